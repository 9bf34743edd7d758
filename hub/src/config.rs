//! `jupyterhub_config.py`, written from the class at every start.

use crate::limits::MemoryGroups;
use crate::shared::Shared;
use attention_lab_jupyter::kernel::KERNEL_NAME;

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
    let spawner = if class.demo {
        "jupyterhub.spawner.SimpleLocalProcessSpawner"
    } else {
        "jupyterhub.spawner.LocalProcessSpawner"
    };
    let spawner = match &class.memory {
        Some(groups) if !class.demo => format!(
            "{limited}\nc.JupyterHub.spawner_class = LimitedSpawner\n",
            limited = LIMITED_SPAWNER
                .replace("@PARENT@", &py(groups.parent.display().to_string()))
                .replace("@FILE@", &py(groups.limit_file))
                .replace("@BYTES@", &groups.bytes.to_string())
                .replace(
                    "@CPU@",
                    &groups
                        .cpu
                        .as_ref()
                        .map_or("None".to_owned(), |cpu| py(cpu.display().to_string()))
                )
        ),
        _ => format!("c.JupyterHub.spawner_class = {}\n", py(spawner)),
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
         c.Spawner.args = ['--MultiKernelManager.default_kernel_name={kernel}']\n\
         c.Spawner.start_timeout = 120\n\
         c.Spawner.http_timeout = 120\n\
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

/// LocalProcessSpawner with each student's server made in that student's memory group (the
/// group made, and its limit written, by the hub as root before the fork; the child joins it
/// before it drops to the student), and in their CPU group of v1's `cpu` hierarchy when there
/// is one (on v2 the memory group is the CPU group). Its kernels and their compiles are the
/// server's children, so they count against the same limit (past it, the kernel's OOM killer
/// ends one of them) and share the student's CPU weight.
const LIMITED_SPAWNER: &str = r#"import os
from jupyterhub.spawner import LocalProcessSpawner


class LimitedSpawner(LocalProcessSpawner):
    memory_parent = @PARENT@
    memory_file = @FILE@
    memory_bytes = @BYTES@
    cpu_parent = @CPU@

    def make_preexec_fn(self, name):
        group = os.path.join(self.memory_parent, name)
        os.makedirs(group, exist_ok=True)
        with open(os.path.join(group, self.memory_file), 'w') as f:
            f.write(str(self.memory_bytes))
        procs = [os.path.join(group, 'cgroup.procs')]
        if self.cpu_parent:
            cpu_group = os.path.join(self.cpu_parent, name)
            os.makedirs(cpu_group, exist_ok=True)
            procs.append(os.path.join(cpu_group, 'cgroup.procs'))
        drop_to_student = super().make_preexec_fn(name)

        def preexec():
            for path in procs:
                with open(path, 'w') as f:
                    f.write(str(os.getpid()))
            drop_to_student()

        return preexec
"#;
