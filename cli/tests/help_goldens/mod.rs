//! The help goldens of `scripts/help_goldens.sh` (cli/tests/data/help/): every `--help`, `-h`,
//! `--version` and bare command line of a binary prints them byte for byte, with their status.
//! Shared by the tests of both binaries (`attention-lab` and `attention-lab-classroom`).

use std::path::Path;
use std::process::Command;

/// Runs every case of `cases.txt` listed for `binary` with the executable `exe`; fails naming
/// each case whose status, stdout or stderr differs from its golden file.
pub fn check(binary: &str, exe: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(goldens_dir());
    let cases = std::fs::read_to_string(dir.join("cases.txt")).expect("cases.txt");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for line in cases.lines() {
        let mut fields = line.splitn(3, '|');
        let (Some(bin), Some(file), Some(args)) = (fields.next(), fields.next(), fields.next())
        else {
            panic!("cases.txt: not `binary|file|args`: {line:?}");
        };
        if bin != binary {
            continue;
        }
        let out = Command::new(exe)
            .args(args.split_whitespace())
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("the binary runs");
        let got = format!(
            "{}\n{}--- stderr\n{}",
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let want = std::fs::read_to_string(dir.join(file)).expect("a golden file");
        if got != want {
            wrong.push(format!("`{bin} {args}`:\n{got}\nwanted ({file}):\n{want}"));
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} cases for {binary}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// Where the goldens are from the package that includes this module.
fn goldens_dir() -> &'static str {
    if env!("CARGO_PKG_NAME") == "attention-lab-cli" {
        "tests/data/help"
    } else {
        "../tests/data/help"
    }
}
