//! The one writer of files a user owns, for the command line and the plot crate, and the
//! command line's one error type ([`error`]).
//!
//! [`write`] replaces a file whole or not at all: the bytes go to a temporary file in the
//! target's own folder (a short name, so targets named near the 255-byte limit work), which is
//! synced and then renamed over the target. On top of a plain rename it
//! - writes *through* a symlink: the file the link points at is replaced, the link is kept;
//! - keeps the replaced file's permission bits (a 0600 file stays 0600); a new file gets
//!   0666 less the umask, as `File::create` would;
//! - refuses to replace a read-only file (no write bit at all), a folder, a socket or a block
//!   device, and a path ending in `/`;
//! - writes straight into a FIFO or a character device (`/dev/null`, `/dev/stdout`, a
//!   terminal): there is no file to replace, and a reader is waiting on the other end.
//!
//! Errors are [`std::io::Error`]s whose text is a short phrase ("read-only file, left as it
//! is"), so a caller can say `PATH: cannot write: PHRASE`.

pub mod cache;
pub mod error;
pub mod size;

use std::fs::{self, File, Metadata};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Symlinks followed at most, as Linux's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;

/// Writes `bytes` to `path` atomically (see the [crate] documentation).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("sheet.md");
/// attention_lab_io::write(&path, b"old")?;
/// attention_lab_io::write(&path, b"new")?;
/// assert_eq!(std::fs::read(&path)?, b"new");
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// The folder is missing or not writable, the target is refused (read-only, a folder, a
/// socket, a block device, a name ending in `/`), or a write, sync or rename fails; the old
/// file is then intact and no temporary file is left.
pub fn write(path: impl AsRef<Path>, bytes: &[u8]) -> io::Result<()> {
    write_with(path, |file| file.write_all(bytes))
}

/// As [`write`], with the contents written by `fill` (for writers that stream, or to fail
/// midway: an error from `fill` leaves the old file as it was).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("report.json");
/// attention_lab_io::write(&path, b"{}")?;
/// let failed = attention_lab_io::write_with(&path, |file| {
///     use std::io::Write;
///     file.write_all(b"{\"half")?;
///     Err(std::io::Error::other("stopped midway"))
/// });
/// assert!(failed.is_err());
/// assert_eq!(std::fs::read(&path)?, b"{}");
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// As [`write`], and whatever `fill` returns.
pub fn write_with(
    path: impl AsRef<Path>,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let path = path.as_ref();
    if path.as_os_str().to_string_lossy().ends_with('/') {
        return Err(refused(
            io::ErrorKind::IsADirectory,
            "names a folder (ends with /); give a file name",
        ));
    }
    match fs::metadata(path) {
        Ok(meta) if is_stream(&meta) => {
            // A FIFO or a character device: write in place, nothing to replace.
            let mut file = fs::OpenOptions::new().write(true).open(path)?;
            fill(&mut file)?;
            file.flush()
        }
        Ok(meta) if meta.is_dir() => Err(refused(
            io::ErrorKind::IsADirectory,
            "is a folder; give a file name",
        )),
        Ok(meta) if !meta.is_file() => Err(refused(
            io::ErrorKind::InvalidInput,
            "not a regular file (a socket or a block device), left as it is",
        )),
        Ok(meta) if meta.permissions().readonly() => Err(refused(
            io::ErrorKind::PermissionDenied,
            "read-only file, left as it is",
        )),
        Ok(meta) => replace(&fs::canonicalize(path)?, Some(&meta), fill),
        Err(e) if e.kind() == io::ErrorKind::NotFound => replace(&resolve(path)?, None, fill),
        Err(e) => Err(e),
    }
}

/// Writes a student's answers file ([`attention_lab::answers::answers_json`]) to `path`, so
/// that an old submission is replaced whole or not at all.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let w = Array2::<f64>::eye(2);
/// let out = MultiHead::split(&w, &w, &w, 1, None)?.forward(&w, &Attend::new())?;
/// let dir = tempfile::tempdir()?;
/// attention_lab_io::write_answers(dir.path().join("ada.json"), "ada", &out)?;
/// let text = std::fs::read_to_string(dir.path().join("ada.json"))?;
/// assert!(text.starts_with(r#"{"student": "ada""#));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`write`].
pub fn write_answers(
    path: impl AsRef<Path>,
    student: &str,
    out: &attention_lab::heads::MultiHeadOutput,
) -> io::Result<()> {
    write(
        path,
        attention_lab::answers::answers_json(student, out).as_bytes(),
    )
}

