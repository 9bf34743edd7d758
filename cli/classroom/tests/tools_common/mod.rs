//! Helpers shared by the tests of `show`, `solve` and `exercise`: run the binary, find the
//! golden files under tests/data/.

#![allow(dead_code)] // each test file uses only some helpers

use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of the binary did.
pub struct Run {
    /// Exit status (-1 if killed by a signal).
    pub status: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// A fresh empty folder under the system's temp dir, removed when dropped, so a test that
/// fails (or returns early) leaves nothing behind. It derefs to its path.
pub struct Scratch(tempfile::TempDir);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// A [`Scratch`] folder whose name starts with `attention-lab-{name}-`.
pub fn temp_dir(name: &str) -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix(&format!("attention-lab-{name}-"))
        .tempdir()
        .expect("a temp dir");
    Scratch(dir)
}

/// `tests/data/<sub>` of the classroom package.
pub fn data(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
        .join(sub)
}

/// Runs `attention-lab-classroom ARGS` (the classroom tools of `attention-lab`) in `dir`, without RUST_BACKTRACE so a panic would show as one.
pub fn run<S: AsRef<str>>(dir: &Path, args: &[S]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_attention-lab-classroom"))
        .args(args.iter().map(AsRef::as_ref))
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the attention-lab binary runs");
    Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs a command that must fail on bad input and returns its one-line message.
pub fn fails<S: AsRef<str>>(dir: &Path, args: &[S]) -> String {
    let r = run(dir, args);
    let shown: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    assert_eq!(r.status, 2, "{shown:?}: status; stderr: {}", r.stderr);
    assert_eq!(r.stdout, "", "{shown:?}: nothing on stdout");
    assert_eq!(
        r.stderr.lines().count(),
        1,
        "{shown:?}: one line: {}",
        r.stderr
    );
    r.stderr.trim_end().to_string()
}

/// A command line clap rejects: status 2 and the first line of its message.
pub fn usage_error<S: AsRef<str>>(dir: &Path, args: &[S]) -> String {
    let r = run(dir, args);
    assert_eq!(r.status, 2, "{}", r.stderr);
    r.stderr.lines().next().unwrap_or_default().to_string()
}

/// The `subcommand` command lines listed in `<dir>/cases.json`, each with the name of its
/// golden file under `key` (cases without that key are skipped).
pub fn cases(dir: &Path, subcommand: &str, key: &str) -> Vec<(Vec<String>, String)> {
    let text = std::fs::read_to_string(dir.join("cases.json")).expect("cases.json");
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).expect("cases.json parses");
    cases
        .iter()
        .filter_map(|c| {
            let golden = c.get(key)?.as_str()?.to_string();
            let listed = c["args"].as_array().expect("args").iter();
            let args = std::iter::once(subcommand.to_string())
                .chain(listed.map(|a| a.as_str().expect("string arg").to_string()))
                .collect();
            Some((args, golden))
        })
        .collect()
}

/// `--help` of `subcommand` shows an example.
pub fn assert_help_has_example(subcommand: &str) {
    let r = run(Path::new("."), &[subcommand, "--help"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Example"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!("attention-lab {subcommand} ")),
        "{}",
        r.stdout
    );
}

/// A .npy file of dtype `<f8` whose header declares `shape` (NumPy's text, e.g. "(2, 3)")
/// and that holds `data` zero bytes after it, whatever the shape says.
pub fn npy_declaring(shape: &str, data: usize) -> Vec<u8> {
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data, 0);
    bytes
}
