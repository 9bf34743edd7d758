//! A server that `lab` or `hub` starts and must not outlive: awaited until it answers, watched
//! until it ends or a stop signal comes, then stopped with whatever it left behind; and a
//! set-up step run so that a stop signal stops it too. Built on [`crate::process`].

use crate::process;
use attention_lab_io::error::{io_text, warn, Result};
use attention_lab_io::problem;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::time::{Duration, Instant};

/// Watches a server started in its own process group (after [`process::become_subreaper`]
/// and [`process::catch_stop_signals`]) until it ends: waits up to 180 s for it to answer on
/// `addr`, then calls `ready` (which prints what users need); returns its exit status (128 + N
/// when a signal N killed it). A stop signal sent to us, or an error from `ready`, stops it and
/// everything below us; so does its own end. `what` names it in messages.
///
/// ```no_run
/// use std::net::SocketAddr;
/// use attention_lab_jupyter::{process, supervise};
/// process::become_subreaper();
/// process::catch_stop_signals();
/// let child = std::process::Command::new("python3").args(["-m", "http.server", "8123"]).spawn()?;
/// let addr = SocketAddr::from(([127, 0, 0, 1], 8123));
/// let status = supervise::supervise(child, addr, "the server", || Ok(()))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// It stopped before answering, did not answer in time, or `ready` failed.
pub fn supervise(
    mut child: Child,
    addr: SocketAddr,
    what: &str,
    ready: impl FnOnce() -> Result<()>,
) -> Result<u8> {
    if let Some(code) = await_server(&mut child, addr, what)? {
        return Ok(code);
    }
    if let Err(e) = ready() {
        stop_server(&mut child, what);
        return Err(e);
    }
    match watch(&mut child, what)? {
        Ended::Stopped(code) => Ok(code),
        Ended::Exited(code) => {
            stop_leftovers();
            Ok(code)
        }
    }
}

/// How a watched server ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// A stop signal came to us; the server and everything below us are stopped. 128 + N.
    Stopped(u8),
    /// The server ended by itself with this status (128 + N for a signal N); what it
    /// started may still run.
    Exited(u8),
}

/// Waits up to 180 s for `child` to answer on `addr`. `Some(128 + N)` when a stop signal N
/// came first (then the server and everything below us are stopped).
///
/// ```no_run
/// use attention_lab_jupyter::supervise;
/// let mut child = std::process::Command::new("python3").args(["-m", "http.server", "8124"]).spawn()?;
/// let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 8124));
/// assert_eq!(supervise::await_server(&mut child, addr, "the server")?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// It ended before answering (everything below us is stopped), or did not answer in time (it
/// is stopped).
pub fn await_server(child: &mut Child, addr: SocketAddr, what: &str) -> Result<Option<u8>> {
    let started = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Some(signal) = process::stop_signal() {
            stop_server(child, what);
            process::die_of(signal);
            return Ok(Some(u8::try_from(128 + signal).unwrap_or(1)));
        }
        if let Ok(Some(status)) = child.try_wait() {
            stop_leftovers();
            return Err(problem!("{what} stopped before serving ({status})"));
        }
        if started.elapsed() > Duration::from_secs(180) {
            stop_server(child, what);
            return Err(problem!(
                "{what} did not answer on port {} in 180 s",
                addr.port()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(None)
}

/// Waits for a serving `child` to end, reaping orphans re-parented to us meanwhile; a stop
/// signal to us stops it and everything below us.
///
/// ```no_run
/// use attention_lab_jupyter::supervise::{self, Ended};
/// let mut child = std::process::Command::new("true").spawn()?;
/// assert_eq!(supervise::watch(&mut child, "true")?, Ended::Exited(0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// Waiting for it failed (it is stopped).
pub fn watch(child: &mut Child, what: &str) -> Result<Ended> {
    for round in 0u64.. {
        if let Some(signal) = process::stop_signal() {
            stop_server(child, what);
            process::die_of(signal);
            return Ok(Ended::Stopped(u8::try_from(128 + signal).unwrap_or(1)));
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                // Killed by a signal (out of memory, kill -9): a shell's 128 + N, not 0.
                let code = status.code().or_else(|| status.signal().map(|s| 128 + s));
                return Ok(Ended::Exited(
                    code.map_or(1, |code| u8::try_from(code).unwrap_or(1)),
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                stop_server(child, what);
                return Err(problem!("waiting for {what}: {}", io_text(&e)));
            }
        }
        // Orphans re-parented to us (a restarted kernel's children) would stay zombies.
        if round % 50 == 49 {
            process::reap_orphans(child.id());
        }
    }
    unreachable!("the loop ends by returning")
}

/// Runs a set-up step (`pip`, `npm`, a warm replay) to its end, unless a stop signal
/// caught by [`process::catch_stop_signals`] comes first: then the step and everything
/// else below us is stopped ([`stop_leftovers`]) and this process dies of that signal, so
/// that no step goes on compiling or downloading for nobody.
///
/// ```no_run
/// let status = attention_lab_jupyter::supervise::run_step(std::process::Command::new("true").spawn()?)?;
/// assert!(status.success());
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// Waiting for the step failed.
pub fn run_step(mut child: Child) -> std::io::Result<std::process::ExitStatus> {
    loop {
        if let Some(signal) = process::stop_signal() {
            stop_leftovers();
            process::die_of(signal);
        }
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How long JupyterLab gets to shut its kernels down after SIGTERM, before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// How long a process left after JupyterLab gets after SIGTERM, before SIGKILL.
const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// Stops the server: SIGTERM, which JupyterLab (or JupyterHub) answers by shutting its
/// kernels (or servers) down; SIGKILL after [`GRACE`]; then every process left below us.
///
/// ```no_run
/// let mut child = std::process::Command::new("sleep").arg("60").spawn()?;
/// attention_lab_jupyter::supervise::stop_server(&mut child, "sleep");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn stop_server(child: &mut Child, what: &str) {
    warn(&format!(
        "attention-lab: stopping {what} and what it started"
    ));
    process::signal_all(&[child.id()], libc::SIGTERM);
    if !exits_within(child, GRACE) {
        let _ = child.kill();
        let _ = child.wait();
    }
    stop_leftovers();
}

/// Ends every descendant still running (a kernel JupyterLab did not stop, an orphan of a
/// crashed server): SIGTERM, then SIGKILL after [`LEFTOVER_GRACE`]; reaps them all. Called
/// only once JupyterLab itself is reaped, so reaping any child cannot take its status.
///
/// ```no_run
/// attention_lab_jupyter::supervise::stop_leftovers();
/// ```
pub fn stop_leftovers() {
    for (signal, limit) in [(libc::SIGTERM, LEFTOVER_GRACE), (libc::SIGKILL, GRACE)] {
        process::signal_all(&process::descendants(), signal);
        let started = Instant::now();
        while !process::descendants().is_empty() && started.elapsed() < limit {
            process::reap_exited();
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    process::reap_exited();
}

/// Whether `child` exits within `limit` (it is reaped if so).
fn exits_within(child: &mut Child, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
