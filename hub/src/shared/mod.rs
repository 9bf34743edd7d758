//! The hub's shared folder (`/srv/attention-lab-hub` by default), root's and readable by all:
//! what every student's server and kernel run, made once by the teacher's set-up.
//!
//! - `venv/`: JupyterHub, JupyterLab, the authenticator, the idle culler and the models the
//!   lessons read ([`MODELS`]: MiniLM's folder, SmolLM2's GGUF file), pinned; the project's
//!   kernelspec in its `share/jupyter/kernels/`. Every student's kernel gets each model's path
//!   in its variable (`ATTENTION_LAB_MODEL`, `ATTENTION_LAB_SMOLLM`), root's and read-only.
//! - `proxy/`: configurable-http-proxy from npm.
//! - `toolchain/`: this machine's Rust toolchain, hard-linked (students cannot enter `/root`).
//! - `src/`: the library's sources; `vendor/`: every crate they need (`cargo vendor`).
//! - `bin/attention-lab`: this binary, which serves the kernel.
//! - `notebooks/`: the lessons, their `:dep` paths pointing at `src/`.
//! - `warm/`: one replay of every lesson as a student's kernel builds it; each new student's
//!   build folder and compiled-crate cache start as hard links to it.
//! - `cells/`: the compiled-cell cache of that replay (`attention_lab_cells`), root's and
//!   read-only to all: every student's kernel loads a lesson's cells from it instead of
//!   compiling them; a student's own edits are compiled into their own home.
//! - `evcxr-config/`: evcxr's settings for every student's kernel (and the warm replay): the
//!   kernel's `init.evcxr`, the lessons' library and plot crate loaded when a kernel starts,
//!   and a `prelude.rs` that has rust-analyzer read them once (see [`KERNEL_PRELUDE`]).
//! - `state/`: the hub's database, cookie secret, passwords and config (root only).

use attention_lab_io::cache::{Packaged, MINILM, MODELS};
use attention_lab_io::error::{io_text, warn, write_file, Error, Result};
use attention_lab_io::problem;
use attention_lab_jupyter::{kernel, lab};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The JupyterHub the hub runs, and the packages beside it (one version each).
pub const PINS: [&str; 5] = [
    "jupyterhub==6.1.1",
    lab::JUPYTERLAB,
    "jupyterhub-firstuseauthenticator==1.1.1",
    "jupyterhub-idle-culler==2.0.0",
    "nbgrader==0.9.6",
];
/// JupyterHub's proxy, from npm.
pub const PROXY: &str = "configurable-http-proxy@5.3.0";

/// The shared folder's layout.
///
/// ```
/// let shared = attention_lab_hub::shared::Shared::new("/srv/attention-lab-hub");
/// assert_eq!(shared.notebooks(), std::path::Path::new("/srv/attention-lab-hub/notebooks"));
/// ```
#[derive(Debug, Clone)]
pub struct Shared {
    root: PathBuf,
}

impl Shared {
    /// The layout below `root` (nothing is made).
    pub fn new(root: impl Into<PathBuf>) -> Shared {
        Shared { root: root.into() }
    }
    /// The folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The venv of JupyterHub and the students' JupyterLab.
    pub fn venv(&self) -> PathBuf {
        self.root.join("venv")
    }
    /// configurable-http-proxy's command.
    pub fn proxy(&self) -> PathBuf {
        self.root
            .join("proxy/node_modules/.bin/configurable-http-proxy")
    }
    /// The Rust toolchain's `bin/`.
    pub fn toolchain_bin(&self) -> PathBuf {
        self.root.join("toolchain/bin")
    }
    /// The library's sources.
    pub fn src(&self) -> PathBuf {
        self.root.join("src")
    }
    /// The vendored crates.
    pub fn vendor(&self) -> PathBuf {
        self.root.join("vendor")
    }
    /// The binary that serves the kernel.
    pub fn bin(&self) -> PathBuf {
        self.root.join("bin/attention-lab")
    }
    /// The lessons as students get them.
    pub fn notebooks(&self) -> PathBuf {
        self.root.join("notebooks")
    }
    /// nbgrader's exchange: released assignments and submissions.
    pub fn exchange(&self) -> PathBuf {
        self.root.join("exchange")
    }

