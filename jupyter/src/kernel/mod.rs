//! `attention-lab kernel`: the Rust Jupyter kernel (evcxr's `CommandContext` behind the
//! project's own protocol side, [`server`]), its kernelspec "Rust (attention-lab)", and the
//! evcxr settings that make its cells faster.

pub mod server;

use attention_lab_io::cache::home;
pub use attention_lab_io::cache::{cache_dir, CACHE_VAR};
use attention_lab_io::error::{io_text, print, report, write_file, Error, Result};
use attention_lab_io::problem;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The kernelspec's folder name: our own, so evcxr's `rust` kernelspec is never touched.
pub const KERNEL_NAME: &str = "attention-lab-rust";
/// What Jupyter shows in its launcher.
pub const DISPLAY_NAME: &str = "Rust (attention-lab)";
/// The kernelspec's language, as the kernel's `language_info` names it.
pub const LANGUAGE: &str = "Rust";
/// Set by `kernel serve` for the process it becomes; only then does `--control_file` serve.
const SERVE_MARKER: &str = "ATTENTION_LAB_KERNEL";
/// Set (to anything) in a hub's kernelspec: each kernel takes the first free shared build
/// folder (`slot-0`, `slot-1`, ...), which the hub warmed for every student, instead of a
/// folder of its notebook's own.
pub const SLOTS_VAR: &str = "ATTENTION_LAB_BUILD_SLOTS";
/// Set in a hub's kernelspec to a folder of vendored crates (`cargo vendor`): cells build
/// from it, offline, instead of from `~/.cargo`'s registry, which a student cannot read.
pub const VENDOR_VAR: &str = "ATTENTION_LAB_VENDOR";
/// Compiled crates kept between kernels and replays (MiB), evcxr's `:cache`; all share one
/// cache (`~/.cache/evcxr`).
///
/// The nine notebooks' dependencies take about 600 MiB there. At 500 every build evicted the
/// least recently used entries, so a notebook's next build mixed recompiled and cached crates;
/// one such build failed in CI ("can't find crate for `serde`", not reproduced since).
pub const EVCXR_CACHE_MIB: u64 = 2048;

/// What `kernel` does: install or uninstall the kernelspec in a Jupyter data folder (the
/// user's when `None`: $JUPYTER_DATA_DIR or ~/.local/share/jupyter), or serve one kernel.
///
/// ```no_run
/// use attention_lab_jupyter::kernel::{run, Action};
/// run(Action::Install { jupyter_path: Some("/tmp/jupyter".into()) })?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write the kernelspec "Rust (attention-lab)", pointing at this binary.
    Install {
        /// The Jupyter data folder holding `kernels/`.
        jupyter_path: Option<PathBuf>,
    },
    /// Remove the kernelspec that `Install` wrote (and nothing else).
    Uninstall {
        /// The Jupyter data folder holding `kernels/`.
        jupyter_path: Option<PathBuf>,
    },
    /// Serve one kernel for Jupyter from its connection file.
    Serve {
        /// The connection file Jupyter passes as {connection_file}.
        control_file: PathBuf,
    },
}

/// Runs `attention-lab kernel ...`; returns the exit status.
///
/// # Errors
/// No Jupyter folder, a kernelspec that cannot be written or is not ours, a failing stdout.
pub fn run(action: Action) -> Result<u8> {
    match action {
        Action::Install { jupyter_path } => user_data_dir(jupyter_path).and_then(|dir| {
            let path = install(&dir)?;
            print(&format!(
                "installed kernel {DISPLAY_NAME:?} in {}\n",
                path.display()
            ))
        }),
        Action::Uninstall { jupyter_path } => user_data_dir(jupyter_path).and_then(|dir| {
            print(&match uninstall(&dir)? {
                Some(path) => format!("removed {}\n", path.display()),
                None => format!("no {KERNEL_NAME} kernel in {}\n", dir.display()),
            })
        }),
        Action::Serve { control_file } => serve(&control_file),
    }?;
    Ok(0)
}

/// When this process was started by `kernel serve` as `attention-lab --control_file FILE`,
/// serves the kernel and returns its exit status; otherwise returns `None`. A kernel that
/// cannot serve (an unreadable connection file, a port taken) says why in one line,
/// `error: ...`, as every subcommand does, and ends with status 2.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(status) = attention_lab_jupyter::kernel::serve_if_asked() {
///         return status;
///     }
///     std::process::ExitCode::SUCCESS // ... the other subcommands
/// }
/// ```
pub fn serve_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != "--control_file" || std::env::var_os(SERVE_MARKER).is_none() {
        return None;
    }
    let control_file = PathBuf::from(args.next()?);
    return_freed_memory();
    Some(match server::serve(&control_file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => report(&error),
    })
}

