//! The compiled-cell cache: a notebook cell that would compile to the same library as a cell
//! compiled before is loaded from the cache, and rustc is not run.
//!
//! evcxr compiles each cell as a crate `ctx` with cargo, which runs the kernel's own binary as
//! its rustc wrapper. There, [`serve`] takes rustc's seat for that one crate:
//! - it computes the cell's [key](key::key) from everything that shapes the library (the
//!   compiler, the arguments, the generated source, the compiled dependencies' bytes);
//! - it looks the key up in the trusted shared stores ([`SHARED_VAR`], written by a hub's
//!   set-up as root), then in the user's own ([`OWN_VAR`]), and checks the entry (owners,
//!   modes, every file's SHA-256, what the source read) before writing its files where rustc
//!   would have and printing what rustc printed;
//! - otherwise it runs rustc, and stores what it made in the user's own store (a cell whose
//!   own code does not compile too: evcxr compiles such cells again and again as it fixes
//!   them, and their errors are the source's alone).
//!
//! Cargo stays in charge of everything else: it rebuilds a changed dependency before it asks
//! for the cell, so the key always sees the dependency the cell is linked with.
//!
//! Nothing in the cache can fail a cell: a store that is missing, full, read-only or not
//! trusted, or an entry that fails a check (or is larger than an entry may be, say a sparse
//! file: nothing past the caps is read), only means compiling as before, with one line of
//! warning per kernel ([`LOG_VAR`]). Each lookup adds a line to `cells.log` in the build folder
//! (see [`Trace`]).
//!
//! ```
//! use attention_lab_cells::{store::Store, Cache};
//! let cache = Cache::new(Some(Store::new("/home/ann/.cache/attention-lab/cells")), vec![], 1 << 30);
//! assert_eq!(cache.stores().count(), 1);
//! ```

pub mod canonical;
pub mod entry;
pub mod files;
pub mod invocation;
pub mod key;
pub mod store;

use entry::{Compiled, Entry};
use invocation::Invocation;
use key::Digest32;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use store::{Refused, Store};

/// The user's own store, written by their kernels (`off` turns the cache off; unset, the
/// kernel sets `CACHE/cells`).
pub const OWN_VAR: &str = "ATTENTION_LAB_CELLS";
/// Stores that a trusted user wrote (a hub's set-up, as root), read first and never written;
/// several are separated by `:`.
pub const SHARED_VAR: &str = "ATTENTION_LAB_CELLS_SHARED";
/// The size cap of the own store in MiB ([`DEFAULT_MIB`] when unset).
pub const MIB_VAR: &str = "ATTENTION_LAB_CELLS_MIB";
/// A file that takes the kernel's one line of warning (the kernel names its own stderr).
pub const LOG_VAR: &str = "ATTENTION_LAB_CELLS_LOG";
/// The niceness rustc compiles a cell at, when set (a hub sets it): a compile that the cache
/// could not spare takes the CPU the others' cells leave idle, not theirs.
pub const COMPILE_NICE_VAR: &str = "ATTENTION_LAB_COMPILE_NICE";
/// The own store's default cap: about 2,000 lesson cells.
pub const DEFAULT_MIB: u64 = 1024;

/// Where evcxr looks for the path of the library it should load (its wrapper writes it).
const EXECUTION_SO_VAR: &str = "EVCXR_EXECUTION_SO_PATH";
/// Set when evcxr rewrites rustc's arguments itself (dependencies as dylibs): not cached.
const FORCE_DYLIB_VAR: &str = "EVCXR_FORCE_DYLIB";
/// The trace of the kernel's lookups, in its build folder.
const TRACE_FILE: &str = "cells.log";
/// Present once the kernel has had its one warning.
const WARNED_FILE: &str = "cells.warned";

/// The stores a kernel looks in, and the cap of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    own: Option<Store>,
    shared: Vec<Store>,
    cap: u64,
}

/// How a cell's library came to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    /// Loaded from the store in this folder.
    Loaded(PathBuf),
    /// Compiled by rustc; `stored` says whether the own store took it.
    Compiled {
        /// Whether the entry is in the own store now.
        stored: bool,
    },
}

/// What answering rustc's invocation gave: what rustc would have returned and printed.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// rustc's exit status.
    pub status: i32,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
    /// The cell's key, when it could be computed.
    pub key: Option<Digest32>,
    /// Loaded or compiled.
    pub how: How,
    /// What went wrong in the cache along the way (the compile went on as before).
    pub trouble: Vec<String>,
}

impl Cache {
    /// A cache of the own store `own` (`None`: nothing is stored), the trusted `shared` ones
    /// and a cap of `cap` bytes on the own store.
    pub fn new(own: Option<Store>, shared: Vec<Store>, cap: u64) -> Cache {
        Cache { own, shared, cap }
    }