    /// The warm replay's `XDG_CACHE_HOME`: `evcxr/` (compiled crates) and
    /// `attention-lab/replay-evcxr/slot-0` (the build folder).
    pub fn warm(&self) -> PathBuf {
        self.root.join("warm")
    }
    /// evcxr's config folder for every student's kernel and the warm replay.
    pub fn evcxr_config(&self) -> PathBuf {
        self.root.join("evcxr-config")
    }
    /// The lessons' compiled cells, written by the warm replay (root's), read by every kernel.
    pub fn cells(&self) -> PathBuf {
        self.root.join("cells")
    }
    /// The hub's own files (root only).
    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }
    /// MiniLM's folder in the venv, once installed.
    pub fn model(&self) -> Option<PathBuf> {
        self.installed(&MINILM)
    }
    /// `model`'s folder or file in the venv, once installed.
    ///
    /// ```
    /// use attention_lab_io::cache::SMOLLM;
    /// let shared = attention_lab_hub::shared::Shared::new("/nonexistent/hub");
    /// assert_eq!(shared.installed(&SMOLLM), None);
    /// ```
    pub fn installed(&self, model: &Packaged) -> Option<PathBuf> {
        model.in_venv(&self.venv())
    }
    /// The environment of every student's kernel.
    pub fn kernel_env(&self) -> serde_json::Value {
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.toolchain_bin().display()
        );
        let mut env = serde_json::json!({
            "PATH": path,
            kernel::VENDOR_VAR: self.vendor(),
            kernel::SLOTS_VAR: "1",
            attention_lab_cells::SHARED_VAR: self.cells(),
            "EVCXR_CONFIG_DIR": self.evcxr_config(),
            // Kernels start with what students already working leave idle; the hub gives
            // them the normal priority back once started (attention_lab_jupyter::priority).
            attention_lab_jupyter::priority::START_NICE_VAR: attention_lab_jupyter::priority::START_NICE.to_string(),
            // A cell the shared cache does not hold compiles with the CPU others leave idle.
            attention_lab_cells::COMPILE_NICE_VAR: "10",
        });
        for model in MODELS {
            if let Some(path) = self.installed(&model) {
                env[model.var] = serde_json::json!(path);
            }
        }
        env
    }
}

/// Makes (or brings up to date) every part of the shared folder from the lessons in
/// `notebooks` (the library is their `:dep` paths' folder, `notebooks/..`).
///
/// # Errors
/// A missing tool (python3, npm, cargo), a failed install, or a file that cannot be written,
/// each in one line.
pub fn prepare(shared: &Shared, notebooks: &Path) -> Result<()> {
    let notebooks = notebooks
        .canonicalize()
        .map_err(|e| Error::io(notebooks.display(), "open", e))?;
    let repo = notebooks
        .parent()
        .ok_or_else(|| problem!("{}: has no parent folder", notebooks.display()))?;
    if !repo.join("Cargo.toml").is_file() {
        return Err(problem!(
            "{}: no Cargo.toml beside the notebooks, so their `:dep` paths lead nowhere",
            repo.display()
        ));
    }
    for dir in [shared.root().to_owned(), shared.root().join("bin")] {
        fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), "create", e))?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::io(dir.display(), "set the mode of", e))?;
    }
    let state = shared.state();
    fs::create_dir_all(&state).map_err(|e| Error::io(state.display(), "create", e))?;
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(state.display(), "set the mode of", e))?;
    venv(shared)?;
    proxy(shared)?;
    toolchain(shared)?;
    copy_tree(repo, &shared.src(), &|p| !skipped_in_source(p))?;
    lessons(&notebooks, repo, shared)?;
    kernel_start(&notebooks, repo, shared)?;
    vendor(shared, repo)?;
    binary(shared)?;
    let spec = shared
        .venv()
        .join("share/jupyter/kernels")
        .join(kernel::KERNEL_NAME);
    fs::create_dir_all(&spec).map_err(|e| Error::io(spec.display(), "create", e))?;
    let text = kernel::kernelspec(&shared.bin(), shared.kernel_env());
    write_file(spec.join("kernel.json"), text.as_bytes())?;
    lab::quiet_news(&shared.venv())?;
    warm(shared)?;
    readable(shared.root())
}

