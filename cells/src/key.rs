//! A cell's key: one SHA-256 of everything that shapes the library rustc would make of it.
//!
//! - the compiler: `rustc -vV` (version, commit, host, LLVM), so another toolchain never hits;
//! - every argument, with the build folder blanked (flags, cfgs, edition, crate type, target);
//! - the source, which evcxr generates from the cell, every earlier cell's items and the
//!   types of the variables it keeps, in its [canonical](crate::canonical) order;
//! - the bytes of every compiled dependency the cell names (`--extern`). A dependency's
//!   library records the hash of each crate it was built against, and rustc refuses a
//!   mismatch, so the direct dependencies' bytes also fix every crate below them.
//!
//! Files the source reads at compile time (`include_str!`) and environment variables it
//! reads (`env!`) are found only by compiling; the entry records them (see [`crate::entry`]).

use crate::invocation::Invocation;
use sha2::{Digest, Sha256};
use std::fmt;
use std::fs;
use std::io;
use std::path::Path;
use std::process::Command;

/// Changes whenever what a key covers, or how an entry is laid out, changes.
const FORMAT: &str = "attention-lab compiled cell, format 2";

/// A SHA-256 digest: an entry's name, and each stored file's check.
///
/// ```
/// use attention_lab_cells::key::Digest32;
/// let d = Digest32::of(b"abc");
/// assert!(d.to_string().starts_with("ba7816bf"));
/// assert_eq!(d.to_string().parse::<Digest32>(), Ok(d));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest32(pub [u8; 32]);

impl Digest32 {
    /// The SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest32 {
        Digest32(Sha256::digest(bytes).into())
    }
}

impl fmt::Display for Digest32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::str::FromStr for Digest32 {
    type Err = ();
    fn from_str(text: &str) -> Result<Digest32, ()> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(());
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let pair = std::str::from_utf8(pair).map_err(|_| ())?;
            out[i] = u8::from_str_radix(pair, 16).map_err(|_| ())?;
        }
        Ok(Digest32(out))
    }
}

/// A hasher of fields, each framed by its length so that no two lists of fields collide.
struct Fields(Sha256);

impl Fields {
    fn field(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }
}

/// The key of compiling `cell` with the compiler that `rustc -vV` describes as `rustc`.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use attention_lab_cells::{invocation::Invocation, key::key};
/// std::fs::create_dir(dir.path().join("src"))?;
/// std::fs::write(dir.path().join("src/lib.rs"), "pub fn f() {}")?;
/// let out = dir.path().join("target");
/// let args = ["--crate-name", "ctx", "--crate-type", "cdylib", "src/lib.rs", "--out-dir"]
///     .map(std::ffi::OsString::from).into_iter().chain([out.into_os_string()]).collect::<Vec<_>>();
/// let cell = Invocation::parse(&args, dir.path()).unwrap();
/// let first = key(&cell, "rustc 1.95.0")?;
/// assert_eq!(key(&cell, "rustc 1.95.0")?, first);
/// assert_ne!(key(&cell, "rustc 1.96.0")?, first);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// The source or a dependency cannot be read.
pub fn key(cell: &Invocation, rustc: &str) -> io::Result<Digest32> {
    let mut fields = Fields(Sha256::new());
    fields.field(FORMAT.as_bytes());
    fields.field(rustc.as_bytes());
    let args = cell.blanked_args();
    fields.field(&(args.len() as u64).to_le_bytes());
    for arg in &args {
        fields.field(arg.as_bytes());
    }
    let source = fs::read(&cell.source)?;
    match std::str::from_utf8(&source) {
        Ok(text) => fields.field(crate::canonical::canonical(text).as_bytes()),
        Err(_) => fields.field(&source),
    }
    for (name, path) in &cell.externs {
        fields.field(name.as_bytes());
        fields.field(&file_digest(path)?.0);
    }
    Ok(Digest32(fields.0.finalize().into()))
}

/// The key under which a failed compile of `cell` is kept: `key` and the source exactly as
/// written. rustc's errors point at lines, and evcxr reads them to fix the cell (which
/// variable was moved, say), so a failure is of one order of the source only, unlike a
/// library (see [`crate::canonical`]).
///
/// # Errors
/// The source cannot be read.
pub fn failure_key(key: &Digest32, cell: &Invocation) -> io::Result<Digest32> {
    let mut fields = Fields(Sha256::new());
    fields.field(b"failure");
    fields.field(&key.0);
    fields.field(&fs::read(&cell.source)?);
    Ok(Digest32(fields.0.finalize().into()))
}

