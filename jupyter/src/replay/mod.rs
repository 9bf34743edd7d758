//! `attention-lab replay`: re-runs evcxr notebooks in-process and checks that
//! their outputs still match the stored ones (nbval for Rust).

use attention_lab_io::error::{io_text, print, warn, Error, Result};
use attention_lab_io::problem;
mod batch;
pub mod compare;
pub mod depth;
pub mod engine;
pub mod launch;
pub mod notebook;
pub mod report;
pub mod runner;
pub mod terminal;

/// Why the batch engine hands a notebook to evcxr.
pub use batch::Fallback;

use compare::CompareOptions;
use engine::{CellRun, EngineKind, KernelOptions, Output, Session};
use indicatif::{ProgressBar, ProgressStyle};
use launch::EngineOptions;
use notebook::{Cell, Notebook};
use report::{CellReport, CellStatus, EngineUse, NotebookReport, Report, Written};
use runner::CurrentDirGuard;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `replay`'s arguments for a warm replay of lessons before a class or a first `lab` (every
/// cell compiled as a kernel compiles it, with time for the slowest, a line per notebook done):
/// `lab` and `hub` run it so.
///
/// ```
/// assert_eq!(attention_lab_jupyter::replay::WARM_ARGS[0], "replay");
/// ```
pub const WARM_ARGS: [&str; 6] = [
    "replay",
    "--engine",
    "evcxr",
    "--timeout",
    "900",
    "--progress-lines",
];

/// What `replay` runs and compares, as its flags give it.
///
/// ```no_run
/// use attention_lab_jupyter::replay::engine::EngineKind;
/// use attention_lab_jupyter::replay::{run, Options};
/// let options = Options {
///     paths: vec!["notebooks".into()],
///     update: false,
///     timeout: 120.0,
///     compare_html: false,
///     sanitize: Vec::new(),
///     json: None,
///     cache: attention_lab_jupyter::kernel::EVCXR_CACHE_MIB,
///     engine: EngineKind::Batch,
///     progress_lines: false,
/// };
/// let status = run(options)?; // 0 when every cell printed what it stores
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Notebooks or folders (searched recursively for *.ipynb).
    pub paths: Vec<PathBuf>,
    /// Write the new outputs into the notebooks (atomically).
    pub update: bool,
    /// Seconds a cell may run before it is killed.
    pub timeout: f64,
    /// Also compare text/html, images and other rich outputs.
    pub compare_html: bool,
    /// nbval sanitize file ([section] with regex:/replace: lines); repeatable.
    pub sanitize: Vec<PathBuf>,
    /// Also write the report as JSON to FILE.
    pub json: Option<PathBuf>,
    /// evcxr compilation cache size in MiB (evcxr's `:cache`); 0 turns it off.
    pub cache: u64,
    /// Which engine runs the cells: the whole notebook as one program, or evcxr cell by cell.
    pub engine: EngineKind,
    /// Off a terminal, also one line on stderr per notebook done: how many of how many, and
    /// an estimate of the time left (`lab` and `hub` discard the report on stdout). On a
    /// terminal the progress bar says it.
    pub progress_lines: bool,
}

/// Seconds that fit a `Duration` (a cell's timeout): positive and not too many.
///
/// ```
/// use attention_lab_jupyter::replay::timeout_seconds;
/// assert_eq!(timeout_seconds("2.5")?, 2.5);
/// assert!(timeout_seconds("-1").is_err());
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// Not a number, not positive, or more seconds than a `Duration` holds.
pub fn timeout_seconds(text: &str) -> Result<f64> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && Duration::try_from_secs_f64(seconds).is_ok() => Ok(seconds),
        Ok(seconds) if seconds > 0.0 && seconds.is_finite() => Err(problem!(
            "{text} seconds is too long (at most {:e})",
            Duration::MAX.as_secs_f64()
        )),
        _ => Err(problem!(
            "expected a positive number of seconds, got {text:?}"
        )),
    }
}