    /// The cache the environment describes ([`OWN_VAR`], [`SHARED_VAR`], [`MIB_VAR`]);
    /// `None` when it is off (the own store unset or `off`, and no shared one).
    ///
    /// ```
    /// std::env::set_var(attention_lab_cells::OWN_VAR, "off");
    /// std::env::remove_var(attention_lab_cells::SHARED_VAR);
    /// assert!(attention_lab_cells::Cache::from_env().is_none());
    /// ```
    pub fn from_env() -> Option<Cache> {
        let own = std::env::var_os(OWN_VAR)
            .filter(|v| !v.is_empty() && v != "off")
            .map(Store::new);
        let shared: Vec<Store> = std::env::var_os(SHARED_VAR)
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(Store::new)
                    .collect()
            })
            .unwrap_or_default();
        let mib = std::env::var(MIB_VAR)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(DEFAULT_MIB);
        (own.is_some() || !shared.is_empty()).then(|| Cache::new(own, shared, mib << 20))
    }

    /// The stores in the order they are searched: the shared ones, then the own one.
    pub fn stores(&self) -> impl Iterator<Item = &Store> {
        self.shared.iter().chain(self.own.as_ref())
    }

    /// Answers rustc's invocation `cell` for the compiler at `rustc`: loads the cell's
    /// library from a store, or compiles it and stores it.
    pub fn compile(&self, rustc: &Path, cell: &Invocation) -> Outcome {
        let mut trouble = Vec::new();
        let memo = self.own.as_ref().map(Store::memo);
        let key = key::rustc_identity(rustc, memo.as_deref())
            .and_then(|id| key::key(cell, &id))
            .map_err(|e| trouble.push(format!("cannot make the cell's key: {e}")))
            .ok();
        let failure = key.and_then(|key| key::failure_key(&key, cell).ok());
        for key in key.iter().chain(&failure) {
            if let Some(loaded) = self.load(key, cell, &mut trouble) {
                return loaded;
            }
        }
        let ran = run_rustc(rustc, &cell.args, &cell.build);
        let (status, compiled) = match ran {
            Ok(output) => (
                output.status.code().unwrap_or(1),
                Compiled {
                    stdout: output.stdout,
                    stderr: output.stderr,
                },
            ),
            Err(e) => {
                let text = format!("error: could not run {}: {e}\n", rustc.display());
                let compiled = Compiled {
                    stdout: Vec::new(),
                    stderr: text.into_bytes(),
                };
                (1, compiled)
            }
        };
        let mut stored = false;
        let source = cell
            .source
            .strip_prefix(&cell.build)
            .unwrap_or(&cell.source);
        let storable = compiled.is_storable(status, &source.to_string_lossy());
        let key = if status == 0 { key } else { failure };
        if let (true, Some(key), Some(own)) = (storable, &key, &self.own) {
            let saved = Entry::of_compile(cell, key, status, &compiled)
                .and_then(|entry| own.save(key, &entry));
            match saved {
                Ok(()) => {
                    stored = true;
                    let _ = own.evict(self.cap);
                }
                Err(e) => trouble.push(format!(
                    "{}: cannot store the cell: {e}",
                    own.root().display()
                )),
            }
        }
        Outcome {
            status,
            stdout: compiled.stdout,
            stderr: compiled.stderr,
            key,
            how: How::Compiled { stored },
            trouble,
        }
    }

    /// The first store's entry of `key` that passes every check, written into place.
    fn load(
        &self,
        key: &Digest32,
        cell: &Invocation,
        trouble: &mut Vec<String>,
    ) -> Option<Outcome> {
        for store in self.stores() {
            let own = Some(store) == self.own.as_ref();
            let entry = match store.load(key) {
                Ok(Some(entry)) => entry,
                Ok(None) => continue,
                Err(refused) => {
                    trouble.push(format!(
                        "{}: {refused}; compiling the cell",
                        store.root().display()
                    ));
                    if own && matches!(refused, Refused::Corrupt(_)) {
                        store.remove(key);
                    }
                    continue;
                }
            };
            // What the source read besides itself changed: the same key, another library.
            if !Entry::is_current(&entry.manifest, cell) {
                if own {
                    store.remove(key);
                }
                continue;
            }
            match entry.restore(cell) {
                Ok((stdout, stderr)) => {
                    if own {
                        store.touch(key);
                    }
                    return Some(Outcome {
                        status: entry.manifest.status,
                        stdout: stdout.into_bytes(),
                        stderr: stderr.into_bytes(),
                        key: Some(*key),
                        how: How::Loaded(store.root().to_owned()),
                        trouble: std::mem::take(trouble),
                    });
                }
                Err(e) => trouble.push(format!(
                    "{}: cannot write the cell's library: {e}",
                    cell.out_dir.display()
                )),
            }
        }
        None
    }
}

