//! How evcxr's environment is made for a kernel or a replay: its build folders (claimed,
//! locked, stamped, with the cells' cargo profile), the compiled-cell cache's settings, the
//! library path to libstd and the standard library's sources for rust-analyzer. Below both
//! [`crate::kernel`] and [`crate::replay`], which each start evcxr with it.

use attention_lab_io::error::{write_file, Error, Result};
use attention_lab_io::problem;
use std::fs;
use std::path::{Path, PathBuf};

/// Set in a hub's kernelspec to a folder of vendored crates (`cargo vendor`): cells build
/// from it, offline, instead of from `~/.cargo`'s registry, which a student cannot read.
pub const VENDOR_VAR: &str = "ATTENTION_LAB_VENDOR";

/// `LD_LIBRARY_PATH` with the toolchain's target library folder first, where the cells'
/// libraries find `libstd-*.so`.
///
/// evcxr links each cell with `-C prefer-dynamic` and an `$ORIGIN`-relative RUNPATH that rustc
/// computes for `target/<triple>/debug/deps/`, but loads the copy one folder up: the path then
/// has one `..` too few, which only goes unnoticed when the build folder is shallow enough for
/// the `..`s to stop at `/` (a `/tmp` folder). Our build folders live deeper, in the cache.
/// `None` when rustc cannot say (evcxr will then report rustc missing itself).
#[cfg(unix)]
pub(crate) fn library_path_with_libstd() -> Option<std::ffi::OsString> {
    let out = std::process::Command::new("rustc")
        .args(["--print", "target-libdir"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let dir = String::from_utf8(out.stdout).ok()?;
    let mut paths = vec![PathBuf::from(dir.trim())];
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&old));
    }
    std::env::join_paths(paths).ok()
}

/// The compiled-cell cache's settings for a kernel (or a replay) in this process: the user's
/// own store `CACHE/cells` unless [`attention_lab_cells::OWN_VAR`] names another (or `off`),
/// and this process's stderr for its one line of warning. A hub's shared store comes from the
/// kernelspec's environment ([`attention_lab_cells::SHARED_VAR`]).
pub(crate) fn cells_env(cache: &Path) -> Vec<(&'static str, std::ffi::OsString)> {
    let mut env = vec![(
        attention_lab_cells::LOG_VAR,
        format!("/proc/{}/fd/2", std::process::id()).into(),
    )];
    if std::env::var_os(attention_lab_cells::OWN_VAR).is_none() {
        env.push((attention_lab_cells::OWN_VAR, cache.join("cells").into()));
    }
    env
}

/// The variable through which rust-analyzer finds the standard library's sources.
pub(crate) const RUST_SRC_PATH: &str = "RUST_SRC_PATH";

/// Where evcxr's rust-analyzer should look for the standard library's sources: an empty
/// library folder of ours (`rust-src-none/` in the cache), unless the user has set
/// `RUST_SRC_PATH` to something (then `None`, and theirs is kept).
///
/// evcxr asks rust-analyzer for the type of every new variable. Given the real sources
/// (rustup's `rust-src`), rust-analyzer reads and resolves all of std, core and alloc once a
/// kernel: about 4 s more to start and 3 s more for the first cell with a `let` on this machine
/// (BENCHMARKS.md). Without them it runs `rustup component add rust-src` at every start,
/// which downloads the component, or waits on the network and fails. The notebooks spell
/// out their variables' types, so the standard library's sources buy them nothing. An empty
/// `core/` is what rust-analyzer takes for a sources folder, and it then finds no crates in it.
///
/// # Errors
/// The folder cannot be made.
pub(crate) fn std_sources_for_analysis(cache: &Path) -> Result<Option<PathBuf>> {
    if std::env::var_os(RUST_SRC_PATH).is_some_and(|v| !v.is_empty()) {
        return Ok(None);
    }
    empty_std_sources(cache).map(Some)
}

/// Makes (or finds) the empty sources folder `rust-src-none/` with its empty `core/`.
fn empty_std_sources(cache: &Path) -> Result<PathBuf> {
    let stub = cache.join("rust-src-none");
    let core = stub.join("core");
    fs::create_dir_all(&core).map_err(|e| Error::io(core.display(), "create", e))?;
    Ok(stub)
}