/// The venv, made once with a Python every student can run, then the models it lacks, each
/// once (its marker lists the interpreter, the pins, then each model's pin as it is
/// installed: a venv made before a model was added keeps everything and gets only that one).
fn venv(shared: &Shared) -> Result<()> {
    let venv = shared.venv();
    let python = students_python()?;
    let ready = venv.join("attention-lab-ready");
    // The interpreter too: a venv is tied to the one it was made with.
    let base = format!("{}\n{}\n", python.display(), PINS.join("\n"));
    if !fs::read_to_string(&ready).is_ok_and(|t| t.starts_with(&base)) {
        lab::make_venv(&python, &venv, &PINS, "attention-lab hub")?;
        write_file(&ready, base.as_bytes())?;
    }
    lab::install_models(&venv, &ready, "attention-lab hub")
}

/// A Python 3 every student can run, with `venv` and `ssl`: the first of `python3` on the
/// PATH, `/usr/bin/python3` and `/usr/local/bin/python3` that the user `nobody` can start
/// (as root; without root, students are this user and `python3` will do). A Python under
/// `/root` (pyenv's) is not open to students, and a copy of it would still load its
/// `libpython` from there.
fn students_python() -> Result<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(PathBuf::from("python3"));
    }
    for candidate in ["python3", "/usr/bin/python3", "/usr/local/bin/python3"] {
        let Ok(out) = Command::new(candidate)
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
        else {
            continue;
        };
        let exe = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if !out.status.success() || !exe.is_absolute() {
            continue;
        }
        let runs = Command::new(&exe)
            .args(["-c", "import ssl, venv, ensurepip"])
            .current_dir("/")
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .is_ok_and(|o| o.status.success());
        if runs {
            return Ok(exe);
        }
    }
    Err(problem!(
        "no Python 3 with venv that every user can run (python3 here is private to root): \
         install one for all (e.g. apt install python3 python3-venv)"
    ))
}

/// The user id (and group id) of `nobody`, who stands for any student.
const NOBODY: u32 = 65534;

/// `from` as a new tree `to`: hard links (`cp -al`), or a copy on another file system.
fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        fs::remove_dir_all(to).map_err(|e| Error::io(to.display(), "remove", e))?;
    }
    let linked = Command::new("cp")
        .arg("-al")
        .arg(from)
        .arg(to)
        .status()
        .is_ok_and(|s| s.success());
    if !linked {
        let _ = fs::remove_dir_all(to);
        copy_tree(from, to, &|_| true)?;
    }
    Ok(())
}

/// configurable-http-proxy, installed with npm once.
fn proxy(shared: &Shared) -> Result<()> {
    if shared.proxy().exists() {
        return Ok(());
    }
    let dir = shared.root().join("proxy");
    warn(&format!(
        "attention-lab hub: installing {PROXY} in {} (once)",
        dir.display()
    ));
    let status = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg(PROXY)
        .spawn()
        .and_then(attention_lab_jupyter::supervise::run_step)
        .map_err(|_| {
            problem!("npm not found: install Node.js and npm (e.g. apt install npm); JupyterHub's proxy {PROXY} comes from npm")
        })?;
    if !status.success() {
        return Err(problem!(
            "npm could not install {PROXY} (network?) into {}",
            dir.display()
        ));
    }
    Ok(())
}

