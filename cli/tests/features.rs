//! The README's two commands compile evcxr once: every crate that `cargo run -p
//! attention-lab-cli` builds gets the same features as in `cargo test --workspace`, so the test
//! command reuses what the main command compiled (the "workspace hack" in cli/Cargo.toml).
//! Fails, naming the crates, when a new dependency or feature makes them drift apart.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Each package (`name vX.Y.Z`) that `cargo tree` lists, with its feature sets (a build
/// dependency or proc-macro's features are resolved apart from the same crate's as a library).
fn features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .arg("tree")
        .args(args)
        .args(["--locked", "--offline", "--prefix", "none", "--no-dedupe"])
        .args(["--format", "{p}|{f}"])
        .current_dir(root)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (package, features) in String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_once('|'))
    {
        // "name v1.2.3 (/path)" for path packages: the path is not part of the name.
        let name = package.split(" (").next().unwrap_or(package);
        packages
            .entry(name.to_owned())
            .or_default()
            .insert(features.to_owned());
    }
    packages
}

#[test]
fn the_main_command_builds_its_crates_with_the_test_commands_features() {
    let run = features(&["-p", "attention-lab-cli", "--edges", "normal,build"]);
    let test = features(&["--workspace", "--edges", "normal,build,dev"]);
    assert!(run.keys().any(|p| p.starts_with("evcxr ")), "{run:?}");
    let differ: Vec<String> = run
        .iter()
        .filter(|(package, features)| test.get(*package).is_some_and(|t| t != *features))
        .map(|(package, features)| format!("{package}: run {features:?}, test {:?}", test[package]))
        .collect();
    assert!(
        differ.is_empty(),
        "features differ, so evcxr would be compiled twice; turn these on in cli/Cargo.toml:\n{}",
        differ.join("\n")
    );
}
