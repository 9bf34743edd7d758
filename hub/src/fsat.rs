//! Folders opened by descriptor, never through a link: what root does in a folder that a
//! student (or the teacher) can write. Each step opens one name below an open folder with
//! `O_NOFOLLOW`, so a link planted meanwhile is refused instead of followed, and a folder
//! renamed meanwhile is still the one that was opened.

use attention_lab_io::error::{Error, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// An open folder, and the path it was opened by (for messages).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    shown: PathBuf,
}

/// What is at a name below a folder.
#[derive(Debug)]
pub enum Found {
    /// A folder (not a link), opened.
    Dir(Dir),
    /// Nothing.
    Missing,
    /// A link, a file or anything else that is no folder.
    Other,
}

fn c_name(name: &str) -> CString {
    CString::new(name).expect("names here hold no NUL")
}

fn last_error(shown: &Path, action: &'static str) -> Error {
    Error::io(shown.display(), action, std::io::Error::last_os_error())
}

impl Dir {
    /// Opens the folder `path` (its last part not a link).
    ///
    /// ```
    /// let dir = attention_lab_hub::fsat::Dir::open("/tmp".as_ref()).unwrap();
    /// assert!(dir.stat().unwrap().st_mode & libc::S_IFMT == libc::S_IFDIR);
    /// ```
    ///
    /// # Errors
    /// It is missing, a link or no folder.
    pub fn open(path: &Path) -> Result<Dir> {
        let text = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| attention_lab_io::problem!("{}: a NUL in the path", path.display()))?;
        // SAFETY: a valid C string; the descriptor returned is ours alone.
        let fd = unsafe { libc::open(text.as_ptr(), FLAGS) };
        if fd < 0 {
            return Err(last_error(path, "open"));
        }
        Ok(Dir {
            // SAFETY: `fd` was just opened and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            shown: path.to_owned(),
        })
    }

    /// The path it was opened by (below its parent's), for messages.
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// A path that leads to this very folder whatever was renamed since
    /// (`/proc/self/fd/N`).
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// What `name` below it is, a folder opened without following a link.
    ///
    /// # Errors
    /// It cannot be looked at (other than missing, a link or no folder).
    pub fn find(&self, name: &str) -> Result<Found> {
        let shown = self.shown.join(name);
        // SAFETY: an open folder and a valid C string; the descriptor returned is ours.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c_name(name).as_ptr(), FLAGS) };
        if fd >= 0 {
            return Ok(Found::Dir(Dir {
                // SAFETY: `fd` was just opened and nothing else owns it.
                fd: unsafe { OwnedFd::from_raw_fd(fd) },
                shown,
            }));
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::ENOENT) => Ok(Found::Missing),
            Some(libc::ELOOP | libc::ENOTDIR) => Ok(Found::Other),
            _ => Err(Error::io(shown.display(), "open", error)),
        }
    }

    /// Makes the folder `name` below it (root's, mode 0700 until given away) and opens it.
    ///
    /// # Errors
    /// It exists already (made meanwhile) or cannot be made.
    pub fn make(&self, name: &str) -> Result<Dir> {
        // SAFETY: an open folder and a valid C string.
        if unsafe { libc::mkdirat(self.fd.as_raw_fd(), c_name(name).as_ptr(), 0o700) } != 0 {
            return Err(last_error(&self.shown.join(name), "create"));
        }
        match self.find(name)? {
            Found::Dir(dir) => Ok(dir),
            _ => Err(attention_lab_io::problem!(
                "{}: replaced while it was made",
                self.shown.join(name).display()
            )),
        }
    }

    /// Renames `name` below it to `to` below `into` (no link followed: the entry itself moves).
    ///
    /// # Errors
    /// The rename fails.
    pub fn rename(&self, name: &str, into: &Dir, to: &str) -> Result<()> {
        // SAFETY: open folders and valid C strings.
        let done = unsafe {
            libc::renameat(
                self.fd.as_raw_fd(),
                c_name(name).as_ptr(),
                into.fd.as_raw_fd(),
                c_name(to).as_ptr(),
            )
        };
        if done != 0 {
            return Err(last_error(&self.shown.join(name), "move"));
        }
        Ok(())
    }

    /// Removes the empty folder `name` below it.
    ///
    /// # Errors
    /// It is not an empty folder.
    pub fn remove_empty(&self, name: &str) -> Result<()> {
        // SAFETY: an open folder and a valid C string.
        let done = unsafe {
            libc::unlinkat(
                self.fd.as_raw_fd(),
                c_name(name).as_ptr(),
                libc::AT_REMOVEDIR,
            )
        };
        if done != 0 {
            return Err(last_error(&self.shown.join(name), "remove"));
        }
        Ok(())
    }

    /// Its owner, mode and the rest.
    ///
    /// # Errors
    /// fstat fails.
    pub fn stat(&self) -> Result<libc::stat> {
        // SAFETY: zeroed is a valid `stat`, which fstat fills.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open descriptor and a buffer of the right type.
        if unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) } != 0 {
            return Err(last_error(&self.shown, "read"));
        }
        Ok(st)
    }

    /// Gives it to `uid`:`gid` with `mode` (set-group-id and sticky bits included).
    ///
    /// # Errors
    /// fchown or fchmod fails.
    pub fn set_owner(&self, uid: u32, gid: u32, mode: u32) -> Result<()> {
        // SAFETY: an open descriptor.
        if unsafe { libc::fchown(self.fd.as_raw_fd(), uid, gid) } != 0 {
            return Err(last_error(&self.shown, "set the owner of"));
        }
        // SAFETY: an open descriptor.
        if unsafe { libc::fchmod(self.fd.as_raw_fd(), mode) } != 0 {
            return Err(last_error(&self.shown, "set the mode of"));
        }
        Ok(())
    }
}

/// A folder, never through a link, closed when it is run (`O_CLOEXEC`).
const FLAGS: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
