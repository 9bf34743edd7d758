//! Assignments and marks for a class on the hub.
//!
//! - **nbgrader** (0.9.6, in the hub's venv) for notebooks every student gets alike: one
//!   course, `attention-lab`, whose exchange is `exchange/` in the shared folder; Rust's stub
//!   for the solutions it clears; the teacher's course folder `~/course` with the
//!   [`ASSIGNMENTS`], `ps1` (the softmax of a row) and `ps2` (attention forward and backward,
//!   each function judged by `attention_lab::check`), to generate, release, collect and
//!   autograde through the project's kernel. Students fetch and submit from JupyterLab's
//!   Assignments tab (or `nbgrader fetch_assignment` / `submit`).
//! - **Per-student sheets**, which nbgrader cannot hand out (it releases one version of an
//!   assignment to the whole class, and `exercise --roster` makes one sheet per student):
//!   `hub --hand-out DIR` puts each student's `DIR/sheets/ID.*` in their
//!   `~/attention-lab/sheet/`, and `hub --collect DIR` gathers each student's
//!   `~/attention-lab/sheet/ID.json` into `DIR/ID.json` for `attention-lab grade`.
//!
//! Everything that touches a student's or the teacher's home runs as that user (`runuser`),
//! never as root: a link a student plants leads only where that student may go anyway.

use crate::accounts::Account;
use crate::fsat::{Dir, Found};
use crate::shared::Shared;
use attention_lab_io::error::{io_text, warn, write_file, Result};
use attention_lab_io::problem;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// nbgrader's course id.
pub const COURSE: &str = "attention-lab";

/// What stands for a cleared Rust solution: it compiles, and panics when it runs.
pub const RUST_STUB: &str = "// YOUR CODE HERE\ntodo!()";

/// The assignments of the teacher's course, each `(name, notebook, its text)`: the source
/// `source/<name>/<notebook>`.
///
/// `ps2`'s cells call `attention_lab::check` with no `:dep` line: every kernel on the hub
/// starts with the library loaded from the shared sources, and a `:dep` path here could only
/// be the repository's. A student's own check draws their inputs from `JUPYTERHUB_USER`; the
/// graded cells draw them from `check::DEFAULT_SEED`, since autograde runs as the teacher
/// (whose name is not the student's) and a mark must not depend on who runs it; a right
/// function is right, and a mistake named, on any seed.
///
/// ```
/// let names: Vec<&str> = attention_lab_hub::grading::ASSIGNMENTS.iter().map(|a| a.0).collect();
/// assert_eq!(names, ["ps1", "ps2"]);
/// ```
pub const ASSIGNMENTS: [(&str, &str, &str); 2] = [
    (
        "ps1",
        "softmax.ipynb",
        include_str!("../assignments/ps1/softmax.ipynb"),
    ),
    (
        "ps2",
        "attention.ipynb",
        include_str!("../assignments/ps2/attention.ipynb"),
    ),
];

/// Most bytes of a student's answers that `--collect` takes.
const MAX_ANSWERS: usize = 10 << 20;

/// nbgrader's settings for everyone who runs the hub's venv: the course, its exchange and
/// Rust's stub.
///
/// ```
/// let text = attention_lab_hub::grading::config("/srv/h/exchange".as_ref());
/// assert!(text.contains("c.Exchange.root = \"/srv/h/exchange\""));
/// assert!(text.contains("\"rust\": \"// YOUR CODE HERE\\ntodo!()\""));
/// assert!(text.contains("c.Execute.startup_timeout = 300"));
/// ```
pub fn config(exchange: &Path) -> String {
    let py = |s: &str| serde_json::to_string(s).expect("a string is JSON");
    format!(
        "# Written by attention-lab hub at every set-up.\n\
         c = get_config()\n\
         c.CourseDirectory.course_id = {course}\n\
         c.Exchange.root = {exchange}\n\
         c.ClearSolutions.code_stub = {{\"Rust\": {stub}, \"rust\": {stub}}}\n\
         # The kernel answers once evcxr has started and loaded the library: 15-30 s on a\n\
         # busy machine, once past nbclient's 60 s default (autograde failed there).\n\
         c.Execute.startup_timeout = 300\n\
         # A first cell compiles; an endless loop still ends.\n\
         c.Execute.timeout = 120\n\
         {shim}{submit}{collect}",
        course = py(COURSE),
        exchange = py(&exchange.display().to_string()),
        stub = py(RUST_STUB),
        shim = EXECUTE_SHIM,
        submit = SUBMIT_SHIM,
        collect = COLLECT_SHIM,
    )
}