/// The toolchain that runs this command (`rustc --print sysroot`), hard-linked into the
/// shared folder (copied when it is on another file system); redone when rustc changes.
fn toolchain(shared: &Shared) -> Result<()> {
    let rustc = |args: &[&str]| -> Result<String> {
        let out = Command::new("rustc").args(args).output().map_err(|_| {
            problem!(
                "rustc not found: the hub builds the students' cells with it (https://rustup.rs)"
            )
        })?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let version = rustc(&["-vV"])?;
    let sysroot = PathBuf::from(rustc(&["--print", "sysroot"])?);
    let dest = shared.root().join("toolchain");
    let marker = shared.root().join("toolchain.version");
    if fs::read_to_string(&marker).is_ok_and(|t| t == version) && dest.is_dir() {
        return Ok(());
    }
    link_or_copy(&sysroot, &dest)?;
    write_file(&marker, version.as_bytes())
}

/// Whether a path of the repository stays out of the shared sources.
fn skipped_in_source(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with('.')
        || matches!(
            name,
            "target" | "node_modules" | "notebooks" | "e2e" | "fuzz"
        )
}

/// Copies the tree `from` over `to` (changed files replaced, nothing removed), keeping modes;
/// `keep` picks the entries.
fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<()> {
    fs::create_dir_all(to).map_err(|e| Error::io(to.display(), "create", e))?;
    let entries = fs::read_dir(from).map_err(|e| Error::io(from.display(), "read", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(from.display(), "read", e))?;
        let source = entry.path();
        if !keep(&source) {
            continue;
        }
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(source.display(), "read", e))?;
        if kind.is_dir() {
            copy_tree(&source, &target, keep)?;
        } else if kind.is_file() {
            let bytes = fs::read(&source).map_err(|e| Error::io(source.display(), "read", e))?;
            // An unchanged file keeps its time: cargo would rebuild every student's library.
            if fs::read(&target).is_ok_and(|old| old == bytes) {
                continue;
            }
            write_file(&target, &bytes)?;
            let mode = entry
                .metadata()
                .map_err(|e| Error::io(source.display(), "read", e))?
                .permissions();
            fs::set_permissions(&target, mode)
                .map_err(|e| Error::io(target.display(), "set the mode of", e))?;
        }
    }
    Ok(())
}

/// The lessons with each `:dep NAME = { path = "P" }` (P relative to the notebooks' folder)
/// pointing at the same folder below the shared `src/`: every student's kernel then builds
/// the same paths, which the warm build already compiled.
fn lessons(notebooks: &Path, repo: &Path, shared: &Shared) -> Result<()> {
    let dest = shared.notebooks();
    fs::create_dir_all(&dest).map_err(|e| Error::io(dest.display(), "create", e))?;
    let entries = fs::read_dir(notebooks).map_err(|e| Error::io(notebooks.display(), "read", e))?;
    let mut names: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ipynb"))
        .collect();
    names.sort();
    for path in names {
        let text = fs::read_to_string(&path).map_err(|e| Error::io(path.display(), "read", e))?;
        let rewritten = point_deps(&text, notebooks, repo, &shared.src())
            .map_err(|e| problem!("{}: {e}", path.display()))?;
        let name = path.file_name().expect("a file has a name");
        write_file(dest.join(name), rewritten.as_bytes())?;
    }
    Ok(())
}

/// What every student's kernel runs when it starts, after the lessons' libraries are loaded
/// (`init.evcxr`): a lesson's first `use` and one variable of the lessons' kind, made and
/// dropped (a moved variable leaves no trace in evcxr's state). Its one job is to have
/// rust-analyzer, which evcxr asks for the type of every new variable, read the library and
/// ndarray's macros when the kernel starts: a kernel's first `let` otherwise took 1.3 s of
/// it (BENCHMARKS.md), in the middle of a lesson. The lessons' own first cells, the same
/// `:dep` lines and `use`, then change nothing.
pub const KERNEL_PRELUDE: &str = "use attention_lab::prelude::*;\n\
    let attention_lab_warm_up: Array2<f64> = array![[0.0]];\n\
    drop(attention_lab_warm_up);\n";

/// The `:dep` lines, as the lessons write them, that every student's kernel runs when it
/// starts (pointed at the shared sources): a lesson's first cell, the same lines, is then
/// done at once.
pub const PRELOADED_DEPS: [&str; 2] = [
    ":dep attention-lab = { path = \"..\" }",
    ":dep attention-lab-plot = { path = \"../plot\" }",
];

/// The one other `:dep` line of the library that lessons write: 009 and 010 load it with the
/// feature `learn` (the decoder and the backward passes). It is not preloaded: a kernel would
/// then build the library twice at every start, and the seed lessons' first cell would pay
/// for code they never call. The warm replay (every lesson) builds it once, in the build
/// folder that each student's kernel starts from.
pub const LEARN_DEP: &str = ":dep attention-lab = { path = \"..\", features = [\"learn\"] }";

