//! Per-student limits: a memory cgroup and a pids cgroup for each student's server (and so
//! for its kernels and their compiles), below groups of the hub's own. cgroup v2 where the
//! controllers are delegated to us, else v1's `memory` and `pids` hierarchies (as on this
//! machine); none, with a warning, where neither can be written (a container without them).
//!
//! The hub's memory group caps the students' sum at the machine's memory less what the
//! system keeps ([`class_cap`]): students' limits may add up to more than the machine (a
//! class rarely peaks at once), but when they do peak the kernel's OOM killer ends a
//! student's process in the hub's group, not the machine's services.

use attention_lab_io::error::Result;
use attention_lab_io::problem;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where one kind of students' groups go, and how their limit is written there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The hub's group; each student's is `parent/<login>`.
    pub parent: PathBuf,
    /// The limit's file in a student's group: `memory.max` or `pids.max` (v2),
    /// `memory.limit_in_bytes` or `pids.max` (v1).
    pub file: &'static str,
    /// The limit: bytes, or processes (threads included).
    pub value: u64,
}

/// The default of `--pids-limit`: processes and threads a student's server, kernels and
/// compiles may have at once (a server and a kernel use about 60; a compile some 20 more).
pub const PIDS: u64 = 512;

/// The name of the hub's group below the cgroup this process runs in.
const GROUP: &str = "attention-lab-hub";

/// Sizes are read as every setting of the project reads them.
pub use attention_lab_io::size::parse_size;

/// The controllers the hub limits, as cgroup names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// Memory: bytes.
    Memory,
    /// Pids: processes and threads.
    Pids,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
        }
    }
}

/// Finds the `controller`'s cgroup this process is in (from `/proc/self/cgroup`, below
/// `cgroup_root`) and makes the hub's group under it, each student's to be limited to
/// `value`; for memory, the hub's group is capped at `cap` bytes (0: none). `Ok(None)` when
/// there is none to write.
///
/// ```no_run
/// use attention_lab_hub::limits::{prepare, Controller};
/// let groups = prepare(std::path::Path::new("/sys/fs/cgroup"), Controller::Pids, 512, 0)?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// The hub's group exists but its limit cannot be set up.
pub fn prepare(
    cgroup_root: &Path,
    controller: Controller,
    value: u64,
    cap: u64,
) -> Result<Option<Limit>> {
    let Ok(ours) = fs::read_to_string("/proc/self/cgroup") else {
        return Ok(None);
    };
    let Some((mut parent, file)) = locate(cgroup_root, &ours, controller) else {
        return Ok(None);
    };
    parent.push(GROUP);
    if fs::create_dir_all(&parent).is_err() {
        return Ok(None);
    }
    let v2 = matches!(file, "memory.max") || parent.join("cgroup.controllers").exists();
    if v2 {
        // v2: the hub's group must hand the controller to the students' groups.
        let control = parent.join("cgroup.subtree_control");
        if fs::write(&control, format!("+{}", controller.name())).is_err() {
            if controller == Controller::Memory {
                let _ = fs::remove_dir(&parent);
            }
            return Ok(None);
        }
    } else if !parent.join(file).exists() {
        return Err(problem!(
            "{}: a {} cgroup without {file}",
            parent.display(),
            controller.name()
        ));
    }
    if controller == Controller::Memory && cap > 0 {
        if !v2 {
            // v1 counts a child's memory in its parent only with use_hierarchy (where the
            // parent's parent has it, it is inherited and this write is refused).
            let _ = fs::write(parent.join("memory.use_hierarchy"), "1");
        }
        fs::write(parent.join(file), cap.to_string()).map_err(|e| {
            attention_lab_io::error::Error::io(parent.join(file).display(), "write", e)
        })?;
    }
    Ok(Some(Limit {
        parent,
        file,
        value,
    }))
}

/// What the students of a class may take together: the machine's memory (`MemTotal` of
/// `/proc/meminfo`, in bytes) less what the system keeps, an eighth and at least 1 GiB.
///
/// ```
/// use attention_lab_hub::limits::class_cap;
/// assert_eq!(class_cap(24 << 30), 21 << 30);
/// assert_eq!(class_cap(4 << 30), 3 << 30);
/// assert_eq!(class_cap(1 << 29), 1 << 29);
/// ```
pub fn class_cap(total: u64) -> u64 {
    let kept = (total / 8).max(1 << 30);
    if total > kept {
        total - kept
    } else {
        // A machine this small: the cap would starve everyone; the students' own limits
        // are all there is.
        total
    }
}

/// The machine's memory in bytes, from `/proc/meminfo` (0 when unknown).
pub fn machine_memory() -> u64 {
    fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        })
        .unwrap_or(0)
}

