//! Processes that must not outlive the command that started them: this process's descendants
//! (read from /proc), the stop signals a terminal or a process manager sends (SIGINT, SIGTERM,
//! SIGHUP), and the reaper role that keeps a dead server's orphans findable. Used by `lab` to
//! stop JupyterLab and its kernels, and by the replay to end a timed-out cell's compilers.

use std::sync::atomic::{AtomicI32, Ordering};

/// The last stop signal received since [`catch_stop_signals`], or 0.
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn remember(signal: libc::c_int) {
    // Only an atomic store: the one thing a signal handler may safely do here.
    STOP.store(signal, Ordering::SeqCst);
}

/// From now on SIGINT, SIGTERM and SIGHUP do not end this process; they are remembered for
/// [`stop_signal`], so the caller can stop its children in order first.
///
/// ```
/// attention_lab_jupyter::process::catch_stop_signals();
/// assert_eq!(attention_lab_jupyter::process::stop_signal(), None);
/// ```
pub fn catch_stop_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = remember as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The stop signal received since [`catch_stop_signals`], if any (the last one).
///
/// ```
/// assert_eq!(attention_lab_jupyter::process::stop_signal(), None);
/// ```
pub fn stop_signal() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Makes this process the reaper of its orphaned descendants (Linux): a kernel whose
/// JupyterLab died is re-parented to us, where [`descendants`] finds it, instead of to init,
/// where it would serve on unseen. Elsewhere it does nothing.
///
/// ```
/// attention_lab_jupyter::process::become_subreaper();
/// ```
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with an integer argument; no memory is involved.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Every descendant of this process, parents before children; empty where /proc is not.
///
/// ```
/// let child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
/// # #[cfg(target_os = "linux")]
/// assert!(attention_lab_jupyter::process::descendants().contains(&child.id()));
/// # let mut child = child; child.kill().unwrap(); child.wait().unwrap();
/// ```
pub fn descendants() -> Vec<u32> {
    descendants_of(std::process::id())
}

/// Every descendant of `root`, parents before children (Linux: the parent pid is field 4 of
/// /proc/PID/stat, after the parenthesised command name); empty elsewhere.
///
/// ```
/// let child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
/// # #[cfg(target_os = "linux")]
/// assert_eq!(attention_lab_jupyter::process::descendants_of(child.id()), Vec::<u32>::new());
/// # let mut child = child; child.kill().unwrap(); child.wait().unwrap();
/// ```
pub fn descendants_of(root: u32) -> Vec<u32> {
    #[cfg(target_os = "linux")]
    {
        let mut parents: Vec<(u32, u32)> = Vec::new();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                    continue;
                };
                let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                    continue;
                };
                if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                    parents.push((pid, ppid));
                }
            }
        }
        let mut found = vec![root];
        let mut index = 0;
        while index < found.len() {
            let parent = found[index];
            for &(pid, ppid) in &parents {
                if ppid == parent && !found.contains(&pid) {
                    found.push(pid);
                }
            }
            index += 1;
        }
        found.remove(0);
        found
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = root;
        Vec::new()
    }
}

/// Sends `signal` to each of `pids` (a process that is gone already is no error).
///
/// ```
/// let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
/// attention_lab_jupyter::process::signal_all(&[child.id()], libc::SIGKILL);
/// assert!(!child.wait().unwrap().success());
/// ```
pub fn signal_all(pids: &[u32], signal: i32) {
    for &pid in pids {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) with a pid we just read; no memory is involved.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}

/// Collects the exit status of every child that has ended (ours and the orphans we reap), so
/// none stays a zombie; returns at once. It may take the status of a `std::process::Child`
/// still held: call it only once those are reaped ([`reap_orphans`] spares one).
///
/// ```
/// attention_lab_jupyter::process::reap_exited();
/// ```
pub fn reap_exited() {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG writes only to `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            break;
        }
    }
}

/// Collects the exit status of every ended child of ours but `spare` (a `std::process::Child`
/// that its owner waits for): the orphans a subreaper inherits; returns at once.
///
/// ```
/// let mut child = std::process::Command::new("true").spawn().unwrap();
/// attention_lab_jupyter::process::reap_orphans(child.id());
/// assert!(child.wait().unwrap().success());
/// ```
pub fn reap_orphans(spare: u32) {
    for pid in descendants() {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            continue;
        };
        if pid.unsigned_abs() != spare {
            let mut status = 0;
            // SAFETY: waitpid with WNOHANG writes only to `status`; a pid that is not our child
            // is ECHILD, no error worth a word.
            unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        }
    }
}

/// Ends this process by `signal` with its default action, after the caller has stopped what
/// it started: a shell or script that ran it sees the signal (Ctrl-C stops a script too), not
/// an exit status. Returns only where the signal does not end the process.
///
/// ```no_run
/// attention_lab_jupyter::process::die_of(libc::SIGTERM);
/// ```
pub fn die_of(signal: i32) {
    // SAFETY: restoring the default action and raising a signal; no memory is involved.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}
