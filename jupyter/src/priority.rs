//! Kernels that start at a low priority, for a class on a few cores.
//!
//! evcxr's start takes seconds of CPU (rust-analyzer reads the lessons' libraries, cargo checks
//! the build), and in a class every kernel starts in the same minute. Started at a low
//! priority ([`START_NICE_VAR`], which a hub's kernelspec sets), a kernel takes only what the
//! kernels already running cells leave idle. A watcher with the right to raise priorities (the
//! hub, as root: an unprivileged process may only lower its own) gives it the normal priority
//! back once it has started ([`Starts`]). The kernel's server starts its thread named
//! [`SERVING_THREAD`] when its start is done, which says so; failing that (a kernel of
//! another build), its process group (the kernel, evcxr's child that runs cells, cargo, rustc)
//! idle for a moment says so too.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The niceness a kernel starts at (`19`: only idle CPU); unset, kernels start as usual.
pub const START_NICE_VAR: &str = "ATTENTION_LAB_START_NICE";

/// The niceness a hub starts students' servers and kernels at: they take only the CPU that the
/// students already working leave idle, until they serve.
///
/// ```
/// assert_eq!(attention_lab_jupyter::priority::START_NICE, 19);
/// ```
pub const START_NICE: i32 = 19;

/// How long a kernel's process group must stay idle to count as started.
const IDLE: Duration = Duration::from_millis(300);
/// After this long a kernel gets the normal priority back whatever it is doing.
const AT_MOST: Duration = Duration::from_secs(600);

/// In `kernel serve`, before it becomes the kernel: lowers this process (and so the kernel,
/// and everything it starts) to the niceness [`START_NICE_VAR`] names, and its session's
/// (see [`set_session_nice`]). Nothing happens when it is unset or not a number.
pub fn lower_for_start() {
    let Some(nice) = std::env::var(START_NICE_VAR)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: setpriority on this thread, which then starts the kernel's others.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    set_session_nice("self", nice);
}

/// Sets the niceness of the session of process `pid` ("self", or a number) as the scheduler
/// shares the CPU between sessions (Linux's autogroups, `/proc/PID/autogroup`). Jupyter starts
/// each server and kernel in a session of its own, and where autogroups are on (the default
/// on most distributions) the CPU is shared between sessions first: a process's own
/// niceness then only ranks it within its session. Best effort: nothing happens where
/// autogroups are off or the file cannot be written.
pub fn set_session_nice(pid: &str, nice: i32) {
    let _ = std::fs::write(format!("/proc/{pid}/autogroup"), nice.to_string());
}

/// The kernels starting at a low priority, each watched until it has started.
///
/// ```no_run
/// let mut starts = attention_lab_jupyter::priority::Starts::new(|uid| uid >= 1000);
/// loop {
///     starts.look(); // every tenth of a second or so
///     std::thread::sleep(std::time::Duration::from_millis(100));
/// }
/// ```
pub struct Starts {
    /// Whose kernels to watch (a class's students).
    owner: Box<dyn Fn(u32) -> bool + Send>,
    /// Each watched process group: when first seen, its last activity, since when unchanged.
    watched: BTreeMap<i32, Watched>,
}

struct Watched {
    seen: Instant,
    activity: Vec<(u32, String)>,
    quiet_since: Instant,
}

impl Starts {
    /// Watches the kernels of the users that `owner` accepts (by uid).
    pub fn new(owner: impl Fn(u32) -> bool + Send + 'static) -> Starts {
        Starts {
            owner: Box::new(owner),
            watched: BTreeMap::new(),
        }
    }

    /// One look: finds new kernels at a low priority, and gives the normal priority to the
    /// process group of each that has been idle for [`IDLE`] (or watched for [`AT_MOST`]);
    /// returns how many got it.
    pub fn look(&mut self) -> usize {
        let now = Instant::now();
        let processes = processes();
        let mut current = BTreeMap::new();
        for leader in low_priority_kernels(&processes, &*self.owner) {
            let activity = activity(&processes, leader);
            let entry = self.watched.remove(&leader).unwrap_or(Watched {
                seen: now,
                activity: Vec::new(),
                quiet_since: now,
            });
            let quiet_since = if entry.activity == activity {
                entry.quiet_since
            } else {
                now
            };
            current.insert(
                leader,
                Watched {
                    seen: entry.seen,
                    activity,
                    quiet_since,
                },
            );
        }
        let started: Vec<i32> = current
            .iter()
            .filter(|(group, w)| {
                now - w.quiet_since >= IDLE || now - w.seen >= AT_MOST || serving(**group)
            })
            .map(|(group, _)| *group)
            .collect();
        for group in &started {
            // SAFETY: setpriority on a process group; refused where we may not raise it.
            unsafe { libc::setpriority(libc::PRIO_PGRP, *group as libc::id_t, 0) };
            set_session_nice(&group.to_string(), 0);
            current.remove(group);
        }
        self.watched = current;
        started.len()
    }
}

