//! The class's accounts: roster ids checked as system user names, and the system users made for
//! them (a private home each, in the group [`GROUP`]), seeded with the notebooks and the warm
//! build.

use attention_lab_classroom::student::{read_roster, Student};
use attention_lab_io::error::{io_text, Error, Result};
use attention_lab_io::problem;
use std::ffi::CString;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The group every account made by `hub` belongs to; a user outside it is never touched.
pub const GROUP: &str = "attention-lab";

/// Whether `id` can name a system user everywhere: a lowercase letter, then at most 31
/// lowercase letters, digits, `-` or `_` (useradd's portable names; JupyterHub lowercases
/// names, so an uppercase id would log in as another user).
///
/// ```
/// use attention_lab_hub::accounts::system_name;
/// assert!(system_name("alice"));
/// assert!(system_name("s-042_b"));
/// assert!(!system_name("Alice"));
/// assert!(!system_name("../x"));
/// assert!(!system_name("a b"));
/// assert!(!system_name(&"a".repeat(33)));
/// ```
pub fn system_name(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && id.len() <= 32
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// The roster's students, each id checked as a system user name, and the teacher's name.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let roster = dir.path().join("class.csv");
/// std::fs::write(&roster, "id,name\nalice,Alice\nbob,Bob\n")?;
/// let students = attention_lab_hub::accounts::class(&roster, "teacher")?;
/// assert_eq!(students.len(), 2);
/// std::fs::write(&roster, "id,name\nAlice,Alice\n")?;
/// assert!(attention_lab_hub::accounts::class(&roster, "teacher").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// The roster cannot be read, an id cannot be a system user name, or the teacher's name is
/// also a student's or no system user name either: one line naming the file and the id.
pub fn class(roster: &Path, teacher: &str) -> Result<Vec<Student>> {
    let students = read_roster(roster)?;
    let shown = roster.display();
    for student in &students {
        if !system_name(&student.id) {
            return Err(problem!(
                "{shown}: id {:?} cannot name a system user: a lowercase letter, then lowercase \
                 letters, digits, '-' or '_', at most 32 characters",
                student.id
            ));
        }
        if student.id == teacher {
            return Err(problem!(
                "{shown}: id {teacher:?} is the teacher's name (--teacher); give the teacher another"
            ));
        }
    }
    if !system_name(teacher) {
        return Err(problem!(
            "--teacher {teacher:?} cannot name a system user: a lowercase letter, then lowercase \
             letters, digits, '-' or '_', at most 32 characters"
        ));
    }
    Ok(students)
}

/// A system user: its ids and home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The login name (the roster's id).
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home folder.
    pub home: PathBuf,
}

/// The system user `name`, if there is one.
///
/// ```
/// let root = attention_lab_hub::accounts::lookup("root").expect("every system has root");
/// assert_eq!(root.uid, 0);
/// assert!(attention_lab_hub::accounts::lookup("no-such-user-here").is_none());
/// ```
pub fn lookup(name: &str) -> Option<Account> {
    let c_name = CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; we copy out at once
    // (the hub is single-threaded while it sets accounts up).
    unsafe {
        let pw = libc::getpwnam(c_name.as_ptr());
        if pw.is_null() {
            return None;
        }
        let home = std::ffi::CStr::from_ptr((*pw).pw_dir)
            .to_string_lossy()
            .into_owned();
        Some(Account {
            name: name.to_owned(),
            uid: (*pw).pw_uid,
            gid: (*pw).pw_gid,
            home: PathBuf::from(home),
        })
    }
}

/// Whether the system user `name` is in [`GROUP`] (was made by `hub`).
fn ours(name: &str) -> bool {
    Command::new("id")
        .args(["-nG", name])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .any(|g| g == GROUP)
        })
}

/// Checks, before anything is made, that no name is a system user that `hub` did not make.
///
/// # Errors
/// A name taken by another user of this machine (root, a service, a person), named.
pub fn check_free(names: &[&str]) -> Result<()> {
    for name in names {
        if lookup(name).is_some() && !ours(name) {
            return Err(problem!(
                "{name:?} is already a user of this machine, not made by attention-lab hub: \
                 rename it in the roster (or --teacher)"
            ));
        }
    }
    Ok(())
}

