//! The flags of `hub`.

use attention_lab_hub::{self as hub, Options};
use clap::Args;
use std::path::PathBuf;

/// `attention-lab hub`
#[derive(Debug, Args)]
pub struct HubArgs {
    /// The class: a CSV with an `id` column (as `exercise --roster` reads); each id becomes a
    /// system user and a hub login.
    #[arg(long, value_name = "FILE")]
    pub roster: PathBuf,
    /// The teacher's login (JupyterHub's admin), also a system user.
    #[arg(long, default_value = "teacher")]
    pub teacher: String,
    /// The lessons each student gets a copy of.
    #[arg(long, default_value = "notebooks")]
    pub notebooks: PathBuf,
    /// The shared folder (toolchain, venv, sources, warm build; the hub's state, root only).
    #[arg(long, value_name = "DIR", default_value = "/srv/attention-lab-hub")]
    pub dir: PathBuf,
    /// Address to serve on ("" for every interface, as a class needs; 127.0.0.1 for this
    /// machine alone).
    #[arg(long, default_value = "")]
    pub ip: String,
    /// Port to serve on.
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Stop a server after this many seconds without activity (jupyterhub-idle-culler).
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    pub cull_idle: u64,
    /// Most memory each student's server, kernels and compiles together may take (`2G`,
    /// `512M`; 0 for no limit). Past it the kernel's OOM killer ends one of that student's
    /// processes, never another's. Needs a writable memory cgroup (v1, or v2 delegated).
    #[arg(long, value_name = "SIZE", default_value = "2G", value_parser = hub::limits::parse_size)]
    pub mem_limit: u64,
    /// Most processes and threads each student's server, kernels and compiles together may
    /// have (0 for no limit): past it a fork fails in that student's pids cgroup, never
    /// another's. Needs a writable pids cgroup (v1, or v2 delegated).
    #[arg(long, value_name = "N", default_value_t = hub::limits::PIDS)]
    pub pids_limit: u64,
    /// Set everything up and make the accounts, then stop instead of serving.
    #[arg(long)]
    pub setup_only: bool,
    /// Put each student's sheet from DIR/sheets (`exercise --roster FILE --out DIR`) in
    /// their ~/attention-lab/sheet/, then stop (nbgrader releases one version to all).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["collect", "setup_only"])]
    pub hand_out: Option<PathBuf>,
    /// Copy each student's answers, ~/attention-lab/sheet/ID.json, to DIR/ID.json for
    /// `attention-lab grade --answers DIR`, then stop.
    #[arg(long, value_name = "DIR", conflicts_with = "setup_only")]
    pub collect: Option<PathBuf>,
    /// Run every server as this one user (JupyterHub's SimpleLocalProcessSpawner), without
    /// system users: for a teacher alone, never a class (anyone could read anyone's files).
    #[arg(long)]
    pub single_user_demo: bool,
    /// Issue LOGIN (a student or the teacher) a new password, printed in the handout; the old
    /// one stops working. Repeat for several.
    #[arg(long, value_name = "LOGIN")]
    pub new_password: Vec<String>,
}

impl From<HubArgs> for Options {
    fn from(args: HubArgs) -> Options {
        let HubArgs {
            roster,
            teacher,
            notebooks,
            dir,
            ip,
            port,
            cull_idle,
            mem_limit,
            pids_limit,
            setup_only,
            hand_out,
            collect,
            single_user_demo,
            new_password,
        } = args;
        Options {
            roster,
            teacher,
            notebooks,
            dir,
            ip,
            port,
            cull_idle,
            mem_limit,
            pids_limit,
            setup_only,
            hand_out,
            collect,
            single_user_demo,
            new_password,
        }
    }
}
