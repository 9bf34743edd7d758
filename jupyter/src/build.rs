//! A kernel's build folder started from a warm one: a new folder gets the compiled crates of a
//! folder that compiled the lessons already (hard links to what cargo never rewrites, copies
//! of the rest), so its first cell finds every dependency fresh instead of compiling them.
//! `lab` warms one folder by replaying the lessons; a hub's set-up does the same as root, and
//! seeds each new student's folder from it (each file then given to the student).

use attention_lab_io::error::{Error, Result};
use std::fs;
use std::path::{Path, PathBuf};

/// The replay engine's evcxr build folders in the cache folder `cache`
/// (`ATTENTION_LAB_CACHE`); the first, [`warm_build`], is the one a warm replay fills.
///
/// ```
/// use attention_lab_jupyter::build::{replay_builds, slot, warm_build};
/// use std::path::Path;
/// assert_eq!(warm_build(Path::new("c")), slot(&replay_builds(Path::new("c")), 0));
/// ```
pub fn replay_builds(cache: &Path) -> PathBuf {
    cache.join("replay-evcxr")
}

/// The kernels' evcxr build folders in the cache folder `cache`.
///
/// ```
/// use attention_lab_jupyter::build::kernel_builds;
/// assert!(kernel_builds(std::path::Path::new("c")).starts_with("c"));
/// ```
pub fn kernel_builds(cache: &Path) -> PathBuf {
    cache.join("evcxr-build")
}

/// Shared build folder number `n` of a builds folder (as opposed to a notebook's own).
///
/// ```
/// use attention_lab_jupyter::build::slot;
/// assert_eq!(slot(std::path::Path::new("b"), 1), std::path::Path::new("b/slot-1"));
/// ```
pub fn slot(builds: &Path, n: usize) -> PathBuf {
    builds.join(slot_name(n))
}

/// The name of shared build folder `n`.
pub(crate) fn slot_name(n: usize) -> String {
    format!("slot-{n}")
}

/// The build folder a warm replay of the lessons fills, from which new kernels' folders start.
///
/// ```
/// use attention_lab_jupyter::build::warm_build;
/// assert!(warm_build(std::path::Path::new("c")).starts_with("c"));
/// ```
pub fn warm_build(cache: &Path) -> PathBuf {
    slot(&replay_builds(cache), 0)
}

/// What [`seed_tree`] does with an entry of the tree it copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// A copy of the new owner's own (a folder: made, and its entries picked in turn).
    Copy,
    /// A hard link to the original, which stays as it is (read-only to another owner).
    Link,
    /// Left out.
    Skip,
}

/// Copies the tree `from` to the new folder `to`, each entry as `pick` says; `own` is called
/// on every folder, copy and symbolic link made (a hub gives each to its student). Symbolic
/// links are copied as links; copies keep their modification times, by which cargo judges
/// freshness.
///
/// ```
/// use attention_lab_jupyter::build::{seed_tree, Pick};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir_all(dir.path().join("from/deps")).unwrap();
/// std::fs::write(dir.path().join("from/deps/libx.rlib"), "x").unwrap();
/// seed_tree(&dir.path().join("from"), &dir.path().join("to"), &|_| Pick::Link, &|_| Ok(()))?;
/// assert_eq!(std::fs::read(dir.path().join("to/deps/libx.rlib")).unwrap(), b"x");
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// A file or folder that cannot be read or made, or an error from `own`.
pub fn seed_tree(
    from: &Path,
    to: &Path,
    pick: &dyn Fn(&Path) -> Pick,
    own: &dyn Fn(&Path) -> Result<()>,
) -> Result<()> {
    fs::create_dir(to).map_err(|e| Error::io(to.display(), "create", e))?;
    let mode = fs::metadata(from)
        .map_err(|e| Error::io(from.display(), "read", e))?
        .permissions();
    fs::set_permissions(to, mode).map_err(|e| Error::io(to.display(), "set the mode of", e))?;
    own(to)?;
    let entries = fs::read_dir(from).map_err(|e| Error::io(from.display(), "read", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(from.display(), "read", e))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let choice = pick(&source);
        if choice == Pick::Skip {
            continue;
        }
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(source.display(), "read", e))?;
        if kind.is_dir() {
            seed_tree(&source, &target, pick, own)?;
        } else if kind.is_symlink() {
            let points =
                fs::read_link(&source).map_err(|e| Error::io(source.display(), "read", e))?;
            std::os::unix::fs::symlink(points, &target)
                .map_err(|e| Error::io(target.display(), "create", e))?;
            own(&target)?;
        } else if choice == Pick::Link {
            fs::hard_link(&source, &target).map_err(|e| Error::io(target.display(), "link", e))?;
        } else {
            fs::copy(&source, &target).map_err(|e| Error::io(target.display(), "write", e))?;
            // Cargo judges freshness by modification times: a copy keeps the original's, or
            // every compiled crate would look older than its own fingerprint.
            let modified = entry
                .metadata()
                .and_then(|m| m.modified())
                .map_err(|e| Error::io(source.display(), "read", e))?;
            fs::File::options()
                .write(true)
                .open(&target)
                .and_then(|f| f.set_modified(modified))
                .map_err(|e| Error::io(target.display(), "set the time of", e))?;
            own(&target)?;
        }
    }
    Ok(())
}