/// Runs a system tool; its failure in one line.
fn run(command: &mut Command, what: &str) -> Result<()> {
    let out = command
        .output()
        .map_err(|e| problem!("{what}: {}", io_text(&e)))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(problem!("{what} failed: {}", err.trim()));
    }
    Ok(())
}

/// Makes [`GROUP`] when it is missing.
///
/// # Errors
/// groupadd is missing or fails.
pub fn ensure_group() -> Result<()> {
    let known = Command::new("getent")
        .args(["group", GROUP])
        .output()
        .is_ok_and(|o| o.status.success());
    if known {
        return Ok(());
    }
    run(
        Command::new("groupadd").args(["--system", GROUP]),
        "groupadd",
    )
}

/// The account `name`, made when missing (in [`GROUP`], a login shell, a home that only it
/// can open); whether it was made now.
///
/// # Errors
/// useradd fails, or the home's mode cannot be set.
pub fn ensure_user(name: &str) -> Result<(Account, bool)> {
    let made = match lookup(name) {
        Some(_) => false,
        None => {
            run(
                Command::new("useradd")
                    .args(["--create-home", "--shell", "/bin/bash", "--groups", GROUP])
                    .args(["--comment", "attention-lab hub"])
                    .arg(name),
                &format!("useradd {name}"),
            )?;
            true
        }
    };
    let account = lookup(name).ok_or_else(|| problem!("useradd {name}: no such user after it"))?;
    // Private whatever useradd's HOME_MODE: no other student may list or read it.
    let meta =
        fs::metadata(&account.home).map_err(|e| Error::io(account.home.display(), "read", e))?;
    if meta.uid() == account.uid && meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(&account.home, fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io(account.home.display(), "set the mode of", e))?;
    }
    Ok((account, made))
}

pub use attention_lab_jupyter::build::Pick;

/// Copies the tree `from` to the new folder `to`, owned by `account`, each entry as `pick`
/// says ([`attention_lab_jupyter::build::seed_tree`], every folder and copy given to the
/// student).
///
/// Called only for a home made in this run, before its student can place anything there,
/// so no path below it can be a link planted to make root write elsewhere.
///
/// # Errors
/// A file or folder that cannot be read, made or given to the student.
pub fn seed(from: &Path, to: &Path, account: &Account, pick: &dyn Fn(&Path) -> Pick) -> Result<()> {
    let own = |path: &Path| {
        std::os::unix::fs::lchown(path, Some(account.uid), Some(account.gid))
            .map_err(|e| Error::io(path.display(), "give to the student", e))
    };
    attention_lab_jupyter::build::seed_tree(from, to, pick, &own)
}

/// Makes the folder `path` (its parent must exist) owned by `account`, mode 0700.
///
/// # Errors
/// It cannot be made or given to the student.
pub fn owned_dir(path: &Path, account: &Account) -> Result<()> {
    match fs::create_dir(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(Error::io(path.display(), "create", e)),
    }
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(path.display(), "set the mode of", e))?;
    std::os::unix::fs::lchown(path, Some(account.uid), Some(account.gid))
        .map_err(|e| Error::io(path.display(), "give to the student", e))
}