/// Every [`TRIM_EVERY`], hands the heap's free pages back to the system (glibc's
/// `malloc_trim`), from a thread of the kernel's own.
///
/// rust-analyzer, which evcxr asks for each new variable's type, frees much of what it
/// builds, but glibc keeps freed pages for the next allocation: a lesson's kernel held 283 MB
/// where 244 MB were in use (BENCHMARKS.md). On a hub, memory is what sets how many students
/// one machine holds.
fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let _ = std::thread::Builder::new()
        .name("trim".into())
        .spawn(|| loop {
            std::thread::sleep(TRIM_EVERY);
            // SAFETY: malloc_trim only releases memory that is free.
            unsafe { libc::malloc_trim(0) };
        });
}

/// How often the kernel hands freed memory back ([`return_freed_memory`]).
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The user's Jupyter data folder (where `jupyter kernelspec list` looks first).
fn user_data_dir(explicit: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir);
    }
    if let Some(dir) = std::env::var_os("JUPYTER_DATA_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("jupyter"));
    }
    home().map(|h| h.join(".local").join("share").join("jupyter"))
}

/// evcxr's config folder of ours, whose `init.evcxr` turns on `:cache`.
fn evcxr_config_dir(cache: &Path) -> PathBuf {
    cache.join("evcxr-config")
}

/// Writes `<jupyter_path>/kernels/attention-lab-rust/kernel.json` (and our evcxr settings in
/// the cache folder); returns the kernelspec's folder.
///
/// # Errors
/// A folder or file that cannot be written, named in the message.
pub fn install(jupyter_path: &Path) -> Result<PathBuf> {
    let exe = std::env::current_exe()
        .map_err(|e| problem!("cannot find this binary: {}", io_text(&e)))?;
    let cache = cache_dir()?;
    let config = evcxr_config_dir(&cache);
    write_init_evcxr(&config)?;
    let spec_dir = jupyter_path.join("kernels").join(KERNEL_NAME);
    fs::create_dir_all(&spec_dir).map_err(|e| Error::io(spec_dir.display(), "create", e))?;
    let env = serde_json::json!({ CACHE_VAR: cache, "EVCXR_CONFIG_DIR": config });
    write_file(
        spec_dir.join("kernel.json"),
        kernelspec(&exe, env).as_bytes(),
    )?;
    Ok(spec_dir)
}

/// The text of a `kernel.json` that runs `EXE kernel serve` with the environment `env` (an
/// object of variables).
///
/// ```
/// let text = attention_lab_jupyter::kernel::kernelspec(
///     std::path::Path::new("/opt/attention-lab"),
///     serde_json::json!({ "PATH": "/usr/bin" }),
/// );
/// let spec: serde_json::Value = serde_json::from_str(&text).unwrap();
/// assert_eq!(spec["argv"][0], "/opt/attention-lab");
/// assert_eq!(spec["display_name"], "Rust (attention-lab)");
/// ```
pub fn kernelspec(exe: &Path, env: serde_json::Value) -> String {
    let spec = serde_json::json!({
        "argv": [exe, "kernel", "serve", "--control-file", "{connection_file}"],
        "display_name": DISPLAY_NAME,
        // As the kernel's language_info names it: JupyterLab starts the one kernel whose
        // language matches when a notebook's kernelspec (evcxr's "rust") is not installed.
        "language": LANGUAGE,
        "interrupt_mode": "message",
        "env": env,
    });
    serde_json::to_string_pretty(&spec).expect("a JSON value serializes")
}

/// The `metadata.kernelspec` that Jupyter writes into a notebook run in this kernel (from the
/// kernelspec: its folder name, display name and language). The notebooks store it, so that
/// opening one in `lab` changes nothing; `replay --update` writes it.
///
/// ```
/// let spec = attention_lab_jupyter::kernel::notebook_kernelspec();
/// assert_eq!(spec["name"], "attention-lab-rust");
/// ```
pub fn notebook_kernelspec() -> serde_json::Value {
    serde_json::json!({
        "display_name": DISPLAY_NAME,
        "language": LANGUAGE,
        "name": KERNEL_NAME,
    })
}

/// The `language_info` of the kernel's `kernel_info_reply`, which Jupyter copies into a
/// notebook's metadata when the kernel starts.
///
/// ```
/// assert_eq!(attention_lab_jupyter::kernel::language_info()["name"], "Rust");
/// ```
pub fn language_info() -> serde_json::Value {
    serde_json::json!({
        "codemirror_mode": "rust",
        "file_extension": ".rs",
        "mimetype": "text/rust",
        "name": LANGUAGE,
        "pygment_lexer": "rust",
        "version": "",
    })
}

