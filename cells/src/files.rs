//! The cache's own writes: folders and files that nobody but their owner may write, whatever
//! the umask, and files replaced whole or not at all; and its reads, which never take more
//! than a cap, whatever size a file claims.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Makes `dir` and its missing parents; `dir` gets mode 0755 whatever the umask, so that
/// nobody else may write it.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let made = dir.path().join("a/cells");
/// attention_lab_cells::files::make_private_dir(&made)?;
/// use std::os::unix::fs::PermissionsExt;
/// assert_eq!(std::fs::metadata(&made)?.permissions().mode() & 0o777, 0o755);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// A folder cannot be made.
pub fn make_private_dir(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(0o755)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let parent = dir.parent().ok_or(e)?;
            fs::create_dir_all(parent)?;
            make_private_dir(dir)
        }
        Err(e) => Err(e),
    }
}

/// Writes a new file (mode 0644 whatever the umask); an existing one is an error.
///
/// # Errors
/// The file exists, or cannot be written.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o644))?;
    file.write_all(bytes)
}

/// Replaces `path` by a file holding `bytes`, whole or not at all (a temporary file in the
/// same folder, renamed over it), of mode 0644.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("libctx.so");
/// attention_lab_cells::files::write_new(&path, b"old")?;
/// attention_lab_cells::files::write_new(&path, b"new")?;
/// assert_eq!(std::fs::read(&path)?, b"new");
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// The folder cannot be written.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = write_file(&tmp, bytes).and_then(|()| fs::rename(&tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// Reads the open file `file` whole when it holds at most `cap` bytes. Its size is checked
/// before anything is read, and no more than `cap + 1` bytes are ever read or allocated: a
/// sparse file of 100 GB (or one that grows meanwhile) is an error, not an abort.
///
/// ```
/// use std::io::Write;
/// let mut file = tempfile::tempfile()?;
/// file.write_all(b"manifest")?;
/// use std::io::Seek;
/// file.rewind()?;
/// assert_eq!(attention_lab_cells::files::read_capped(&mut file, 8)?, b"manifest");
/// file.set_len(100 << 30)?;
/// let e = attention_lab_cells::files::read_capped(&mut file, 8).unwrap_err();
/// assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// The file is larger than `cap`, or cannot be read.
pub fn read_capped(file: &mut fs::File, cap: u64) -> io::Result<Vec<u8>> {
    let too_large = |len: u64| {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{len} bytes, more than the {cap} expected"),
        )
    };
    let len = file.metadata()?.len();
    if len > cap {
        return Err(too_large(len));
    }
    // `len <= cap`: the capacity is bounded by the caller's cap, not by the file.
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}