/// A persistent evcxr build folder for one kernel, locked while the kernel runs, so that two
/// notebooks open at once never share one. A notebook's own folder (keyed by its session
/// name) when it is free; else the first free shared slot.
#[cfg(unix)]
pub(crate) fn claim_build_dir(root: &Path, session: Option<&str>) -> Result<(PathBuf, fs::File)> {
    use std::os::fd::AsRawFd;
    fs::create_dir_all(root).map_err(|e| Error::io(root.display(), "create", e))?;
    write_cell_profile(root)?;
    let named = session.map(|s| format!("nb-{}", slug(s)));
    let slots = (0..64).map(crate::build::slot_name);
    for name in named.into_iter().chain(slots) {
        let lock_path = root.join(format!("{name}.lock"));
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(lock_path.display(), "open", e))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            let dir = root.join(name);
            renew_build_dir(&dir)?;
            attention_lab_cells::Trace::start(&dir);
            return Ok((dir, lock));
        }
    }
    Err(problem!(
        "{}: all 64 build folders are in use by other kernels",
        root.display()
    ))
}

/// The stamp of a build folder whose compiled crates all came from the remapping wrapper
/// (`wrapper.rs`). Folders from before it may hold a crate and a dependency compiled in two
/// different folders, whose hashes disagree ("can't find crate", E0463, with every file
/// present); cargo sees fresh files and never rebuilds them, so such a folder fails for good.
const BUILD_STAMP: &str = "attention-lab build folder, version 2: target paths remapped\n";
const BUILD_STAMP_FILE: &str = "attention-lab-build.stamp";

/// Empties `dir/target` once unless `dir` carries [`BUILD_STAMP`]; the next build takes its
/// crates from evcxr's cache (or compiles them).
fn renew_build_dir(dir: &Path) -> Result<()> {
    let stamp = dir.join(BUILD_STAMP_FILE);
    if fs::read_to_string(&stamp).is_ok_and(|t| t == BUILD_STAMP) {
        return Ok(());
    }
    let target = dir.join("target");
    match fs::remove_dir_all(&target) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Error::io(target.display(), "empty", e));
        }
        _ => {}
    }
    fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), "create", e))?;
    write_file(&stamp, BUILD_STAMP.as_bytes())
}

/// Cargo's settings for every build folder below `root`: a cell's crate at opt-level 0, its
/// dependencies at 2.
///
/// evcxr writes `opt-level = 2` into its crate's manifest, for the cell and every dependency
/// alike. Cargo reads `.cargo/config.toml` in the folders above the build, and a profile there
/// overrides the manifest's, so a cell is compiled quickly while the library it calls stays
/// optimised. Measured on notebooks 000 and 002 (BENCHMARKS.md, levers): the median cell
/// 0.69 s at opt-level 2, 0.69 s at 1 and 0.38 s at 0. A cell is a few calls into the
/// library; a long loop written in a cell runs unoptimised. evcxr's `:opt` has no effect here.
///
/// With [`VENDOR_VAR`] set, crates.io is replaced by that vendored folder (and cargo stays
/// offline), so every student's kernel builds from the same read-only sources.
fn write_cell_profile(root: &Path) -> Result<()> {
    let dir = root.join(".cargo");
    fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), "create", e))?;
    let mut text = String::from(
        "# Written by attention-lab (jupyter/src/kernel.rs) for evcxr's build folders below.\n\
         [profile.dev]\nopt-level = 0\n\n\
         [profile.dev.package.\"*\"]\nopt-level = 2\n",
    );
    if let Some(vendor) = std::env::var_os(VENDOR_VAR).filter(|v| !v.is_empty()) {
        let vendor = serde_json::to_string(&vendor.to_string_lossy()).expect("a string serializes");
        text.push_str(&format!(
            "\n[source.crates-io]\nreplace-with = \"attention-lab-vendor\"\n\n\
             [source.attention-lab-vendor]\ndirectory = {vendor}\n\n[net]\noffline = true\n"
        ));
    }
    let config = dir.join("config.toml");
    if fs::read_to_string(&config).is_ok_and(|t| t == text) {
        return Ok(());
    }
    write_file(&config, text.as_bytes())
}

