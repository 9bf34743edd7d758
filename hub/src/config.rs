//! `jupyterhub_config.py`, written from the class at every start.

use crate::limits::Limit;
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
    /// Each student's server (with its kernels) in a cgroup of its own for each of these
    /// (memory, pids), so limited.
    pub limits: Vec<Limit>,
}

/// A Python string literal for `text` (JSON's escapes are Python's).
fn py(text: impl AsRef<str>) -> String {
    serde_json::to_string(text.as_ref()).expect("a string serializes")
}

/// The config's text.
///
/// ```
/// use attention_lab_hub::{config::{config, Class}, shared::Shared};
/// let class = Class { students: vec!["alice"], teacher: "teacher", ip: "", port: 8000, cull_after: 3600, demo: false, limits: Vec::new() };
/// let text = config(&Shared::new("/srv/h"), &class);
/// assert!(text.contains("c.Authenticator.allowed_users = {\"alice\"}"));
/// assert!(text.contains("LocalProcessSpawner"));
/// ```
pub fn config(shared: &Shared, class: &Class) -> String {
    let state = shared.state();
    let at = |name: &str| py(state.join(name).display().to_string());
    let users = class.students.iter().map(py).collect::<Vec<_>>().join(", ");
    let spawner = if class.demo {
        "c.JupyterHub.spawner_class = 'jupyterhub.spawner.SimpleLocalProcessSpawner'\n".to_owned()
    } else {
        let limits: Vec<String> = class
            .limits
            .iter()
            .map(|l| {
                format!(
                    "({}, {}, {})",
                    py(l.parent.display().to_string()),
                    py(l.file),
                    l.value
                )
            })
            .collect();
        format!(
            "{class_spawner}\nc.JupyterHub.spawner_class = ClassSpawner\n",
            class_spawner = CLASS_SPAWNER
                .replace("@LIMITS@", &format!("[{}]", limits.join(", ")))
                .replace("@NICE@", &priority::START_NICE.to_string())
        )
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
         {authenticator}\
         c.JupyterHub.authenticator_class = ClassAuthenticator\n\
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
        authenticator = CLASS_AUTHENTICATOR,
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

/// firstuseauthenticator for a class, whose passwords root issued (`passwords`):
/// - changing a password (`/hub/auth/change-password`) needs the current one (firstuse's
///   own form asks only for the new one: anyone at a browser left signed in could take the
///   account);
/// - deleting a user in the Admin page keeps their password (firstuse's drops it, and the
///   account would be anyone's who signed in first once it is added again).
const CLASS_AUTHENTICATOR: &str = r#"import bcrypt
import dbm
from firstuseauthenticator.firstuseauthenticator import CustomLoginHandler, FirstUseAuthenticator
from jupyterhub.handlers import BaseHandler
from tornado import web

CHANGE_PASSWORD_PAGE = """{% extends "page.html" %}
{% block main %}
<div class="container">
  <form method="post" role="form">
    <input type="hidden" name="_xsrf" value="{{ xsrf_token }}"/>
    <h2>Change password</h2>
    <div class="form-group">
      <label for="current_password">Current password:</label>
      <input type="password" class="form-control" name="current_password" id="current_password" autocomplete="current-password"/>
    </div>
    <div class="form-group">
      <label for="password">New password:</label>
      <input type="password" class="form-control" name="password" id="password" autocomplete="new-password"/>
    </div>
    <input type="submit" id="change_submit" class="btn btn-jupyter" value="Change password"/>
  </form>
  {% if message %}
  <div class="alert alert-{{ 'success' if changed else 'danger' }}" role="alert">{{ message }}</div>
  {% endif %}
</div>
{% endblock %}
"""


class ChangePasswordHandler(BaseHandler):
    async def page(self, message=None, changed=False):
        ns = dict(self.template_namespace, xsrf_token=self.xsrf_token.decode("ascii"),
                  message=message, changed=changed)
        return await self.settings["jinja2_env"].from_string(CHANGE_PASSWORD_PAGE).render_async(**ns)

    @web.authenticated
    async def get(self):
        self.finish(await self.page())

    @web.authenticated
    async def post(self):
        name = self.current_user.name
        current = self.get_body_argument("current_password", "", strip=False)
        new = self.get_body_argument("password", "", strip=False)
        if not self.authenticator.check_password(name, current):
            self.log.warning("change of %s's password refused: the current password is not right", name)
            self.set_status(403)
            self.finish(await self.page("The current password is not right: nothing changed."))
            return
        message = self.authenticator.reset_password(name, new)
        changed = "success" in message
        if not changed:
            self.set_status(400)
        self.finish(await self.page(message, changed))


class ClassAuthenticator(FirstUseAuthenticator):
    def check_password(self, name, password):
        with dbm.open(self.dbm_path, "c", 0o600) as db:
            stored = db.get(name.encode("utf8"))
        return stored is not None and bcrypt.checkpw(password.encode("utf8"), stored)

    def delete_user(self, user):
        """The password root issued stays: the account, added again, signs in with it."""

    def get_handlers(self, app):
        return [(r"/login", CustomLoginHandler), (r"/auth/change-password", ChangePasswordHandler)]


"#;

/// LocalProcessSpawner for a class:
/// - each student's server is made in that student's memory and pids groups when there are
///   some (each group made, and its limit written, by the hub as root before the fork; the
///   child joins them before it drops to the student). Its kernels and their compiles are
///   the server's children, so they count against the same limits: past the memory one, the
///   kernel's OOM killer ends one of them; past the pids one, a fork fails in that student's
///   group alone;
/// - it starts at the niceness [`START_NICE`](attention_lab_jupyter::priority::START_NICE), its session too (Linux shares the CPU between
///   sessions first, and the server is one), and is given the normal priority back (by the
///   hub, as root) once it answers on its port: a class whose servers all start in the same
///   minute then starts them with what the students already working leave idle.
const CLASS_SPAWNER: &str = r#"import asyncio
import os
import pwd
from jupyterhub.spawner import LocalProcessSpawner


class ClassSpawner(LocalProcessSpawner):
    # (the hub's group, the limit's file, the limit) of each controller: memory, pids
    limits = @LIMITS@
    start_nice = @NICE@

    def make_preexec_fn(self, name):
        procs = []
        for parent, file, value in self.limits:
            group = os.path.join(parent, name)
            os.makedirs(group, exist_ok=True)
            with open(os.path.join(group, file), 'w') as f:
                f.write(str(value))
            procs.append(os.path.join(group, 'cgroup.procs'))
        drop_to_student = super().make_preexec_fn(name)

        def preexec():
            for path in procs:
                with open(path, 'w') as f:
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
