//! Runs cells in an in-process evcxr context and records their outputs the
//! way evcxr_jupyter 0.22 would (see its `core.rs`).
//!
//! Design: each notebook gets a worker thread that owns a fresh
//! `CommandContext` (evcxr's context is not shared across threads, and a cell
//! that never returns must not block the caller). The caller sends one cell at
//! a time and waits for the reply with a deadline. On timeout it kills every
//! descendant process of this process (the evcxr runtime child that runs the
//! cell, plus any cargo/rustc still compiling it), repeatedly for a grace
//! period, so that `execute` returns; if it still does not, the worker thread
//! is abandoned. Either way the rest of that notebook is not run, because the
//! kernel lost its variables.

use super::engine::{first_line, CellRun, KernelOptions, Output, Raised, Session};
use attention_lab_io::error::{Error, Result};
use attention_lab_io::problem;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// How long to keep killing descendants after a timeout before giving up on
/// the worker thread.
const KILL_GRACE: Duration = Duration::from_secs(20);

/// Minimum time allowed for evcxr to start.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// How long output channels must stay quiet after a cell before its output
/// is taken as complete (evcxr syncs stdout, but not the child's stderr). At 15 ms a
/// cell's last stderr line arrived after it on a loaded 2-core machine (a CI run beside
/// two builds): the reader thread that forwards the child's stderr had not run yet.
const SETTLE_QUIET: Duration = Duration::from_millis(50);

struct Request {
    code: String,
}

struct Reply {
    outputs: Vec<Output>,
    raised: Option<Raised>,
    seconds: f64,
}

type ProcessHandle = Arc<Mutex<std::process::Child>>;

/// A running evcxr context for one notebook.
pub struct Kernel {
    requests: Option<Sender<Request>>,
    replies: Receiver<Reply>,
    process: ProcessHandle,
    thread: Option<std::thread::JoinHandle<()>>,
    timeout: Duration,
    lost: Option<String>,
    /// Holds the lock on the kept build folder for as long as the context runs.
    _build_lock: Option<std::fs::File>,
    /// That folder, whose `cells.log` tells how each library came to be.
    build: Option<PathBuf>,
}

/// Sets the process's current folder for the lifetime of the guard and
/// restores it afterwards. evcxr canonicalises relative `:dep` paths against
/// the current folder and its child inherits it, so it must be the notebook's
/// folder, as when Jupyter starts the kernel there.
pub struct CurrentDirGuard {
    previous: PathBuf,
}

impl CurrentDirGuard {
    /// Changes into `folder`.
    pub fn enter(folder: &Path) -> std::io::Result<CurrentDirGuard> {
        let previous = std::env::current_dir()?;
        std::env::set_current_dir(folder)?;
        Ok(CurrentDirGuard { previous })
    }
}

impl Drop for CurrentDirGuard {
    fn drop(&mut self) {
        let _ = std::env::set_current_dir(&self.previous);
    }
}

