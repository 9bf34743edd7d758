//! `attention-lab hub`'s refusals: a roster with a hostile or taken id is one line naming the
//! file and the id, exit status 2, and nothing is made (no shared folder, no system user).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::fs;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_attention-lab");

/// Runs `hub --roster <roster text> --dir <tmp>/hub`; returns (status, stderr, whether the
/// shared folder exists afterwards).
fn hub(roster: &str, extra: &[&str]) -> (Option<i32>, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("class.csv");
    fs::write(&file, roster).unwrap();
    let shared = dir.path().join("hub");
    let out = Command::new(BIN)
        .arg("hub")
        .arg("--roster")
        .arg(&file)
        .arg("--dir")
        .arg(&shared)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr, shared.exists())
}

#[test]
fn hostile_ids_are_one_line_and_nothing_is_made() {
    let long = "a".repeat(200);
    for (id, says) in [
        ("../x", "\"../x\" may only hold"),
        ("two words", "\"two words\" may only hold"),
        (long.as_str(), "at most 100 characters"),
        ("Alice", "\"Alice\" cannot name a system user"),
        ("teacher", "the teacher's name"),
    ] {
        let (status, stderr, made) = hub(&format!("id,name\nbob,Bob\n\"{id}\",X\n"), &[]);
        assert_eq!(status, Some(2), "{id}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{id}: {stderr}");
        assert!(
            stderr.contains("class.csv") && stderr.contains(says),
            "{id}: {stderr}"
        );
        assert!(!made, "{id}: the shared folder was made");
    }
}

#[test]
fn an_id_that_is_already_a_user_of_the_machine_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Without root the hub refuses first, for that reason.
        let (status, stderr, made) = hub("id\nroot\n", &[]);
        assert_eq!(status, Some(2), "{stderr}");
        assert!(stderr.contains("must run as root"), "{stderr}");
        assert!(!made);
        return;
    }
    let (status, stderr, made) = hub("id\nbob\nroot\n", &[]);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains("\"root\" is already a user of this machine"),
        "{stderr}"
    );
    assert!(!made, "the shared folder was made");
}