/// Replaces an existing account's build folder `~/.cache/attention-lab/evcxr-build/slot-0`
/// with a new one seeded from `built` (the warm build), as [`seed`] seeds a new account's:
/// for an account made before the hub was upgraded, whose build folder the new lessons or
/// library would otherwise recompile cell by cell. Root works there without following any
/// link the student placed: each folder on the way is opened by descriptor (`O_NOFOLLOW`)
/// and must be the student's; the new folder is filled in a root-only folder beside the old
/// one, given to the student from the deepest entry up, then renamed into place; the old one
/// is moved aside and removed without following links. Returns false (with nothing changed)
/// when a folder on the way is not the student's.
///
/// # Errors
/// A folder that cannot be opened, made, filled, moved or given to the student.
pub fn reseed_build(built: &Path, account: &Account) -> Result<bool> {
    use crate::fsat::{Dir, Found};
    let home = Dir::open(&account.home)?;
    let mut dir = home;
    let builds =
        attention_lab_jupyter::build::kernel_builds(Path::new(attention_lab_io::cache::FOLDER));
    let parts: Vec<String> = Path::new(".cache")
        .join(builds)
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if dir.stat()?.st_uid != account.uid {
        return Ok(false);
    }
    for part in &parts {
        dir = match dir.find(part)? {
            Found::Dir(next) if next.stat()?.st_uid == account.uid => next,
            Found::Missing => {
                let next = dir.make(part)?;
                next.set_owner(account.uid, account.gid, 0o700)?;
                next
            }
            _ => return Ok(false),
        };
    }
    let slot = attention_lab_jupyter::build::slot(Path::new(""), 0);
    let slot = slot.to_string_lossy();
    let stage_name = format!(".reseed-{}", std::process::id());
    let stage = dir.make(&stage_name)?;
    let made = std::cell::RefCell::new(Vec::new());
    let record = |path: &Path| {
        made.borrow_mut().push(path.to_owned());
        Ok(())
    };
    let target = stage.proc_path().join(&*slot);
    attention_lab_jupyter::build::seed_tree(
        built,
        &target,
        &attention_lab_jupyter::build::build_pick,
        &record,
    )?;
    // The deepest first: no folder is the student's while root still writes below it.
    for path in made.borrow().iter().rev() {
        std::os::unix::fs::lchown(path, Some(account.uid), Some(account.gid))
            .map_err(|e| Error::io(path.display(), "give to the student", e))?;
    }
    let stale = format!(".stale-{}", std::process::id());
    let had_one = !matches!(dir.find(&slot)?, Found::Missing);
    if had_one {
        dir.rename(&slot, &dir, &stale)?;
    }
    stage.rename(&slot, &dir, &slot)?;
    dir.remove_empty(&stage_name)?;
    if had_one {
        // std's remove_dir_all opens each folder without following a link.
        let old = dir.proc_path().join(&stale);
        fs::remove_dir_all(&old).map_err(|e| Error::io(old.display(), "remove", e))?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let roster = dir.path().join("class.csv");
        let long = "a".repeat(40);
        for (id, says) in [
            ("../x", "may only hold"),
            ("a b", "may only hold"),
            (long.as_str(), "cannot name a system user"),
            ("Alice", "cannot name a system user"),
            ("teacher", "the teacher's name"),
        ] {
            fs::write(&roster, format!("id,name\nbob,Bob\n\"{id}\",X\n")).unwrap();
            let error = class(&roster, "teacher").unwrap_err().to_string();
            assert!(error.contains(says), "{id}: {error}");
            assert!(error.contains("class.csv"), "{id}: {error}");
        }
    }

    #[test]
    fn a_system_user_not_made_by_the_hub_is_refused() {
        let error = check_free(&["nobody-here-xyz", "root"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"root\" is already a user"), "{error}");
    }
}

#[cfg(test)]
mod reseed_tests {
    use super::*;
    use attention_lab_jupyter::build::{kernel_builds, slot};

    fn me(home: &Path) -> Account {
        // SAFETY: no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Account {
            name: "me".into(),
            uid,
            gid,
            home: home.to_owned(),
        }
    }

    /// An account's stale build folder is replaced by the warm one; one that is missing is
    /// made; a link planted on the way is not followed (and nothing is changed).
    #[test]
    fn a_stale_build_folder_is_replaced_and_no_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let built = dir.path().join("warm");
        fs::create_dir_all(built.join("deps")).unwrap();
        fs::write(built.join("deps/lib.rlib"), "new").unwrap();
        let home = dir.path().join("home");
        let builds = kernel_builds(&home.join(".cache").join(attention_lab_io::cache::FOLDER));
        let ours = slot(&builds, 0);
        fs::create_dir_all(ours.join("deps")).unwrap();
        fs::write(ours.join("deps/lib.rlib"), "old").unwrap();
        fs::write(ours.join("stale-only"), "old").unwrap();
        let account = me(&home);
        assert!(reseed_build(&built, &account).unwrap());
        assert_eq!(
            fs::read_to_string(ours.join("deps/lib.rlib")).unwrap(),
            "new"
        );
        assert!(!ours.join("stale-only").exists());
        let names: Vec<_> = fs::read_dir(&builds)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("slot-0")]);
        // Missing: made.
        fs::remove_dir_all(home.join(".cache")).unwrap();
        assert!(reseed_build(&built, &account).unwrap());
        assert!(ours.join("deps/lib.rlib").is_file());
        // A link on the way: refused, what it leads to untouched.
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        fs::remove_dir_all(home.join(".cache")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, home.join(".cache")).unwrap();
        assert!(!reseed_build(&built, &account).unwrap());
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}