/// A notebook found on the command line, read but not yet run.
struct Input {
    /// Path shown to the user (as given, or folder/relative path).
    display: String,
    /// Absolute path, immune to the per-notebook folder changes.
    absolute: PathBuf,
    /// Exact bytes read, to leave the file alone unless outputs change.
    original: String,
    parsed: Result<Notebook>,
}

/// Runs `replay` and returns the process exit status: 0 all matched,
/// 1 a cell failed, 2 bad input (a malformed notebook among the others).
///
/// # Errors
/// Bad input found before any notebook runs (a missing path, a folder without notebooks, an
/// unreadable or invalid sanitize file), a report that cannot be written, a failing stdout.
pub fn run(args: Options) -> Result<u8> {
    // The flag's parser checks this too; a library caller's value is checked here.
    timeout_seconds(&args.timeout.to_string()).map_err(|e| Error::at("--timeout", e))?;
    let cwd = std::env::current_dir()
        .map_err(|e| problem!("cannot use the current folder: {}", io_text(&e)))?;
    let mut sanitizers = Vec::new();
    for file in &args.sanitize {
        sanitizers.extend(compare::load_sanitize_file(&cwd.join(file))?);
    }
    let compare = CompareOptions {
        compare_html: args.compare_html,
        sanitizers,
    };
    let inputs = read_inputs(&cwd, &args.paths)?;
    let json_path = report_path(&args, &cwd, &inputs)?;
    let engine_options = EngineOptions {
        kind: args.engine,
        kernel: KernelOptions {
            timeout: Duration::from_secs_f64(args.timeout),
            cache_mib: args.cache,
        },
    };

    // A notebook's code cells (none for one that did not parse): the bar's and the lines' unit.
    let cells_of = |input: &Input| input.parsed.as_ref().map_or(0, |nb| code_cells(nb).count());
    let total_cells: usize = inputs.iter().map(cells_of).sum();
    let progress_owner = terminal::Progress::new(total_cells as u64);
    let progress = progress_owner.bar.clone();
    progress.set_style(bar_style());
    let total_notebooks = inputs.len();
    progress.set_prefix(format!("1/{total_notebooks}"));
    let started = Instant::now();
    let mut cells_done = 0;

    // Keeps the spinner and elapsed time moving during long cells.
    progress.enable_steady_tick(Duration::from_millis(200));

    let mut notebooks = Vec::new();
    let mut input_errors = 0;
    let mut write_errors = 0;
    for input in inputs {
        let report = match &input.parsed {
            Err(error) => {
                input_errors += 1;
                progress.suspend(|| warn(&format!("error: {}: {error}", input.display)));
                NotebookReport::new(
                    input.display.clone(),
                    EngineUse::default(),
                    Vec::new(),
                    Some(format!("malformed notebook: {error}")),
                    Written::default(),
                    0.0,
                )
            }
            Ok(notebook) => {
                let report = run_notebook(
                    &input,
                    notebook.clone(),
                    args.update,
                    &compare,
                    &engine_options,
                    &progress,
                );
                progress.suspend(|| print(&report.render()))?;
                if let Some(error) = &report.write_error {
                    write_errors += 1;
                    progress.suspend(|| warn(&format!("error: {error}")));
                }
                report
            }
        };
        notebooks.push(report);
        cells_done += cells_of(&input);
        // A notebook whose engine did not start counted no cell: the bar follows the lines.
        progress.set_position(cells_done as u64);
        let done = notebooks.len();
        progress.set_prefix(format!(
            "{}/{total_notebooks}",
            (done + 1).min(total_notebooks)
        ));
        if args.progress_lines && progress.is_hidden() {
            let counts = Counts {
                notebooks: (done, total_notebooks),
                cells: (cells_done, total_cells),
            };
            warn(&progress_line(&counts, started.elapsed(), &input.display));
        }
    }
    progress_owner.finish();

    let report = Report::new(notebooks, args.update, args.engine, args.timeout);
    let status = if input_errors > 0 || write_errors > 0 {
        2
    } else {
        u8::from(!report.ok)
    };
    print(&format!("\n{}", report.render_summary()))?;
    if let Some(path) = json_path {
        attention_lab_io::write(&path, report.to_json().as_bytes()).map_err(|error| {
            problem!(
                "{}: cannot write JSON report: {}",
                path.display(),
                io_text(&error)
            )
        })?;
    }
    Ok(status)
}

