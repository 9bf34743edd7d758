//! A cell as cargo hands evcxr's to rustc, for the tests: per user a build folder whose
//! `src/lib.rs` calls a compiled dependency, `dep` (its `VALUE`), through one exported
//! function, `answer`, which the tests load and call.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]
#![allow(dead_code)]

use attention_lab_cells::{invocation::Invocation, store::Store, Cache, How, Outcome};

/// A library compiled by rustc and stored.
pub const COMPILED: How = How::Compiled { stored: true };
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Lab {
    pub dir: tempfile::TempDir,
    /// The real compiler (not rustup's proxy).
    pub rustc: PathBuf,
}

impl Lab {
    pub fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        // Not writable by others: the stores below must be trusted.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let sysroot = Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .unwrap();
        let sysroot = PathBuf::from(String::from_utf8(sysroot.stdout).unwrap().trim());
        let lab = Lab {
            dir,
            rustc: sysroot.join("bin/rustc"),
        };
        fs::create_dir_all(lab.dir.path().join("dep")).unwrap();
        for user in ["ann", "ben"] {
            fs::create_dir_all(lab.build(user).join("src")).unwrap();
            fs::create_dir_all(lab.deps(user)).unwrap();
            lab.write_source(user, "pub const EARLIER: i32 = 0;\n");
        }
        lab.dependency("ann", 1);
        fs::copy(
            lab.deps("ann").join("libdep.rlib"),
            lab.deps("ben").join("libdep.rlib"),
        )
        .unwrap();
        lab
    }

    pub fn build(&self, user: &str) -> PathBuf {
        self.dir.path().join(user).join("build")
    }

    fn deps(&self, user: &str) -> PathBuf {
        self.build(user).join("target/debug/deps")
    }

    pub fn store_dir(&self, user: &str) -> PathBuf {
        self.dir.path().join(user).join("cells")
    }

    /// How `cache` answers for `cell`.
    pub fn how(&self, cache: &Cache, cell: &Invocation) -> How {
        cache.compile(&self.rustc, cell).how
    }

    /// A library loaded from the user's own store.
    pub fn loaded(&self, user: &str) -> How {
        How::Loaded(self.store_dir(user))
    }

    /// A user's cache: their own store alone.
    pub fn cache(&self, user: &str) -> Cache {
        Cache::new(Some(Store::new(self.store_dir(user))), vec![], 1 << 30)
    }

    /// Compiles the dependency with `VALUE = value` into the user's build folder.
    pub fn dependency(&self, user: &str, value: i32) {
        let source = self.dir.path().join("dep/dep.rs");
        fs::write(&source, format!("pub const VALUE: i32 = {value};\n")).unwrap();
        let out = Command::new(&self.rustc)
            .args([
                "--crate-name",
                "dep",
                "--crate-type",
                "rlib",
                "--edition=2021",
            ])
            .arg(&source)
            .args(["-C", "metadata=0123", "--out-dir"])
            .arg(self.deps(user))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The cell's source: `earlier` (an earlier cell's items, defining `EARLIER`), then the
    /// cell, which answers `dep::VALUE + EARLIER`.
    pub fn write_source(&self, user: &str, earlier: &str) {
        let text = format!(
            "{earlier}#[no_mangle]\npub extern \"C\" fn answer() -> i32 {{ dep::VALUE + EARLIER }}\n"
        );
        fs::write(self.build(user).join("src/lib.rs"), text).unwrap();
    }

    /// rustc's arguments for the user's cell, as cargo passes evcxr's (plus `extra`).
    pub fn cell(&self, user: &str, extra: &[&str]) -> Invocation {
        let deps = self.deps(user).display().to_string();
        let mut args: Vec<String> = [
            "--crate-name",
            "ctx",
            "--edition=2021",
            "src/lib.rs",
            "--error-format=json",
            "--json=diagnostic-rendered-ansi,artifacts,future-incompat",
            "--crate-type",
            "cdylib",
            "--emit=dep-info,link",
            "-C",
            "strip=debuginfo",
        ]
        .map(String::from)
        .to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend([
            "--out-dir".into(),
            deps.clone(),
            "-L".into(),
            format!("dependency={deps}"),
            "--extern".into(),
            format!("dep={deps}/libdep.rlib"),
        ]);
        let args: Vec<OsString> = args.into_iter().map(OsString::from).collect();
        Invocation::parse(&args, &self.build(user)).expect("a cell")
    }

    pub fn library_path(&self, cell: &Invocation) -> PathBuf {
        cell.out_dir.join("libctx.so")
    }

    pub fn library(&self, cell: &Invocation) -> Vec<u8> {
        fs::read(self.library_path(cell)).unwrap()
    }

    pub fn dep_info(&self, cell: &Invocation) -> String {
        fs::read_to_string(cell.out_dir.join("ctx.d")).unwrap()
    }

    /// A compiler that runs the real one but reports itself as `version`.
    pub fn toolchain(&self, version: &str) -> PathBuf {
        let dir = self.dir.path().join("other-toolchain");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rustc");
        let script = format!(
            "#!/bin/sh\nif [ \"$1\" = -vV ]; then echo '{version}'; exit 0; fi\nexec '{}' \"$@\"\n",
            self.rustc.display()
        );
        fs::write(&path, script).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

/// Loads the library at `path` (a copy, so that each load is a new library) and calls its
/// `answer`.
pub fn answer(path: &Path) -> i32 {
    use std::os::unix::ffi::OsStrExt;
    let copy = path.with_file_name(format!(
        "loaded-{}-{}.so",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    fs::copy(path, &copy).unwrap();
    let name = std::ffi::CString::new(copy.as_os_str().as_bytes()).unwrap();
    // SAFETY: a library these tests compiled, whose `answer` takes nothing and returns an i32.
    unsafe {
        let handle = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!handle.is_null(), "dlopen {}", copy.display());
        let symbol = libc::dlsym(handle, c"answer".as_ptr());
        assert!(!symbol.is_null());
        let answer: extern "C" fn() -> i32 = std::mem::transmute(symbol);
        answer()
    }
}

pub trait Text {
    fn stderr_text(&self) -> String;
}

impl Text for Outcome {
    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}
