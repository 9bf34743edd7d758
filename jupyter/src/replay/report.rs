//! The replay report: printed per cell and as a summary table, and written
//! as JSON with `--json`.

use super::engine::{EngineKind, Libraries};
use serde::Serialize;
use std::fmt::Write as _;

/// Outcome of one code cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Ran and matched (or was not compared: `nbval-ignore-output`).
    Passed,
    /// Output mismatch, unexpected error, missing expected error, timeout.
    Failed,
    /// Not run: `nbval-skip`, or the kernel was lost earlier.
    Skipped,
}

/// One code cell's result.
#[derive(Debug, Clone, Serialize)]
pub struct CellReport {
    /// 1-based position among all cells of the notebook (markdown included).
    pub index: usize,
    /// nbformat cell id, when the file has one.
    pub id: Option<String>,
    /// Outcome.
    pub status: CellStatus,
    /// Seconds the cell took (evcxr: compile and run; batch: run); absent when not run.
    pub seconds: Option<f64>,
    /// Why it failed or was skipped, or a note (e.g. output not compared).
    pub reason: Option<String>,
    /// Unified diff stored -> replayed when outputs differ.
    pub diff: Option<String>,
    /// Whether the cell's outputs were rewritten (`--update`).
    pub updated: bool,
    /// The cell's libraries: loaded from the compiled-cell cache, or compiled (evcxr only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub libraries: Option<Libraries>,
}

/// One notebook's result.
#[derive(Debug, Clone, Serialize)]
pub struct NotebookReport {
    /// Path as given or found.
    pub path: String,
    /// Number of code cells.
    pub cells: usize,
    /// Code cells that passed.
    pub passed: usize,
    /// Code cells that failed.
    pub failed: usize,
    /// Code cells not run.
    pub skipped: usize,
    /// Wall-clock seconds for the whole notebook, kernel start included.
    pub seconds: f64,
    /// The engine that ran the cells (absent when none started).
    pub engine: Option<EngineKind>,
    /// Why the batch engine handed this notebook to evcxr.
    pub fallback: Option<String>,
    /// Seconds to start the engine: evcxr's start-up, or the batch engine's build and run
    /// (absent if it did not start).
    pub startup_seconds: Option<f64>,
    /// Notebook-level error (malformed file, kernel failed to start, ...).
    pub error: Option<String>,
    /// Whether `--update` rewrote the file.
    pub written: bool,
    /// Why `--update` could not rewrite the file (said on stderr, not in the report on stdout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_error: Option<String>,
    /// Per code cell results.
    pub cell_results: Vec<CellReport>,
}

/// Totals over all notebooks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    /// Notebooks replayed (malformed ones included).
    pub notebooks: usize,
    /// Code cells.
    pub cells: usize,
    /// Passed cells.
    pub passed: usize,
    /// Failed cells.
    pub failed: usize,
    /// Skipped cells.
    pub skipped: usize,
    /// Notebook-level errors.
    pub errors: usize,
    /// Seconds in total.
    pub seconds: f64,
    /// The cells' libraries: loaded from the compiled-cell cache, or compiled (evcxr only).
    pub libraries: Libraries,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// True when every notebook matched (the exit status is then 0).
    pub ok: bool,
    /// Whether this was an `--update` run.
    pub update: bool,
    /// The engine asked for (`--engine`).
    pub engine: EngineKind,
    /// Timeout per cell, in seconds.
    pub timeout_seconds: f64,
    /// Sums over notebooks.
    pub totals: Totals,
    /// Per notebook results.
    pub notebooks: Vec<NotebookReport>,
}

/// How a notebook's engine started, for the report.
///
/// ```
/// use attention_lab_jupyter::replay::report::EngineUse;
/// assert_eq!(EngineUse::default().engine, None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct EngineUse {
    /// The engine that ran the cells (none when none started).
    pub engine: Option<EngineKind>,
    /// Why the batch engine handed the notebook to evcxr.
    pub fallback: Option<String>,
    /// Seconds to start it.
    pub startup_seconds: Option<f64>,
}

/// Whether `--update` wrote the notebook, or why not.
///
/// ```
/// use attention_lab_jupyter::replay::report::Written;
/// assert!(!Written::default().written);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// The file was rewritten.
    pub written: bool,
    /// Why it could not be.
    pub write_error: Option<String>,
}

impl NotebookReport {
    /// The one constructor: counts come from the cell results.
    ///
    /// ```
    /// use attention_lab_jupyter::replay::report::{EngineUse, NotebookReport, Written};
    /// let report = NotebookReport::new("a.ipynb".into(), EngineUse::default(), Vec::new(),
    ///     Some("malformed notebook: not UTF-8 text".into()), Written::default(), 0.0);
    /// assert_eq!((report.cells, report.failed), (0, 0));
    /// ```
    pub fn new(
        path: String,
        engine: EngineUse,
        cell_results: Vec<CellReport>,
        error: Option<String>,
        written: Written,
        seconds: f64,
    ) -> NotebookReport {
        let count = |status| {
            cell_results
                .iter()
                .filter(|cell: &&CellReport| cell.status == status)
                .count()
        };
        NotebookReport {
            path,
            cells: cell_results.len(),
            passed: count(CellStatus::Passed),
            failed: count(CellStatus::Failed),
            skipped: count(CellStatus::Skipped),
            seconds,
            engine: engine.engine,
            fallback: engine.fallback,
            startup_seconds: engine.startup_seconds,
            error,
            written: written.written,
            write_error: written.write_error,
            cell_results,
        }
    }

