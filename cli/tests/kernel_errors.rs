//! `attention-lab kernel serve` that cannot serve says why as every subcommand does: one line
//! on stderr, `error: ...`, naming the connection file, and exit status 2 (bad input).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::fs;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_attention-lab");

/// `kernel serve --control-file FILE` with HOME, the cache and every Jupyter/XDG folder inside
/// `home`; its exit status and stderr.
fn serve(home: &Path, file: &Path) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .env("HOME", home)
        .env("ATTENTION_LAB_CACHE", home.join("cache"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CACHE_HOME", home.join("xdg-cache"))
        .env_remove("JUPYTER_DATA_DIR")
        .env_remove("EVCXR_CONFIG_DIR")
        .args(["kernel", "serve", "--control-file"])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.stdout.is_empty());
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_or_malformed_connection_file_is_one_error_line_naming_it_with_status_2() {
    let home = tempfile::tempdir().unwrap();
    let malformed = home.path().join("kernel-1.json");
    fs::write(&malformed, "{\"shell_port\": ").unwrap();
    for (file, says) in [
        (Path::new("/nonexistent.json"), "no such file"),
        (malformed.as_path(), "not a Jupyter connection file"),
    ] {
        let (status, stderr) = serve(home.path(), file);
        assert_eq!(status, Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        let named = format!("error: {}: ", file.display());
        assert!(
            stderr.starts_with(&named) && stderr.contains(says),
            "{stderr}"
        );
    }
}
