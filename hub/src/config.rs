//! `jupyterhub_config.py`, written from the class at every start.

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
}

/// A Python string literal for `text` (JSON's escapes are Python's).
fn py(text: impl AsRef<str>) -> String {
    serde_json::to_string(text.as_ref()).expect("a string serializes")
}

/// The config's text.
///
/// ```
/// use attention_lab_hub::{config::{config, Class}, shared::Shared};
/// let class = Class { students: vec!["alice"], teacher: "teacher", ip: "", port: 8000, cull_after: 3600, demo: false };
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
         c.JupyterHub.spawner_class = {spawner}\n\
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
        spawner = py(spawner),
        singleuser = py(shared.venv().join("bin/jupyterhub-singleuser").display().to_string()),
        kernel = KERNEL_NAME,
        cull = class.cull_after,
    )
}
