//! `attention-lab hub --roster class.csv`: a class on one machine. A real JupyterHub
//! (the Python package, with configurable-http-proxy from npm) whose users are the roster's
//! students, each a system user with a private home, spawned by JupyterHub's
//! `LocalProcessSpawner` into JupyterLab with the "Rust (attention-lab)" kernel and a copy of
//! the lessons; the teacher is the admin. The teacher's set-up compiles the lessons' crates
//! once; each new student starts from hard links to them, so a first cell runs warm.
//!
//! - [`accounts`]: roster ids as system users, made and seeded;
//! - [`shared`]: the shared folder every student's server and kernel run from;
//! - [`config`]: writes `jupyterhub_config.py`;
//! - [`fsat`]: folders opened by descriptor, never through a link;
//! - [`grading`]: nbgrader's course and exchange, per-student sheets handed out and collected;
//! - [`limits`]: each student's memory cgroup;
//! - [`passwords`]: each account's first password, issued by root.
//!
//! ```
//! assert!(attention_lab_hub::accounts::system_name("alice"));
//! ```

pub mod accounts;
pub mod config;
pub mod fsat;
pub mod grading;
pub mod limits;
pub mod passwords;
pub mod shared;

use accounts::{Account, Pick};
use attention_lab_io::error::{print, warn, Error, Result};
use attention_lab_io::problem;
use attention_lab_jupyter::{build, process, supervise};
use shared::Shared;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The class to serve and how, as `hub`'s flags give it.
///
/// ```no_run
/// use attention_lab_hub::{run, Options};
/// let class = Options {
///     roster: "class.csv".into(),
///     teacher: "teacher".into(),
///     notebooks: "notebooks".into(),
///     dir: "/srv/attention-lab-hub".into(),
///     ip: String::new(),
///     port: 8000,
///     cull_idle: 3600,
///     mem_limit: 2 << 30,
///     pids_limit: 512,
///     setup_only: false,
///     hand_out: None,
///     collect: None,
///     single_user_demo: false,
///     new_password: Vec::new(),
/// };
/// let status = run(class)?; // JupyterHub's exit status, once it is stopped
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The class: a CSV with an `id` column (as `exercise --roster` reads); each id becomes a
    /// system user and a hub login.
    pub roster: PathBuf,
    /// The teacher's login (JupyterHub's admin), also a system user.
    pub teacher: String,
    /// The lessons each student gets a copy of.
    pub notebooks: PathBuf,
    /// The shared folder (toolchain, venv, sources, warm build; the hub's state, root only).
    pub dir: PathBuf,
    /// Address to serve on ("" for every interface, as a class needs; 127.0.0.1 for this
    /// machine alone).
    pub ip: String,
    /// Port to serve on.
    pub port: u16,
    /// Stop a server after this many seconds without activity (jupyterhub-idle-culler).
    pub cull_idle: u64,
    /// Most memory each student's server, kernels and compiles together may take (`2G`,
    /// `512M`; 0 for no limit). Past it the kernel's OOM killer ends one of that student's
    /// processes, never another's. Needs a writable memory cgroup (v1, or v2 delegated).
    pub mem_limit: u64,
    /// Most processes and threads each student's server, kernels and compiles together may
    /// have (0 for no limit): past it a fork fails in that student's pids cgroup, never
    /// another's. Needs a writable pids cgroup (v1, or v2 delegated).
    pub pids_limit: u64,
    /// Set everything up and make the accounts, then stop instead of serving.
    pub setup_only: bool,
    /// Put each student's sheet from DIR/sheets (`exercise --roster FILE --out DIR`) in
    /// their ~/attention-lab/sheet/, then stop (nbgrader releases one version to all).
    pub hand_out: Option<PathBuf>,
    /// Copy each student's answers, ~/attention-lab/sheet/ID.json, to DIR/ID.json for
    /// `attention-lab grade --answers DIR`, then stop.
    pub collect: Option<PathBuf>,
    /// Run every server as this one user (JupyterHub's SimpleLocalProcessSpawner), without
    /// system users: for a teacher alone, never a class (anyone could read anyone's files).
    pub single_user_demo: bool,
    /// Issue LOGIN (a student or the teacher) a new password, printed in the handout; the old
    /// one stops working. Repeat for several.
    pub new_password: Vec<String>,
}

