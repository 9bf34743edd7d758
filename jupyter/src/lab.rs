//! `attention-lab lab [DIR]`: JupyterLab with the project's Rust kernel, in one command.

use attention_lab_io::error::{io_text, print, warn, Error, Result};
use attention_lab_io::problem;
use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;

use crate::kernel;

/// The JupyterLab that `lab` installs (one version, so every student sees the same page).
const JUPYTERLAB: &str = "jupyterlab==4.6.6";

/// `attention-lab lab [DIR]`
#[derive(Debug, Args)]
pub struct LabArgs {
    /// Folder JupyterLab opens (the notebooks).
    #[arg(default_value = "notebooks")]
    dir: PathBuf,
    /// Port on 127.0.0.1.
    #[arg(long, default_value_t = 8888)]
    port: u16,
    /// Do not open a browser; just print the URL.
    #[arg(long = "no-browser")]
    no_browser: bool,
}

/// Runs `attention-lab lab`; returns JupyterLab's exit status.
///
/// # Errors
/// No such folder, a busy port, no Python, a failed install, a failing stdout.
pub fn run(args: LabArgs) -> Result<u8> {
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
    let cache = kernel::cache_dir()?;
    let venv = ensure_venv(&cache.join("venv-lab"))?;
    let data = cache.join("jupyter");
    kernel::install(&data)?;
    let token = token()?;
    let mut command = Command::new(venv.join("bin").join("jupyter"));
    command
        .args(["lab", "--ip=127.0.0.1", "--ServerApp.port_retries=0"])
        .arg(format!("--port={}", args.port))
        .arg(format!("--IdentityProvider.token={token}"))
        .arg(format!(
            "--MultiKernelManager.default_kernel_name={}",
            kernel::KERNEL_NAME
        ))
        .arg("--ServerApp.root_dir=.")
        .current_dir(&args.dir)
        // A data folder of our own: our kernelspec is found there, and a "rust" kernel of the
        // user's does not take the notebooks (their kernelspec names "rust").
        .env("JUPYTER_DATA_DIR", &data)
        .stdin(Stdio::null());
    if args.no_browser {
        command.arg("--no-browser");
    }
    // Containers and CI machines often run as root, which Jupyter refuses unless told.
    // SAFETY: geteuid has no preconditions.
    #[cfg(unix)]
    if unsafe { libc::geteuid() } == 0 {
        command.arg("--allow-root");
    }
    let mut child = command.spawn().map_err(|e| {
        problem!(
            "cannot start JupyterLab from {}: {}",
            venv.display(),
            io_text(&e)
        )
    })?;
    let started = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(problem!("JupyterLab stopped before serving ({status})"));
        }
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            return Err(problem!(
                "JupyterLab did not answer on port {} in 180 s",
                args.port
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    print(&format!(
        "JupyterLab: http://127.0.0.1:{}/lab?token={token}\n",
        args.port
    ))?;
    let status = child
        .wait()
        .map_err(|e| problem!("waiting for JupyterLab: {}", io_text(&e)))?;
    Ok(status
        .code()
        .map_or(0, |code| u8::try_from(code).unwrap_or(1)))
}

/// Makes (or reuses) the venv with the pinned JupyterLab; returns its folder.
fn ensure_venv(venv: &Path) -> Result<PathBuf> {
    let ready = venv.join("attention-lab-ready");
    if fs::read_to_string(&ready).is_ok_and(|t| t.trim() == JUPYTERLAB) {
        return Ok(venv.to_owned());
    }
    let python3 = Command::new("python3")
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
    warn(&format!(
        "attention-lab lab: installing {JUPYTERLAB} in {} (once)",
        venv.display()
    ));
    let made = Command::new("python3")
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
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            JUPYTERLAB,
        ])
        .status()
        .map_err(|e| problem!("pip: {}", io_text(&e)))?;
    if !installed.success() {
        return Err(problem!(
            "pip could not install {JUPYTERLAB} (network?) into {}",
            venv.display()
        ));
    }
    fs::write(&ready, JUPYTERLAB).map_err(|e| Error::io(ready.display(), "write", e))?;
    Ok(venv.to_owned())
}

/// A random token for JupyterLab's URL.
fn token() -> Result<String> {
    let mut bytes = [0u8; 24];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::io("/dev/urandom", "read", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
