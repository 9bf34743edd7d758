//! The cache never makes a wrong library and never fails a cell: planted, corrupted and
//! truncated entries are refused and the cell compiled; a store that is full, read-only, not
//! a folder or deleted means compiling as before, with the trouble reported once.
//!
//! Some cases need root (to plant a file as another user, or to mount a small or read-only
//! file system); without it they are checked through modes alone and say so.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use attention_lab_cells::{store::Store, Cache, How};
use common::{answer, Lab, COMPILED};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The user id of `nobody`, who stands for another student.
const NOBODY: u32 = 65534;

/// Ann (the teacher) compiles the cell into her store; returns Ben's cell.
fn teacher_compiled(lab: &Lab) -> attention_lab_cells::invocation::Invocation {
    let outcome = lab.cache("ann").compile(&lab.rustc, &lab.cell("ann", &[]));
    assert_eq!(outcome.how, COMPILED);
    lab.cell("ben", &[])
}

/// Replaces every stored library of `store` with one that answers 99.
fn plant(lab: &Lab, store: &Path) {
    let evil = lab.dir.path().join("evil");
    fs::create_dir_all(evil.join("src")).unwrap();
    fs::write(
        evil.join("src/lib.rs"),
        "#[no_mangle]\npub extern \"C\" fn answer() -> i32 { 99 }\n",
    )
    .unwrap();
    let out = Command::new(&lab.rustc)
        .args([
            "--crate-name",
            "ctx",
            "--crate-type",
            "cdylib",
            "src/lib.rs",
            "--out-dir",
            ".",
        ])
        .current_dir(&evil)
        .output()
        .unwrap();
    assert!(out.status.success());
    let library = fs::read(evil.join("libctx.so")).unwrap();
    let sha = attention_lab_cells::key::Digest32::of(&library).to_string();
    for entry in fs::read_dir(store.join("entries")).unwrap() {
        let entry = entry.unwrap().path();
        let manifest_path = entry.join("manifest.json");
        let mut manifest: serde_json::Value =
            serde_json::from_slice(&fs::read(&manifest_path).unwrap()).unwrap();
        for (i, file) in manifest["files"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            if file["emit"] == "link" {
                fs::write(entry.join(i.to_string()), &library).unwrap();
                file["sha256"] = sha.clone().into();
                file["len"] = library.len().into();
            }
        }
        fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    }
}

fn chown_all(path: &Path, uid: u32) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{uid}"))
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_student_cannot_write_the_shared_store() {
    if !is_root() {
        eprintln!("skipped: needs root to act as another user");
        return;
    }
    let lab = Lab::new();
    teacher_compiled(&lab);
    let store = lab.store_dir("ann");
    let (entry, _) = stored_library(&store);
    // As a student: a new entry, a changed library, a renamed entry, a removed one.
    let attempts = [
        format!("mkdir '{}/entries/planted'", store.display()),
        format!("echo x > '{}/0'", entry.display()),
        format!(
            "mv '{}' '{}/entries/moved'",
            entry.display(),
            store.display()
        ),
        format!("rm -rf '{}'", entry.display()),
        format!("touch '{}/used'", entry.display()),
    ];
    for attempt in attempts {
        let status = Command::new("sh")
            .args(["-c", &attempt])
            .uid(NOBODY)
            .gid(NOBODY)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "a student could: {attempt}");
    }
    // And so Ben's kernel loads the teacher's library, unchanged.
    let ben = Cache::new(
        Some(Store::new(lab.store_dir("ben"))),
        vec![Store::new(&store)],
        1 << 30,
    );
    let cell = lab.cell("ben", &[]);
    assert_eq!(lab.how(&ben, &cell), How::Loaded(store));
    assert_eq!(answer(&lab.library_path(&cell)), 1);
}

use std::os::unix::process::CommandExt;

