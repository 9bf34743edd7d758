//! `jupyterhub_config.py`, written from the class at every start.

use crate::limits::MemoryGroups;
use crate::shared::Shared;
use attention_lab_jupyter::kernel::KERNEL_NAME;
use attention_lab_jupyter::priority;

/// What the config needs beyond the shared folder.
#[derive(Debug, Clone)]
pub struct Class<'a> {
    /// The students' login names.
    pub students: Vec<&'a str>,
    /// The teacher's login name (JupyterHub's admin).
    pub teacher: &'a str,
    /// Address JupyterHub's proxy listens on ("" for every interface).
    pub ip: &'a str,
    /// Its port.
    pub port: u16,
    /// Seconds of inactivity after which a server is stopped.
    pub cull_after: u64,
    /// Everyone as this one user (`SimpleLocalProcessSpawner`), for a teacher alone.
    pub demo: bool,
    /// Each student's server (with its kernels) in a memory cgroup of its own, so limited.
    pub memory: Option<MemoryGroups>,
}

/// A Python string literal for `text` (JSON's escapes are Python's).
fn py(text: impl AsRef<str>) -> String {
    serde_json::to_string(text.as_ref()).expect("a string serializes")
}

/// The config's text.
///
/// ```
/// use attention_lab_hub::{config::{config, Class}, shared::Shared};
/// let class = Class { students: vec!["alice"], teacher: "teacher", ip: "", port: 8000, cull_after: 3600, demo: false, memory: None };
/// let text = config(&Shared::new("/srv/h"), &class);
/// assert!(text.contains("c.Authenticator.allowed_users = {\"alice\"}"));
/// assert!(text.contains("LocalProcessSpawner"));
/// ```
pub fn config(shared: &Shared, class: &Class) -> String {
    let state = shared.state();
    let at = |name: &str| py(state.join(name).display().to_string());
    let users = class.students.iter().map(py).collect::<Vec<_>>().join(", ");
    let spawner = match (&class.memory, class.demo) {
        (_, true) => {
            "c.JupyterHub.spawner_class = 'jupyterhub.spawner.SimpleLocalProcessSpawner'\n"
                .to_owned()
        }
        (memory, false) => {
            let (parent, file, bytes) = match memory {
                Some(groups) => (
                    py(groups.parent.display().to_string()),
                    py(groups.limit_file),
                    groups.bytes.to_string(),
                ),
                None => ("None".to_owned(), "None".to_owned(), "0".to_owned()),
            };
            format!(
                "{class_spawner}\nc.JupyterHub.spawner_class = ClassSpawner\n",
                class_spawner = CLASS_SPAWNER
                    .replace("@PARENT@", &parent)
                    .replace("@FILE@", &file)
                    .replace("@BYTES@", &bytes)
                    .replace("@NICE@", &priority::START_NICE.to_string())
            )
        }
    };
    let demo_homes = if class.demo {
        format!(
            "c.SimpleLocalProcessSpawner.home_dir_template = {}\n",
            py(shared.root().join("demo/{username}").display().to_string())
        )
    } else {
        String::new()
    };
    format!(
        "# Written by `attention-lab hub` at every start; edits are lost.\n\
         import sys\n\
         c = get_config()  # noqa: F821\n\
         c.JupyterHub.bind_url = {bind}\n\
         c.JupyterHub.db_url = 'sqlite:///' + {db}\n\
         c.JupyterHub.cookie_secret_file = {cookie}\n\
         c.ConfigurableHTTPProxy.command = [{proxy}]\n\
         c.ConfigurableHTTPProxy.pid_file = {proxy_pid}\n\
         # Servers outlive a restarted hub process; `attention-lab hub` stops them when it stops.\n\
         c.JupyterHub.cleanup_servers = False\n\
         c.JupyterHub.authenticator_class = 'firstuseauthenticator.FirstUseAuthenticator'\n\
         c.FirstUseAuthenticator.dbm_path = {passwords}\n\
         c.FirstUseAuthenticator.create_users = False\n\
         c.FirstUseAuthenticator.min_password_length = 8\n\
         c.Authenticator.allowed_users = {{{users}}}\n\
         c.Authenticator.admin_users = {{{teacher}}}\n\
         {spawner}\
         c.Spawner.cmd = [{singleuser}]\n\
         c.Spawner.default_url = '/lab'\n\
         c.Spawner.notebook_dir = '~/attention-lab'\n\
         {demo_homes}\
         # A kernel that starts while the class starts may take over a minute (it starts with\n\
         # the CPU others leave idle): the server waits for its first answer instead of giving\n\
         # up after 60 s and closing the channels its questions came on.\n\
         # Kernels listen on Unix sockets (ipc) in the student's runtime folder, which only\n\
         # they can enter: no other student can reach their ports (a TCP port of 127.0.0.1 is\n\
         # open to every user of the machine).\n\
         c.Spawner.args = ['--MultiKernelManager.default_kernel_name={kernel}',\n\
         \x20   '--MappingKernelManager.kernel_info_timeout=600',\n\
         \x20   '--KernelManager.transport=ipc']\n\
         # Servers start with the CPU the class leaves idle: when a whole class starts at once\n\
         # on two cores, the last ones take minutes (BENCHMARKS.md).\n\
         c.Spawner.start_timeout = 600\n\
         c.Spawner.http_timeout = 600\n\
         c.JupyterHub.services = [{{\n\
         \x20   'name': 'idle-culler',\n\
         \x20   'command': [sys.executable, '-m', 'jupyterhub_idle_culler', '--timeout={cull}'],\n\
         }}]\n\
         c.JupyterHub.load_roles = [{{\n\
         \x20   'name': 'idle-culler',\n\
         \x20   'scopes': ['list:users', 'read:users:activity', 'read:servers', 'delete:servers'],\n\
         \x20   'services': ['idle-culler'],\n\
         }}]\n",
        bind = py(format!("http://{}:{}/", class.ip, class.port)),
        db = at("jupyterhub.sqlite"),
        cookie = at("jupyterhub_cookie_secret"),
        proxy = py(shared.proxy().display().to_string()),
        proxy_pid = at("proxy.pid"),
        passwords = at("passwords.dbm"),
        teacher = py(class.teacher),
        singleuser = py(shared.venv().join("bin/jupyterhub-singleuser").display().to_string()),
        kernel = KERNEL_NAME,
        cull = class.cull_after,
    )
}

