//! Output sinks that fail: a closed pipe ends every subcommand quietly with status 0 (as in
//! ripgrep), a full disk is one line and status 2, and a closed stderr never aborts.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A folder with a notebook of markdown only: `replay` prints its report without evcxr.
fn markdown_notebook(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sinks-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let notebook = r##"{"cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# Title"]}],
 "metadata": {"kernelspec": {"display_name": "Rust", "language": "rust", "name": "rust"}},
 "nbformat": 4, "nbformat_minor": 5}
"##;
    std::fs::write(dir.join("md.ipynb"), notebook).unwrap();
    dir
}

/// Every subcommand that prints, with arguments that succeed.
fn commands(dir: &Path) -> Vec<Vec<String>> {
    let show = Path::new(env!("CARGO_MANIFEST_DIR")).join("classroom/tests/data/show/f64_2d.npy");
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        owned(&["show", show.to_str().unwrap()]),
        owned(&[
            "solve",
            "--json",
            "--x",
            "[[1,0],[0,1]]",
            "--wq",
            "[[1,0],[0,1]]",
            "--wk",
            "[[1,0],[0,1]]",
            "--wv",
            "[[1,0],[0,1]]",
        ]),
        owned(&["exercise", "--seed", "7", "--answers"]),
        owned(&["replay", dir.join("md.ipynb").to_str().unwrap()]),
    ]
}

fn run(args: &[String], stdout: Stdio, close_stderr: bool) -> Output {
    let bin = env!("CARGO_BIN_EXE_attention-lab");
    let mut command = if close_stderr {
        // `2>&-`: the process starts with no file descriptor 2 at all.
        let mut c = Command::new("sh");
        c.arg("-c").arg("exec \"$0\" \"$@\" 2>&-").arg(bin);
        c
    } else {
        Command::new(bin)
    };
    command
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(stdout)
        .output()
        .expect("the binary runs")
}

/// A pipe whose reading end is already closed: the first write fails with EPIPE.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer.into()
}

fn dev_full() -> Stdio {
    File::options()
        .write(true)
        .open("/dev/full")
        .unwrap()
        .into()
}

#[test]
fn closed_pipe_ends_quietly_with_status_0() {
    let dir = markdown_notebook("pipe");
    for args in commands(&dir) {
        let out = run(&args, closed_pipe(), false);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}: nothing on stderr");
    }
}

#[test]
fn full_disk_is_one_line_and_status_2() {
    let dir = markdown_notebook("full");
    for args in commands(&dir) {
        let out = run(&args, dev_full(), false);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr, "error: stdout: no space left on device\n",
            "{args:?}: one line"
        );
    }
}

#[test]
fn closed_stderr_never_aborts() {
    let dir = markdown_notebook("stderr");
    for args in commands(&dir) {
        let full = run(&args, dev_full(), true);
        assert_eq!(
            full.status.code(),
            Some(2),
            "{args:?}: /dev/full without stderr"
        );
        let pipe = run(&args, closed_pipe(), true);
        assert_eq!(
            pipe.status.code(),
            Some(0),
            "{args:?}: closed pipe without stderr"
        );
    }
    // Bad input with no stderr: still status 2, not an abort.
    let bad = run(&["show".into(), "missing.npy".into()], Stdio::null(), true);
    assert_eq!(bad.status.code(), Some(2));
}