/// nbgrader's submit, with the submission kept from the other students. nbgrader 0.9.6 makes
/// a submission's files 0644 and its folder 0777, hidden only by the random part of its name
/// in an unlistable `inbound/`: a name that leaks (a shared screen, a log) opens it to every
/// account. `inbound/` is the teacher's and set-group-ID, so what is made in it is in the
/// teacher's group: files 0640 and folders 0750 leave a submission to its student and the
/// teacher, and the top folder 0770 lets the teacher's group remove it, as nbgrader's 0777 is
/// meant to. nbgrader's copy (`copytree`) copies the student's folder's mode onto the new one,
/// which drops set-group-ID before nbgrader writes `timestamp.txt` there (then in the
/// student's group, unreadable to the teacher): its copy goes to a private folder first, with
/// its own rules (ignored files, sizes), and from there into folders made in `inbound/`, which
/// keep the bit.
const SUBMIT_SHIM: &str = r#"
import os
import shutil
import tempfile
from nbgrader.exchange.default.submit import ExchangeSubmit


class SubmitToTheTeacher(ExchangeSubmit):
    def do_copy(self, src, dest, log=None):
        if os.path.dirname(dest) != self.inbound_path:
            return super().do_copy(src, dest, log)
        with tempfile.TemporaryDirectory() as private:
            staged = os.path.join(private, "submission")
            super().do_copy(src, staged, log)
            for folder, _, files in os.walk(staged):
                into = os.path.join(dest, os.path.relpath(folder, staged))
                os.makedirs(into, exist_ok=True)
                for name in files:
                    shutil.copyfile(os.path.join(folder, name), os.path.join(into, name))

    def set_perms(self, dest, fileperms, dirperms):
        super().set_perms(dest, fileperms & ~0o007, dirperms & ~0o007)

    def copy_files(self):
        # nbgrader leaves the folder 0777 for a moment: a copy that fails must not leave it so.
        try:
            super().copy_files()
        finally:
            top = os.path.join(self.inbound_path, self.assignment_filename)
            if os.path.isdir(top) and not os.path.islink(top):
                os.chmod(top, 0o770)


c.ExchangeFactory.submit = SubmitToTheTeacher
"#;

/// nbgrader's collect, taking only what a student really submitted. `inbound/` is writable by
/// all, and nbgrader's collect believes a folder's name (`ben+ps1+<time>+<random>`: a later
/// time wins) and follows the links in it, as the teacher: a student could hand in a folder in
/// another's name, or a link to the teacher's source (the solution, graded and returned as
/// feedback). A folder that is not the named student's own (or is a link) is renamed out of
/// the collect's reach (`refused-...`, no `+`), with one line; a submission is copied
/// without following links, and one holding anything but files and folders is refused.
const COLLECT_SHIM: &str = r#"
import os
import pwd
import shutil
import stat
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.exchange import ignore_patterns


def _owned_by_named_student(path, name):
    st = os.lstat(path)
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid


class CollectWhatWasSubmitted(ExchangeCollect):
    def init_src(self):
        inbound = os.path.join(self.root, self.coursedir.course_id, "inbound")
        if os.path.isdir(inbound):
            for name in os.listdir(inbound):
                if name.count("+") < 2:
                    continue
                if not _owned_by_named_student(os.path.join(inbound, name), name.split("+", 1)[0]):
                    refused = "refused-" + name.replace("+", "_")
                    self.log.warning("refused %s: not its named student's own folder", name)
                    os.rename(os.path.join(inbound, name), os.path.join(inbound, refused))
        super().init_src()

    def do_copy(self, src, dest, log=None):
        shutil.copytree(src, dest, symlinks=True, ignore=ignore_patterns(
            exclude=self.coursedir.ignore, include=self.coursedir.include,
            max_file_size=self.coursedir.max_file_size, log=self.log))
        # Checked on the copy, which the student cannot change any more.
        for folder, dirs, files in os.walk(dest):
            for entry in dirs + files:
                mode = os.lstat(os.path.join(folder, entry)).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    shutil.rmtree(dest)
                    self.log.error("refused %s: it holds %s, which is not a file", src, entry)
                    return


c.ExchangeFactory.collect = CollectWhatWasSubmitted
"#;