/// The students' kernels' evcxr settings ([`Shared::evcxr_config`]): the kernel's own
/// `init.evcxr`, then the lessons' library and plot crate, as the lessons' first cells name
/// them, and [`KERNEL_PRELUDE`].
fn kernel_start(notebooks: &Path, repo: &Path, shared: &Shared) -> Result<()> {
    let config = shared.evcxr_config();
    fs::create_dir_all(&config).map_err(|e| Error::io(config.display(), "create", e))?;
    let mut init = kernel::init_evcxr();
    for line in PRELOADED_DEPS {
        let shared_line = point_dep_line(line, notebooks, repo, &shared.src())
            .map_err(|e| problem!("{}: {e}", notebooks.display()))?
            .unwrap_or_default();
        init.push_str(&shared_line);
        init.push('\n');
    }
    write_file(config.join("init.evcxr"), init.as_bytes())?;
    write_file(config.join("prelude.rs"), KERNEL_PRELUDE.as_bytes())
}

/// `text` (a notebook's JSON) with each `:dep ... path = "P"` line of its cells made
/// `path = "<src>/<P below repo>"`.
///
/// ```
/// use std::path::Path;
/// let nb = r#"{"cells": [{"cell_type": "code", "source": [":dep attention-lab = { path = \"../plot\" }\n"]}]}"#;
/// let out = attention_lab_hub::shared::point_deps(nb, Path::new("/r/notebooks"), Path::new("/r"), Path::new("/srv/h/src"))?;
/// assert!(out.contains(r#"path = \"/srv/h/src/plot\""#));
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
/// Not a notebook, or a path outside the repository.
pub fn point_deps(
    text: &str,
    notebooks: &Path,
    repo: &Path,
    src: &Path,
) -> std::result::Result<String, String> {
    let mut nb: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not a notebook: {e}"))?;
    let cells = nb["cells"]
        .as_array_mut()
        .ok_or("not a notebook: no cells")?;
    for cell in cells {
        let Some(lines) = cell["source"].as_array_mut() else {
            continue;
        };
        for line in lines {
            let Some(text) = line.as_str() else { continue };
            if let Some(new) = point_dep_line(text, notebooks, repo, src)? {
                *line = serde_json::Value::String(new);
            }
        }
    }
    Ok(serde_json::to_string_pretty(&nb).expect("a JSON value serializes") + "\n")
}

/// One `:dep` line pointed at `src` (`None` for any other line).
fn point_dep_line(
    line: &str,
    notebooks: &Path,
    repo: &Path,
    src: &Path,
) -> std::result::Result<Option<String>, String> {
    const KEY: &str = "path = \"";
    let (true, Some(at)) = (line.starts_with(":dep "), line.find(KEY)) else {
        return Ok(None);
    };
    let start = at + KEY.len();
    let len = line[start..]
        .find('"')
        .ok_or_else(|| format!("an unclosed path in {line:?}"))?;
    let relative = &line[start..start + len];
    let inside = normalize(&notebooks.join(relative));
    let inside = inside
        .strip_prefix(repo)
        .map_err(|_| format!(":dep path {relative:?} leads outside {}", repo.display()))?;
    let shared = if inside.as_os_str().is_empty() {
        src.to_owned()
    } else {
        src.join(inside)
    };
    Ok(Some(format!(
        "{}{}{}",
        &line[..start],
        shared.display(),
        &line[start + len..]
    )))
}