/// Runs rustc with `args` in `build`, its output captured; rustc dies with this process.
fn run_rustc(rustc: &Path, args: &[String], build: &Path) -> std::io::Result<std::process::Output> {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(rustc);
    command.args(args).current_dir(build);
    let nice = std::env::var(COMPILE_NICE_VAR)
        .ok()
        .and_then(|v| v.parse::<i32>().ok());
    // SAFETY: prctl and setpriority are async-signal-safe and touch only this (forked)
    // process.
    unsafe {
        command.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if let Some(nice) = nice {
                libc::setpriority(libc::PRIO_PROCESS, 0, nice);
            }
            Ok(())
        });
    }
    command.output()
}

/// In cargo's rustc wrapper (this process: `WRAPPER RUSTC ARGS...`), with the cache on and a
/// cell to compile: answers for rustc and exits with its status. Elsewhere returns at once,
/// and the caller runs rustc as before.
pub fn serve() {
    if std::env::var_os(FORCE_DYLIB_VAR).is_some() {
        return;
    }
    let Some(cache) = Cache::from_env() else {
        return;
    };
    let args: Vec<OsString> = std::env::args_os().collect();
    let Some((rustc, rest)) = invocation::wrapper_args(&args) else {
        return;
    };
    let Ok(build) = std::env::current_dir() else {
        return;
    };
    let Some(cell) = Invocation::parse(&rest, &build) else {
        return;
    };
    let outcome = cache.compile(Path::new(&rustc), &cell);
    // As evcxr's wrapper: the files first, then the messages that announce them.
    let _ = std::io::stdout().write_all(&outcome.stdout);
    let _ = std::io::stderr().write_all(&outcome.stderr);
    Trace::record(&cell.build, &outcome);
    if !outcome.trouble.is_empty() {
        warn_once(&cell.build, &outcome.trouble[0]);
    }
    if outcome.status == 0 {
        if let Some(file) = std::env::var_os(EXECUTION_SO_VAR) {
            let library = cell
                .out_dir
                .join(format!("lib{}.so", invocation::CELL_CRATE));
            let _ = fs::write(file, library.to_string_lossy().as_bytes());
        }
    }
    std::process::exit(outcome.status);
}

/// Writes `line` where [`LOG_VAR`] says, unless this kernel had its warning already.
fn warn_once(build: &Path, line: &str) {
    let marker = build.join(WARNED_FILE);
    let first = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker)
        .is_ok();
    let Some(log) = std::env::var_os(LOG_VAR) else {
        return;
    };
    if first {
        if let Ok(mut file) = fs::OpenOptions::new().append(true).open(log) {
            let _ = writeln!(file, "attention-lab: compiled-cell cache: {line}");
        }
    }
}

/// The kernel's lookups, one line each in `cells.log` of its build folder: `loaded KEY
/// FOLDER`, `compiled KEY stored`, `compiled KEY not-stored`, `compiled - not-stored` (no
/// key), and `failed KEY stored` or `failed KEY not-stored` for a compile that failed.
///
/// ```
/// use attention_lab_cells::Trace;
/// let dir = tempfile::tempdir()?;
/// Trace::start(dir.path());
/// assert_eq!(Trace::read(dir.path()), Trace::default());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Libraries loaded from a store.
    pub loaded: usize,
    /// Libraries compiled by rustc.
    pub compiled: usize,
}

impl Trace {
    /// A new kernel in `build`: an empty trace, and its one warning still to come.
    pub fn start(build: &Path) {
        let _ = fs::remove_file(build.join(TRACE_FILE));
        let _ = fs::remove_file(build.join(WARNED_FILE));
    }

    /// The counts of the trace in `build` so far.
    pub fn read(build: &Path) -> Trace {
        let text = fs::read_to_string(build.join(TRACE_FILE)).unwrap_or_default();
        let mut trace = Trace::default();
        for line in text.lines() {
            match line.split(' ').next() {
                Some("loaded") => trace.loaded += 1,
                Some("compiled" | "failed") => trace.compiled += 1,
                _ => {}
            }
        }
        trace
    }

    fn record(build: &Path, outcome: &Outcome) {
        let key = outcome
            .key
            .map(|k| k.to_string())
            .unwrap_or_else(|| "-".into());
        let verb = if outcome.status == 0 {
            "compiled"
        } else {
            "failed"
        };
        let line = match &outcome.how {
            How::Loaded(from) => format!("loaded {key} {}\n", from.display()),
            How::Compiled { stored: true } => format!("{verb} {key} stored\n"),
            How::Compiled { stored: false } => format!("{verb} {key} not-stored\n"),
        };
        if let Ok(mut file) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(build.join(TRACE_FILE))
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}