/// nbgrader's Execute, for evcxr's kernel: its error replies leave out `ename`, `evalue`
/// and `traceback` (the error itself comes as an output, as it should), and nbgrader 0.9.6
/// reads `ename` from the reply (KeyError: autograde failed on every notebook with a failing
/// test). The reply gets them from the cell's error output, as the protocol has them.
const EXECUTE_SHIM: &str = r#"
from nbgrader.converters.autograde import Autograde
from nbgrader.preprocessors import Execute


class ExecuteRust(Execute):
    def on_cell_executed(self, **kwargs):
        content = kwargs["execute_reply"]["content"]
        if content.get("status") == "error" and "ename" not in content:
            errors = [o for o in kwargs["cell"].outputs if o.output_type == "error"]
            content["ename"] = errors[0].ename if errors else "Error"
            content["evalue"] = errors[0].evalue if errors else ""
            content["traceback"] = list(errors[0].traceback) if errors else []
        return super().on_cell_executed(**kwargs)


c.Autograde.autograde_preprocessors = [
    ExecuteRust if p is Execute else p for p in Autograde.autograde_preprocessors.default()
]
"#;

/// Makes the exchange (writable by all, sticky as /tmp: nbgrader keeps each course's
/// inbound unlistable) and writes nbgrader's settings into the venv.
///
/// # Errors
/// A folder or file that cannot be made.
pub fn prepare(shared: &Shared) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let exchange = shared.exchange();
    std::fs::create_dir_all(&exchange)
        .map_err(|e| attention_lab_io::error::Error::io(exchange.display(), "create", e))?;
    std::fs::set_permissions(&exchange, std::fs::Permissions::from_mode(0o1777)).map_err(|e| {
        attention_lab_io::error::Error::io(exchange.display(), "set the mode of", e)
    })?;
    let etc = shared.venv().join("etc/jupyter");
    std::fs::create_dir_all(&etc)
        .map_err(|e| attention_lab_io::error::Error::io(etc.display(), "create", e))?;
    write_file(etc.join("nbgrader_config.py"), config(&exchange).as_bytes())
}

/// The course's folders in the exchange, each with nbgrader's own mode
/// (`release_assignment.py`, `release_feedback.py`): the course's own and `outbound/` 0755
/// (students fetch), `inbound/` 2733 (students submit, none lists: nbgrader names each
/// submission with a random part) and sticky too (3733: nbgrader leaves `inbound/`'s mode as
/// it finds it), so that no student renames or removes another's submission, even one whose
/// name leaked; `feedback/` 0711.
pub const COURSE_DIRS: [(&str, u32); 4] = [
    (COURSE, 0o755),
    ("outbound", 0o755),
    ("inbound", 0o3733),
    ("feedback", 0o711),
];

/// Makes the course's folders in the exchange the teacher's, before any student can make
/// them: the exchange itself root's, 1777 (nbgrader needs it writable by all; sticky, so
/// nobody removes or renames another's entry), and each of [`COURSE_DIRS`] the teacher's
/// (and the teacher's group's: submissions inherit it), with its mode. A folder there that
/// is not the teacher's (a student's made before the first release, a link, a file) is moved
/// to `state/exchange-refused/` (root's) and made afresh, and one line says so. Returns those
/// lines.
///
/// # Errors
/// A folder that cannot be opened, made, moved or given to the teacher.
pub fn exchange(shared: &Shared, teacher: &Account) -> Result<Vec<String>> {
    let root = Dir::open(&shared.exchange())?;
    // SAFETY: geteuid and getegid have no preconditions. (Root, for a class.)
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    root.set_owner(uid, gid, 0o1777)?;
    let mut said = Vec::new();
    let [(course, mode), below @ ..] = COURSE_DIRS;
    let course = teachers_dir(shared, &root, course, mode, teacher, &mut said)?;
    for (name, mode) in below {
        teachers_dir(shared, &course, name, mode, teacher, &mut said)?;
    }
    Ok(said)
}

