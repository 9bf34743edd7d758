//! Per-student memory limits: a memory cgroup for each student's server (and so for its
//! kernels and their compiles), below a group of the hub's own. cgroup v2 where the memory
//! controller is delegated to us, else v1's memory hierarchy (as on this machine); none, with
//! a warning, where neither can be written (a container without them).

use attention_lab_io::error::Result;
use attention_lab_io::problem;
use std::fs;
use std::path::{Path, PathBuf};

/// Where the students' memory groups go, and how a limit is written there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryGroups {
    /// The hub's group; each student's is `parent/<login>`.
    pub parent: PathBuf,
    /// The limit's file in a group: `memory.max` (v2) or `memory.limit_in_bytes` (v1).
    pub limit_file: &'static str,
    /// The limit, in bytes.
    pub bytes: u64,
}

/// The name of the hub's group below the cgroup this process runs in.
const GROUP: &str = "attention-lab-hub";

/// Reads a size: a number of bytes, or one with a binary suffix `K`, `M`, `G` (`2G`, `512M`).
///
/// ```
/// use attention_lab_hub::limits::parse_size;
/// assert_eq!(parse_size("2G").unwrap(), 2 << 30);
/// assert_eq!(parse_size("0").unwrap(), 0);
/// assert!(parse_size("2 gigs").is_err());
/// ```
///
/// # Errors
/// Not a number with one of those suffixes, or more than 2^64 bytes.
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 10),
        Some((i, 'M' | 'm')) => (&text[..i], 20),
        Some((i, 'G' | 'g')) => (&text[..i], 30),
        _ => (text, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 2G, 512M or 1073741824"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// Finds the memory cgroup this process is in (from `/proc/self/cgroup`, below
/// `cgroup_root`) and makes the hub's group under it. `Ok(None)` when there is none to write.
///
/// ```no_run
/// let groups = attention_lab_hub::limits::prepare(std::path::Path::new("/sys/fs/cgroup"), 2 << 30)?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// The hub's group exists but its limit cannot be set up.
pub fn prepare(cgroup_root: &Path, bytes: u64) -> Result<Option<MemoryGroups>> {
    let Ok(ours) = fs::read_to_string("/proc/self/cgroup") else {
        return Ok(None);
    };
    let Some((mut parent, limit_file)) = locate(cgroup_root, &ours) else {
        return Ok(None);
    };
    parent.push(GROUP);
    if fs::create_dir_all(&parent).is_err() {
        return Ok(None);
    }
    if limit_file == "memory.max" {
        // v2: the hub's group must hand the memory controller to the students' groups.
        let control = parent.join("cgroup.subtree_control");
        if fs::write(&control, "+memory").is_err() {
            let _ = fs::remove_dir(&parent);
            return Ok(None);
        }
    } else if !parent.join(limit_file).exists() {
        return Err(problem!(
            "{}: a memory cgroup without {limit_file}",
            parent.display()
        ));
    }
    Ok(Some(MemoryGroups {
        parent,
        limit_file,
        bytes,
    }))
}

/// The memory group this process is in, from the text of `/proc/self/cgroup`: v2's when
/// its memory controller is there, else v1's `memory` hierarchy.
///
/// ```
/// use attention_lab_hub::limits::locate;
/// let root = std::path::Path::new("/sys/fs/cgroup");
/// let (dir, file) = locate(root, "4:memory:/box/7\n0::/\n").unwrap();
/// assert_eq!((dir.to_str().unwrap(), file), ("/sys/fs/cgroup/memory/box/7", "memory.limit_in_bytes"));
/// ```
pub fn locate(cgroup_root: &Path, proc_cgroup: &str) -> Option<(PathBuf, &'static str)> {
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
            let has_memory = fs::read_to_string(dir.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
            if has_memory {
                return Some((dir, "memory.max"));
            }
        }
    }
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "memory").then(|| {
            (
                below(cgroup_root.join("memory"), path),
                "memory.limit_in_bytes",
            )
        })
    })
}

impl MemoryGroups {
    /// Removes the students' groups and the hub's (each is empty once its processes are
    /// gone); a group still in use stays.
    ///
    /// ```no_run
    /// # let groups: attention_lab_hub::limits::MemoryGroups = unimplemented!();
    /// groups.remove();
    /// ```
    pub fn remove(&self) {
        if let Ok(entries) = fs::read_dir(&self.parent) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = fs::remove_dir(entry.path());
                }
            }
        }
        let _ = fs::remove_dir(&self.parent);
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
        let (dir, file) = locate(Path::new("/nonexistent"), text).unwrap();
        assert_eq!(dir, Path::new("/nonexistent/memory/process_api/abc"));
        assert_eq!(file, "memory.limit_in_bytes");
        assert!(locate(Path::new("/nonexistent"), "0::/\n").is_none());
    }

    #[test]
    fn v2_is_taken_when_its_group_offers_memory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("user.slice/me");
        fs::create_dir_all(&dir).unwrap();
        fs::write(root.path().join("cgroup.controllers"), "cpu memory pids").unwrap();
        fs::write(dir.join("cgroup.controllers"), "cpu memory").unwrap();
        let (found, file) = locate(root.path(), "0::/user.slice/me\n").unwrap();
        assert_eq!((found, file), (dir.clone(), "memory.max"));
        fs::write(dir.join("cgroup.controllers"), "cpu").unwrap();
        assert!(locate(root.path(), "0::/user.slice/me\n").is_none());
    }
}