/// Runs `attention-lab hub`; returns JupyterHub's exit status (128 + N when a signal N
/// stopped it). SIGINT, SIGTERM or SIGHUP stop JupyterHub, its proxy and every student's
/// server and kernel. JupyterHub ended by a crash or a kill is started again, and finds the
/// students' servers still running.
///
/// # Errors
/// A bad roster (nothing is made then), not root, a missing tool, a busy port, a failed
/// install, each in one line.
pub fn run(args: Options) -> Result<u8> {
    let students = accounts::class(&args.roster, &args.teacher)?;
    // From here a stop signal stops what runs below us (a set-up step, later JupyterHub)
    // before this process ends.
    process::become_subreaper();
    process::catch_stop_signals();
    let names: Vec<&str> = students.iter().map(|s| s.id.as_str()).collect();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if args.single_user_demo {
        warn(
            "attention-lab hub: --single-user-demo runs every server as this one user: any \
             student could read any other's files and the answer keys. For a teacher alone.",
        );
    } else if !root {
        return Err(problem!(
            "attention-lab hub must run as root to make a system user for each student \
             (or --single-user-demo, for a teacher alone)"
        ));
    } else {
        let mut all = names.clone();
        all.push(&args.teacher);
        accounts::check_free(&all)?;
    }
    if args.hand_out.is_some() || args.collect.is_some() {
        return exchange(&args, &names, root);
    }
    if !args.setup_only {
        drop(
            TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], args.port))).map_err(|e| {
                problem!(
                    "port {} is busy ({}); choose another with --port",
                    args.port,
                    attention_lab_io::error::io_text(&e)
                )
            })?,
        );
    }
    let class = set_up(&args, &students, &names)?;
    if args.setup_only {
        print(&class.handout)?;
        return Ok(0);
    }
    if !class.uids.is_empty() {
        watch_kernel_starts(class.uids.clone());
    }
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let served = serve(&class, addr);
    remove_groups(&class.limits);
    served
}

/// Removes the hub's cgroups (every student's, and its own), saying which stayed.
fn remove_groups(limits: &[limits::Limit]) {
    for limit in limits {
        for left in limit.remove() {
            warn(&format!(
                "attention-lab hub: {} still has processes: left in place",
                left.display()
            ));
        }
    }
}

