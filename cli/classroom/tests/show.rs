//! `attention-lab show` prints .npy files byte for byte as NumPy does (goldens from
//! scripts/cli_goldens.py) and reports bad files in one line.

mod tools_common;

use std::path::Path;
use tools_common::{assert_help_has_example, cases, data, fails, npy_declaring, run, usage_error};

#[test]
fn show_matches_numpy_goldens() {
    let dir = data("show");
    let cases = cases(&dir, "show", "stdout");
    assert!(cases.len() > 60, "cases.json lists every file and variant");
    let mut failures = Vec::new();
    for (args, golden) in &cases {
        let expected = std::fs::read_to_string(dir.join("expected").join(golden)).unwrap();
        let r = run(&dir, args);
        if r.status != 0 || r.stdout != expected {
            failures.push(format!(
                "show {}: status {}\n--- numpy\n{expected}--- ours\n{}{}",
                args.join(" "),
                r.status,
                r.stdout,
                r.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn show_reports_bad_files_in_one_line() {
    let dir = data("show");
    let supported = "(supported: float64, float32, int64, int32, bool)";
    let expected = [
        (
            vec!["missing.npy"],
            "error: missing.npy: cannot read: no such file".to_string(),
        ),
        (
            vec!["not_npy.txt"],
            "error: not_npy.txt: not a .npy file (it does not start with the NumPy magic string)"
                .to_string(),
        ),
        (
            vec!["u16.npy"],
            format!("error: u16.npy: unsupported dtype '<u2' {supported}"),
        ),
        (
            vec!["complex.npy"],
            format!("error: complex.npy: unsupported dtype '<c16' {supported}"),
        ),
        (
            vec!["truncated.npy"],
            "error: truncated.npy: its header declares 96 bytes of data but the file holds only 91"
                .to_string(),
        ),
        (
            vec!["."],
            "error: .: cannot read: is a directory, not a file".to_string(),
        ),
        // Every file is read before anything is printed.
        (
            vec!["f64_2d.npy", "missing.npy"],
            "error: missing.npy: cannot read: no such file".to_string(),
        ),
    ];
    for (mut args, message) in expected {
        args.insert(0, "show");
        assert_eq!(fails(&dir, &args), message, "{args:?}");
    }
}

#[test]
fn show_rejects_a_precision_that_is_not_a_number() {
    assert_eq!(
        usage_error(&data("show"), &["show", "f64_2d.npy", "--precision", "x"]),
        "error: invalid value 'x' for '--precision <P>': invalid digit found in string"
    );
}

#[test]
fn show_help_has_an_example() {
    assert_help_has_example("show");
}

/// Headers that declare more than a file holds, or more than memory can address, are one
/// line before anything is allocated; devices and FIFOs are read no further than declared.
#[test]
fn show_refuses_huge_declared_shapes_without_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "(1000000000000,)",
            8,
            "its header declares 8000000000000 bytes of data but the file holds only 8",
        ),
        (
            "(1000000, 1000000)",
            8,
            "its header declares 8000000000000 bytes of data but the file holds only 8",
        ),
        (
            "(0, 1000000000000000000, 1000000000000000000)",
            0,
            "shape (0, 1000000000000000000, 1000000000000000000) is too large for this machine",
        ),
        (
            "(99999999999999999999999,)",
            0,
            "not a valid .npy file: shape (99999999999999999999999,)",
        ),
    ];
    for (i, (shape, data, message)) in cases.into_iter().enumerate() {
        let name = format!("huge{i}.npy");
        std::fs::write(dir.path().join(&name), npy_declaring(shape, data)).unwrap();
        assert_eq!(
            fails(dir.path(), &["show", &name]),
            format!("error: {name}: {message}")
        );
    }
    assert_eq!(
        fails(dir.path(), &["show", "/dev/zero"]),
        "error: /dev/zero: not a .npy file (it does not start with the NumPy magic string)"
    );
}

#[cfg(unix)]
#[test]
fn show_reads_a_fifo_only_as_far_as_its_header_declares() {
    let dir = tempfile::tempdir().unwrap();
    // The same array as a regular file: what NumPy's np.load reads from the FIFO.
    let declared = npy_declaring("(2, 2)", 32);
    std::fs::write(dir.path().join("file.npy"), &declared).unwrap();
    let fifo = dir.path().join("pipe.npy");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let writer = std::thread::spawn({
        let fifo = fifo.clone();
        move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            // Declares a 2 x 2 matrix, then would stream zeros for ever.
            let _ = f.write_all(&npy_declaring("(2, 2)", 0));
            let zeros = [0u8; 4096];
            while f.write_all(&zeros).is_ok() {}
        }
    });
    let out = run(dir.path(), &["show", "pipe.npy"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, run(dir.path(), &["show", "file.npy"]).stdout);
    writer.join().unwrap();
}

/// A file name that is not UTF-8 is read, and named in messages with U+FFFD for its bad bytes.
#[cfg(unix)]
#[test]
fn show_reads_files_whose_names_are_not_utf8() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"caf\xe9.npy");
    std::fs::copy(data("show").join("f64_2d.npy"), dir.path().join(name)).unwrap();
    let show = |args: &[&OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_attention-lab-classroom"))
            .arg("show")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = show(&[name]);
    let expected = std::fs::read(data("show").join("expected").join("f64_2d.print.txt")).unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, expected);
    let missing = OsStr::from_bytes(b"gone\xff.npy");
    let out = show(&[missing]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: gone\u{fffd}.npy: cannot read: no such file\n"
    );
}

#[test]
fn a_missing_subcommand_is_named_with_the_choices() {
    assert_eq!(
        fails(Path::new("."), &[] as &[&str]),
        "error: attention-lab-classroom: a subcommand is missing: show, solve, exercise, grade \
         (attention-lab-classroom --help says more)"
    );
}
