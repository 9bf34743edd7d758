//! One compiled cell as the cache keeps it: the files rustc wrote, what it printed, and what
//! the source read besides itself, all checked before anything is loaded.

use crate::invocation::Invocation;
use crate::key::{file_digest, Digest32};
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::PathBuf;

/// The manifest of an entry (`manifest.json`): which files it holds and how to check them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The entry's key, written out: an entry under another name is refused.
    pub key: String,
    /// rustc's exit status: 0, or 1 for a cell whose own code does not compile (see
    /// [`Compiled::is_storable`]).
    #[serde(default)]
    pub status: i32,
    /// The files rustc wrote, in the order it announced them.
    pub files: Vec<StoredFile>,
    /// rustc's standard output, the build folder blanked.
    pub stdout: String,
    /// rustc's standard error (its JSON messages: artefacts, warnings), the build folder
    /// blanked.
    pub stderr: String,
    /// Each environment variable the source read (`env!`, `option_env!`) and its value then
    /// (`None`: unset); a hit needs the same values now.
    pub env: Vec<(String, Option<String>)>,
    /// Each file the source read besides itself (`include_str!`, `#[path]`), blanked, with
    /// the SHA-256 of its bytes then; a hit needs the same bytes now.
    pub inputs: Vec<(String, String)>,
}

/// One file of an entry: its name in the output folder, what rustc called it, its check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    /// The file's name in rustc's output folder (`libctx.so`, `ctx.d`).
    pub name: String,
    /// rustc's name for the kind of output (`link`, `dep-info`, `metadata`).
    pub emit: String,
    /// The SHA-256 of the stored bytes.
    pub sha256: String,
    /// Their length.
    pub len: u64,
}

/// An entry ready to store: its manifest and each file's stored bytes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The manifest.
    pub manifest: Manifest,
    /// The bytes of `manifest.files`, in the same order.
    pub bytes: Vec<Vec<u8>>,
}

/// What one rustc run of a cell left: its output streams and the files it announced.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

impl Compiled {
    /// Whether a compile that ended with `status` may be stored: a success, or a failure that
    /// only the source can cause. That is exit status 1 with every error located in the
    /// crate's own source (`source`, as rustc names it), beside rustc's closing "aborting due
    /// to" line. evcxr compiles a cell again after such errors (a moved variable, a `?`), so
    /// they come back with the cell. A failure of anything else (the linker, a full disk, a
    /// killed rustc) is never stored.
    pub fn is_storable(&self, status: i32, source: &str) -> bool {
        if status == 0 {
            return true;
        }
        if status != 1 {
            return false;
        }
        let mut errors = 0;
        for line in String::from_utf8_lossy(&self.stderr).lines() {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if msg["$message_type"] != "diagnostic" || msg["level"] != "error" {
                continue;
            }
            let in_source = msg["spans"].as_array().is_some_and(|spans| {
                spans
                    .iter()
                    .any(|s| s["is_primary"] == true && s["file_name"] == source)
            });
            let closing = msg["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("aborting due to"));
            if !in_source && !closing {
                return false;
            }
            errors += usize::from(in_source);
        }
        errors > 0
    }

    /// The files rustc announced on stderr (`--json=artifacts`): path and kind.
    pub fn artifacts(&self) -> Vec<(PathBuf, String)> {
        String::from_utf8_lossy(&self.stderr)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|msg| {
                let path = msg["artifact"].as_str()?;
                let emit = msg["emit"].as_str()?;
                Some((PathBuf::from(path), emit.to_owned()))
            })
            .collect()
    }
}

impl Entry {
    /// The entry of a successful compile of `cell` under `key`.
    ///
    /// # Errors
    /// An announced file is not in the output folder or cannot be read, or the output is not
    /// UTF-8 (such a compile is not stored).
    pub fn of_compile(
        cell: &Invocation,
        key: &Digest32,
        status: i32,
        compiled: &Compiled,
    ) -> io::Result<Entry> {
        let text = |bytes: &[u8]| {
            std::str::from_utf8(bytes)
                .map(|t| cell.blank(t))
                .map_err(|_| io::Error::other("rustc's output is not UTF-8"))
        };
        let (mut files, mut bytes) = (Vec::new(), Vec::new());
        let (mut env, mut inputs) = (Vec::new(), Vec::new());
        for (path, emit) in compiled.artifacts() {
            let name = plain_name(path.file_name())
                .filter(|_| path.parent() == Some(cell.out_dir.as_path()))
                .ok_or_else(|| {
                    io::Error::other(format!("{}: outside rustc's output folder", path.display()))
                })?;
            let mut data = fs::read(&path)?;
            if emit == "dep-info" {
                let deps = text(&data)?;
                (env, inputs) = read_dep_info(cell, &deps)?;
                data = deps.into_bytes();
            }
            files.push(StoredFile {
                name: name.to_owned(),
                emit,
                sha256: Digest32::of(&data).to_string(),
                len: data.len() as u64,
            });
            bytes.push(data);
        }
        let manifest = Manifest {
            key: key.to_string(),
            status,
            files,
            stdout: text(&compiled.stdout)?,
            stderr: text(&compiled.stderr)?,
            env,
            inputs,
        };
        Ok(Entry { manifest, bytes })
    }

