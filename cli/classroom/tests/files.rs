//! Files a user owns, written by `exercise --output` through the one writer (attention-lab-io):
//! a symlink is written through, a mode is kept, a read-only file, a folder and a name ending
//! in `/` are refused with one line and status 2, a FIFO is written into.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]
#![cfg(unix)]

mod tools_common;

use std::fs;
use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
use std::path::Path;
use tools_common::{fails, run};

fn sheet(dir: &Path, output: &str) -> tools_common::Run {
    run(dir, &["exercise", "--seed", "7", "--output", output])
}

fn expected() -> String {
    fs::read_to_string(tools_common::data("exercise").join("seed7.md")).unwrap()
}

#[test]
fn output_through_a_symlink_keeps_the_link_and_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("real.md"), "old").unwrap();
    fs::set_permissions(
        dir.path().join("real.md"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    symlink("real.md", dir.path().join("link.md")).unwrap();
    let r = sheet(dir.path(), "link.md");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let link = fs::symlink_metadata(dir.path().join("link.md")).unwrap();
    assert!(link.file_type().is_symlink(), "the link is kept");
    assert_eq!(
        fs::read_to_string(dir.path().join("real.md")).unwrap(),
        expected()
    );
    let mode = fs::metadata(dir.path().join("real.md"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn read_only_file_folder_and_slash_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("ro.md"), "old").unwrap();
    fs::set_permissions(dir.path().join("ro.md"), fs::Permissions::from_mode(0o444)).unwrap();
    fs::create_dir(dir.path().join("sheets")).unwrap();
    let cases = [
        (
            "ro.md",
            "error: ro.md: cannot write: read-only file, left as it is",
        ),
        (
            "sheets",
            "error: sheets: cannot write: is a folder; give a file name",
        ),
        (
            "sheets/",
            "error: sheets/: cannot write: names a folder (ends with /); give a file name",
        ),
    ];
    for (output, message) in cases {
        assert_eq!(
            fails(dir.path(), &["exercise", "--seed", "7", "--output", output]),
            message
        );
    }
    assert_eq!(fs::read_to_string(dir.path().join("ro.md")).unwrap(), "old");
}

#[test]
fn output_into_a_fifo_writes_to_its_reader() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
    };
    let r = sheet(dir.path(), "fifo");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(reader.join().unwrap(), expected());
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_name_of_255_bytes_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("{}.md", "s".repeat(252));
    fs::write(dir.path().join(&name), "old").unwrap();
    let r = sheet(dir.path(), &name);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(
        fs::read_to_string(dir.path().join(&name)).unwrap(),
        expected()
    );
}