/// `--hand-out` and `--collect`: each student's sheet out, or their answers in, as that
/// student; returns 1 when some student had nothing to collect.
fn exchange(args: &Options, names: &[&str], root: bool) -> Result<u8> {
    if !root || args.single_user_demo {
        return Err(problem!(
            "--hand-out and --collect run as root, as each student in turn (with system users, not --single-user-demo)"
        ));
    }
    let accounts = names
        .iter()
        .map(|name| {
            accounts::lookup(name).ok_or_else(|| {
                problem!("{name}: no such user yet; run attention-lab hub --roster first")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let missing = match (&args.hand_out, &args.collect) {
        (Some(dir), _) => grading::hand_out(&accounts, dir)?,
        (_, Some(dir)) => grading::collect(&accounts, dir)?,
        _ => 0,
    };
    Ok(u8::from(missing > 0))
}

/// A class set up and ready to serve.
struct SetUp {
    shared: Shared,
    config_file: PathBuf,
    /// What the teacher hands out.
    handout: String,
    /// The class's users (none in a demo), whose kernels' starts the hub watches.
    uids: Vec<u32>,
    /// The students' memory and pids groups, those the hub could make.
    limits: Vec<limits::Limit>,
}

/// The shared folder, every account (with its home seeded once), the memory groups and
/// JupyterHub's config; stops here (as killed by it) when a stop signal came meanwhile.
fn set_up(
    args: &Options,
    students: &[attention_lab_classroom::student::Student],
    names: &[&str],
) -> Result<SetUp> {
    let shared = Shared::new(&args.dir);
    shared::prepare(&shared, &args.notebooks)?;
    // nbgrader's settings go into the venv that `prepare` made (grading reads `Shared`, so
    // `shared` may not call it).
    grading::prepare(&shared)?;
    let mut made = Vec::new();
    let mut uids = Vec::new();
    if args.single_user_demo {
        for name in names.iter().chain([&args.teacher.as_str()]) {
            demo_home(&shared, name)?;
        }
    } else {
        accounts::ensure_group()?;
        for name in names.iter().chain([&args.teacher.as_str()]) {
            let (account, new) = accounts::ensure_user(name)?;
            uids.push(account.uid);
            if new {
                seed_student(&shared, &account)?;
                made.push(account.name.clone());
            } else {
                reseed_if_stale(&shared, &account)?;
            }
            seeded(&shared, &account)?;
            if name == &args.teacher.as_str() {
                grading::course(&account)?;
                grading::exchange(&shared, &account)?;
            }
        }
    }
    let limits = if args.single_user_demo || args.setup_only {
        Vec::new()
    } else {
        make_groups(args.mem_limit, args.pids_limit)?
    };
    let class = config::Class {
        students: names.to_vec(),
        teacher: &args.teacher,
        ip: &args.ip,
        port: args.port,
        cull_after: args.cull_idle,
        demo: args.single_user_demo,
        limits: limits.clone(),
    };
    let config_file = shared.state().join("jupyterhub_config.py");
    attention_lab_io::error::write_file(&config_file, config::config(&shared, &class).as_bytes())?;
    let mut accounts = names.to_vec();
    accounts.push(&args.teacher);
    for name in &args.new_password {
        if !accounts.contains(&name.as_str()) {
            return Err(problem!(
                "--new-password {name}: not in the roster and not the teacher"
            ));
        }
    }
    let mut renew: Vec<&str> = made.iter().map(String::as_str).collect();
    renew.extend(args.new_password.iter().map(String::as_str));
    let issued = passwords::issue(&shared, &accounts, &renew)?;
    let handout = handout(args, students, &made, &issued);
    if let Some(signal) = process::stop_signal() {
        remove_groups(&limits);
        process::die_of(signal);
    }
    Ok(SetUp {
        shared,
        config_file,
        handout,
        uids,
        limits,
    })
}

/// The students' memory groups (each `mem_limit` bytes, the sum capped at
/// [`limits::class_cap`] of the machine) and pids groups (`pids_limit` each), those that can
/// be made here; a warning for each that cannot.
fn make_groups(mem_limit: u64, pids_limit: u64) -> Result<Vec<limits::Limit>> {
    use limits::Controller;
    let root = Path::new("/sys/fs/cgroup");
    let cap = limits::class_cap(limits::machine_memory());
    let mut made = Vec::new();
    for (controller, value, cap, flag) in [
        (Controller::Memory, mem_limit, cap, "--mem-limit"),
        (Controller::Pids, pids_limit, 0, "--pids-limit"),
    ] {
        if value == 0 {
            continue;
        }
        match limits::prepare(root, controller, value, cap)? {
            Some(limit) => made.push(limit),
            None => warn(&format!(
                "attention-lab hub: no writable {controller:?} cgroup here: students are not \
                 limited ({flag})"
            )),
        }
    }
    Ok(made)
}

/// Serves until a stop signal, a teacher's "Shut down hub" or a crash loop; every process
/// below us is stopped then.
fn serve(class: &SetUp, addr: SocketAddr) -> Result<u8> {
    let (shared, config_file) = (&class.shared, &class.config_file);
    let start = || {
        Command::new(shared.venv().join("bin/jupyterhub"))
            .arg("-f")
            .arg(config_file)
            .current_dir(shared.state())
            .env("PATH", path_with(&shared.venv().join("bin")))
            .stdin(Stdio::null())
            // Its proxy logs to stdout: our stdout is the handout alone.
            .stdout(std::io::stderr())
            .process_group(0)
            .spawn()
            .map_err(|e| {
                supervise::stop_leftovers();
                problem!(
                    "cannot start JupyterHub: {}",
                    attention_lab_io::error::io_text(&e)
                )
            })
    };
    let mut child = start()?;
    await_hub(&mut child, addr, &class.limits)?;
    if let Err(e) = print(&class.handout) {
        supervise::stop_server(&mut child, "JupyterHub");
        return Err(e);
    }
    let mut crashes: Vec<Instant> = Vec::new();
    loop {
        let code = watch(&mut child, &class.limits)?;
        crashes.retain(|t| t.elapsed() < RESTART_WINDOW);
        // Exit 0 is a teacher's "Shut down hub"; a crash loop is no class either.
        if code == 0 || crashes.len() >= RESTARTS {
            if code != 0 {
                warn(&format!(
                    "attention-lab hub: JupyterHub ended {} times in {} s (status {code}); \
                     stopping every student's server",
                    RESTARTS + 1,
                    RESTART_WINDOW.as_secs()
                ));
            }
            supervise::stop_leftovers();
            return Ok(code);
        }
        crashes.push(Instant::now());
        stop_helpers();
        warn(&format!(
            "attention-lab hub: JupyterHub ended (status {code}); starting it again \
             (students' servers keep running)"
        ));
        child = start()?;
        await_hub(&mut child, addr, &class.limits)?;
    }
}

/// On a stop signal: JupyterHub and everything below us stopped, then the hub's cgroups
/// removed, then this process ended by that signal (as `supervise`'s waits end it, which
/// would leave the groups behind).
fn stop_if_signalled(child: &mut std::process::Child, limits: &[limits::Limit]) {
    if let Some(signal) = process::stop_signal() {
        supervise::stop_server(child, "JupyterHub");
        remove_groups(limits);
        process::die_of(signal);
    }
}

/// Waits for JupyterHub to answer on `addr` (at most 180 s), or a stop signal.
///
/// # Errors
/// It ended first (everything below us is stopped), or did not answer in time (stopped).
fn await_hub(
    child: &mut std::process::Child,
    addr: SocketAddr,
    limits: &[limits::Limit],
) -> Result<()> {
    let started = Instant::now();
    while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        stop_if_signalled(child, limits);
        if let Ok(Some(status)) = child.try_wait() {
            supervise::stop_leftovers();
            return Err(problem!("JupyterHub stopped before serving ({status})"));
        }
        if started.elapsed() > Duration::from_secs(180) {
            supervise::stop_server(child, "JupyterHub");
            return Err(problem!(
                "JupyterHub did not answer on port {} in 180 s",
                addr.port()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Waits for JupyterHub to end (its status, 128 + N for a signal N), reaping orphans
/// re-parented to us meanwhile; a stop signal ends the class ([`stop_if_signalled`]).
///
/// # Errors
/// Waiting for it failed (it is stopped).
fn watch(child: &mut std::process::Child, limits: &[limits::Limit]) -> Result<u8> {
    use std::os::unix::process::ExitStatusExt;
    for round in 0u64.. {
        stop_if_signalled(child, limits);
        match child.try_wait() {
            Ok(Some(status)) => {
                let code = status.code().or_else(|| status.signal().map(|s| 128 + s));
                return Ok(code.map_or(1, |code| u8::try_from(code).unwrap_or(1)));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                supervise::stop_server(child, "JupyterHub");
                return Err(problem!(
                    "waiting for JupyterHub: {}",
                    attention_lab_io::error::io_text(&e)
                ));
            }
        }
        // Orphans re-parented to us (a restarted kernel's children) would stay zombies.
        if round % 50 == 49 {
            process::reap_orphans(child.id());
        }
    }
    unreachable!("the loop ends by returning")
}

/// Gives each kernel of the class, which starts at a low priority (see
/// `attention_lab_jupyter::priority`), the normal priority back once it has started: a thread
/// that looks ten times a second for as long as the hub serves.
fn watch_kernel_starts(uids: Vec<u32>) {
    let mut starts = attention_lab_jupyter::priority::Starts::new(move |uid| uids.contains(&uid));
    let _ = std::thread::Builder::new()
        .name("kernel-starts".into())
        .spawn(move || loop {
            starts.look();
            std::thread::sleep(Duration::from_millis(100));
        });
}

/// Stops what a crashed JupyterHub left besides the students' servers: its proxy and idle
/// culler, which the next JupyterHub starts afresh (two cullers would both run, and the
/// old proxy holds the port).
fn stop_helpers() {
    let helpers: Vec<u32> = process::descendants()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| {
                let cmd = String::from_utf8_lossy(&cmd);
                cmd.contains("configurable-http-proxy") || cmd.contains("jupyterhub_idle_culler")
            })
        })
        .collect();
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        process::signal_all(&helpers, signal);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(2)
            && helpers
                .iter()
                .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
        {
            process::reap_exited();
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    process::reap_exited();
}

/// JupyterHub, ended other than by a teacher's "Shut down hub", is started again, its
/// students' servers untouched (`cleanup_servers = False`), as systemd restarts a Littlest
/// JupyterHub; at most this many times within [`RESTART_WINDOW`].
const RESTARTS: usize = 3;
/// See [`RESTARTS`].
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// `PATH` with `dir` first (JupyterHub finds its services' Python there).
fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_owned()];
    if let Some(old) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&old));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

/// A new student's home: the lessons in `~/attention-lab`, and the warm build folder and
/// compiled crates below `~/.cache`, whose compiled files are hard links to the shared ones.
fn seed_student(shared: &Shared, account: &Account) -> Result<()> {
    accounts::seed(
        &shared.notebooks(),
        &account.home.join("attention-lab"),
        account,
        &|_| Pick::Copy,
    )?;
    let cache = account.home.join(".cache");
    accounts::owned_dir(&cache, account)?;
    let warm = shared.warm();
    // The warm replay ran with `warm` as its XDG cache folder, as a kernel runs with `~/.cache`.
    let built = build::warm_build(&warm.join(attention_lab_io::cache::FOLDER));
    if built.is_dir() {
        let ours = cache.join(attention_lab_io::cache::FOLDER);
        accounts::owned_dir(&ours, account)?;
        let builds = build::kernel_builds(&ours);
        accounts::owned_dir(&builds, account)?;
        accounts::seed(
            &built,
            &build::slot(&builds, 0),
            account,
            &build::build_pick,
        )?;
    }
    let crates = warm.join("evcxr");
    if crates.is_dir() {
        // evcxr rewrites each entry's `hits` on every use: that file is the student's own.
        let pick = |p: &Path| match p.file_name().is_some_and(|n| n == "hits") {
            true => Pick::Copy,
            false => Pick::Link,
        };
        accounts::seed(&crates, &cache.join("evcxr"), account, &pick)?;
    }
    Ok(())
}

/// Where the hub notes which warm build an account's build folder was seeded from (root's).
fn seeded_marker(shared: &Shared, account: &Account) -> PathBuf {
    shared.state().join("seeded").join(&account.name)
}

/// Notes that `account`'s build folder now starts from the current warm build.
fn seeded(shared: &Shared, account: &Account) -> Result<()> {
    let marker = seeded_marker(shared, account);
    let key = shared::warm_key_written(shared);
    let dir = shared.state().join("seeded");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), "create", e))?;
    attention_lab_io::error::write_file(&marker, key.as_bytes())
}