/// The `controller`'s group this process is in, from the text of `/proc/self/cgroup`, and
/// the limit's file there: v2's when that controller is there, else v1's hierarchy of its
/// name.
///
/// ```
/// use attention_lab_hub::limits::{locate, Controller};
/// let root = std::path::Path::new("/sys/fs/cgroup");
/// let (dir, file) = locate(root, "4:memory:/box/7\n0::/\n", Controller::Memory).unwrap();
/// assert_eq!((dir.to_str().unwrap(), file), ("/sys/fs/cgroup/memory/box/7", "memory.limit_in_bytes"));
/// ```
pub fn locate(
    cgroup_root: &Path,
    proc_cgroup: &str,
    controller: Controller,
) -> Option<(PathBuf, &'static str)> {
    let name = controller.name();
    let below = |dir: PathBuf, path: &str| dir.join(path.trim_start_matches('/'));
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.is_empty() {
            let dir = below(cgroup_root.to_owned(), path);
            let dir = if cgroup_root.join("cgroup.controllers").exists() {
                dir
            } else {
                below(cgroup_root.join("unified"), path)
            };
            let has = fs::read_to_string(dir.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == name));
            if has {
                let file = match controller {
                    Controller::Memory => "memory.max",
                    Controller::Pids => "pids.max",
                };
                return Some((dir, file));
            }
        }
    }
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == name).then(|| {
            let file = match controller {
                Controller::Memory => "memory.limit_in_bytes",
                Controller::Pids => "pids.max",
            };
            (below(cgroup_root.join(name), path), file)
        })
    })
}

impl Limit {
    /// Removes the students' groups and the hub's, once each is empty: a group's processes
    /// may take a moment to be gone after they were stopped, so each is tried for up to
    /// 5 s. Returns the groups left (still in use).
    ///
    /// ```no_run
    /// # let groups: attention_lab_hub::limits::Limit = unimplemented!();
    /// assert!(groups.remove().is_empty());
    /// ```
    pub fn remove(&self) -> Vec<PathBuf> {
        let mut left: Vec<PathBuf> = fs::read_dir(&self.parent)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        left.push(self.parent.clone());
        let started = Instant::now();
        loop {
            // Children first: the hub's group is removable only once they are gone.
            left.retain(|dir| fs::remove_dir(dir).is_err() && dir.exists());
            if left.is_empty() || started.elapsed() > Duration::from_secs(5) {
                return left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_the_rest() {
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("1073741824").unwrap(), 1 << 30);
        assert!(parse_size("").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
        assert!(parse_size("20000000000G").is_err());
    }

    #[test]
    fn v1_memory_is_found_among_other_hierarchies() {
        let text = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n";
        let (dir, file) = locate(Path::new("/nonexistent"), text, Controller::Memory).unwrap();
        assert_eq!(dir, Path::new("/nonexistent/memory/process_api/abc"));
        assert_eq!(file, "memory.limit_in_bytes");
        assert!(locate(Path::new("/nonexistent"), "0::/\n", Controller::Memory).is_none());
        assert!(locate(Path::new("/nonexistent"), text, Controller::Pids).is_none());
        let text = "8:pids:/box\n4:memory:/process_api/abc\n";
        let (dir, _) = locate(Path::new("/r"), text, Controller::Pids).unwrap();
        assert_eq!(dir, Path::new("/r/pids/box"));
    }

    /// What `remove` leaves: nothing, once the groups are empty.
    #[test]
    fn removing_takes_every_students_group_and_the_hubs() {
        let root = tempfile::tempdir().unwrap();
        let parent = root.path().join(GROUP);
        for student in ["ann", "ben"] {
            fs::create_dir_all(parent.join(student)).unwrap();
        }
        let limit = Limit {
            parent: parent.clone(),
            file: "pids.max",
            value: PIDS,
        };
        assert!(limit.remove().is_empty());
        assert!(!parent.exists());
    }

    #[test]
    fn v2_is_taken_when_its_group_offers_memory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("user.slice/me");
        fs::create_dir_all(&dir).unwrap();
        fs::write(root.path().join("cgroup.controllers"), "cpu memory pids").unwrap();
        fs::write(dir.join("cgroup.controllers"), "cpu memory").unwrap();
        let (found, file) = locate(root.path(), "0::/user.slice/me\n", Controller::Memory).unwrap();
        assert_eq!((found, file), (dir.clone(), "memory.max"));
        fs::write(dir.join("cgroup.controllers"), "cpu").unwrap();
        assert!(locate(root.path(), "0::/user.slice/me\n", Controller::Memory).is_none());
    }
}