/// The folder `name` below `parent`, the teacher's with `mode`: made when missing, moved
/// aside and made afresh (with a line in `said`) when it is anything else.
fn teachers_dir(
    shared: &Shared,
    parent: &Dir,
    name: &str,
    mode: u32,
    teacher: &Account,
    said: &mut Vec<String>,
) -> Result<Dir> {
    let dir = match parent.find(name)? {
        Found::Dir(dir) if dir.stat()?.st_uid == teacher.uid => dir,
        Found::Missing => parent.make(name)?,
        found => {
            let owner = match &found {
                Found::Dir(dir) => format!("owned by uid {}", dir.stat()?.st_uid),
                _ => "not a folder".to_owned(),
            };
            let refused = shared.state().join("exchange-refused");
            std::fs::create_dir_all(&refused)
                .map_err(|e| attention_lab_io::error::Error::io(refused.display(), "create", e))?;
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let aside = format!("{name}-{nanos}");
            parent.rename(name, &Dir::open(&refused)?, &aside)?;
            let line = format!(
                "attention-lab hub: {} was {owner}, not the teacher's: moved to {}, made afresh",
                parent.shown().join(name).display(),
                refused.join(&aside).display()
            );
            warn(&line);
            said.push(line);
            parent.make(name)?
        }
    };
    dir.set_owner(teacher.uid, teacher.gid, mode)?;
    Ok(dir)
}

