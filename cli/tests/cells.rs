//! The compiled-cell cache through the real binary (`replay --engine evcxr`, which compiles as
//! the kernel does): a second replay loads what the first compiled and prints the same, and a
//! store that cannot be written changes nothing but one line of warning.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use common::copy_dir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `basic` fixture in a fresh folder of this test's own.
fn fixture(test: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/basic");
    let to =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cells-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&to);
    copy_dir(&from, &to);
    to
}

/// Replays the fixture with the cell store `store`; returns the output and the report.
fn replay(folder: &Path, store: &Path) -> (Output, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_attention-lab"))
        .args([
            "replay",
            "--engine",
            "evcxr",
            "basic.ipynb",
            "--sanitize",
            "sanitize.cfg",
        ])
        .args(["--json", "report.json"])
        .current_dir(folder)
        .env(attention_lab_cells::OWN_VAR, store)
        .env_remove(attention_lab_cells::SHARED_VAR)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(folder.join("report.json")).unwrap_or_default();
    eprintln!("--- stderr\n{}", String::from_utf8_lossy(&output.stderr));
    (output, serde_json::from_str(&report).unwrap_or(Value::Null))
}

fn libraries(report: &Value) -> (u64, u64) {
    let l = &report["totals"]["libraries"];
    (
        l["loaded"].as_u64().unwrap(),
        l["compiled"].as_u64().unwrap(),
    )
}

#[test]
fn a_second_replay_loads_every_library_the_first_compiled() {
    let folder = fixture("twice");
    let store = folder.join("cells");
    let (first, report) = replay(&folder, &store);
    assert_eq!(first.status.code(), Some(0));
    let (loaded, compiled) = libraries(&report);
    assert_eq!(loaded, 0, "a new store");
    assert!(compiled >= 6, "{compiled}");
    let (second, report) = replay(&folder, &store);
    assert_eq!(second.status.code(), Some(0), "the same outputs, loaded");
    let (loaded, compiled_again) = libraries(&report);
    // Only compiles that failed (a cell with a type error, evcxr's retries) are not stored.
    let failed = compiled - loaded;
    assert!(loaded >= 6, "{loaded} loaded");
    assert_eq!(
        compiled_again, failed,
        "every library that compiled was loaded"
    );
    // Each cell that compiled at all shows how its library came.
    let cells = report["notebooks"][0]["cell_results"].as_array().unwrap();
    let shown: u64 = cells
        .iter()
        .filter_map(|c| c["libraries"]["loaded"].as_u64())
        .sum();
    assert_eq!(shown, loaded);
    assert!(String::from_utf8_lossy(&second.stdout).contains("loaded from the compiled-cell cache"));
}

#[test]
fn a_store_that_cannot_be_written_compiles_as_before_with_one_line_of_warning() {
    let folder = fixture("unwritable");
    let file = folder.join("not-a-folder");
    std::fs::write(&file, "a file where the store should be").unwrap();
    let (output, report) = replay(&folder, &file.join("cells"));
    assert_eq!(output.status.code(), Some(0), "every cell as before");
    let (loaded, compiled) = libraries(&report);
    assert_eq!(loaded, 0);
    assert!(compiled >= 6);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("compiled-cell cache"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("not-a-folder"),
        "names the folder: {}",
        warnings[0]
    );
}
