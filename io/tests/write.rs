//! The writer's cases: a replaced file keeps its mode and its symlink, refusals leave the
//! target alone, a failed write leaves the old file intact and no temporary file behind.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]
#![cfg(unix)]

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// The names in `dir`, sorted: no temporary file may be left.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn writes_through_a_symlink_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.md");
    fs::write(&real, "old").unwrap();
    let link = dir.path().join("link.md");
    symlink("real.md", &link).unwrap();
    attention_lab_io::write(&link, b"new").unwrap();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("real.md"));
    assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    assert_eq!(names(dir.path()), ["link.md", "real.md"]);
}

#[test]
fn a_dangling_symlink_creates_its_target() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("sub")).unwrap();
    let link = dir.path().join("link.md");
    symlink("sub/later.md", &link).unwrap();
    attention_lab_io::write(&link, b"made").unwrap();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_to_string(dir.path().join("sub/later.md")).unwrap(),
        "made"
    );
}

#[test]
fn keeps_the_mode_of_the_replaced_file() {
    let dir = tempfile::tempdir().unwrap();
    for bits in [0o600, 0o640, 0o755] {
        let path = dir.path().join(format!("f{bits:o}"));
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(bits)).unwrap();
        attention_lab_io::write(&path, b"new").unwrap();
        assert_eq!(mode(&path), bits, "{bits:o}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
    }
}

#[test]
fn a_new_file_gets_the_mode_file_create_gives() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference");
    fs::File::create(&reference).unwrap();
    let path = dir.path().join("new.md");
    attention_lab_io::write(&path, b"x").unwrap();
    assert_eq!(mode(&path), mode(&reference));
}

#[test]
fn refuses_a_read_only_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.md");
    fs::write(&path, "old").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
    let err = attention_lab_io::write(&path, b"new").unwrap_err();
    assert_eq!(err.to_string(), "read-only file, left as it is");
    assert_eq!(fs::read_to_string(&path).unwrap(), "old");
    assert_eq!(names(dir.path()), ["ro.md"]);
}

#[test]
fn refuses_a_folder_and_a_name_ending_in_a_slash() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    fs::create_dir(&sub).unwrap();
    let err = attention_lab_io::write(&sub, b"x").unwrap_err();
    assert_eq!(err.to_string(), "is a folder; give a file name");
    let slash = format!("{}/", dir.path().join("nothing").display());
    let err = attention_lab_io::write(&slash, b"x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "names a folder (ends with /); give a file name"
    );
    assert_eq!(names(dir.path()), ["sub"]);
}

#[test]
fn writes_into_a_fifo_and_a_character_device() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            fs::File::open(fifo)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            text
        })
    };
    attention_lab_io::write(&fifo, b"through the pipe").unwrap();
    assert_eq!(reader.join().unwrap(), "through the pipe");
    use std::os::unix::fs::FileTypeExt;
    assert!(
        fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(),
        "still a FIFO"
    );
    attention_lab_io::write("/dev/null", b"gone").unwrap();
    assert!(fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn a_name_of_255_bytes_works() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("{}.md", "n".repeat(252));
    assert_eq!(name.len(), 255);
    let path = dir.path().join(&name);
    attention_lab_io::write(&path, b"old").unwrap();
    attention_lab_io::write(&path, b"new").unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "new");
    assert_eq!(names(dir.path()), [name]);
}

#[test]
fn a_write_failing_midway_leaves_the_old_file_and_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notebook.ipynb");
    fs::write(&path, "old contents").unwrap();
    let err = attention_lab_io::write_with(&path, |file| {
        file.write_all(b"half of the new")?;
        Err(std::io::Error::other("disk pulled out"))
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "disk pulled out");
    assert_eq!(fs::read_to_string(&path).unwrap(), "old contents");
    assert_eq!(names(dir.path()), ["notebook.ipynb"]);
}

#[test]
fn a_missing_folder_is_no_such_file() {
    let err = attention_lab_io::write("/no/such/folder/x.md", b"x").unwrap_err();
    assert_eq!(attention_lab_io::describe(&err), "no such file");
}

/// A writer killed midway (SIGKILL, no destructor runs) leaves the old file whole: only a
/// temporary file, never the target, holds partial bytes.
#[test]
fn a_killed_writer_leaves_the_old_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.bin");
    fs::write(&path, "old").unwrap();
    // The child: this test binary, asked to run the helper below, killed while it writes.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "slow_writer_helper", "--nocapture", "--ignored"])
        .env("SLOW_WRITER_TARGET", &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it has started writing, then kill it.
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"writing") {
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut byte)
            .unwrap();
        seen.push(byte[0]);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "old");
}

#[test]
#[ignore = "run by a_killed_writer_leaves_the_old_file_whole"]
fn slow_writer_helper() {
    let Some(path) = std::env::var_os("SLOW_WRITER_TARGET") else {
        return;
    };
    attention_lab_io::write_with(path, |file| loop {
        file.write_all(&[b'x'; 4096])?;
        let mut out = std::io::stdout();
        out.write_all(b"writing")?;
        out.flush()?;
        std::thread::sleep(std::time::Duration::from_millis(10));
    })
    .unwrap();
}
