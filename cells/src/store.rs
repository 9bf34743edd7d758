//! A folder of compiled cells: found by key, checked before use, written whole or not at all,
//! and kept under a size cap.
//!
//! ```text
//! ROOT/entries/KEY/manifest.json   what the entry holds (entry::Manifest)
//! ROOT/entries/KEY/0, 1, ...       the files rustc wrote, in the manifest's order
//! ROOT/entries/KEY/used            touched at each hit: the least recently used go first
//! ROOT/rustc/                      what `rustc -vV` printed, per compiler file
//! ROOT/tmp/                        entries being written
//! ```
//!
//! A kernel reads entries only from folders it can trust: each folder from `/` down to the
//! entry, and each file, must belong to root or to the kernel's own user, and none may be
//! writable by anyone else (a folder such as `/tmp`, writable by all but sticky, may be on
//! the way). On a hub, the lessons' entries are root's and every student's own are in their
//! private home, so no student can write a file that another student's kernel loads.
//!
//! Nor does a kernel read more than an entry should hold: a manifest up to [`MAX_MANIFEST`],
//! each file up to the length its manifest records (at most [`MAX_FILE`]). A larger or
//! sparse file is a corrupt entry, and the cell compiles as before.

use crate::entry::{Entry, Manifest};
use crate::files::{make_private_dir, read_capped, write_file};
use crate::key::Digest32;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The largest `manifest.json` read or written: a lesson's is about 115 KB (rustc's
/// messages, as JSON).
///
/// ```
/// assert!(attention_lab_cells::store::MAX_MANIFEST >= 1 << 20);
/// ```
pub const MAX_MANIFEST: u64 = 16 << 20;
/// The largest file of an entry read or written: a lesson's library is about 7 MB.
///
/// ```
/// assert!(attention_lab_cells::store::MAX_FILE > attention_lab_cells::store::MAX_MANIFEST);
/// ```
pub const MAX_FILE: u64 = 256 << 20;

/// A folder of entries.
///
/// ```
/// use attention_lab_cells::store::Store;
/// let store = Store::new("/home/ann/.cache/attention-lab/cells");
/// assert!(store.root().ends_with("cells"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    root: PathBuf,
}

/// Why an entry that is there was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A folder or file on the way may have been written by someone else.
    Untrusted(String),
    /// The entry fails its checks: truncated, changed, or from another format.
    Corrupt(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Untrusted(why) => write!(f, "not trusted: {why}"),
            Refused::Corrupt(why) => write!(f, "corrupt: {why}"),
        }
    }
}

impl Store {
    /// The store in `root` (nothing is made until an entry is written).
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `rustc -vV`'s answers are remembered.
    pub fn memo(&self) -> PathBuf {
        self.root.join("rustc")
    }

    fn entries(&self) -> PathBuf {
        self.root.join("entries")
    }

    fn entry_dir(&self, key: &Digest32) -> PathBuf {
        self.entries().join(key.to_string())
    }