/// An account made before the warm build was redone (an upgrade of the hub, new lessons)
/// gets a build folder from the new one ([`accounts::reseed_build`]); its compiled cells
/// would otherwise all be rebuilt.
fn reseed_if_stale(shared: &Shared, account: &Account) -> Result<()> {
    let key = shared::warm_key_written(shared);
    let marker = seeded_marker(shared, account);
    if key.is_empty() || std::fs::read_to_string(&marker).is_ok_and(|k| k == key) {
        return Ok(());
    }
    let built = build::warm_build(&shared.warm().join(attention_lab_io::cache::FOLDER));
    if !built.is_dir() {
        return Ok(());
    }
    if !accounts::reseed_build(&built, account)? {
        warn(&format!(
            "attention-lab hub: {}: a folder of ~/.cache/{}/ is not theirs or a link: build \
             folder left as it is",
            account.name,
            attention_lab_io::cache::FOLDER
        ));
    }
    Ok(())
}

/// `--single-user-demo`: a home below the shared folder for each login, with the lessons.
fn demo_home(shared: &Shared, name: &str) -> Result<()> {
    let home = shared.root().join("demo").join(name);
    std::fs::create_dir_all(&home).map_err(|e| Error::io(home.display(), "create", e))?;
    let lessons = home.join("attention-lab");
    if lessons.exists() {
        return Ok(());
    }
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let me = Account {
        name: name.to_owned(),
        uid,
        gid,
        home,
    };
    accounts::seed(&shared.notebooks(), &lessons, &me, &|_| Pick::Copy)
}

