//! `replay`'s hostile inputs (issue 8) that need no evcxr context: the report never replaces an
//! input, `--update` leaves an unchanged notebook's bytes alone, a non-Rust notebook and
//! malformed fields are one named line with status 2, symlinks never run a notebook twice, a
//! malformed evcxr.toml is named in the notebook's error.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A markdown-only notebook (no evcxr needed), written with metadata a rewrite would change:
/// a big integer, an escaped `é`, keys out of order.
const MARKDOWN: &str = r##"{"nbformat": 4, "nbformat_minor": 5,
 "metadata": {"kernelspec": {"name": "rust", "language": "rust", "display_name": "Rust"},
  "custom": {"big": 123456789012345678901234567890, "name": "caf\u00e9"}},
 "cells": [{"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# Title"]}]}
"##;

fn folder(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("replay-input-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn replay(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attention-lab"))
        .arg("replay")
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("binary runs")
}

/// Status 2 and exactly one line on stderr, returned.
fn one_line_error(cwd: &Path, args: &[&str]) -> String {
    let out = replay(cwd, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
    stderr.trim_end().to_owned()
}

#[test]
fn the_json_report_never_replaces_an_input() {
    let dir = folder("json");
    std::fs::write(dir.join("a.ipynb"), MARKDOWN).unwrap();
    std::fs::write(dir.join("s.cfg"), "[t]\nregex: x\nreplace: y\n").unwrap();
    std::os::unix::fs::symlink("a.ipynb", dir.join("link.json")).unwrap();
    for (json, same) in [
        ("a.ipynb", "a.ipynb"),
        ("s.cfg", "s.cfg"),
        ("link.json", "a.ipynb"),
    ] {
        let line = one_line_error(&dir, &["--sanitize", "s.cfg", "--json", json, "a.ipynb"]);
        assert!(
            line.starts_with(&format!("error: --json: {json} is an input ("))
                && line.contains(same)
                && line.ends_with("the report needs a file of its own"),
            "{line}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("a.ipynb")).unwrap(),
        MARKDOWN
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("s.cfg")).unwrap(),
        "[t]\nregex: x\nreplace: y\n"
    );
}

#[test]
fn update_leaves_an_unchanged_notebook_byte_for_byte() {
    let dir = folder("update");
    std::fs::write(dir.join("a.ipynb"), MARKDOWN).unwrap();
    let out = replay(&dir, &["--update", "--json", "report.json", "a.ipynb"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("a.ipynb")).unwrap(),
        MARKDOWN
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["notebooks"][0]["written"], false);
}

#[test]
fn a_notebook_of_another_language_is_bad_input() {
    let dir = folder("python");
    let python = MARKDOWN.replace(
        r#""name": "rust", "language": "rust", "display_name": "Rust""#,
        r#""name": "python3", "language": "python", "display_name": "Python 3""#,
    );
    std::fs::write(dir.join("p.ipynb"), &python).unwrap();
    assert_eq!(
        one_line_error(&dir, &["p.ipynb"]),
        "error: p.ipynb: a python notebook (kernel \"python3\"), not Rust: replay runs Rust notebooks only"
    );
}

#[test]
fn malformed_fields_are_named() {
    let dir = folder("fields");
    let cases = [
        (
            MARKDOWN.replace(r##""source": ["# Title"]"##, r#""source": 42"#),
            "error: n.ipynb: cell 1: \"source\" must be a string or a list of strings, not 42",
        ),
        (
            MARKDOWN.replace(r#""nbformat": 4,"#, r#""nbformat": 4.0,"#),
            "error: n.ipynb: \"nbformat\" must be the integer 4, not 4.0",
        ),
        (
            MARKDOWN.replace(r#""metadata": {}, "source""#, r#""metadata": {"tags": "nbval-skip"}, "source""#),
            "error: n.ipynb: cell 1: \"tags\" must be a list of strings (e.g. [\"nbval-skip\"]), not \"nbval-skip\"",
        ),
    ];
    for (text, message) in cases {
        std::fs::write(dir.join("n.ipynb"), &text).unwrap();
        assert_eq!(one_line_error(&dir, &["n.ipynb"]), message);
    }
}

#[test]
fn a_timeout_too_long_for_a_duration_is_one_line() {
    let dir = folder("timeout");
    let line = one_line_error(&dir, &["--timeout", "1e20", "x.ipynb"]);
    assert!(
        line.starts_with(
            "error: invalid value '1e20' for '--timeout <SECONDS>': 1e20 seconds is too long"
        ),
        "{line}"
    );
}

#[test]
fn symlinks_never_run_a_notebook_twice() {
    let dir = folder("links");
    std::fs::create_dir(dir.join("nb")).unwrap();
    std::fs::write(dir.join("nb/a.ipynb"), MARKDOWN).unwrap();
    // A folder link back to its parent (a loop) and a second name for the file.
    std::os::unix::fs::symlink("..", dir.join("nb/loop")).unwrap();
    std::os::unix::fs::symlink("a.ipynb", dir.join("nb/b.ipynb")).unwrap();
    let out = replay(
        &dir,
        &["--json", "report.json", "nb", "nb/a.ipynb", "nb/b.ipynb"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["totals"]["notebooks"], 1, "{report}");
}

/// A malformed `evcxr.toml` beside a notebook is named in the notebook's error (evcxr reads it
/// when the context starts and names no file), and no cell runs.
#[test]
fn a_malformed_evcxr_toml_is_named() {
    let dir = folder("evcxr-toml");
    let code = r#"{"nbformat": 4, "nbformat_minor": 5,
 "metadata": {"kernelspec": {"name": "rust", "language": "rust", "display_name": "Rust"}},
 "cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": 1,
            "outputs": [], "source": ["1 + 1"]}]}"#;
    std::fs::write(dir.join("n.ipynb"), code).unwrap();
    std::fs::write(dir.join("evcxr.toml"), "this is [not toml\n").unwrap();
    let out = replay(&dir, &["--engine", "evcxr", "n.ipynb"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let error = stdout
        .lines()
        .find(|l| l.contains("ERROR"))
        .expect("an error line");
    assert!(error.contains("evcxr.toml: TOML parse error"), "{error}");
}

/// A notebook with one Rust code cell.
fn notebook_with(code: &str) -> String {
    serde_json::json!({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "rust", "language": "rust", "display_name": "Rust"}},
        "cells": [
            {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": "# Deep"},
            {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": null,
             "outputs": [], "source": code},
        ],
    })
    .to_string()
}

#[test]
fn code_nested_too_deep_for_a_parser_is_one_line_not_an_abort() {
    // Each aborted replay with a stack overflow (issue 30); a sum of 1,000,000 terms gave no
    // answer within 120 s.
    let dir = folder("deep");
    let cases = [
        (
            "parens",
            format!("let a = {}1{};", "(".repeat(10_000), ")".repeat(10_000)),
        ),
        (
            "braces",
            format!("{}{}", "{".repeat(100_000), "}".repeat(100_000)),
        ),
        (
            "brackets",
            format!("let a = {}1{};", "[".repeat(100_000), "]".repeat(100_000)),
        ),
        ("negations", format!("let a = {}1;", "-".repeat(100_000))),
        ("sum", format!("let a = 1{};", "+1".repeat(30_000))),
        ("long_sum", format!("let a = 1{};", "+1".repeat(1_000_000))),
        ("calls", format!("let a = x{};", ".f()".repeat(100_000))),
    ];
    for (name, code) in &cases {
        let file = format!("{name}.ipynb");
        std::fs::write(dir.join(&file), notebook_with(code)).unwrap();
        assert_eq!(
            one_line_error(&dir, &[&file]),
            format!(
                "error: {file}: code cell 1 nests deeper than 1000 levels (brackets, operators or \
                 calls in a row); replay reads at most 1000"
            )
        );
    }
}

#[test]
fn a_shallow_cell_is_read_without_room_for_the_parsers_big_stack() {
    // Under `ulimit -v`, the 512 MiB stack of the depth check's thread cannot be mapped: the
    // check then parses shallow code on its own thread instead of refusing the notebook.
    let dir = folder("ulimit");
    std::fs::write(dir.join("n.ipynb"), notebook_with("let a = 1;")).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 500000 && exec '{}' replay --timeout 30 n.ipynb",
            env!("CARGO_BIN_EXE_attention-lab")
        ))
        .current_dir(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("code cell 1"), "{stderr}");
}