impl Kernel {
    /// Starts a fresh evcxr context (in the current folder) and waits for it
    /// to be ready. Returns the error text and start-up seconds on failure.
    pub fn start(options: &KernelOptions) -> Result<(Kernel, f64)> {
        let started = Instant::now();
        let (ready_tx, ready_rx) = mpsc::channel();
        let (request_tx, request_rx) = mpsc::channel::<Request>();
        let (reply_tx, reply_rx) = mpsc::channel::<Reply>();
        let cache_mib = options.cache_mib;
        let (build_lock, build) = keep_build_folder()?.unzip();
        let thread = std::thread::Builder::new()
            .name("evcxr-kernel".into())
            .spawn(move || worker(cache_mib, ready_tx, request_rx, reply_tx))
            .map_err(|error| problem!("cannot start kernel thread: {error}"))?;
        // Start-up compiles a first snippet and is not a cell: allow at
        // least STARTUP_TIMEOUT even when the cell timeout is small.
        let startup_timeout = options.timeout.max(STARTUP_TIMEOUT);
        match ready_rx.recv_timeout(startup_timeout) {
            Ok(Ok(process)) => Ok((
                Kernel {
                    requests: Some(request_tx),
                    replies: reply_rx,
                    process,
                    thread: Some(thread),
                    timeout: options.timeout,
                    lost: None,
                    _build_lock: build_lock,
                    build,
                },
                started.elapsed().as_secs_f64(),
            )),
            Ok(Err(message)) => {
                let _ = thread.join();
                Err(problem!(
                    "evcxr failed to start: {}",
                    first_line(&message.to_string())
                ))
            }
            Err(RecvTimeoutError::Timeout) => {
                kill_descendants(None);
                Err(problem!(
                    "evcxr did not start within {} s",
                    startup_timeout.as_secs_f64()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                Err("evcxr crashed while starting (internal panic)".into())
            }
        }
    }

    /// Runs one cell, enforcing the timeout.
    pub fn run(&mut self, code: &str) -> CellRun {
        if let Some(reason) = &self.lost {
            return lost_run(reason.clone(), 0.0);
        }
        let started = Instant::now();
        let request = Request {
            code: code.to_owned(),
        };
        let sent = self
            .requests
            .as_ref()
            .map(|requests| requests.send(request).is_ok())
            .unwrap_or(false);
        if !sent {
            return self.lose("evcxr kernel thread has stopped".into(), started);
        }
        match self.replies.recv_timeout(self.timeout) {
            Ok(reply) => CellRun {
                outputs: reply.outputs,
                raised: reply.raised,
                seconds: reply.seconds,
            },
            Err(RecvTimeoutError::Disconnected) => {
                self.lose("evcxr crashed (internal panic)".into(), started)
            }
            Err(RecvTimeoutError::Timeout) => {
                let message = format!(
                    "cell timed out after {} s and was killed",
                    self.timeout.as_secs_f64()
                );
                let deadline = Instant::now() + KILL_GRACE;
                // Keep killing: evcxr may start cargo or a new child between
                // our kills, until `execute` returns.
                let reply = loop {
                    kill_descendants(Some(&self.process));
                    match self.replies.recv_timeout(Duration::from_millis(250)) {
                        Ok(reply) => break Some(reply),
                        Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                        Err(_) => break None,
                    }
                };
                let mut outputs = reply.map(|reply| reply.outputs).unwrap_or_default();
                // Like Jupyter's report of an interrupted cell.
                outputs.retain(|output| !matches!(output, Output::Error { .. }));
                outputs.push(Output::error(&message));
                self.lost = Some("not run: an earlier cell timed out".into());
                CellRun {
                    outputs,
                    raised: Some(Raised::TimedOut(message)),
                    seconds: started.elapsed().as_secs_f64(),
                }
            }
        }
    }

    fn lose(&mut self, reason: String, started: Instant) -> CellRun {
        self.lost = Some(format!("not run: {reason}"));
        lost_run(reason, started.elapsed().as_secs_f64())
    }

    /// Stops the context: closing the request channel ends the worker, which
    /// drops the context (evcxr then ends its child and removes its tmpdir).
    /// A worker stuck after a timeout is not waited for.
    pub fn shutdown(mut self) {
        self.requests.take();
        if let Some(thread) = self.thread.take() {
            if self.lost.is_none() {
                let _ = thread.join();
            }
        }
    }
}

impl Session for Kernel {
    fn run(&mut self, _position: usize, code: &str) -> CellRun {
        Kernel::run(self, code)
    }

    fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    fn shutdown(self: Box<Self>) {
        Kernel::shutdown(*self);
    }

    fn interrupter(&self) -> super::engine::Interrupt {
        crate::cell::interrupter(self.process.clone())
    }

    fn libraries(&self) -> Option<super::engine::Libraries> {
        let trace = attention_lab_cells::Trace::read(self.build.as_ref()?);
        Some(super::engine::Libraries {
            loaded: trace.loaded,
            compiled: trace.compiled,
        })
    }
}

fn lost_run(reason: String, seconds: f64) -> CellRun {
    CellRun {
        outputs: vec![Output::error(&reason)],
        raised: Some(Raised::Lost(reason)),
        seconds,
    }
}

/// Points evcxr at a kept build folder of the cache (`replay-evcxr/`), locked while this
/// context runs, as `attention-lab kernel` does for each kernel: the path dependencies
/// (attention-lab, the plot crate) are then compiled once, not in every new context, which
/// evcxr's `:cache` skips (BENCHMARKS.md, "Levers": a third less CPU a notebook). The
/// compiled-cell cache is turned on as in a kernel. Returns the lock and the folder; `None`
/// where the kernel's folders are not supported (not Unix).
fn keep_build_folder() -> Result<Option<(std::fs::File, PathBuf)>> {
    #[cfg(unix)]
    {
        let cache = attention_lab_io::cache::cache_dir()?;
        let (folder, lock) =
            crate::environment::claim_build_dir(&crate::build::replay_builds(&cache), None)?;
        // evcxr reads its build folder from the environment when the context is made; the
        // replay makes one context at a time, before its threads read the environment.
        std::env::set_var("EVCXR_TMPDIR", &folder);
        // As the kernel: rust-analyzer without the standard library's sources.
        if let Some(stub) = crate::environment::std_sources_for_analysis(&cache)? {
            std::env::set_var(crate::environment::RUST_SRC_PATH, stub);
        }
        for (name, value) in crate::environment::cells_env(&cache) {
            std::env::set_var(name, value);
        }
        // Once: the cells' libstd folder goes first on the loader's path (see the kernel).
        static LIBSTD: OnceLock<()> = OnceLock::new();
        LIBSTD.get_or_init(|| {
            if let Some(path) = crate::environment::library_path_with_libstd() {
                std::env::set_var("LD_LIBRARY_PATH", path);
            }
        });
        Ok(Some((lock, folder)))
    }
    #[cfg(not(unix))]
    Ok(None)
}

/// evcxr reads the current folder's `evcxr.toml` first, and its parse error names no file.
fn name_config_file(message: String) -> String {
    if !message.starts_with("TOML parse error") {
        return message;
    }
    let path = std::env::current_dir()
        .map(|dir| dir.join("evcxr.toml"))
        .unwrap_or_else(|_| "evcxr.toml".into());
    format!("{}: {message}", path.display())
}

/// The worker thread: owns the evcxr context and runs cells on request.
fn worker(
    cache_mib: u64,
    ready: Sender<Result<ProcessHandle>>,
    requests: Receiver<Request>,
    replies: Sender<Reply>,
) {
    // Same as CommandContext::new(), but with a child path that survives
    // this binary being rebuilt while it runs (see `runtime_executable`).
    let started = runtime_executable().and_then(|exe| {
        evcxr::EvalContext::with_subprocess_command(std::process::Command::new(exe))
            .map_err(|error| Error::Input(name_config_file(error.to_string())))
    });
    let (mut context, channels) = match started {
        Ok((eval, channels)) => (evcxr::CommandContext::with_eval_context(eval), channels),
        Err(error) => {
            let _ = ready.send(Err(error));
            return;
        }
    };
    let collected = Arc::new(Collected::default());
    for (name, receiver) in [("stdout", channels.stdout), ("stderr", channels.stderr)] {
        let collected = Arc::clone(&collected);
        // Lines are recorded in arrival order, like evcxr_jupyter's
        // pass-through thread; the threads end when evcxr drops its senders.
        std::thread::spawn(move || {
            while let Ok(line) = receiver.recv() {
                collected.lines().push((name, line));
                collected.arrivals.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    if cache_mib > 0 {
        let _ = context.execute(&format!(":cache {cache_mib}"));
    }
    // As evcxr_jupyter starts a kernel: the folder's evcxr.toml (or evcxr's config folder)
    // may declare dependencies and a prelude. Quiet: it would name the file on our stdout.
    if let Err(error) = context.execute(":load_config --quiet") {
        let _ = ready.send(Err(problem!(
            "evcxr's startup configuration (evcxr.toml or init.evcxr): {}",
            first_line(&error.to_string())
        )));
        return;
    }
    settle(&collected);
    collected.lines().clear();
    if ready.send(Ok(context.process_handle())).is_err() {
        return;
    }
    for request in requests {
        let started = Instant::now();
        let result = context.execute(&request.code);
        let seconds = started.elapsed().as_secs_f64();
        settle(&collected);
        let lines = std::mem::take(&mut *collected.lines());
        let (outputs, raised) = crate::cell::outcome(lines, result);
        if replies
            .send(Reply {
                outputs,
                raised,
                seconds,
            })
            .is_err()
        {
            return;
        }
    }
}

/// The binary evcxr starts as its child (and as its rustc wrapper): this
/// one. When `cargo build` replaces the file during a run, Linux reports the
/// old inode as "PATH (deleted)"; the rebuilt file at PATH has the same
/// runtime hook, so use it.
fn runtime_executable() -> Result<PathBuf> {
    let exe = std::env::current_exe()
        .map_err(|error| problem!("cannot find this executable: {error}"))?;
    let text = exe.to_string_lossy();
    match text.strip_suffix(" (deleted)") {
        Some(original) if !exe.exists() => Ok(PathBuf::from(original)),
        _ => Ok(exe),
    }
}

#[derive(Default)]
struct Collected {
    lines: Mutex<Vec<(&'static str, String)>>,
    arrivals: AtomicU64,
}

impl Collected {
    /// The lines so far. A poisoned lock still holds whole lines (a push, a clear or a take
    /// either happened or did not), so they are taken as they are.
    fn lines(&self) -> MutexGuard<'_, Vec<(&'static str, String)>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Waits until no output line has arrived for `SETTLE_QUIET` (at most 1 s).
fn settle(collected: &Collected) {
    let limit = Instant::now() + Duration::from_secs(1);
    let mut seen = collected.arrivals.load(Ordering::SeqCst);
    loop {
        std::thread::sleep(SETTLE_QUIET);
        let now = collected.arrivals.load(Ordering::SeqCst);
        if now == seen || Instant::now() > limit {
            return;
        }
        seen = now;
    }
}

/// Kills the evcxr runtime child and, on Linux, every other descendant of
/// this process (cargo, rustc and the rustc wrapper evcxr runs through this
/// binary). Used only after a timeout, when the notebook's kernel is
/// abandoned anyway.
pub(super) fn kill_descendants(process: Option<&ProcessHandle>) {
    if let Some(process) = process {
        // try_lock: evcxr may hold the lock while reaping a dead child.
        if let Ok(mut child) = process.try_lock() {
            let _ = child.kill();
        }
    }
    crate::process::signal_all(&crate::process::descendants(), libc::SIGKILL);
}
