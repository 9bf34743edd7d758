//! `jupyterhub_config.py` runs: Python executes it with a stand-in for traitlets' config
//! object, so a name error or a bad literal fails here, not when a teacher starts the hub.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab_hub::config::{config, Class};
use attention_lab_hub::limits::Limit;
use attention_lab_hub::shared::Shared;
use std::process::Command;

/// A stand-in for `jupyterhub.spawner`, whose LocalProcessSpawner's pre-exec function says
/// it ran.
const FAKE_JUPYTERHUB: &str = r#"
import sys, types
spawner = types.ModuleType("jupyterhub.spawner")
class LocalProcessSpawner:
    def make_preexec_fn(self, name):
        return lambda: print("dropped to", name)
spawner.LocalProcessSpawner = LocalProcessSpawner
hub = types.ModuleType("jupyterhub")
hub.spawner = spawner
sys.modules["jupyterhub"] = hub
sys.modules["jupyterhub.spawner"] = spawner
handlers = types.ModuleType("jupyterhub.handlers")
handlers.BaseHandler = type("BaseHandler", (), {})
sys.modules["jupyterhub.handlers"] = handlers
firstuse = types.ModuleType("firstuseauthenticator.firstuseauthenticator")
class FirstUseAuthenticator:
    def delete_user(self, user):
        raise AssertionError("firstuse's delete_user drops the password")
firstuse.FirstUseAuthenticator = FirstUseAuthenticator
firstuse.CustomLoginHandler = type("CustomLoginHandler", (), {})
sys.modules["firstuseauthenticator"] = types.ModuleType("firstuseauthenticator")
sys.modules["firstuseauthenticator.firstuseauthenticator"] = firstuse
tornado = types.ModuleType("tornado")
tornado.web = types.ModuleType("tornado.web")
tornado.web.authenticated = lambda f: f
sys.modules["tornado"], sys.modules["tornado.web"] = tornado, tornado.web
# bcrypt's shape, not its hash.
bcrypt = types.ModuleType("bcrypt")
bcrypt.checkpw = lambda password, stored: stored == b"hash:" + password
sys.modules["bcrypt"] = bcrypt
"#;

/// Runs the config under Python; returns what it set, as `section.name = repr(value)` lines.
fn settings(text: &str) -> String {
    run(
        text,
        r#"
for section, values in sorted(root.items()):
    for key, value in sorted(values.items()):
        print(f"{section}.{key} = {value!r}")
"#,
    )
}

/// Runs the config under Python, then `after` (which sees its settings as `root`); returns
/// what that printed.
fn run(text: &str, after: &str) -> String {
    let runner = FAKE_JUPYTERHUB.to_owned()
        + r#"
class Section(dict):
    def __getattr__(self, key):
        return self.setdefault(key, Section())
    def __setattr__(self, key, value):
        self[key] = value
root = Section()
exec(sys.stdin.read(), {"get_config": lambda: root})
"# + after;
    let mut child = Command::new("python3")
        .args(["-c", &runner])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn class<'a>(students: Vec<&'a str>, demo: bool) -> Class<'a> {
    Class {
        students,
        teacher: "teacher",
        ip: "",
        port: 8000,
        cull_after: 600,
        demo,
        limits: Vec::new(),
    }
}

#[test]
fn a_class_config_runs_and_names_the_roster_the_spawner_and_the_kernel() {
    let shared = Shared::new("/srv/h");
    let set = settings(&config(&shared, &class(vec!["alice", "bob"], false)));
    for line in [
        "Authenticator.allowed_users = {'alice', 'bob'}",
        "Authenticator.admin_users = {'teacher'}",
        "JupyterHub.authenticator_class = <class 'ClassAuthenticator'>",
        "Spawner.cmd = ['/srv/h/venv/bin/jupyterhub-singleuser']",
        "Spawner.args = ['--MultiKernelManager.default_kernel_name=attention-lab-rust', '--MappingKernelManager.kernel_info_timeout=600', '--KernelManager.transport=ipc']",
        "JupyterHub.bind_url = 'http://:8000/'",
        "JupyterHub.cleanup_servers = False",
    ] {
        let (key, value) = line.split_once(" = ").unwrap();
        let found = set
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or("");
        // Sets print in any order: compare their members.
        if value.starts_with('{') {
            let members = |s: &str| {
                let mut m: Vec<String> = s
                    .trim_matches(|c| c == '{' || c == '}')
                    .split(", ")
                    .map(str::to_owned)
                    .collect();
                m.sort();
                m
            };
            assert_eq!(
                members(found.split_once(" = ").map_or("", |p| p.1)),
                members(value),
                "{set}"
            );
        } else {
            assert_eq!(found, line, "{set}");
        }
    }
    assert!(set.contains("--timeout=600"), "{set}");
}