/// Where `--json` writes the report (from the current folder), if asked.
///
/// # Errors
/// The path names an input: the report must never replace a notebook or a sanitize file (it
/// did, issue 8).
fn report_path(args: &Options, cwd: &Path, inputs: &[Input]) -> Result<Option<PathBuf>> {
    let Some(given) = &args.json else {
        return Ok(None);
    };
    let json = cwd.join(given);
    let inputs_too = inputs.iter().map(|input| input.absolute.clone());
    let sanitize = args.sanitize.iter().map(|file| cwd.join(file));
    if let Some(same) = inputs_too.chain(sanitize).find(|p| same_file(p, &json)) {
        return Err(Error::at(
            "--json",
            format!(
                "{} is an input ({}); the report needs a file of its own",
                given.display(),
                same.display()
            ),
        ));
    }
    Ok(Some(json))
}

/// The progress bar's look: cells done of all, the notebook, the time left.
fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cells, notebook {prefix}, \
         about {eta} left  {msg}",
    )
    .expect("valid progress template")
}

/// How far a replay is: notebooks and code cells done, each of its total.
struct Counts {
    notebooks: (usize, usize),
    cells: (usize, usize),
}

/// The line said off a terminal after each notebook, with the time left estimated from the
/// time per cell so far (the first notebooks compile the most, so it starts high).
fn progress_line(counts: &Counts, elapsed: Duration, notebook: &str) -> String {
    let (done, total) = counts.cells;
    let left = match done {
        0 => String::new(),
        _ if done >= total => String::new(),
        _ => {
            let seconds = elapsed.as_secs_f64() * (total - done) as f64 / done as f64;
            format!(
                ", about {} left",
                indicatif::HumanDuration(Duration::from_secs_f64(seconds.round()))
            )
        }
    };
    format!(
        "replay: {} of {} notebooks ({done} of {total} cells) after {}{left}: {notebook} done",
        counts.notebooks.0,
        counts.notebooks.1,
        indicatif::HumanDuration(Duration::from_secs(elapsed.as_secs())),
    )
}

/// Resolves command-line paths to notebooks and reads them all up front, so
/// that bad input is reported before minutes of evcxr work.
fn read_inputs(cwd: &Path, paths: &[PathBuf]) -> Result<Vec<Input>> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for path in paths {
        let absolute = cwd.join(path);
        let metadata = match std::fs::metadata(&absolute) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::at(path.display(), "no such file or folder"))
            }
            Err(error) => return Err(Error::io(path.display(), "read", error)),
        };
        if metadata.is_dir() {
            let mut relative = Vec::new();
            find_notebooks(&absolute, Path::new(""), &mut relative)
                .map_err(|(folder, error)| Error::io(path.join(folder).display(), "read", error))?;
            if relative.is_empty() {
                return Err(Error::at(
                    path.display(),
                    "folder contains no .ipynb notebooks",
                ));
            }
            relative.sort();
            for rel in relative {
                found.push((path.join(&rel).display().to_string(), absolute.join(rel)));
            }
        } else {
            found.push((path.display().to_string(), absolute));
        }
    }
    let mut inputs: Vec<Input> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (display, absolute) in found {
        // One notebook named twice (a symlink, `a/../a`) runs once.
        if !seen.insert(std::fs::canonicalize(&absolute).unwrap_or_else(|_| absolute.clone())) {
            continue;
        }
        let bytes = std::fs::read(&absolute).map_err(|error| Error::io(&display, "read", error))?;
        let (original, parsed) = match String::from_utf8(bytes) {
            Ok(text) => {
                // A cell too deep for a parser's stack is bad input, found before any engine.
                let parsed = Notebook::parse(&text)
                    .and_then(|notebook| depth::check(&notebook).map(|()| notebook));
                (text, parsed)
            }
            Err(_) => (String::new(), Err(Error::from("not UTF-8 text"))),
        };
        inputs.push(Input {
            display,
            absolute,
            original,
            parsed,
        });
    }
    Ok(inputs)
}