/// One process as the watcher sees it.
struct Process {
    pid: i32,
    stat: Stat,
}

/// Every process of the machine, read once a look.
fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = Stat::read(&entry.path())?;
            Some(Process { pid, stat })
        })
        .collect()
}

pub use crate::kernel::server::SERVING_THREAD;

/// Whether the kernel `pid` has started its [`SERVING_THREAD`].
fn serving(pid: i32) -> bool {
    let dir = Path::new("/proc").join(pid.to_string());
    let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        comm.trim_end() == SERVING_THREAD
    })
}

/// The process groups led by a kernel (`... --control_file ...`) of an accepted owner, whose
/// leader runs at a niceness above 0.
fn low_priority_kernels(processes: &[Process], owner: &dyn Fn(u32) -> bool) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    processes
        .iter()
        .filter(|p| p.stat.group == p.pid && p.stat.nice > 0)
        .filter(|p| {
            let dir = Path::new("/proc").join(p.pid.to_string());
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            std::fs::metadata(&dir).is_ok_and(|m| owner(m.uid()))
                && cmdline
                    .split(|b| *b == 0)
                    .any(|arg| arg == b"--control_file")
        })
        .map(|p| p.pid)
        .collect()
}

/// What every thread of every process of `group` has run and waited to run so far (from
/// `/proc/PID/task/TID/schedstat`): unchanged only while the whole group is idle. A thread
/// that waits for a core counts as busy, so a starved start is never taken for a finished one.
fn activity(processes: &[Process], group: i32) -> Vec<(u32, String)> {
    let mut seen = Vec::new();
    for process in processes.iter().filter(|p| p.stat.group == group) {
        let tasks = Path::new("/proc")
            .join(process.pid.to_string())
            .join("task");
        let Ok(tasks) = std::fs::read_dir(tasks) else {
            continue;
        };
        for task in tasks.flatten() {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            let mut fields = stat.split_whitespace();
            let ran = fields.next().unwrap_or("");
            let waited = fields.next().unwrap_or("");
            let tid = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            seen.push((tid, format!("{ran} {waited}")));
        }
    }
    seen.sort();
    seen
}

/// The fields of `/proc/PID/stat` the watcher needs.
struct Stat {
    group: i32,
    nice: i64,
}

impl Stat {
    fn read(dir: &Path) -> Option<Stat> {
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // After the command's name, which is in parentheses and may hold anything: state,
        // ppid, pgrp, ... nice is the 17th field after it.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
        Some(Stat {
            group: fields.get(2)?.parse().ok()?,
            nice: fields.get(16)?.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_and_is_busy_while_it_works() {
        let own = Stat::read(Path::new("/proc/self")).unwrap();
        // SAFETY: getpgrp and getpriority have no preconditions.
        let (group, nice) = unsafe {
            (
                libc::getpgrp(),
                libc::getpriority(libc::PRIO_PROCESS, 0) as i64,
            )
        };
        assert_eq!((own.group, own.nice), (group, nice));
        let before = activity(&processes(), group);
        assert!(!before.is_empty());
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert_ne!(
            activity(&processes(), group),
            before,
            "a busy thread changes the group's activity"
        );
    }

    /// The server's thread, once started, says the kernel serves.
    #[test]
    fn the_serving_thread_says_the_kernel_serves() {
        let pid = std::process::id() as i32;
        assert!(!serving(pid));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (named_tx, named) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(SERVING_THREAD.into())
            .spawn(move || {
                // Named by now (a thread names itself as it starts).
                let _ = named_tx.send(());
                let _ = rx.recv();
            })
            .unwrap();
        named.recv().unwrap();
        assert!(serving(pid));
        drop(tx);
        thread.join().unwrap();
    }

    /// A kernel-like process group at niceness 19 (a shell named as a kernel is) gets the
    /// normal priority back once it idles, and only then.
    #[test]
    fn an_idle_kernel_group_gets_the_normal_priority_back() {
        use std::os::unix::process::CommandExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: raising a priority needs root (CAP_SYS_NICE)");
            return;
        }
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 30",
                "--control_file",
            ])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // SAFETY: lowering a child's priority needs no privilege.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, 19) };
        let mut starts = Starts::new(move |uid| uid == me);
        let started = std::time::Instant::now();
        let mut when = None;
        while started.elapsed() < Duration::from_secs(20) && when.is_none() {
            if starts.look() > 0 {
                when = Some(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let nice = Stat::read(Path::new(&format!("/proc/{pid}"))).map(|s| s.nice);
        let _ = child.kill();
        let _ = child.wait();
        assert!(when.is_some(), "never judged started");
        assert_eq!(nice, Some(0));
    }
}