#[test]
fn a_demo_config_runs_everyone_as_one_user_in_homes_below_the_shared_folder() {
    let set = settings(&config(&Shared::new("/srv/h"), &class(vec!["alice"], true)));
    assert!(
        set.contains("JupyterHub.spawner_class = 'jupyterhub.spawner.SimpleLocalProcessSpawner'"),
        "{set}"
    );
    assert!(
        set.contains("SimpleLocalProcessSpawner.home_dir_template = '/srv/h/demo/{username}'"),
        "{set}"
    );
}

#[test]
fn names_with_quotes_stay_python_strings() {
    // Roster ids cannot hold quotes, but the folder may.
    let set = settings(&config(
        &Shared::new("/srv/it's \"here\""),
        &class(vec!["alice"], false),
    ));
    // Python's repr of the string the config builds: the quote escaped, the rest as given.
    let want = r#"'/srv/it\'s "here"/venv/bin/jupyterhub-singleuser'"#;
    assert!(set.contains(want), "{set}");
}

#[test]
fn a_class_starts_each_server_at_a_low_priority_and_lets_it_take_the_normal_one_back() {
    let out = run(
        &config(&Shared::new("/srv/h"), &class(vec!["alice"], false)),
        "import os\nroot.JupyterHub.spawner_class().make_preexec_fn('alice')()\n\
         print('nice', os.getpriority(os.PRIO_PROCESS, 0))\n",
    );
    assert_eq!(out, "dropped to alice\nnice 19\n");
    // Once the server answers on its port, its process group takes the normal priority back
    // (the hub does it, as root).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not checked: raising a priority needs root");
        return;
    }
    let out = run(
        &config(&Shared::new("/srv/h"), &class(vec!["alice"], false)),
        "import asyncio, os, socket, subprocess\n\
         server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen()\n\
         child = subprocess.Popen(['sleep', '30'], start_new_session=True, preexec_fn=lambda: os.nice(19))\n\
         spawner = root.JupyterHub.spawner_class()\n\
         asyncio.run(spawner.normal_priority_when_serving('127.0.0.1', server.getsockname()[1], child.pid, tries=10))\n\
         print('nice', os.getpriority(os.PRIO_PROCESS, child.pid))\n\
         child.kill()\n",
    );
    assert_eq!(out, "nice 0\n");
}

#[test]
fn a_limited_class_puts_each_server_in_its_students_groups_before_dropping_to_them() {
    let groups = tempfile::tempdir().unwrap();
    let mut limited = class(vec!["alice"], false);
    let (memory, pids) = (groups.path().join("memory"), groups.path().join("pids"));
    limited.limits = vec![
        Limit {
            parent: memory.join("attention-lab-hub"),
            file: "memory.limit_in_bytes",
            value: 2 << 30,
        },
        Limit {
            parent: pids.join("attention-lab-hub"),
            file: "pids.max",
            value: 512,
        },
    ];
    let out = run(
        &config(&Shared::new("/srv/h"), &limited),
        "import os\nroot.JupyterHub.spawner_class().make_preexec_fn('alice')()\nprint('pid', os.getpid())\n",
    );
    let group = memory.join("attention-lab-hub/alice");
    let limit = std::fs::read_to_string(group.join("memory.limit_in_bytes")).unwrap();
    assert_eq!(limit, (2u64 << 30).to_string());
    let pid = std::fs::read_to_string(group.join("cgroup.procs")).unwrap();
    let in_pids = pids.join("attention-lab-hub/alice");
    assert_eq!(
        std::fs::read_to_string(in_pids.join("pids.max")).unwrap(),
        "512"
    );
    assert_eq!(
        std::fs::read_to_string(in_pids.join("cgroup.procs")).unwrap(),
        pid
    );
    // The groups are joined first, then the student's pre-exec function runs.
    assert_eq!(out, format!("dropped to alice\npid {pid}\n"));
    assert!(config(&Shared::new("/srv/h"), &limited)
        .contains("c.JupyterHub.spawner_class = ClassSpawner"),);
}

/// The class's authenticator checks a current password against the stored hash, and
/// deleting a user keeps their password; its change-password page is its own.
#[test]
fn the_authenticator_checks_the_current_password_and_keeps_a_deleted_users() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("passwords");
    let out = run(
        &config(&Shared::new("/srv/h"), &class(vec!["alice"], false)),
        &format!(
            "import dbm, types\n\
             auth = root.JupyterHub.authenticator_class()\n\
             auth.dbm_path = {db:?}\n\
             with dbm.open(auth.dbm_path, 'c') as db:\n    db[b'alice'] = b'hash:right'\n\
             print(auth.check_password('alice', 'right'), auth.check_password('alice', 'wrong'), auth.check_password('bob', 'right'))\n\
             auth.delete_user(types.SimpleNamespace(name='alice'))\n\
             print(auth.check_password('alice', 'right'))\n\
             print([h[0] for h in auth.get_handlers(None)], auth.get_handlers(None)[1][1].__name__)\n",
            db = db.display().to_string()
        ),
    );
    assert_eq!(
        out,
        "True False False\nTrue\n['/login', '/auth/change-password'] ChangePasswordHandler\n"
    );
}