/// `path` with `.` and `..` taken out, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every crate the lessons' `:dep`s need, vendored (`cargo vendor`) at the versions of the
/// repository's Cargo.lock, readable by all.
fn vendor(shared: &Shared, repo: &Path) -> Result<()> {
    let dest = shared.vendor();
    let lock = fs::read(repo.join("Cargo.lock")).unwrap_or_default();
    let marker = shared.root().join("vendor.lock");
    if fs::read(&marker).is_ok_and(|m| m == lock) && dest.is_dir() {
        return Ok(());
    }
    let manifest = shared.root().join("vendor-manifest");
    fs::create_dir_all(manifest.join("src"))
        .map_err(|e| Error::io(manifest.display(), "create", e))?;
    let src = shared.src();
    let toml = format!(
        "[package]\nname = \"attention-lab-hub-lessons\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n[dependencies]\n\
         attention-lab = {{ path = {:?} }}\nattention-lab-plot = {{ path = {:?} }}\n\
         attention-lab-model = {{ path = {:?} }}\n\n[workspace]\n",
        src.display().to_string(),
        src.join("plot").display().to_string(),
        src.join("model").display().to_string(),
    );
    write_file(manifest.join("Cargo.toml"), toml.as_bytes())?;
    write_file(manifest.join("src/lib.rs"), b"")?;
    write_file(manifest.join("Cargo.lock"), &lock)?;
    warn(&format!(
        "attention-lab hub: vendoring the lessons' crates in {} (once)",
        dest.display()
    ));
    let out = Command::new("cargo")
        .args(["vendor", "--versioned-dirs", "--quiet"])
        .arg(&dest)
        .current_dir(&manifest)
        .output()
        .map_err(|_| problem!("cargo not found: the hub vendors the lessons' crates with it"))?;
    if !out.status.success() {
        return Err(problem!(
            "cargo vendor failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    readable(&dest)?;
    write_file(&marker, &lock)
}

/// This binary, copied into the shared folder (atomically) when it differs.
fn binary(shared: &Shared) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| problem!("cannot find this binary: {}", io_text(&e)))?;
    let bytes = fs::read(&exe).map_err(|e| Error::io(exe.display(), "read", e))?;
    let dest = shared.bin();
    if fs::read(&dest).is_ok_and(|b| b == bytes) {
        return Ok(());
    }
    write_file(&dest, &bytes)?;
    fs::set_permissions(&dest, fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::io(dest.display(), "set the mode of", e))
}

/// Replays every lesson once as a student's kernel runs it (the shared toolchain, sources and
/// vendored crates), so that `warm/` holds the compiled crates and a build folder and
/// `cells/` every lesson cell's library; redone when the binary or the lessons change.
fn warm(shared: &Shared) -> Result<()> {
    let warm = shared.warm();
    let start: Vec<String> = ["init.evcxr", "prelude.rs"]
        .iter()
        .map(|name| fs::read_to_string(shared.evcxr_config().join(name)).unwrap_or_default())
        .collect();
    let key = warm_key(&start, &shared.bin(), &shared.notebooks());
    let marker = shared.root().join("warm.ready");
    if fs::read_to_string(&marker).is_ok_and(|k| k == key) && warm.is_dir() {
        return Ok(());
    }
    for dir in [&warm, &shared.cells()] {
        if dir.exists() {
            fs::remove_dir_all(dir).map_err(|e| Error::io(dir.display(), "remove", e))?;
        }
    }
    fs::create_dir_all(&warm).map_err(|e| Error::io(warm.display(), "create", e))?;
    warn("attention-lab hub: compiling the lessons once for every student (a few minutes)");
    let mut command = Command::new(shared.bin());
    command
        .args(attention_lab_jupyter::replay::WARM_ARGS)
        .arg(shared.notebooks())
        .env("XDG_CACHE_HOME", &warm)
        .env_remove(attention_lab_io::cache::CACHE_VAR)
        .stdout(std::process::Stdio::null());
    if let serde_json::Value::Object(env) = shared.kernel_env() {
        for (key, value) in env {
            command.env(key, value.as_str().unwrap_or_default());
        }
    }
    // The replay writes the shared store (as root); kernels only read it.
    command
        .env(attention_lab_cells::OWN_VAR, shared.cells())
        .env_remove(attention_lab_cells::SHARED_VAR);
    let status = command
        .spawn()
        .and_then(attention_lab_jupyter::supervise::run_step)
        .map_err(|e| problem!("cannot run {}: {}", shared.bin().display(), io_text(&e)))?;
    // 1: some stored output differs: the crates are compiled all the same.
    if status.code() == Some(2) || status.code().is_none() {
        return Err(problem!(
            "the warm replay of {} failed ({status})",
            shared.notebooks().display()
        ));
    }
    write_file(&marker, key.as_bytes())
}

/// What the warm build is keyed by: the kernel's start, the binary's content and each
/// lesson's code cells (a 64-bit FNV-1a of each, by name): a rebuilt binary of the same size
/// or a cell edited to the same length is a new warm build; a lesson whose stored outputs
/// alone changed is not (the replay compiles the code).
///
/// ```
/// use attention_lab_hub::shared::warm_key;
/// let dir = tempfile::tempdir()?;
/// let (bin, lessons) = (dir.path().join("bin"), dir.path().join("lessons"));
/// std::fs::create_dir(&lessons)?;
/// std::fs::write(&bin, "abcd")?;
/// let lesson = |code: &str, output: &str| format!(
///     r#"{{"cells": [{{"cell_type": "code", "source": ["{code}"], "outputs": ["{output}"]}}]}}"#
/// );
/// std::fs::write(lessons.join("000.ipynb"), lesson("let a = 1;", "x"))?;
/// let key = warm_key(&[], &bin, &lessons);
/// std::fs::write(&bin, "abce")?;
/// assert_ne!(warm_key(&[], &bin, &lessons), key);
/// std::fs::write(&bin, "abcd")?;
/// std::fs::write(lessons.join("000.ipynb"), lesson("let a = 2;", "x"))?;
/// assert_ne!(warm_key(&[], &bin, &lessons), key);
/// std::fs::write(lessons.join("000.ipynb"), lesson("let a = 1;", "a new output"))?;
/// assert_eq!(warm_key(&[], &bin, &lessons), key);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn warm_key(start: &[String], bin: &Path, notebooks: &Path) -> String {
    let mut lessons: Vec<PathBuf> = fs::read_dir(notebooks)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    lessons.sort();
    let mut key = format!(
        "{}\nbin {:016x}\n",
        start.join("\n"),
        fnv(&fs::read(bin).unwrap_or_default())
    );
    for lesson in lessons {
        let name = lesson.file_name().unwrap_or_default().to_string_lossy();
        key.push_str(&format!("{name} {:016x}\n", fnv(&code_of(&lesson))));
    }
    key
}