    /// The entry of `key`, checked: `Ok(None)` when there is none.
    ///
    /// # Errors
    /// There is one, but a folder or file on the way is not trusted, or it fails a check.
    pub fn load(&self, key: &Digest32) -> Result<Option<Entry>, Refused> {
        let dir = self.entry_dir(key);
        match fs::symlink_metadata(&dir) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(Refused::Untrusted(format!("{}: {e}", dir.display()))),
            Ok(_) => {}
        }
        trusted_folders(&dir)?;
        let corrupt = |why: String| Refused::Corrupt(format!("{}: {why}", dir.display()));
        let manifest: Manifest =
            serde_json::from_slice(&read_trusted(&dir.join("manifest.json"), MAX_MANIFEST)?)
                .map_err(|e| corrupt(format!("manifest.json: {e}")))?;
        if manifest.key != key.to_string() {
            return Err(corrupt("holds another key".into()));
        }
        let bytes = (manifest.files.iter().enumerate())
            .map(|(i, file)| {
                if file.len > MAX_FILE {
                    return Err(corrupt(format!(
                        "{}: {} bytes recorded, more than the {MAX_FILE} a file may hold",
                        file.name, file.len
                    )));
                }
                read_trusted(&dir.join(i.to_string()), file.len)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let entry = Entry { manifest, bytes };
        entry
            .verify()
            .map_err(|why| Refused::Corrupt(format!("{}: {why}", dir.display())))?;
        Ok(Some(entry))
    }

    /// Marks the entry of `key` as just used (for eviction). Best effort.
    pub fn touch(&self, key: &Digest32) {
        let used = self.entry_dir(key).join("used");
        if let Ok(file) = fs::OpenOptions::new().write(true).open(used) {
            let _ = file.set_modified(SystemTime::now());
        }
    }

    /// Stores `entry` under `key`, whole or not at all; an entry already there (another
    /// kernel's, just written) is kept.
    ///
    /// # Errors
    /// The folder cannot be made or written (read-only, full, deleted midway); a file or the
    /// manifest is over its cap ([`MAX_FILE`], [`MAX_MANIFEST`]).
    pub fn save(&self, key: &Digest32, entry: &Entry) -> io::Result<()> {
        let manifest = serde_json::to_vec_pretty(&entry.manifest).map_err(io::Error::other)?;
        // What no kernel would read back is not written.
        let largest = entry
            .bytes
            .iter()
            .map(|b| b.len() as u64)
            .max()
            .unwrap_or(0);
        if manifest.len() as u64 > MAX_MANIFEST || largest > MAX_FILE {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "a file of {largest} bytes or a manifest of {} bytes, over the store's caps",
                    manifest.len()
                ),
            ));
        }
        for dir in [&self.root, &self.entries(), &self.root.join("tmp")] {
            make_private_dir(dir)?;
        }
        let tmp = self.root.join("tmp").join(format!(
            "{key}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        let written = (|| {
            make_private_dir(&tmp)?;
            for (i, bytes) in entry.bytes.iter().enumerate() {
                write_file(&tmp.join(i.to_string()), bytes)?;
            }
            write_file(&tmp.join("manifest.json"), &manifest)?;
            write_file(&tmp.join("used"), b"")?;
            fs::rename(&tmp, self.entry_dir(key))
        })();
        match written {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                // Another kernel stored the same entry first.
                if self.entry_dir(key).join("manifest.json").exists() {
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Removes the entry of `key` (one that failed its checks). Best effort.
    pub fn remove(&self, key: &Digest32) {
        let dir = self.entry_dir(key);
        let doomed = self
            .root
            .join("tmp")
            .join(format!("{key}-removed-{}", std::process::id()));
        // Renamed first: a reader sees the whole entry or none.
        if fs::rename(&dir, &doomed).is_ok() {
            let _ = fs::remove_dir_all(&doomed);
        }
    }

    /// The bytes the entries take.
    pub fn size(&self) -> u64 {
        self.list().iter().map(|e| e.bytes).sum()
    }

    /// Removes the least recently used entries until the store takes at most `cap` bytes
    /// (with room for about a tenth more, so that every store does not evict); returns how
    /// many went.
    ///
    /// # Errors
    /// The entries cannot be listed.
    pub fn evict(&self, cap: u64) -> io::Result<usize> {
        let mut entries = self.list();
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        if total <= cap {
            return Ok(0);
        }
        let goal = cap - cap / 10;
        entries.sort_by_key(|e| e.used);
        let mut removed = 0;
        for entry in entries {
            if total <= goal {
                break;
            }
            if let Ok(key) = entry.name.parse::<Digest32>() {
                self.remove(&key);
                total = total.saturating_sub(entry.bytes);
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn list(&self) -> Vec<Listed> {
        let Ok(dirs) = fs::read_dir(self.entries()) else {
            return Vec::new();
        };
        dirs.filter_map(|d| d.ok())
            .map(|d| {
                let path = d.path();
                let files = fs::read_dir(&path)
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.ok());
                let bytes = files
                    .filter_map(|f| f.metadata().ok())
                    .map(|m| m.len())
                    .sum();
                let used = fs::metadata(path.join("used"))
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                Listed {
                    name: d.file_name().to_string_lossy().into_owned(),
                    bytes,
                    used,
                }
            })
            .collect()
    }
}

struct Listed {
    name: String,
    bytes: u64,
    used: SystemTime,
}

/// Whether a file or folder with this owner and mode could only have been written by root or
/// by this process's user.
fn trusted_meta(meta: &fs::Metadata, sticky_ok: bool) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != 0 && meta.uid() != me {
        return Err(format!("owned by user {}", meta.uid()));
    }
    let others_write = meta.mode() & 0o022 != 0;
    let sticky = meta.mode() & 0o1000 != 0;
    if others_write && !(sticky_ok && sticky && meta.is_dir()) {
        return Err(format!(
            "writable by others (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Checks every folder from `/` down to `dir` (see the module's documentation).
fn trusted_folders(dir: &Path) -> Result<(), Refused> {
    let canonical = dir
        .canonicalize()
        .map_err(|e| Refused::Untrusted(format!("{}: {e}", dir.display())))?;
    let mut path = PathBuf::new();
    let parts: Vec<_> = canonical.components().collect();
    let inside_from = parts.len().saturating_sub(3); // ROOT, entries, KEY
    for (i, part) in parts.iter().enumerate() {
        path.push(part);
        let meta = fs::metadata(&path)
            .map_err(|e| Refused::Untrusted(format!("{}: {e}", path.display())))?;
        trusted_meta(&meta, i < inside_from)
            .map_err(|why| Refused::Untrusted(format!("{}: {why}", path.display())))?;
    }
    Ok(())
}

/// Reads a file of an entry: a regular file (never through a symlink), trusted, of at most
/// `cap` bytes (a larger one is corrupt, and is not read).
fn read_trusted(path: &Path, cap: u64) -> Result<Vec<u8>, Refused> {
    let untrusted = |why: String| Refused::Untrusted(format!("{}: {why}", path.display()));
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Refused::Corrupt(format!("{}: missing", path.display())),
            _ => untrusted(e.to_string()),
        })?;
    let meta = file.metadata().map_err(|e| untrusted(e.to_string()))?;
    if !meta.is_file() {
        return Err(untrusted("not a regular file".into()));
    }
    trusted_meta(&meta, false).map_err(untrusted)?;
    read_capped(&mut file, cap).map_err(|e| match e.kind() {
        io::ErrorKind::FileTooLarge => Refused::Corrupt(format!("{}: {e}", path.display())),
        _ => untrusted(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::StoredFile;
    use std::fs::File;
    use std::os::unix::fs::PermissionsExt;

    fn entry(key: &Digest32, body: &[u8]) -> Entry {
        Entry {
            manifest: Manifest {
                key: key.to_string(),
                status: 0,
                files: vec![StoredFile {
                    name: "libctx.so".into(),
                    emit: "link".into(),
                    sha256: Digest32::of(body).to_string(),
                    len: body.len() as u64,
                }],
                stdout: String::new(),
                stderr: String::new(),
                env: Vec::new(),
                inputs: Vec::new(),
            },
            bytes: vec![body.to_vec()],
        }
    }

    fn private_tempdir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn an_entry_is_saved_and_loaded_whole() {
        let dir = private_tempdir();
        let store = Store::new(dir.path().join("cells"));
        let key = Digest32::of(b"a");
        assert_eq!(store.load(&key), Ok(None));
        store.save(&key, &entry(&key, b"lib")).unwrap();
        assert_eq!(store.load(&key).unwrap().unwrap().bytes, [b"lib".to_vec()]);
        // Saving again (another kernel) keeps the first.
        store.save(&key, &entry(&key, b"lib")).unwrap();
        assert_eq!(fs::read_dir(store.root().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn an_entry_over_the_caps_is_not_written() {
        let dir = private_tempdir();
        let store = Store::new(dir.path().join("cells"));
        let key = Digest32::of(b"a");
        let mut large = entry(&key, b"lib");
        large.manifest.stderr = "x".repeat(MAX_MANIFEST as usize);
        let e = store.save(&key, &large).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(store.load(&key), Ok(None));
    }

    #[test]
    fn truncated_changed_or_misnamed_entries_are_refused() {
        let dir = private_tempdir();
        let store = Store::new(dir.path().join("cells"));
        let key = Digest32::of(b"a");
        store.save(&key, &entry(&key, b"library")).unwrap();
        let file = store.entry_dir(&key).join("0");
        fs::write(&file, b"librar").unwrap();
        assert!(matches!(store.load(&key), Err(Refused::Corrupt(_))));
        fs::write(&file, b"librarY").unwrap();
        assert!(matches!(store.load(&key), Err(Refused::Corrupt(_))));
        fs::remove_file(&file).unwrap();
        assert!(matches!(store.load(&key), Err(Refused::Corrupt(_))));
        fs::write(store.entry_dir(&key).join("manifest.json"), b"{\"key\": 1").unwrap();
        assert!(matches!(store.load(&key), Err(Refused::Corrupt(_))));
        store.remove(&key);
        assert_eq!(store.load(&key), Ok(None));
        // An entry moved under another key's name.
        let other = Digest32::of(b"b");
        store.save(&other, &entry(&other, b"x")).unwrap();
        fs::rename(store.entry_dir(&other), store.entry_dir(&key)).unwrap();
        assert!(matches!(store.load(&key), Err(Refused::Corrupt(_))));
    }

    #[test]
    fn folders_or_files_writable_by_others_are_not_trusted() {
        let dir = private_tempdir();
        let store = Store::new(dir.path().join("cells"));
        let key = Digest32::of(b"a");
        store.save(&key, &entry(&key, b"lib")).unwrap();
        let set =
            |p: &Path, mode| fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
        set(&store.entries(), 0o777);
        assert!(matches!(store.load(&key), Err(Refused::Untrusted(_))));
        set(&store.entries(), 0o755);
        set(&store.entry_dir(&key).join("0"), 0o666);
        assert!(matches!(store.load(&key), Err(Refused::Untrusted(_))));
        set(&store.entry_dir(&key).join("0"), 0o644);
        set(dir.path(), 0o777);
        assert!(matches!(store.load(&key), Err(Refused::Untrusted(_))));
        // Sticky, as /tmp: nobody else can move what is in it.
        set(dir.path(), 0o1777);
        assert!(store.load(&key).unwrap().is_some());
        set(dir.path(), 0o700);
        // A file replaced by a symlink to a file elsewhere.
        let elsewhere = dir.path().join("planted");
        fs::write(&elsewhere, b"lib").unwrap();
        fs::remove_file(store.entry_dir(&key).join("0")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.entry_dir(&key).join("0")).unwrap();
        assert!(matches!(store.load(&key), Err(Refused::Untrusted(_))));
    }

    #[test]
    fn new_folders_and_files_are_not_writable_by_others_whatever_the_umask() {
        let dir = private_tempdir();
        let store = Store::new(dir.path().join("cells"));
        let key = Digest32::of(b"a");
        // SAFETY: umask has no preconditions; restored below.
        let old = unsafe { libc::umask(0o000) };
        let saved = store.save(&key, &entry(&key, b"lib"));
        // SAFETY: as above; this puts back the mask the test found.
        unsafe { libc::umask(old) };
        saved.unwrap();
        for path in [
            store.root().to_owned(),
            store.entries(),
            store.entry_dir(&key),
            store.entry_dir(&key).join("0"),
        ] {
            let mode = fs::metadata(&path).unwrap().mode();
            assert_eq!(mode & 0o022, 0, "{}: {mode:o}", path.display());
        }
    }

    #[test]
    fn eviction_removes_the_least_recently_used_first() {
        let dir = private_tempdir();
        let store = Store::new(dir.path().join("cells"));
        let keys: Vec<Digest32> = (0..4u8).map(|i| Digest32::of(&[i])).collect();
        for (i, key) in keys.iter().enumerate() {
            store.save(key, &entry(key, &vec![b'x'; 1000])).unwrap();
            let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
            File::options()
                .write(true)
                .open(store.entry_dir(key).join("used"))
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        store.touch(&keys[0]);
        let one = store.size() / 4;
        assert_eq!(store.evict(store.size()).unwrap(), 0);
        assert_eq!(store.evict(3 * one).unwrap(), 2);
        assert!(store.load(&keys[0]).unwrap().is_some(), "just used");
        assert!(store.load(&keys[1]).unwrap().is_none());
        assert!(store.load(&keys[2]).unwrap().is_none());
        assert!(store.load(&keys[3]).unwrap().is_some());
    }

    #[test]
    fn a_read_only_or_deleted_folder_fails_to_save_and_loads_nothing() {
        let dir = private_tempdir();
        let store = Store::new(dir.path().join("cells"));
        let key = Digest32::of(b"a");
        store.save(&key, &entry(&key, b"lib")).unwrap();
        fs::remove_dir_all(store.root()).unwrap();
        assert_eq!(store.load(&key), Ok(None));
        store.save(&key, &entry(&key, b"lib")).unwrap();
        // Root ignores permissions: read-only is tested where it holds (not as root).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            fs::set_permissions(store.root(), fs::Permissions::from_mode(0o555)).unwrap();
            let other = Digest32::of(b"b");
            assert!(store.save(&other, &entry(&other, b"lib")).is_err());
        }
    }
}