/// The SHA-256 of a file's bytes, read in pieces.
///
/// # Errors
/// The file cannot be read.
pub fn file_digest(path: &Path) -> io::Result<Digest32> {
    use std::io::Read;
    let mut hasher = Sha256::new();
    let mut file = fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(Digest32(hasher.finalize().into())),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The largest memo of `rustc -vV` read (it prints about 300 bytes): a larger file, even a
/// sparse one, is asked again.
const MEMO_CAP: u64 = 64 << 10;

/// What `rustc -vV` prints for the compiler at `rustc`.
///
/// Running it costs about as much as a cache hit, so the answer is remembered in `memo` (a
/// folder of the user's own), under the compiler file's identity: its path, device, inode,
/// size and times. A toolchain updated in place is a new file, so it is asked again.
///
/// # Errors
/// The compiler cannot be run, or fails.
pub fn rustc_identity(rustc: &Path, memo: Option<&Path>) -> io::Result<String> {
    let memo_file = memo.and_then(|dir| Some(dir.join(file_identity(rustc).ok()?.to_string())));
    let remembered = memo_file.as_ref().and_then(|f| {
        let mut file = fs::File::open(f).ok()?;
        String::from_utf8(crate::files::read_capped(&mut file, MEMO_CAP).ok()?).ok()
    });
    if let Some(text) = remembered {
        if let Some(text) = text.strip_prefix(FORMAT).and_then(|t| t.strip_prefix('\n')) {
            return Ok(text.to_owned());
        }
    }
    let out = Command::new(rustc).arg("-vV").output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{} -vV failed ({})",
            rustc.display(),
            out.status
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if let Some(file) = memo_file {
        // Best effort: without the memo the next cell asks rustc again.
        let _ = crate::files::make_private_dir(file.parent().unwrap_or(Path::new(".")))
            .and_then(|()| crate::files::write_new(&file, format!("{FORMAT}\n{text}").as_bytes()));
    }
    Ok(text)
}

/// A digest of where a file is and which version of it is there (not its bytes).
fn file_identity(path: &Path) -> io::Result<Digest32> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(path)?;
    let text = format!(
        "{}\n{} {} {} {}.{} {}.{}",
        path.display(),
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    Ok(Digest32::of(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_read_back_and_refuse_bad_text() {
        let d = Digest32::of(b"cell");
        assert_eq!(d.to_string().len(), 64);
        assert_eq!(d.to_string().parse::<Digest32>(), Ok(d));
        assert!("zz".repeat(32).parse::<Digest32>().is_err());
        assert!("ab".parse::<Digest32>().is_err());
        assert!("é".repeat(32).parse::<Digest32>().is_err());
    }

    #[test]
    fn fields_are_framed() {
        let mut ab_c = Fields(Sha256::new());
        ab_c.field(b"ab");
        ab_c.field(b"c");
        let mut a_bc = Fields(Sha256::new());
        a_bc.field(b"a");
        a_bc.field(b"bc");
        assert_ne!(ab_c.0.finalize(), a_bc.0.finalize());
    }

    #[test]
    fn the_memo_answers_for_the_same_file_and_asks_again_for_a_changed_one() {
        let dir = tempfile::tempdir().unwrap();
        let memo = dir.path().join("memo");
        let fake = dir.path().join("rustc");
        let script = |version: &str| format!("#!/bin/sh\necho 'rustc {version}'\n");
        crate::files::write_new(&fake, script("1.0").as_bytes()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(rustc_identity(&fake, Some(&memo)).unwrap(), "rustc 1.0\n");
        assert_eq!(fs::read_dir(&memo).unwrap().count(), 1);
        assert_eq!(rustc_identity(&fake, Some(&memo)).unwrap(), "rustc 1.0\n");
        // A memo grown sparse to 100 GB is not read: rustc is asked again, and the memo
        // rewritten.
        let remembered = fs::read_dir(&memo).unwrap().next().unwrap().unwrap().path();
        let grown = fs::OpenOptions::new()
            .write(true)
            .open(&remembered)
            .unwrap();
        grown.set_len(100 << 30).unwrap();
        assert_eq!(rustc_identity(&fake, Some(&memo)).unwrap(), "rustc 1.0\n");
        assert!(fs::metadata(&remembered).unwrap().len() < MEMO_CAP);
        // Replaced in place (as an update does): a new file, asked again.
        let next = dir.path().join("rustc.new");
        crate::files::write_new(&next, script("2.0").as_bytes()).unwrap();
        fs::set_permissions(&next, fs::Permissions::from_mode(0o755)).unwrap();
        fs::rename(&next, &fake).unwrap();
        assert_eq!(rustc_identity(&fake, Some(&memo)).unwrap(), "rustc 2.0\n");
        assert!(rustc_identity(&dir.path().join("none"), None).is_err());
    }
}
