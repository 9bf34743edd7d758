//! `attention-lab lab`: what goes wrong before JupyterLab starts gets one line and exit 2.

use std::net::TcpListener;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_attention-lab");

fn lab(args: &[&str], path: &str) -> (Output, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .arg("lab")
        .args(args)
        .env("HOME", home.path())
        .env("ATTENTION_LAB_CACHE", home.path().join("cache"))
        .env("PATH", path)
        .output()
        .unwrap();
    (out, home)
}

fn one_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr
}

#[test]
fn a_busy_port_is_named() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = std::env::var("PATH").unwrap();
    let (out, _home) = lab(
        &[
            "--no-browser",
            "--port",
            &port,
            dir.path().to_str().unwrap(),
        ],
        &path,
    );
    let stderr = one_line(&out);
    assert!(stderr.contains(&format!("port {port} ")), "{stderr}");
}

#[test]
fn a_missing_python3_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let (out, home) = lab(
        &["--no-browser", "--port", "0", dir.path().to_str().unwrap()],
        empty.path().to_str().unwrap(),
    );
    let stderr = one_line(&out);
    assert!(
        stderr.contains("python3 not found: install Python 3"),
        "{stderr}"
    );
    assert!(!home.path().join("cache/venv-lab").exists());
}

#[test]
fn a_missing_folder_is_named() {
    let path = std::env::var("PATH").unwrap();
    let (out, _home) = lab(&["/nonexistent/notebooks"], &path);
    let stderr = one_line(&out);
    assert!(
        stderr.contains("/nonexistent/notebooks: no such folder"),
        "{stderr}"
    );
}
