//! evcxr's crate cache, shared by two build folders through this binary as cargo's rustc
//! wrapper (as a kernel and `replay --engine evcxr` run it). Without the wrapper's remap of the
//! build folder, this is the failure that broke notebook 008 in CI: `serde` cached from one
//! folder, `serde_core` compiled again in another, "can't find crate for `serde`" (E0463).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::fs;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_attention-lab");

/// `cargo build` of `project` into `target`, with evcxr's wrapper and cache turned on as
/// evcxr turns them on, the cache below `cache`. Offline: the workspace's lock pins serde.
fn build(project: &Path, target: &Path, cache: &Path) -> std::process::Output {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--offline", "--quiet"])
        .current_dir(project)
        .env("XDG_CACHE_HOME", cache)
        .env("RUSTC_WRAPPER", BIN)
        .env("EVCXR_RUSTC_WRAPPER", "1")
        .env("EVCXR_CACHE_ENABLED", "1")
        .env("EVCXR_TARGET_DIR", target)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap()
}

#[test]
fn a_crate_cached_from_one_folder_links_with_its_dependency_built_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p");
    fs::create_dir_all(project.join("src")).unwrap();
    fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nserde = \"1\"\n",
    )
    .unwrap();
    fs::write(project.join("src/lib.rs"), "pub use serde::Serialize;\n").unwrap();
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    fs::copy(lock, project.join("Cargo.lock")).unwrap();
    let cache = dir.path().join("cache");

    let first = build(&project, &dir.path().join("a"), &cache);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );

    // Evict serde_core's entry only, as evcxr's size limit or a second kernel's build may.
    let mut evicted = 0;
    for entry in fs::read_dir(cache.join("evcxr")).unwrap() {
        let entry = entry.unwrap().path();
        let meta = fs::read_to_string(entry.join("meta")).unwrap_or_default();
        if meta.lines().any(|l| l == "serde_core") {
            fs::remove_dir_all(&entry).unwrap();
            evicted += 1;
        }
    }
    assert!(
        evicted > 0,
        "no cache entry for serde_core: the cache was not used"
    );

    let second = build(&project, &dir.path().join("b"), &cache);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(dir.path().join("b/debug/libp.rlib").exists());
}