/// LocalProcessSpawner for a class:
/// - each student's server is made in that student's memory group when there is one (the
///   group made, and its limit written, by the hub as root before the fork; the child joins
///   it before it drops to the student). Its kernels and their compiles are the server's
///   children, so they count against the same limit: past it, the kernel's OOM killer ends
///   one of them;
/// - it starts at the niceness [`START_NICE`](attention_lab_jupyter::priority::START_NICE), its session too (Linux shares the CPU between
///   sessions first, and the server is one), and is given the normal priority back (by the
///   hub, as root) once it answers on its port: a class whose servers all start in the same
///   minute then starts them with what the students already working leave idle.
const CLASS_SPAWNER: &str = r#"import asyncio
import os
import pwd
from jupyterhub.spawner import LocalProcessSpawner


class ClassSpawner(LocalProcessSpawner):
    memory_parent = @PARENT@
    memory_file = @FILE@
    memory_bytes = @BYTES@
    start_nice = @NICE@

    def make_preexec_fn(self, name):
        procs = None
        if self.memory_parent:
            group = os.path.join(self.memory_parent, name)
            os.makedirs(group, exist_ok=True)
            with open(os.path.join(group, self.memory_file), 'w') as f:
                f.write(str(self.memory_bytes))
            procs = os.path.join(group, 'cgroup.procs')
        drop_to_student = super().make_preexec_fn(name)

        def preexec():
            if procs:
                with open(procs, 'w') as f:
                    f.write(str(os.getpid()))
            os.setpriority(os.PRIO_PROCESS, 0, self.start_nice)
            set_session_nice('self', self.start_nice)
            drop_to_student()

        return preexec

    def get_env(self):
        env = super().get_env()
        # The kernels' sockets are files named after the runtime folder, and a socket's path
        # has at most 107 bytes: a short folder in the home (0700, made by Jupyter) keeps a
        # 32-character login's under it.
        env['JUPYTER_RUNTIME_DIR'] = os.path.join(pwd.getpwnam(self.user.name).pw_dir, '.jrun')
        return env

    async def start(self):
        ip, port = await super().start()
        asyncio.ensure_future(self.normal_priority_when_serving(ip, port, self.pid))
        return ip, port

    async def normal_priority_when_serving(self, ip, port, pid, tries=1200):
        for _ in range(tries):
            try:
                _, writer = await asyncio.open_connection(ip or '127.0.0.1', port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.5)
        try:
            os.setpriority(os.PRIO_PGRP, pid, 0)
        except OSError:
            pass  # it ended meanwhile
        set_session_nice(pid, 0)


def set_session_nice(pid, nice):
    """The niceness of a session (Linux's autogroup), which ranks it among sessions: the
    server is one of its own. Nothing where autogroups are off."""
    try:
        with open(f'/proc/{pid}/autogroup', 'w') as f:
            f.write(str(nice))
    except OSError:
        pass
"#;
