//! `attention-lab kernel`: the Rust Jupyter kernel (evcxr's `CommandContext`, [`context`],
//! behind the project's own protocol side, [`server`]), its kernelspec "Rust (attention-lab)",
//! and the evcxr settings that make its cells faster.

pub mod context;
pub mod server;
pub mod spec;

use attention_lab_io::cache::home;
pub use attention_lab_io::cache::{cache_dir, CACHE_VAR};
use attention_lab_io::error::{io_text, print, report, write_file, Error, Result};
use attention_lab_io::problem;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub use spec::{language_info, notebook_kernelspec, DISPLAY_NAME, KERNEL_NAME, LANGUAGE};
/// Set by `kernel serve` for the process it becomes; only then does `--control_file` serve.
const SERVE_MARKER: &str = "ATTENTION_LAB_KERNEL";
/// Set (to anything) in a hub's kernelspec: each kernel takes the first free shared build
/// folder (`slot-0`, `slot-1`, ...), which the hub warmed for every student, instead of a
/// folder of its notebook's own.
pub const SLOTS_VAR: &str = "ATTENTION_LAB_BUILD_SLOTS";
pub use crate::environment::VENDOR_VAR;
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
    Some(match server::serve(&control_file, context::start) {
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
    use crate::environment::{cells_env, claim_build_dir, library_path_with_libstd};
    use crate::environment::{std_sources_for_analysis, RUST_SRC_PATH};
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

#[cfg(not(unix))]
fn serve(_control_file: &Path) -> Result<()> {
    Err("the kernel needs a Unix system (Linux or macOS)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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
