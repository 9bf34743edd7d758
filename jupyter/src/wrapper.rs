//! evcxr's rustc wrapper, made sound across build folders.
//!
//! evcxr runs this binary as cargo's `RUSTC_WRAPPER`. It keeps each compiled crate in
//! `~/.cache/evcxr` under a key made of rustc's arguments with the build folder's path
//! blanked out, and copies a hit into whatever folder asks next. But a crate that includes a
//! file from its build script's `OUT_DIR` (serde_core, typenum, ...) records that file's
//! path, so its crate hash differs from one build folder to another. Once the cache holds
//! `serde` from one folder and `serde_core` from another (the older entry evicted, or two
//! kernels compiling it at once), every new folder fails with "can't find crate for `serde`"
//! (E0463), and cargo, which sees fresh files, never repairs it.
//!
//! The fix: rustc is told to write the build folder's path as one fixed name
//! ([`REMAPPED_TARGET`]), so a crate compiles to the same bytes in every folder. The remap is
//! part of the arguments, hence of evcxr's key: entries made without it are never used again.

use std::ffi::{OsStr, OsString};

/// What rustc writes instead of the build folder's `target/` path.
pub const REMAPPED_TARGET: &str = "/attention-lab-build-target";

/// Set by evcxr (`runtime.rs`) when it runs this binary as cargo's rustc wrapper.
const WRAPPER_VAR: &str = "EVCXR_RUSTC_WRAPPER";
/// Set by evcxr (`module/cache.rs`) only when its crate cache is on: the folder it blanks out.
const TARGET_DIR_VAR: &str = "EVCXR_TARGET_DIR";

/// The wrapper's arguments with the remap flag added, or `None` when nothing needs adding: not
/// a compilation (`rustc -vV`, cargo's probes), or the flag is there already.
///
/// `args` are the wrapper's own: this binary, then rustc, then rustc's arguments.
///
/// ```
/// use attention_lab_jupyter::wrapper::{remapped_args, REMAPPED_TARGET};
/// use std::ffi::OsString;
/// let args: Vec<OsString> = ["me", "rustc", "--out-dir", "/b/target/debug/deps"]
///     .map(OsString::from)
///     .to_vec();
/// let out = remapped_args(&args, "/b/target".as_ref()).unwrap();
/// let flag = format!("--remap-path-prefix=/b/target={REMAPPED_TARGET}");
/// assert_eq!(out.last().unwrap().to_str(), Some(flag.as_str()));
/// assert!(remapped_args(&out, "/b/target".as_ref()).is_none());
/// ```
pub fn remapped_args(args: &[OsString], target: &OsStr) -> Option<Vec<OsString>> {
    let mut flag = OsString::from("--remap-path-prefix=");
    flag.push(target);
    flag.push("=");
    flag.push(REMAPPED_TARGET);
    let compiles = args.iter().any(|a| a == "--out-dir");
    if !compiles || target.is_empty() || args.contains(&flag) {
        return None;
    }
    let mut out = args.to_vec();
    out.push(flag);
    Some(out)
}

/// In evcxr's rustc wrapper with its cache on, runs this binary again with the remap flag
/// added (evcxr reads the arguments from the process itself); elsewhere returns at once.
/// Should the re-run fail to start, the compilation goes on without the remap, as evcxr alone
/// would do it, after one line on stderr.
#[cfg(unix)]
pub(crate) fn remap_build_folder() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os(WRAPPER_VAR).is_none() {
        return;
    }
    let Some(target) = std::env::var_os(TARGET_DIR_VAR) else {
        return;
    };
    let args: Vec<OsString> = std::env::args_os().collect();
    let Some(args) = remapped_args(&args, &target) else {
        return;
    };
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let error = std::process::Command::new(me)
        .arg0(&args[0])
        .args(&args[1..])
        .exec();
    eprintln!(
        "attention-lab: rustc wrapper: could not re-run itself with --remap-path-prefix ({error})"
    );
}

#[cfg(not(unix))]
pub(crate) fn remap_build_folder() {}

/// In evcxr's rustc wrapper, answers a cell's compile from the compiled-cell cache (and
/// exits); elsewhere, and for every other crate, returns at once.
#[cfg(unix)]
pub(crate) fn serve_cells() {
    if std::env::var_os(WRAPPER_VAR).is_some() {
        attention_lab_cells::serve();
    }
}

#[cfg(not(unix))]
pub(crate) fn serve_cells() {}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn probes_and_empty_targets_are_left_alone() {
        let probe = os(&["me", "rustc", "-vV"]);
        assert!(remapped_args(&probe, "/b/target".as_ref()).is_none());
        let build = os(&["me", "rustc", "--out-dir", "/b/target/debug/deps"]);
        assert!(remapped_args(&build, "".as_ref()).is_none());
    }

    #[test]
    fn the_flag_goes_last_and_the_rest_is_kept_in_order() {
        let build = os(&[
            "me",
            "rustc",
            "--crate-name",
            "serde",
            "--out-dir",
            "/b/t/deps",
        ]);
        let out = remapped_args(&build, "/b/t".as_ref()).unwrap();
        assert_eq!(out[..build.len()], build[..]);
        assert_eq!(out.len(), build.len() + 1);
    }
}