/// Collects `*.ipynb` below `root`, skipping hidden folders such as
/// `.ipynb_checkpoints`.
fn find_notebooks(
    root: &Path,
    rel: &Path,
    out: &mut Vec<PathBuf>,
) -> Result<(), (PathBuf, std::io::Error)> {
    let folder = root.join(rel);
    let entries = std::fs::read_dir(&folder).map_err(|error| (rel.to_path_buf(), error))?;
    for entry in entries {
        let entry = entry.map_err(|error| (rel.to_path_buf(), error))?;
        let name = entry.file_name();
        let name_text = name.to_string_lossy();
        if name_text.starts_with('.') {
            continue;
        }
        let path = rel.join(&name);
        let kind = entry.file_type().map_err(|error| (path.clone(), error))?;
        // Symlinked folders are not followed: a link to a parent would loop (issue 8).
        if kind.is_dir() {
            find_notebooks(root, &path, out)?;
        } else if name_text.ends_with(".ipynb") && entry.path().is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// Replays one notebook in its folder with a fresh engine, then writes it with `--update`.
fn run_notebook(
    input: &Input,
    mut notebook: Notebook,
    update: bool,
    compare: &CompareOptions,
    options: &EngineOptions,
    progress: &ProgressBar,
) -> NotebookReport {
    let started = Instant::now();
    let folder = input.absolute.parent().unwrap_or(Path::new("/"));
    let replayed = match CurrentDirGuard::enter(folder) {
        Err(error) => Replayed::not_run(
            &notebook,
            format!(
                "cannot enter folder {}: {}",
                folder.display(),
                io_text(&error)
            ),
            None,
        ),
        Ok(_guard) => replay_in_folder(input, &notebook, update, compare, options, progress),
    };
    let Replayed {
        engine,
        mut cells,
        new_outputs,
        aborted,
        mut error,
    } = replayed;
    let mut written = Written::default();
    if update && !aborted {
        written = write_back(input, &mut notebook, new_outputs);
    } else if update {
        for cell in &mut cells {
            cell.updated = false;
        }
        error.get_or_insert_with(|| "run aborted, notebook not updated".into());
    }
    NotebookReport::new(
        input.display.clone(),
        engine,
        cells,
        error,
        written,
        started.elapsed().as_secs_f64(),
    )
}

/// A cell's replayed outputs and execution count, kept for `--update`.
struct NewOutputs {
    position: usize,
    outputs: Vec<Output>,
    count: Option<u64>,
}

/// What replaying a notebook's cells gave, before anything is written.
struct Replayed {
    engine: EngineUse,
    cells: Vec<CellReport>,
    new_outputs: Vec<NewOutputs>,
    /// A cell timed out or the kernel was lost: the notebook must not be written.
    aborted: bool,
    /// Notebook-level error (the engine did not start).
    error: Option<String>,
}

impl Replayed {
    /// Every code cell skipped because the notebook could not run.
    fn not_run(notebook: &Notebook, error: String, fallback: Option<String>) -> Replayed {
        let reason = format!("not run: {error}");
        let cells = code_cells(notebook)
            .map(|(position, cell)| skipped(position, cell, reason.clone()))
            .collect();
        Replayed {
            engine: EngineUse {
                fallback,
                ..EngineUse::default()
            },
            cells,
            new_outputs: Vec::new(),
            aborted: true,
            error: Some(error),
        }
    }
}

fn code_cells(notebook: &Notebook) -> impl Iterator<Item = (usize, &Cell)> {
    notebook
        .cells
        .iter()
        .enumerate()
        .filter(|(_, cell)| cell.is_code())
}

fn skipped(position: usize, cell: &Cell, reason: String) -> CellReport {
    CellReport {
        index: position + 1,
        id: cell.id.clone(),
        status: CellStatus::Skipped,
        seconds: None,
        reason: Some(reason),
        diff: None,
        updated: false,
        libraries: None,
    }
}

/// Starts the engine in the current folder (the notebook's) and runs the cells through it.
fn replay_in_folder(
    input: &Input,
    notebook: &Notebook,
    update: bool,
    compare: &CompareOptions,
    options: &EngineOptions,
    progress: &ProgressBar,
) -> Replayed {
    if code_cells(notebook).next().is_none() {
        return Replayed {
            engine: EngineUse::default(),
            cells: Vec::new(),
            new_outputs: Vec::new(),
            aborted: false,
            error: None,
        };
    }
    match launch::start(notebook, &input.absolute, &input.display, options, progress) {
        Err(not_started) => Replayed::not_run(notebook, not_started.error, not_started.fallback),
        Ok(started) => {
            let engine = EngineUse {
                engine: Some(started.engine),
                fallback: started.fallback,
                startup_seconds: Some(started.startup_seconds),
            };
            let mut session = started.session;
            let replayed = replay_cells(
                &input.display,
                notebook,
                session.as_mut(),
                update,
                compare,
                progress,
                engine,
            );
            session.shutdown();
            replayed
        }
    }
}

/// Runs every code cell through the session and judges it against its stored outputs.
fn replay_cells(
    display: &str,
    notebook: &Notebook,
    session: &mut dyn Session,
    update: bool,
    compare: &CompareOptions,
    progress: &ProgressBar,
    engine: EngineUse,
) -> Replayed {
    // Execution counts: keep null when the file has none, otherwise number
    // from the first run cell's stored count (evcxr_jupyter starts at 2).
    let any_count = notebook
        .cells
        .iter()
        .any(|cell| cell.execution_count().is_some());
    let mut next_count: Option<u64> = None;
    let mut first = true;
    let mut replayed = Replayed {
        engine,
        cells: Vec::new(),
        new_outputs: Vec::new(),
        aborted: false,
        error: None,
    };
    for (position, cell) in code_cells(notebook) {
        progress.set_message(format!("{display} cell {}", position + 1));
        progress.inc(1);
        if cell.has_tag("nbval-skip") {
            replayed
                .cells
                .push(skipped(position, cell, "nbval-skip".into()));
            continue;
        }
        if first {
            first = false;
            next_count = any_count.then(|| cell.execution_count().unwrap_or(2));
        }
        let count = next_count;
        next_count = next_count.map(|n| n + 1);
        if let Some(reason) = session.lost() {
            replayed
                .cells
                .push(skipped(position, cell, reason.to_owned()));
            continue;
        }
        let before = session.libraries();
        let run = session.run(position, &cell.source.text());
        let outputs: Vec<Value> = run.outputs.iter().map(|o| o.to_nbformat(count)).collect();
        let mut report = judge(position, cell, &run, &outputs, update, compare);
        report.libraries = session
            .libraries()
            .zip(before)
            .map(|(after, before)| after - before);
        replayed.aborted |= run.raised.as_ref().is_some_and(|raised| raised.aborts());
        if update && !replayed.aborted {
            // nbval-ignore-output cells are rewritten too, so use the raw outputs.
            report.updated =
                cell.outputs() != outputs.as_slice() || cell.execution_count() != count;
            replayed.new_outputs.push(NewOutputs {
                position,
                outputs: run.outputs,
                count,
            });
        }
        replayed.cells.push(report);
    }
    replayed
}

/// A run cell's status, nbval's way: errors must be expected, outputs must match.
fn judge(
    position: usize,
    cell: &Cell,
    run: &CellRun,
    outputs: &[Value],
    update: bool,
    compare: &CompareOptions,
) -> CellReport {
    let expect_error = cell.has_tag("raises-exception");
    let ignore_output = cell.has_tag("nbval-ignore-output");
    let diff = compare::diff(
        &compare.normalize(cell.outputs()),
        &compare.normalize(outputs),
    );
    let differs = !diff.is_empty() && !ignore_output;
    let (status, reason) = match &run.raised {
        Some(raised) if raised.aborts() => (CellStatus::Failed, Some(raised.to_string())),
        Some(raised) if !expect_error => (
            CellStatus::Failed,
            Some(format!("unexpected error: {raised}")),
        ),
        None if expect_error => (
            CellStatus::Failed,
            Some("tagged raises-exception but raised no error".into()),
        ),
        _ if differs && !update => (CellStatus::Failed, Some("output differs".into())),
        _ if ignore_output => (
            CellStatus::Passed,
            Some("output not compared (nbval-ignore-output)".into()),
        ),
        _ if differs => (CellStatus::Passed, Some("output differed".into())),
        _ => (CellStatus::Passed, None),
    };
    CellReport {
        index: position + 1,
        id: cell.id.clone(),
        status,
        seconds: Some(run.seconds),
        reason,
        diff: differs.then_some(diff),
        updated: false,
        libraries: None,
    }
}

/// Puts the new outputs into the notebook and writes it, only when an output, a count or the
/// kernel's metadata changed (a rewrite reformats the JSON). A notebook whose cells ran gets
/// the metadata Jupyter gives one run in the project's kernel (its kernelspec and
/// language_info), so that opening it in `lab` changes nothing.
fn write_back(input: &Input, notebook: &mut Notebook, new_outputs: Vec<NewOutputs>) -> Written {
    let mut changed = false;
    if !new_outputs.is_empty() {
        for (key, value) in [
            ("kernelspec", crate::kernel::notebook_kernelspec()),
            ("language_info", crate::kernel::language_info()),
        ] {
            changed |= notebook.metadata.get(key) != Some(&value);
            notebook.metadata.insert(key.into(), value);
        }
    }
    for NewOutputs {
        position,
        outputs,
        count,
    } in new_outputs
    {
        let cell = &mut notebook.cells[position];
        let outputs: Vec<Value> = outputs.iter().map(|o| o.to_nbformat(count)).collect();
        changed |= cell.outputs() != outputs.as_slice() || cell.execution_count() != count;
        cell.extra.insert("outputs".into(), Value::Array(outputs));
        cell.extra.insert(
            "execution_count".into(),
            count.map(Value::from).unwrap_or(Value::Null),
        );
    }
    let text = notebook.to_jupyter_json();
    if !changed || text == input.original {
        return Written::default();
    }
    match attention_lab_io::write(&input.absolute, text.as_bytes()) {
        Ok(()) => Written {
            written: true,
            write_error: None,
        },
        Err(error) => Written {
            written: false,
            write_error: Some(format!(
                "{}: cannot write: {}",
                input.display,
                io_text(&error)
            )),
        },
    }
}

/// Whether `a` and `b` name one file (through symlinks and `..`); a missing `b` is no file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The time left is the time per cell so far times the cells left; none before the first
    /// cell and none after the last.
    #[test]
    fn a_progress_line_estimates_the_time_left_from_the_cells_done() {
        let line = |done, elapsed| {
            let counts = Counts {
                notebooks: (1, 4),
                cells: (done, 40),
            };
            progress_line(&counts, Duration::from_secs(elapsed), "000.ipynb")
        };
        assert_eq!(
            line(10, 120),
            "replay: 1 of 4 notebooks (10 of 40 cells) after 2 minutes, about 6 minutes left: \
             000.ipynb done"
        );
        assert!(!line(0, 5).contains("left"), "{}", line(0, 5));
        assert!(!line(40, 300).contains("left"), "{}", line(40, 300));
    }

    /// A timeout the flag's parser would refuse is an error naming it for a library caller
    /// too, before anything runs, not a panic in `Duration::from_secs_f64`.
    #[test]
    fn a_timeout_that_fits_no_duration_is_an_error_naming_the_flag() {
        for timeout in [-1.0, 0.0, f64::NAN, f64::INFINITY, 1e300] {
            let options = Options {
                paths: vec![PathBuf::from("no-such-notebook.ipynb")],
                update: false,
                timeout,
                compare_html: false,
                sanitize: Vec::new(),
                json: None,
                cache: 0,
                engine: EngineKind::Batch,
                progress_lines: false,
            };
            let e = run(options).unwrap_err().to_string();
            assert!(e.starts_with("--timeout: "), "{timeout}: {e}");
        }
    }
}