    /// Whether what the source read besides itself is as it was: the same environment
    /// variables and the same bytes in the same files.
    pub fn is_current(manifest: &Manifest, cell: &Invocation) -> bool {
        let env_same = manifest.env.iter().all(|(name, value)| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()) == *value
        });
        env_same
            && manifest.inputs.iter().all(|(path, sha)| {
                let path = cell.build.join(cell.unblank(path));
                file_digest(&path).is_ok_and(|d| d.to_string() == *sha)
            })
    }

    /// Checks each file's length and SHA-256 against the manifest.
    ///
    /// # Errors
    /// The first file that fails, named.
    pub fn verify(&self) -> Result<(), String> {
        if self.bytes.len() != self.manifest.files.len() {
            return Err("the manifest and the files disagree".into());
        }
        for (file, data) in self.manifest.files.iter().zip(&self.bytes) {
            if data.len() as u64 != file.len || Digest32::of(data).to_string() != file.sha256 {
                return Err(format!("{} fails its check", file.name));
            }
            if plain_name(Some(OsStr::new(&file.name))).is_none() {
                return Err(format!("{:?} is not a plain file name", file.name));
            }
        }
        Ok(())
    }

    /// Writes the files into `cell`'s output folder (each whole or not at all), as rustc
    /// would have; returns rustc's output to print, for this build folder (its exit status is
    /// [`Manifest::status`]).
    ///
    /// # Errors
    /// A file cannot be written.
    pub fn restore(&self, cell: &Invocation) -> io::Result<(String, String)> {
        for (file, data) in self.manifest.files.iter().zip(&self.bytes) {
            let target = cell.out_dir.join(&file.name);
            if file.emit == "dep-info" {
                let text = String::from_utf8_lossy(data);
                crate::files::write_new(&target, cell.unblank(&text).as_bytes())?;
            } else {
                crate::files::write_new(&target, data)?;
            }
        }
        // A library is executable, as rustc leaves it.
        for file in self.manifest.files.iter().filter(|f| f.emit == "link") {
            use std::os::unix::fs::PermissionsExt;
            let target = cell.out_dir.join(&file.name);
            fs::set_permissions(&target, fs::Permissions::from_mode(0o755))?;
        }
        Ok((
            cell.unblank(&self.manifest.stdout),
            cell.unblank(&self.manifest.stderr),
        ))
    }
}

/// A file name with no folder part, or `None`.
fn plain_name(name: Option<&OsStr>) -> Option<&str> {
    let name = name?.to_str()?;
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains('/');
    plain.then_some(name)
}

/// Environment variables read at compile time, with their values ([`Manifest::env`]).
type EnvReads = Vec<(String, Option<String>)>;
/// Files read at compile time, with their SHA-256 ([`Manifest::inputs`]).
type FileReads = Vec<(String, String)>;