/// What the teacher hands out: the address, and each student's login.
fn handout(
    args: &Options,
    students: &[attention_lab_classroom::student::Student],
    made: &[String],
    issued: &std::collections::BTreeMap<String, String>,
) -> String {
    let host = if args.ip.is_empty() {
        hostname()
    } else {
        args.ip.clone()
    };
    let url = format!("http://{host}:{}/hub/login", args.port);
    let mut text = format!(
        "JupyterHub for {} students: {url}\n\
         teacher: sign in as {:?} (admin: Admin page, every server), {}\n\
         Passwords are printed once, by the run that issued them; anyone may change their own at\n\
         http://{host}:{port}/hub/auth/change-password. Hand each student their line:\n",
        students.len(),
        args.teacher,
        passwords::handout_line(issued.get(&args.teacher).map(String::as_str)),
        port = args.port,
    );
    for student in students {
        let name = if student.name.is_empty() {
            String::new()
        } else {
            format!(" ({})", student.name)
        };
        let password = passwords::handout_line(issued.get(&student.id).map(String::as_str));
        text.push_str(&format!("  {url}  user {}{name}  {password}\n", student.id));
    }
    if !made.is_empty() {
        text.push_str(&format!(
            "made {} system users: {}\n",
            made.len(),
            made.join(", ")
        ));
    }
    text
}

/// This machine's name, as students' browsers reach it (`localhost` when unknown).
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(0);
    if ok && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".to_owned()
    }
}