    /// Text for one notebook: a line per code cell, diffs indented below.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.path);
        if let Some(reason) = &self.fallback {
            let _ = writeln!(out, "  batch engine fell back to evcxr: {reason}");
        }
        match (self.engine, self.startup_seconds) {
            (Some(EngineKind::Evcxr), Some(seconds)) => {
                let _ = writeln!(out, "  evcxr started in {seconds:.2} s");
            }
            (Some(EngineKind::Batch), Some(seconds)) => {
                let _ = writeln!(
                    out,
                    "  batch engine: built and ran as one program in {seconds:.2} s"
                );
            }
            _ => {}
        }
        if let Some(error) = &self.error {
            let _ = writeln!(out, "  ERROR {error}");
        }
        for cell in &self.cell_results {
            let label = match cell.status {
                CellStatus::Passed => "ok",
                CellStatus::Failed => "FAILED",
                CellStatus::Skipped => "skipped",
            };
            let seconds = cell
                .seconds
                .map(|s| format!("{s:7.2} s"))
                .unwrap_or_else(|| "        -".into());
            let id = cell
                .id
                .as_deref()
                .map(|id| format!(" ({id})"))
                .unwrap_or_default();
            let reason = cell
                .reason
                .as_deref()
                .map(|r| format!("  {r}"))
                .unwrap_or_default();
            let updated = if cell.updated { "  [updated]" } else { "" };
            let _ = writeln!(
                out,
                "  cell {:<3}{id:<14} {label:<8}{seconds}{reason}{updated}",
                cell.index
            );
            if let Some(diff) = &cell.diff {
                for line in diff.lines() {
                    let _ = writeln!(out, "      {line}");
                }
            }
        }
        if self.written {
            let _ = writeln!(out, "  updated {}", self.path);
        }
        out
    }
}

impl Report {
    /// The whole run's report; totals come from the notebooks, and it is ok when no cell
    /// failed and no notebook had an error.
    ///
    /// ```
    /// use attention_lab_jupyter::replay::engine::EngineKind;
    /// use attention_lab_jupyter::replay::report::{EngineUse, NotebookReport, Report, Written};
    /// let bad = NotebookReport::new("a.ipynb".into(), EngineUse::default(), Vec::new(),
    ///     Some("malformed notebook".into()), Written::default(), 0.0);
    /// let report = Report::new(vec![bad], false, EngineKind::Batch, 120.0);
    /// assert_eq!((report.ok, report.totals.errors), (false, 1));
    /// ```
    pub fn new(
        notebooks: Vec<NotebookReport>,
        update: bool,
        engine: EngineKind,
        timeout_seconds: f64,
    ) -> Report {
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
            for cell in &n.cell_results {
                totals.libraries += cell.libraries.unwrap_or_default();
            }
        }
        Report {
            ok: totals.failed == 0 && totals.errors == 0,
            update,
            engine,
            timeout_seconds,
            totals,
            notebooks,
        }
    }

    /// The summary table.
    pub fn render_summary(&self) -> String {
        let width = self
            .notebooks
            .iter()
            .map(|n| n.path.chars().count())
            .chain(["notebook".len(), "total".len()])
            .max()
            .unwrap_or(8);
        let mut out = String::new();
        let row = |out: &mut String,
                   name: &str,
                   c: &dyn std::fmt::Display,
                   p: &dyn std::fmt::Display,
                   f: &dyn std::fmt::Display,
                   s: &dyn std::fmt::Display,
                   t: &dyn std::fmt::Display,
                   e: &str| {
            let line = format!("{name:<width$}  {c:>5}  {p:>6}  {f:>6}  {s:>7}  {t:>8}  {e}");
            let _ = writeln!(out, "{}", line.trim_end());
        };
        row(
            &mut out, "notebook", &"cells", &"passed", &"failed", &"skipped", &"seconds", "engine",
        );
        for n in &self.notebooks {
            let failed: &dyn std::fmt::Display = if n.error.is_some() && n.failed == 0 {
                &"error"
            } else {
                &n.failed
            };
            row(
                &mut out,
                &n.path,
                &n.cells,
                &n.passed,
                failed,
                &n.skipped,
                &format!("{:.2}", n.seconds),
                &match (n.engine, &n.fallback) {
                    (Some(engine), None) => engine.to_string(),
                    (Some(engine), Some(_)) => format!("{engine} (batch fell back)"),
                    (None, _) => "-".to_owned(),
                },
            );
        }
        let t = &self.totals;
        row(
            &mut out,
            "total",
            &t.cells,
            &t.passed,
            &t.failed,
            &t.skipped,
            &format!("{:.2}", t.seconds),
            "",
        );
        if t.errors > 0 {
            let _ = writeln!(out, "{} notebook error(s)", t.errors);
        }
        let l = t.libraries;
        if l.loaded + l.compiled > 0 {
            let _ = writeln!(
                out,
                "cells' libraries: {} loaded from the compiled-cell cache, {} compiled",
                l.loaded, l.compiled
            );
        }
        // Closing line in the plain "N passed, N failed, N skipped" form.
        let verdict = if self.ok { "OK" } else { "FAILED" };
        let _ = writeln!(
            out,
            "{verdict}: {} passed, {} failed, {} skipped",
            t.passed, t.failed, t.skipped
        );
        out
    }

    /// The report as JSON, as `--json FILE` writes it.
    pub fn to_json(&self) -> String {
        let value = serde_json::to_value(self).expect("a report is valid JSON");
        super::notebook::to_pretty(&value)
    }
}