#[test]
fn entries_planted_by_another_user_are_never_loaded() {
    let lab = Lab::new();
    let cell = teacher_compiled(&lab);
    let store = lab.store_dir("ann");
    plant(&lab, &store);
    let ben = Cache::new(
        Some(Store::new(lab.store_dir("ben"))),
        vec![Store::new(&store)],
        1 << 30,
    );
    type Case<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let mut cases: Vec<Case> = vec![
        (
            "a store writable by its group",
            Box::new(|| {
                fs::set_permissions(store.join("entries"), fs::Permissions::from_mode(0o775))
                    .unwrap()
            }),
        ),
        (
            "a store writable by all",
            Box::new(|| fs::set_permissions(&store, fs::Permissions::from_mode(0o777)).unwrap()),
        ),
    ];
    if is_root() {
        cases.push((
            "a store owned by a student",
            Box::new(|| chown_all(&store, NOBODY)),
        ));
    } else {
        eprintln!("not checked: a store owned by another user (needs root)");
    }
    for (what, make) in cases {
        make();
        let outcome = ben.compile(&lab.rustc, &cell);
        assert_eq!(outcome.how, COMPILED, "{what}");
        assert!(
            outcome.trouble[0].contains("not trusted"),
            "{what}: {:?}",
            outcome.trouble
        );
        assert_eq!(answer(&lab.library_path(&cell)), 1, "{what}");
        // Back to trusted, and Ben's own entry out of the way for the next case.
        fs::set_permissions(&store, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(store.join("entries"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::remove_dir_all(lab.store_dir("ben")).unwrap();
    }
    if is_root() {
        chown_all(&store, 0);
        // Trusted again, the planted library would load: the checks above are what refused it.
        let outcome = ben.compile(&lab.rustc, &cell);
        assert_eq!(outcome.how, How::Loaded(store));
        assert_eq!(answer(&lab.library_path(&cell)), 99);
    }
}

#[test]
fn corrupted_or_truncated_entries_are_compiled_again_and_replaced() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    let cell = lab.cell("ann", &[]);
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    let (entry, library) = stored_library(&lab.store_dir("ann"));
    let damage: [(&str, &dyn Fn()); 4] = [
        ("a flipped byte", &|| {
            let mut bytes = fs::read(&library).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x40;
            fs::write(&library, bytes).unwrap();
        }),
        ("a truncated library", &|| {
            let bytes = fs::read(&library).unwrap();
            fs::write(&library, &bytes[..bytes.len() / 3]).unwrap();
        }),
        ("a truncated manifest", &|| {
            let manifest = entry.join("manifest.json");
            let bytes = fs::read(&manifest).unwrap();
            fs::write(&manifest, &bytes[..bytes.len() / 2]).unwrap();
        }),
        ("a missing library", &|| fs::remove_file(&library).unwrap()),
    ];
    for (what, damage) in damage {
        damage();
        let outcome = cache.compile(&lab.rustc, &cell);
        assert_eq!(outcome.how, COMPILED, "{what}");
        assert!(
            outcome.trouble[0].contains("corrupt"),
            "{what}: {:?}",
            outcome.trouble
        );
        assert_eq!(answer(&lab.library_path(&cell)), 1, "{what}");
        let again = cache.compile(&lab.rustc, &cell);
        assert_eq!(again.how, lab.loaded("ann"), "{what}: replaced");
    }
}

/// The folder of the one entry in `store`, and its stored library.
fn stored_library(store: &Path) -> (PathBuf, PathBuf) {
    let entry = fs::read_dir(store.join("entries"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let library = (0..2)
        .map(|i| entry.join(i.to_string()))
        .find(|p| fs::read(p).unwrap().starts_with(b"\x7fELF"))
        .unwrap();
    (entry, library)
}

/// Makes `path` a sparse file of 100 GB, its first bytes kept.
fn grow_sparse(path: &Path) {
    let file = fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(100 << 30).unwrap();
}

#[test]
fn oversized_or_sparse_entries_are_compiled_again_with_one_line() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    let cell = lab.cell("ann", &[]);
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    let store = lab.store_dir("ann");
    let shared = Cache::new(None, vec![Store::new(&store)], 1 << 30);
    let recorded_large = |entry: &Path, library: &Path| {
        grow_sparse(library);
        let index = library.file_name().unwrap().to_str().unwrap();
        let path = entry.join("manifest.json");
        let mut manifest: serde_json::Value =
            serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        manifest["files"][index.parse::<usize>().unwrap()]["len"] = (100u64 << 30).into();
        fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    };
    // What each case does to the entry (its folder, its library), and the line it gives.
    type Damage<'a> = &'a dyn Fn(&Path, &Path);
    let cases: [(&str, Damage, &str); 3] = [
        (
            "a sparse manifest",
            &|entry, _| grow_sparse(&entry.join("manifest.json")),
            "manifest.json: 107374182400 bytes, more than the 16777216 expected",
        ),
        (
            "a sparse library",
            &|_, library| grow_sparse(library),
            "107374182400 bytes, more than the",
        ),
        (
            "a sparse library its manifest records",
            &recorded_large,
            "libctx.so: 107374182400 bytes recorded, more than the 268435456 a file may hold",
        ),
    ];
    for (what, damage, says) in cases {
        let (entry, library) = stored_library(&store);
        damage(&entry, &library);
        // A store the kernel cannot repair (a hub's shared one) is read, refused, kept.
        let outcome = shared.compile(&lab.rustc, &cell);
        assert_eq!(outcome.how, How::Compiled { stored: false }, "{what}");
        assert_eq!(outcome.status, 0, "{what}");
        assert_eq!(outcome.trouble.len(), 1, "{what}: {:?}", outcome.trouble);
        let line = &outcome.trouble[0];
        assert!(
            line.contains("corrupt") && line.contains(says) && !line.contains('\n'),
            "{what}: {line}"
        );
        assert_eq!(answer(&lab.library_path(&cell)), 1, "{what}");
        // The own store's is compiled again and replaced.
        let outcome = cache.compile(&lab.rustc, &cell);
        assert_eq!(outcome.how, COMPILED, "{what}");
        assert_eq!(outcome.trouble.len(), 1, "{what}: {:?}", outcome.trouble);
        assert_eq!(
            lab.how(&cache, &cell),
            lab.loaded("ann"),
            "{what}: replaced"
        );
    }
}

/// A small file system of its own, mounted while it lives (root only).
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, options: &str) -> Option<Mount> {
        fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(at.to_owned()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_read_only_missing_or_strange_store_compiles_as_before() {
    let lab = Lab::new();
    let cell = lab.cell("ann", &[]);
    let check = |what: &str, store: &Path| {
        let cache = Cache::new(Some(Store::new(store)), vec![], 1 << 30);
        let outcome = cache.compile(&lab.rustc, &cell);
        assert_eq!(outcome.status, 0, "{what}");
        assert_eq!(outcome.how, How::Compiled { stored: false }, "{what}");
        assert_eq!(
            outcome.trouble.len(),
            1,
            "{what}: one line: {:?}",
            outcome.trouble
        );
        assert!(
            outcome.trouble[0].contains("cannot store"),
            "{what}: {:?}",
            outcome.trouble
        );
        assert_eq!(answer(&lab.library_path(&cell)), 1, "{what}");
    };
    let file = lab.dir.path().join("a-file");
    fs::write(&file, "not a folder").unwrap();
    check("a file where the folder should be", &file.join("cells"));
    if is_root() {
        let full = Mount::tmpfs(&lab.dir.path().join("full"), "size=8k").expect("mount a tmpfs");
        fs::write(full.0.join("filler"), vec![0u8; 8192]).ok();
        check("a full file system", &full.0.join("cells"));
        let read_only = Mount::tmpfs(&lab.dir.path().join("ro"), "ro").expect("mount a tmpfs");
        check("a read-only file system", &read_only.0.join("cells"));
    } else {
        let read_only = lab.dir.path().join("ro");
        fs::create_dir(&read_only).unwrap();
        fs::set_permissions(&read_only, fs::Permissions::from_mode(0o555)).unwrap();
        check("a read-only folder", &read_only.join("cells"));
        eprintln!("not checked: a full file system (needs root to mount one)");
    }
    // A store deleted between two cells is made again.
    let cache = lab.cache("ann");
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    fs::remove_dir_all(lab.store_dir("ann")).unwrap();
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    assert_eq!(lab.how(&cache, &cell), lab.loaded("ann"));
}

#[test]
fn the_own_store_stays_under_its_cap() {
    let lab = Lab::new();
    let one = {
        let cache = lab.cache("ann");
        cache.compile(&lab.rustc, &lab.cell("ann", &[]));
        Store::new(lab.store_dir("ann")).size()
    };
    let cap = 3 * one + one / 2;
    let cache = Cache::new(Some(Store::new(lab.store_dir("ann"))), vec![], cap);
    for i in 1..9 {
        lab.write_source("ann", &format!("pub const EARLIER: i32 = {i};\n"));
        let cell = lab.cell("ann", &[]);
        assert_eq!(lab.how(&cache, &cell), COMPILED);
        assert!(
            Store::new(lab.store_dir("ann")).size() <= cap,
            "after cell {i}"
        );
    }
    // The newest stays.
    let last = cache.compile(&lab.rustc, &lab.cell("ann", &[]));
    assert_eq!(last.how, lab.loaded("ann"), "{:?}", last.trouble);
}