/// The teacher's course folder, `~/course`: its `nbgrader_config.py` once, and each of the
/// [`ASSIGNMENTS`]' source when it has none: what the teacher changed stays, and an
/// assignment added to the hub reaches a course made before it.
///
/// # Errors
/// `runuser` is missing or the folder cannot be made.
pub fn course(teacher: &Account) -> Result<()> {
    let root = teacher.home.join("course");
    let config = format!(
        "umask 077; [ -e {root} ] && exit 0; mkdir -p {root} && \
         printf 'c = get_config()\\nc.CourseDirectory.root = %s\\n' {root_py} > {root}/nbgrader_config.py",
        root = shell(&root.display().to_string()),
        root_py = shell(&serde_json::to_string(&root.display().to_string()).expect("JSON")),
    );
    let mut steps = vec![(config, None)];
    for (name, notebook, text) in ASSIGNMENTS {
        let source = shell(&root.join("source").join(name).display().to_string());
        steps.push((
            format!("umask 077; [ -e {source} ] && exit 0; mkdir -p {source} && cat > {source}/{notebook}"),
            Some(text.as_bytes()),
        ));
    }
    for (script, input) in steps {
        let out = as_user(teacher, &script, input)?;
        if !out.status.success() {
            return Err(problem!(
                "{}: cannot make the teacher's course folder: {}",
                root.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// Puts each student's sheet (`sheets/ID.md`, `.tex`, `.pdf` from `exercise --roster --out
/// DIR`) in their `~/attention-lab/sheet/`, replacing an older one, mode 0600; says what it
/// did for each. Returns how many students got nothing.
///
/// # Errors
/// `DIR/sheets` is not a folder.
pub fn hand_out(students: &[Account], dir: &Path) -> Result<usize> {
    let sheets = dir.join("sheets");
    if !sheets.is_dir() {
        return Err(problem!(
            "{}: no such folder (make it with attention-lab exercise --roster FILE --out {})",
            sheets.display(),
            dir.display()
        ));
    }
    let mut missing = 0;
    for student in students {
        let mut given = Vec::new();
        for ext in ["md", "tex", "pdf"] {
            let name = format!("{}.{ext}", student.name);
            let Ok(bytes) = std::fs::read(sheets.join(&name)) else {
                continue;
            };
            let script = format!(
                "umask 077; mkdir -p ~/attention-lab/sheet && cd ~/attention-lab/sheet && \
                 cat > .{name}.tmp && mv -f .{name}.tmp {name}"
            );
            let out = as_user(student, &script, Some(&bytes))?;
            if out.status.success() {
                given.push(name);
            } else {
                warn(&format!(
                    "{}: {name} not handed out: {}",
                    student.name,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        if given.is_empty() {
            missing += 1;
            warn(&format!("{}: no sheet handed out", student.name));
        } else {
            println!(
                "{}: ~/attention-lab/sheet/{}",
                student.name,
                given.join(", ")
            );
        }
    }
    Ok(missing)
}

/// Copies each student's answers, `~/attention-lab/sheet/ID.json` (read as that student, at
/// most 10 MiB), to `out/ID.json` (atomically), for `attention-lab grade --answers out`;
/// says what it did for each. Returns how many students had none.
///
/// # Errors
/// `out` cannot be made, or a file there cannot be written.
pub fn collect(students: &[Account], out: &Path) -> Result<usize> {
    std::fs::create_dir_all(out)
        .map_err(|e| attention_lab_io::error::Error::io(out.display(), "create", e))?;
    let mut missing = 0;
    for student in students {
        let name = format!("{}.json", student.name);
        let script = format!("head -c {} ~/attention-lab/sheet/{name}", MAX_ANSWERS + 1);
        let got = as_user(student, &script, None)?;
        let problem = if !got.status.success() {
            Some(String::from_utf8_lossy(&got.stderr).trim().to_owned())
        } else if got.stdout.len() > MAX_ANSWERS {
            Some(format!("more than {} MiB", MAX_ANSWERS >> 20))
        } else {
            None
        };
        match problem {
            Some(why) => {
                missing += 1;
                warn(&format!("{}: no answers collected ({why})", student.name));
            }
            None => {
                write_file(out.join(&name), &got.stdout)?;
                println!(
                    "{}: {} ({} bytes)",
                    student.name,
                    out.join(&name).display(),
                    got.stdout.len()
                );
            }
        }
    }
    Ok(missing)
}

/// Runs `sh -c script` as `account` (its groups, its home as `HOME` and working folder),
/// with `input` on its standard input.
fn as_user(account: &Account, script: &str, input: Option<&[u8]>) -> Result<Output> {
    // runuser lives in sbin, which a PATH without it (sudo's, cron's) leaves out.
    let runuser = ["/usr/sbin/runuser", "/sbin/runuser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("runuser");
    let mut child = Command::new(runuser)
        .args(["-u", &account.name, "--", "sh", "-c", script])
        .env("HOME", &account.home)
        .current_dir("/")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| problem!("cannot run runuser (util-linux): {}", io_text(&e)))?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        // A step that stops reading early fails on its own; its status says so.
        let _ = stdin.write_all(bytes);
    }
    child
        .wait_with_output()
        .map_err(|e| problem!("waiting for runuser: {}", io_text(&e)))
}

/// `text` as one word for `sh`: in single quotes, each `'` closed, escaped and reopened.
///
/// ```
/// assert_eq!(attention_lab_hub::grading::shell("it's"), r#"'it'\''s'"#);
/// ```
pub fn shell(text: &str) -> String {
    format!("'{}'", text.replace('\'', r#"'\''"#))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn mode(path: &Path) -> (u32, u32) {
        let meta = std::fs::symlink_metadata(path).unwrap();
        (meta.uid(), meta.permissions().mode() & 0o7777)
    }

    /// A course folder planted before the first release (here a link to another folder, and
    /// as root a folder of another user) is moved aside and made afresh, the teacher's, with
    /// nbgrader's modes; what the link led to is untouched.
    #[test]
    fn the_course_in_the_exchange_is_the_teachers_whatever_was_planted() {
        let dir = tempfile::tempdir().unwrap();
        let shared = Shared::new(dir.path());
        std::fs::create_dir_all(shared.exchange()).unwrap();
        std::fs::create_dir_all(shared.state()).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
        let course = shared.exchange().join(COURSE);
        std::os::unix::fs::symlink(&elsewhere, &course).unwrap();
        // SAFETY: no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let teacher = Account {
            name: "teacher".into(),
            uid,
            gid,
            home: dir.path().into(),
        };
        let said = exchange(&shared, &teacher).unwrap();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("was not a folder, not the teacher's: moved to"));
        assert_eq!(mode(&elsewhere), (uid, 0o700));
        assert_eq!(mode(&shared.exchange()).1, 0o1777);
        for (name, want) in COURSE_DIRS {
            let path = if name == COURSE {
                course.clone()
            } else {
                course.join(name)
            };
            assert_eq!(mode(&path), (uid, want), "{name}");
        }
        // Again: nothing to say.
        assert!(exchange(&shared, &teacher).unwrap().is_empty());
        if uid == 0 {
            let inbound = course.join("inbound");
            std::os::unix::fs::chown(&inbound, Some(4242), Some(4242)).unwrap();
            std::fs::write(inbound.join("planted"), "x").unwrap();
            let said = exchange(&shared, &teacher).unwrap();
            assert!(
                said[0].contains("inbound was owned by uid 4242"),
                "{said:?}"
            );
            assert_eq!(mode(&inbound), (0, 0o3733));
            assert!(!inbound.join("planted").exists());
        }
    }

    /// An assignment's notebook, its cells marked `key` by nbgrader, its grade cells' points.
    fn assignment(name: &str) -> (serde_json::Value, impl Fn(&str) -> Vec<String>, f64) {
        let (_, _, text) = ASSIGNMENTS.iter().find(|a| a.0 == name).unwrap();
        let nb: serde_json::Value = serde_json::from_str(text).unwrap();
        let cells = nb["cells"].as_array().unwrap().clone();
        let points = cells
            .iter()
            .filter_map(|c| c["metadata"]["nbgrader"]["points"].as_f64())
            .sum();
        let marked = move |key: &str| {
            cells
                .iter()
                .filter(|c| c["metadata"]["nbgrader"][key] == true)
                .map(|c| c["source"].as_str().unwrap().to_owned())
                .collect()
        };
        (nb, marked, points)
    }

    #[test]
    fn each_assignment_is_a_notebook_for_the_rust_kernel_with_solutions_and_tests() {
        for (name, solutions, tests, points) in [("ps1", 1, 2, 3.0), ("ps2", 6, 6, 10.0)] {
            let (nb, marked, total) = assignment(name);
            // As Jupyter writes them for the project's kernel: opening it changes nothing.
            assert_eq!(
                nb["metadata"]["kernelspec"],
                attention_lab_jupyter::kernel::notebook_kernelspec()
            );
            assert_eq!(
                nb["metadata"]["language_info"],
                attention_lab_jupyter::kernel::language_info()
            );
            // nbgrader picks the stub by the kernelspec's language, as the notebook names it.
            let language = nb["metadata"]["kernelspec"]["language"].as_str().unwrap();
            let stub = serde_json::to_string(RUST_STUB).unwrap();
            assert!(config("/x".as_ref()).contains(&format!("{language:?}: {stub}")));
            let (mine, graded) = (marked("solution"), marked("grade"));
            assert_eq!(
                (mine.len(), graded.len(), total),
                (solutions, tests, points)
            );
            for source in mine {
                assert!(source.contains("// BEGIN SOLUTION") && source.contains("// END SOLUTION"));
            }
            let all = nb["cells"].as_array().unwrap();
            assert!(
                all.iter().all(|c| !c["source"].as_str().unwrap().contains(":dep")),
                "{name}: the hub's kernel has the library loaded; a :dep path would be the repository's"
            );
        }
    }

    /// ps2: each exercise's cell checks the student's function on their own inputs, and its
    /// graded cell the same function on the default seed's, asserting that it is right.
    #[test]
    fn each_of_ps2s_functions_is_graded_by_its_check_on_inputs_that_do_not_depend_on_who_grades() {
        let (_, marked, _) = assignment("ps2");
        for (mine, graded) in marked("solution").iter().zip(marked("grade")) {
            let function = mine
                .split_once("fn ")
                .and_then(|(_, rest)| rest.split_once('('))
                .unwrap()
                .0;
            let check = mine.lines().last().unwrap();
            let what = check
                .strip_prefix("check::")
                .and_then(|c| c.strip_suffix(&format!("({function})")))
                .unwrap_or_else(|| panic!("{function}'s cell ends with {check:?}"));
            assert!(
                graded.contains(&format!(
                    "check::Checker::new(check::DEFAULT_SEED).{what}({function});"
                )),
                "{graded}"
            );
            assert!(graded.contains("assert!(result.is_right(), \"{result}\");"));
            assert!(!graded.contains("JUPYTERHUB_USER") && !graded.contains("check::student_seed"));
        }
    }

    /// The course gets each assignment's source once: a teacher's edit stays, and an assignment
    /// removed (or added to the hub after the course was made) is written again. As root only
    /// (runuser).
    #[test]
    fn the_course_gets_each_assignment_it_lacks_and_keeps_the_teachers_edits() {
        // SAFETY: no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        if uid != 0 {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let teacher = Account {
            name: "root".into(),
            uid,
            gid,
            home: dir.path().into(),
        };
        course(&teacher).unwrap();
        let source =
            |ps: &str, notebook: &str| dir.path().join("course/source").join(ps).join(notebook);
        for (ps, notebook, text) in ASSIGNMENTS {
            assert_eq!(std::fs::read_to_string(source(ps, notebook)).unwrap(), text);
        }
        let config = std::fs::read_to_string(dir.path().join("course/nbgrader_config.py")).unwrap();
        assert!(config.contains("c.CourseDirectory.root = "), "{config}");
        std::fs::write(source("ps1", "softmax.ipynb"), "edited").unwrap();
        std::fs::remove_dir_all(dir.path().join("course/source/ps2")).unwrap();
        course(&teacher).unwrap();
        assert_eq!(
            std::fs::read_to_string(source("ps1", "softmax.ipynb")).unwrap(),
            "edited"
        );
        let (_, _, ps2) = ASSIGNMENTS[1];
        assert_eq!(
            std::fs::read_to_string(source("ps2", "attention.ipynb")).unwrap(),
            ps2
        );
    }
}