/// Writes a temporary file beside `target`, then renames it over `target`.
fn replace(
    target: &Path,
    old: Option<&Metadata>,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let folder = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut temp = new_temp(folder, old).map_err(without_temp_path)?;
    fill(temp.as_file_mut())?;
    temp.as_file_mut().flush()?;
    temp.as_file().sync_all()?;
    // The temporary file is removed when `persist` fails (its Drop).
    temp.persist(target)
        .map_err(|e| without_temp_path(e.error))?;
    // The rename itself is durable once the folder is synced; not every system can.
    if let Ok(dir) = File::open(folder) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// A temporary file in `folder` with the replaced file's mode, or 0666 less the umask.
#[cfg(unix)]
fn new_temp(folder: &Path, old: Option<&Metadata>) -> io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    match old {
        Some(meta) => {
            let temp = tempfile::NamedTempFile::new_in(folder)?;
            // chmod, not the umask: the file keeps exactly the bits it had.
            temp.as_file().set_permissions(meta.permissions())?;
            Ok(temp)
        }
        None => tempfile::Builder::new()
            .permissions(fs::Permissions::from_mode(0o666))
            .tempfile_in(folder),
    }
}

/// A temporary file in `folder` with the replaced file's read-only flag.
#[cfg(not(unix))]
fn new_temp(folder: &Path, old: Option<&Metadata>) -> io::Result<tempfile::NamedTempFile> {
    let temp = tempfile::NamedTempFile::new_in(folder)?;
    if let Some(meta) = old {
        temp.as_file().set_permissions(meta.permissions())?;
    }
    Ok(temp)
}

/// Where a new file at `path` lands: the end of its chain of (dangling) symlinks.
fn resolve(path: &Path) -> io::Result<PathBuf> {
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = fs::read_link(&at)?;
                at = match at.parent() {
                    Some(parent) => parent.join(link),
                    None => link,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(refused(
        io::ErrorKind::InvalidInput,
        "too many levels of symbolic links",
    ))
}

/// A FIFO or a character device.
#[cfg(unix)]
fn is_stream(meta: &Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    meta.file_type().is_fifo() || meta.file_type().is_char_device()
}

/// No FIFOs or device nodes to write into elsewhere.
#[cfg(not(unix))]
fn is_stream(_meta: &Metadata) -> bool {
    false
}

/// tempfile names its temporary file in its errors (`... (os error 2) at path ".tmpX"`); the
/// user never asked for that file, so keep the OS error alone.
fn without_temp_path(e: io::Error) -> io::Error {
    if e.raw_os_error().is_some() {
        return e;
    }
    let text = e.to_string();
    let code = text
        .split_once("(os error ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(code, _)| code.parse().ok());
    code.map_or(e, io::Error::from_raw_os_error)
}

fn refused(kind: io::ErrorKind, why: &'static str) -> io::Error {
    io::Error::new(kind, why)
}

/// An I/O error as a person reads it: "no such file", "no space left on device" (lower case,
/// without Rust's " (os error N)"); the phrases of [`write`]'s refusals unchanged.
///
/// ```
/// use std::io;
/// assert_eq!(attention_lab_io::describe(&io::Error::from_raw_os_error(28)), "no space left on device");
/// assert_eq!(attention_lab_io::describe(&io::Error::other("read-only file")), "read-only file");
/// ```
pub fn describe(e: &io::Error) -> String {
    if e.get_ref().is_some() {
        return e.to_string();
    }
    match e.kind() {
        io::ErrorKind::NotFound => return "no such file".to_owned(),
        io::ErrorKind::PermissionDenied => return "permission denied".to_owned(),
        io::ErrorKind::IsADirectory => return "is a directory, not a file".to_owned(),
        _ => {}
    }
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}