/// The code cells' sources of a notebook, each followed by a NUL (the whole file when it is
/// no notebook).
fn code_of(path: &Path) -> Vec<u8> {
    let bytes = fs::read(path).unwrap_or_default();
    let Ok(nb) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return bytes;
    };
    let mut code = Vec::new();
    for cell in nb["cells"].as_array().into_iter().flatten() {
        if cell["cell_type"] == "code" {
            match &cell["source"] {
                serde_json::Value::Array(lines) => {
                    for line in lines {
                        code.extend_from_slice(line.as_str().unwrap_or_default().as_bytes());
                    }
                }
                other => code.extend_from_slice(other.as_str().unwrap_or_default().as_bytes()),
            }
            code.push(0);
        }
    }
    code
}

/// The key of the warm build made last (empty before the first).
pub fn warm_key_written(shared: &Shared) -> String {
    fs::read_to_string(shared.root().join("warm.ready")).unwrap_or_default()
}

/// FNV-1a (64 bits) of bytes taken 8 at a time.
fn fnv(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut words = bytes.chunks_exact(8);
    for word in words.by_ref() {
        hash ^= u64::from_le_bytes(word.try_into().expect("8 bytes"));
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    for &byte in words.remainder() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Makes everything below `dir` readable (and folders enterable) by all, as `chmod -R a+rX`;
/// `state/` is skipped.
fn readable(dir: &Path) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io(dir.display(), "read", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir.display(), "read", e))?;
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "state") && path.parent() == Some(dir) {
            continue;
        }
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(path.display(), "read", e))?;
        if kind.is_symlink() {
            continue;
        }
        let mode = entry
            .metadata()
            .map_err(|e| Error::io(path.display(), "read", e))?
            .permissions()
            .mode();
        let want = if kind.is_dir() || mode & 0o111 != 0 {
            mode | 0o555
        } else {
            mode | 0o444
        };
        if want != mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(want))
                .map_err(|e| Error::io(path.display(), "set the mode of", e))?;
        }
        if kind.is_dir() {
            readable(&path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