/// A file name for a notebook's session: its readable tail plus a hash of the whole path.
fn slug(session: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    session.hash(&mut hasher);
    let tail: String = session
        .rsplit('/')
        .next()
        .unwrap_or(session)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect();
    format!("{tail}-{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_differ_for_same_name_in_other_folders() {
        let a = slug("a/000-intro.ipynb");
        let b = slug("b/000-intro.ipynb");
        assert_ne!(a, b);
        assert!(a.starts_with("000_intro_ipynb-"), "{a}");
    }

    #[cfg(unix)]
    #[test]
    fn two_kernels_of_one_notebook_get_two_build_folders() {
        let root = tempfile::tempdir().unwrap();
        let (first, l1) = claim_build_dir(root.path(), Some("n.ipynb")).unwrap();
        let (second, _l2) = claim_build_dir(root.path(), Some("n.ipynb")).unwrap();
        let (third, _l3) = claim_build_dir(root.path(), None).unwrap();
        assert_ne!(first, second);
        assert_ne!(second, third);
        assert!(first.ends_with(format!("nb-{}", slug("n.ipynb"))));
        drop(l1);
        let (again, _l4) = claim_build_dir(root.path(), Some("n.ipynb")).unwrap();
        assert_eq!(again, first);
    }

    /// The folder put first in the kernel's LD_LIBRARY_PATH holds the libstd that evcxr's
    /// cells are linked against (without it, every cell fails to load: "dlopen failed").
    #[cfg(unix)]
    #[test]
    fn kernel_library_path_starts_with_a_folder_holding_libstd() {
        let path = library_path_with_libstd().expect("rustc prints its target-libdir");
        let first = std::env::split_paths(&path).next().unwrap();
        let has_libstd = fs::read_dir(&first).unwrap().any(|entry| {
            let name = entry.unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("libstd-") && name.ends_with(".so")
        });
        assert!(has_libstd, "no libstd-*.so in {}", first.display());
    }

    /// rust-analyzer takes a folder for the standard library's sources when it has `core/`;
    /// ours must hold nothing else, so that no crate of the standard library is loaded.
    #[test]
    fn empty_std_sources_is_a_core_folder_and_nothing_else() {
        let cache = tempfile::tempdir().unwrap();
        let first = empty_std_sources(cache.path()).unwrap();
        let again = empty_std_sources(cache.path()).unwrap();
        assert_eq!(first, again);
        let entries: Vec<_> = fs::read_dir(&first)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries, ["core"]);
        assert_eq!(fs::read_dir(first.join("core")).unwrap().count(), 0);
    }

    /// A build folder from before the remapping wrapper loses its compiled files once (they
    /// may disagree with each other for good); one with the stamp keeps them.
    #[cfg(unix)]
    #[test]
    fn an_unstamped_build_folder_is_emptied_once() {
        let root = tempfile::tempdir().unwrap();
        let old = root
            .path()
            .join("slot-0/target/debug/deps/libserde-1.rmeta");
        fs::create_dir_all(old.parent().unwrap()).unwrap();
        fs::write(&old, "old").unwrap();
        fs::write(root.path().join("slot-0/Cargo.toml"), "[package]").unwrap();
        let (folder, _lock) = claim_build_dir(root.path(), None).unwrap();
        assert!(!old.exists());
        assert!(folder.join("Cargo.toml").exists());
        let new = folder.join("target/debug/deps/libserde-2.rmeta");
        fs::create_dir_all(new.parent().unwrap()).unwrap();
        fs::write(&new, "new").unwrap();
        renew_build_dir(&folder).unwrap();
        assert!(new.exists());
    }

    /// Cargo, building in a folder below a claimed root, compiles the top crate (the cell) at
    /// opt-level 0 and its path dependency (the library) at 2, although the top crate's
    /// manifest asks for 2, as evcxr's does.
    #[cfg(unix)]
    #[test]
    fn build_folders_compile_the_cell_at_0_and_its_dependencies_at_2() {
        let root = tempfile::tempdir().unwrap();
        let (folder, _lock) = claim_build_dir(root.path(), None).unwrap();
        let lib = root.path().join("lib");
        for (dir, manifest) in [
            (
                &lib,
                "[package]\nname = \"lib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
            (
                &folder,
                "[package]\nname = \"ctx\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
                 [profile.dev]\nopt-level = 2\n[dependencies]\nlib = { path = \"../lib\" }\n",
            ),
        ] {
            fs::create_dir_all(dir.join("src")).unwrap();
            fs::write(dir.join("Cargo.toml"), manifest).unwrap();
            fs::write(dir.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        }
        let out = std::process::Command::new("cargo")
            .args(["build", "-v", "--offline"])
            .current_dir(&folder)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_PROFILE_DEV_OPT_LEVEL")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        let line = |name: &str| {
            log.lines()
                .find(|l| l.contains(&format!("--crate-name {name} ")))
                .unwrap_or_else(|| panic!("no rustc line for {name}: {log}"))
                .to_owned()
        };
        assert!(line("lib").contains("opt-level=2"), "{}", line("lib"));
        // Cargo passes no opt-level flag for 0.
        assert!(!line("ctx").contains("opt-level="), "{}", line("ctx"));
    }
}
