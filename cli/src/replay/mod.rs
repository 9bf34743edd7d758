//! `attention-lab replay`: re-runs evcxr notebooks in-process and checks that
//! their outputs still match the stored ones (nbval for Rust).

use crate::error::{io_text, print, warn, Error, Result};
use crate::problem;
pub mod compare;
pub mod notebook;
pub mod report;
pub mod runner;
pub mod terminal;

use compare::CompareOptions;
use indicatif::{ProgressBar, ProgressStyle};
use notebook::Notebook;
use report::{CellReport, CellStatus, NotebookReport, Report, Totals};
use runner::{CurrentDirGuard, Kernel, KernelOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Command-line options of `replay`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Cell tags (metadata.tags), as nbval: nbval-skip (not run), nbval-ignore-output
(run, not compared), raises-exception (must raise: error output or panic).
Compared: stream text and text/plain exactly; other MIME types only with
--compare-html. Each notebook gets a fresh evcxr context started in the
notebook's folder, like a Jupyter kernel.

Exit status: 0 everything matched, 1 a cell failed, 2 bad input (missing path,
no notebooks, unreadable or malformed notebook, bad sanitize file).")]
pub struct ReplayArgs {
    /// Notebooks or folders (searched recursively for *.ipynb).
    #[arg(value_name = "PATH", default_value = "notebooks")]
    pub paths: Vec<PathBuf>,
    /// Write the new outputs into the notebooks (atomically).
    #[arg(long)]
    pub update: bool,
    /// Seconds a cell may run before it is killed.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0, value_parser = parse_seconds)]
    pub timeout: f64,
    /// Also compare text/html, images and other rich outputs.
    #[arg(long)]
    pub compare_html: bool,
    /// nbval sanitize file ([section] with regex:/replace: lines); repeatable.
    #[arg(long, value_name = "FILE")]
    pub sanitize: Vec<PathBuf>,
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// evcxr compilation cache size in MiB (evcxr's `:cache`); 0 turns it off.
    #[arg(long, value_name = "MIB", default_value_t = 500)]
    pub cache: u64,
}

/// Seconds that fit a `Duration` (a cell's timeout): positive and not too many.
fn parse_seconds(text: &str) -> Result<f64> {
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
pub fn run(args: ReplayArgs) -> Result<u8> {
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
    let json_path = args.json.as_ref().map(|path| cwd.join(path));
    if let (Some(json), Some(given)) = (&json_path, &args.json) {
        // The report must never replace a notebook or a sanitize file (it did, issue 8).
        let inputs_too = inputs.iter().map(|input| input.absolute.clone());
        let sanitize = args.sanitize.iter().map(|file| cwd.join(file));
        if let Some(same) = inputs_too.chain(sanitize).find(|p| same_file(p, json)) {
            return Err(Error::at(
                "--json",
                format!(
                    "{} is an input ({}); the report needs a file of its own",
                    given.display(),
                    same.display()
                ),
            ));
        }
    }
    let kernel_options = KernelOptions {
        timeout: Duration::from_secs_f64(args.timeout),
        cache_mib: args.cache,
    };

    let total_cells: usize = inputs
        .iter()
        .filter_map(|input| input.parsed.as_ref().ok())
        .map(|nb| nb.cells.iter().filter(|cell| cell.is_code()).count())
        .sum();
    let progress_owner = terminal::Progress::new(total_cells as u64);
    let progress = progress_owner.bar.clone();
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cells  {msg}",
        )
        .expect("valid progress template"),
    );

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
                NotebookReport {
                    path: input.display.clone(),
                    cells: 0,
                    passed: 0,
                    failed: 0,
                    skipped: 0,
                    seconds: 0.0,
                    startup_seconds: None,
                    error: Some(format!("malformed notebook: {error}")),
                    written: false,
                    write_error: None,
                    cell_results: Vec::new(),
                }
            }
            Ok(notebook) => {
                let report = run_notebook(
                    &input,
                    notebook.clone(),
                    args.update,
                    &compare,
                    &kernel_options,
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
    }
    progress_owner.finish();

    let mut totals = Totals {
        notebooks: notebooks.len(),
        ..Totals::default()
    };
    for n in &notebooks {
        totals.cells += n.cells;
        totals.passed += n.passed;
        totals.failed += n.failed;
        totals.skipped += n.skipped;
        totals.errors += usize::from(n.error.is_some() || n.write_error.is_some());
        totals.seconds += n.seconds;
    }
    let status = if input_errors > 0 || write_errors > 0 {
        2
    } else if totals.failed > 0 || totals.errors > 0 {
        1
    } else {
        0
    };
    let report = Report {
        ok: status == 0,
        update: args.update,
        timeout_seconds: args.timeout,
        totals,
        notebooks,
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
                let parsed = Notebook::parse(&text);
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

/// Replays one notebook in a fresh evcxr context started in its folder.
fn run_notebook(
    input: &Input,
    mut notebook: Notebook,
    update: bool,
    compare: &CompareOptions,
    kernel_options: &KernelOptions,
    progress: &ProgressBar,
) -> NotebookReport {
    let started = Instant::now();
    let code_cells = notebook.cells.iter().filter(|cell| cell.is_code()).count();
    let mut report = NotebookReport {
        path: input.display.clone(),
        cells: code_cells,
        passed: 0,
        failed: 0,
        skipped: 0,
        seconds: 0.0,
        startup_seconds: None,
        error: None,
        written: false,
        write_error: None,
        cell_results: Vec::new(),
    };
    progress.set_message(format!("{} (starting evcxr)", input.display));

    let folder = input
        .absolute
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let guard = CurrentDirGuard::enter(&folder);
    let mut kernel = match &guard {
        Err(error) => {
            report.error = Some(format!(
                "cannot enter folder {}: {}",
                folder.display(),
                io_text(error)
            ));
            None
        }
        Ok(_) if code_cells == 0 => None,
        Ok(_) => match Kernel::start(kernel_options) {
            Ok((kernel, seconds)) => {
                report.startup_seconds = Some(seconds);
                Some(kernel)
            }
            Err(error) => {
                report.error = Some(error.to_string());
                None
            }
        },
    };
    let not_run = report
        .error
        .clone()
        .map(|error| format!("not run: {error}"));

    // Execution counts: keep null when the file has none, otherwise number
    // from the first run cell's stored count (evcxr_jupyter starts at 2).
    let any_count = notebook
        .cells
        .iter()
        .any(|cell| cell.execution_count().is_some());
    let mut next_count: Option<u64> = None;
    let mut first = true;
    let mut aborted = report.error.is_some();
    let mut new_outputs: Vec<(usize, Vec<Value>, Option<u64>)> = Vec::new();
    let mut changed = false;

    for (position, cell) in notebook.cells.iter().enumerate() {
        if !cell.is_code() {
            continue;
        }
        let mut result = CellReport {
            index: position + 1,
            id: cell.id.clone(),
            status: CellStatus::Skipped,
            seconds: None,
            reason: None,
            diff: None,
            updated: false,
        };
        progress.set_message(format!("{} cell {}", input.display, position + 1));
        let Some(running) = kernel.as_mut() else {
            result.reason = not_run.clone();
            report.cell_results.push(result);
            progress.inc(1);
            continue;
        };
        if cell.has_tag("nbval-skip") {
            result.reason = Some("nbval-skip".into());
            report.cell_results.push(result);
            progress.inc(1);
            continue;
        }
        if first {
            first = false;
            next_count = any_count.then(|| cell.execution_count().unwrap_or(2));
        }
        let count = next_count;
        next_count = next_count.map(|n| n + 1);

        if let Some(reason) = running.lost_reason() {
            result.reason = Some(reason.to_owned());
            report.cell_results.push(result);
            progress.inc(1);
            continue;
        }
        let run = running.run(&cell.source.text(), count);
        result.seconds = Some(run.seconds);
        let expect_error = cell.has_tag("raises-exception");
        let ignore_output = cell.has_tag("nbval-ignore-output");
        let stored = compare.normalize(cell.outputs());
        let replayed = compare.normalize(&run.outputs);
        let diff = compare::diff(&stored, &replayed);
        let differs = !diff.is_empty() && !ignore_output;
        result.status = CellStatus::Failed;
        if run.timed_out || run.kernel_lost.is_some() {
            result.reason = run.raised.clone().or(run.kernel_lost.clone());
            aborted = true;
        } else if let (Some(raised), false) = (&run.raised, expect_error) {
            result.reason = Some(format!("unexpected error: {raised}"));
        } else if expect_error && run.raised.is_none() {
            result.reason = Some("tagged raises-exception but raised no error".into());
        } else if differs && !update {
            result.reason = Some("output differs".into());
        } else {
            result.status = CellStatus::Passed;
            if ignore_output {
                result.reason = Some("output not compared (nbval-ignore-output)".into());
            } else if differs {
                result.reason = Some("output differed".into());
            }
        }
        if update && !aborted {
            // nbval-ignore-output cells are rewritten too, so use the raw outputs.
            result.updated =
                cell.outputs() != run.outputs.as_slice() || cell.execution_count() != count;
            changed |= result.updated;
            new_outputs.push((position, run.outputs, count));
        }
        if differs {
            result.diff = Some(diff);
        }
        report.cell_results.push(result);
        progress.inc(1);
    }
    if let Some(kernel) = kernel.take() {
        kernel.shutdown();
    }
    drop(guard);

    if update && !aborted {
        for (position, outputs, count) in new_outputs {
            let cell = &mut notebook.cells[position];
            cell.extra.insert("outputs".into(), Value::Array(outputs));
            cell.extra.insert(
                "execution_count".into(),
                count.map(Value::from).unwrap_or(Value::Null),
            );
        }
        // Only a changed output or count rewrites the file: a rewrite reformats the JSON.
        let text = notebook.to_jupyter_json();
        if changed && text != input.original {
            match attention_lab_io::write(&input.absolute, text.as_bytes()) {
                Ok(()) => report.written = true,
                Err(error) => {
                    report.write_error = Some(format!(
                        "{}: cannot write: {}",
                        input.display,
                        io_text(&error)
                    ))
                }
            }
        }
    } else if update {
        for cell in &mut report.cell_results {
            cell.updated = false;
        }
        if report.error.is_none() {
            report.error = Some("run aborted, notebook not updated".into());
        }
    }
    report.recount();
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// Whether `a` and `b` name one file (through symlinks and `..`); a missing `b` is no file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