/// Removes `<jupyter_path>/kernels/attention-lab-rust` if it is ours (its kernel.json names
/// our `kernel serve`); returns the removed folder.
///
/// # Errors
/// The folder holds a kernelspec that is not ours, or cannot be removed.
pub fn uninstall(jupyter_path: &Path) -> Result<Option<PathBuf>> {
    let spec_dir = jupyter_path.join("kernels").join(KERNEL_NAME);
    let json = spec_dir.join("kernel.json");
    let text = match fs::read_to_string(&json) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(json.display(), "read", e)),
    };
    let ours = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .is_some_and(|v| v["display_name"] == DISPLAY_NAME);
    if !ours {
        return Err(problem!(
            "{}: not written by attention-lab, left alone",
            json.display()
        ));
    }
    fs::remove_dir_all(&spec_dir).map_err(|e| Error::io(spec_dir.display(), "remove", e))?;
    Ok(Some(spec_dir))
}

/// The kernel's own `init.evcxr`: evcxr's commands run when a kernel starts (`:cache`).
///
/// ```
/// assert!(attention_lab_jupyter::kernel::init_evcxr().starts_with(":cache "));
/// ```
pub fn init_evcxr() -> String {
    format!(":cache {EVCXR_CACHE_MIB}\n")
}

fn write_init_evcxr(config: &Path) -> Result<()> {
    fs::create_dir_all(config).map_err(|e| Error::io(config.display(), "create", e))?;
    let init = config.join("init.evcxr");
    let text = init_evcxr();
    if fs::read_to_string(&init).is_ok_and(|t| t == text) {
        return Ok(());
    }
    write_file(&init, text.as_bytes())
}

/// Prepares the kernel's environment and becomes `attention-lab --control_file FILE`, which
/// [`serve_if_asked`] turns into [`server::serve`] (the environment must be set when the
/// process starts: evcxr's child, which runs the cells, inherits it).
#[cfg(unix)]
fn serve(control_file: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()
        .map_err(|e| problem!("cannot find this binary: {}", io_text(&e)))?;
    let cache = cache_dir()?;
    let config = std::env::var_os("EVCXR_CONFIG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| evcxr_config_dir(&cache));
    if !config.join("init.evcxr").exists() {
        write_init_evcxr(&config)?;
    }
    // A hub's kernels take the slots it warmed, whatever the notebook.
    let session = std::env::var("JPY_SESSION_NAME")
        .ok()
        .filter(|_| std::env::var_os(SLOTS_VAR).is_none());
    let (build_dir, lock) =
        claim_build_dir(&crate::build::kernel_builds(&cache), session.as_deref())?;
    // A new folder starts with what `lab`'s (or any) replay of the lessons compiled.
    crate::build::seed_from_warm(&crate::build::warm_build(&cache), &build_dir);
    // The lock lives as long as the kernel: keep its descriptor open across exec.
    // SAFETY: fcntl on a descriptor we own; clearing FD_CLOEXEC has no other effect.
    unsafe { libc::fcntl(lock.as_raw_fd(), libc::F_SETFD, 0) };
    let mut command = std::process::Command::new(exe);
    if let Some(path) = library_path_with_libstd() {
        command.env("LD_LIBRARY_PATH", path);
    }
    if let Some(stub) = std_sources_for_analysis(&cache)? {
        command.env(RUST_SRC_PATH, stub);
    }
    for (name, value) in cells_env(&cache) {
        command.env(name, value);
    }
    crate::priority::lower_for_start();
    let error = command
        .arg("--control_file")
        .arg(control_file)
        .env(SERVE_MARKER, "1")
        .env("EVCXR_TMPDIR", &build_dir)
        .env("EVCXR_CONFIG_DIR", &config)
        .exec();
    drop(lock);
    Err(problem!("cannot start the kernel: {error}"))
}

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

#[cfg(not(unix))]
fn serve(_control_file: &Path) -> Result<()> {
    Err("the kernel needs a Unix system (Linux or macOS)".to_owned())
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

    #[test]
    fn uninstall_leaves_a_foreign_kernelspec() {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("kernels").join(KERNEL_NAME);
        fs::create_dir_all(&spec).unwrap();
        fs::write(spec.join("kernel.json"), r#"{"display_name": "Other"}"#).unwrap();
        assert!(uninstall(dir.path()).is_err());
        assert!(spec.join("kernel.json").exists());
    }
}