/// The environment variables and files (other than the crate's root) that a dep-info file
/// (`ctx.d`, make's syntax, as rustc writes it) lists, with each file's SHA-256 now.
fn read_dep_info(cell: &Invocation, text: &str) -> io::Result<(EnvReads, FileReads)> {
    let (mut env, mut inputs) = (Vec::new(), Vec::new());
    for line in text.lines() {
        if let Some(var) = line.strip_prefix("# env-dep:") {
            let var = var.replace("\\n", "\n");
            env.push(match var.split_once('=') {
                Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                None => (var, None),
            });
            continue;
        }
        // The last block lists each input alone, as `path:`.
        let Some(path) = line.strip_suffix(':') else {
            continue;
        };
        if path.is_empty() || path.contains(": ") || path.starts_with('#') {
            continue;
        }
        let path = path.replace("\\ ", " ");
        let resolved = cell.build.join(cell.unblank(&path));
        if resolved == cell.source {
            continue;
        }
        inputs.push((path, file_digest(&resolved)?.to_string()));
    }
    Ok((env, inputs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::path::Path;

    fn cell(build: &Path) -> Invocation {
        let out = build.join("target/deps");
        fs::create_dir_all(&out).unwrap();
        fs::create_dir_all(build.join("src")).unwrap();
        fs::write(build.join("src/lib.rs"), "// cell").unwrap();
        let mut args: Vec<OsString> = [
            "--crate-name",
            "ctx",
            "--crate-type",
            "cdylib",
            "src/lib.rs",
            "--out-dir",
        ]
        .map(OsString::from)
        .to_vec();
        args.push(out.into_os_string());
        Invocation::parse(&args, build).unwrap()
    }

    fn compiled(cell: &Invocation, depinfo: &str) -> Compiled {
        let out = &cell.out_dir;
        fs::write(out.join("libctx.so"), b"\x7fELF library").unwrap();
        fs::write(out.join("ctx.d"), depinfo).unwrap();
        let stderr = format!(
            "{{\"$message_type\":\"artifact\",\"artifact\":\"{}\",\"emit\":\"dep-info\"}}\n\
             {{\"$message_type\":\"artifact\",\"artifact\":\"{}\",\"emit\":\"link\"}}\n",
            out.join("ctx.d").display(),
            out.join("libctx.so").display()
        );
        Compiled {
            stdout: Vec::new(),
            stderr: stderr.into_bytes(),
        }
    }

    #[test]
    fn an_entry_moves_between_build_folders() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (from, to) = (cell(a.path()), cell(b.path()));
        let deps = format!(
            "{0}/ctx.d: src/lib.rs\n\n{0}/libctx.so: src/lib.rs\n\nsrc/lib.rs:\n",
            from.out_dir.display()
        );
        let key = Digest32::of(b"k");
        let entry = Entry::of_compile(&from, &key, 0, &compiled(&from, &deps)).unwrap();
        assert!(!entry.manifest.stderr.contains(a.path().to_str().unwrap()));
        assert!(entry.manifest.inputs.is_empty() && entry.manifest.env.is_empty());
        entry.verify().unwrap();
        let (_, stderr) = entry.restore(&to).unwrap();
        assert!(stderr.contains(&to.out_dir.join("libctx.so").display().to_string()));
        let restored = fs::read_to_string(to.out_dir.join("ctx.d")).unwrap();
        assert_eq!(
            restored,
            deps.replace(a.path().to_str().unwrap(), b.path().to_str().unwrap())
        );
        assert_eq!(
            fs::read(to.out_dir.join("libctx.so")).unwrap(),
            b"\x7fELF library"
        );
    }

    #[test]
    fn what_the_source_read_must_be_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let cell = cell(dir.path());
        fs::write(dir.path().join("data with space.txt"), "one").unwrap();
        let deps =
            "x: src/lib.rs data\\ with\\ space.txt\n\nsrc/lib.rs:\ndata\\ with\\ space.txt:\n\n\
                    # env-dep:LESSON=one\\ntwo\n# env-dep:UNSET_IN_THIS_TEST\n";
        let entry =
            Entry::of_compile(&cell, &Digest32::of(b"k"), 0, &compiled(&cell, deps)).unwrap();
        let m = &entry.manifest;
        assert_eq!(m.inputs.len(), 1);
        assert_eq!(
            m.env,
            [
                ("LESSON".to_owned(), Some("one\ntwo".to_owned())),
                ("UNSET_IN_THIS_TEST".to_owned(), None)
            ]
        );
        // LESSON is not set in this process.
        assert!(!Entry::is_current(m, &cell));
        let mut without_env = m.clone();
        without_env.env.truncate(0);
        assert!(Entry::is_current(&without_env, &cell));
        fs::write(dir.path().join("data with space.txt"), "two").unwrap();
        assert!(!Entry::is_current(&without_env, &cell));
    }

    #[test]
    fn a_changed_byte_or_a_strange_name_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let cell = cell(dir.path());
        let entry = Entry::of_compile(
            &cell,
            &Digest32::of(b"k"),
            0,
            &compiled(&cell, "src/lib.rs:\n"),
        )
        .unwrap();
        let mut flipped = entry.clone();
        flipped.bytes[1][0] ^= 1;
        assert_eq!(flipped.verify(), Err("libctx.so fails its check".into()));
        let mut short = entry.clone();
        short.bytes[1].pop();
        assert!(short.verify().is_err());
        let mut escape = entry.clone();
        escape.manifest.files[1].name = "../libctx.so".into();
        assert!(escape.verify().is_err());
        let mut missing = entry;
        missing.bytes.pop();
        assert!(missing.verify().is_err());
    }
}