/// How a new build folder gets each entry of a warm one: the registry crates' compiled files
/// as hard links (never rebuilt while their sources stay as they are); the library's
/// incremental state left out (cargo reads it only to recompile the library); the rest
/// (fingerprints, build scripts' output, the library's and the cell's crates, which a rebuild
/// rewrites in place) as copies.
///
/// ```
/// use attention_lab_jupyter::build::{build_pick, Pick};
/// use std::path::Path;
/// assert_eq!(build_pick(Path::new("t/debug/deps/libndarray-1.rlib")), Pick::Link);
/// assert_eq!(build_pick(Path::new("t/debug/deps/libattention_lab-1.rlib")), Pick::Copy);
/// ```
pub fn build_pick(path: &Path) -> Pick {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let parent = path.parent().and_then(Path::file_name);
    let ours = name.starts_with("libctx") || name.starts_with("libattention_lab");
    if parent.is_some_and(|p| p == "incremental") && !name.starts_with("ctx-") {
        Pick::Skip
    } else if matches!(ext, "rlib" | "rmeta" | "so") && !ours {
        Pick::Link
    } else {
        Pick::Copy
    }
}

/// Gives the build folder `dir`, when it has no compiled crates yet, the compiled crates and
/// lock file of the warm folder `warm` (a replay's, which `lab` makes when it first starts);
/// returns whether it did. Nothing is done while a replay holds `warm` (its lock file, as
/// `kernel` names it, is taken for the copy), or when there is no warm folder. A copy that
/// fails midway is removed: the kernel then compiles as it would have.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let warm = attention_lab_jupyter::build::warm_build(dir.path());
/// std::fs::create_dir_all(warm.join("target/debug/deps"))?;
/// std::fs::write(warm.join("target/debug/deps/libndarray-1.rlib"), "compiled")?;
/// let new = dir.path().join("evcxr-build/nb-000");
/// std::fs::create_dir_all(&new)?;
/// assert!(attention_lab_jupyter::build::seed_from_warm(&warm, &new));
/// assert!(new.join("target/debug/deps/libndarray-1.rlib").exists());
/// assert!(!attention_lab_jupyter::build::seed_from_warm(&warm, &new), "only once");
/// # Ok::<(), std::io::Error>(())
/// ```
#[cfg(unix)]
pub fn seed_from_warm(warm: &Path, dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let target = dir.join("target");
    if target.exists() || !warm.join("target").is_dir() {
        return false;
    }
    let Ok(lock) = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(warm.with_extension("lock"))
    else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; released when `lock` is dropped.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return false;
    }
    let seeded = seed_tree(&warm.join("target"), &target, &build_pick, &|_| Ok(()));
    if seeded.is_err() {
        let _ = fs::remove_dir_all(&target);
        return false;
    }
    // The same versions as the warm build, so that cargo finds its crates fresh.
    let _ = fs::copy(warm.join("Cargo.lock"), dir.join("Cargo.lock"));
    true
}
