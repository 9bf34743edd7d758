//! The replay report: printed per cell and as a summary table, and written
//! as JSON with `--json`.

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
    /// Seconds evcxr took (compile + run); absent when not run.
    pub seconds: Option<f64>,
    /// Why it failed or was skipped, or a note (e.g. output not compared).
    pub reason: Option<String>,
    /// Unified diff stored -> replayed when outputs differ.
    pub diff: Option<String>,
    /// Whether the cell's outputs were rewritten (`--update`).
    pub updated: bool,
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
    /// Seconds to start the evcxr context (absent if it did not start).
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
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// True when every notebook matched (the exit status is then 0).
    pub ok: bool,
    /// Whether this was an `--update` run.
    pub update: bool,
    /// Timeout per cell, in seconds.
    pub timeout_seconds: f64,
    /// Sums over notebooks.
    pub totals: Totals,
    /// Per notebook results.
    pub notebooks: Vec<NotebookReport>,
}

impl NotebookReport {
    /// Recounts passed/failed/skipped from the cell results.
    pub fn recount(&mut self) {
        let count = |status| {
            self.cell_results
                .iter()
                .filter(|cell| cell.status == status)
                .count()
        };
        self.passed = count(CellStatus::Passed);
        self.failed = count(CellStatus::Failed);
        self.skipped = count(CellStatus::Skipped);
    }

    /// Text for one notebook: a line per code cell, diffs indented below.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.path);
        if let Some(seconds) = self.startup_seconds {
            let _ = writeln!(out, "  evcxr started in {seconds:.2} s");
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
                   t: &dyn std::fmt::Display| {
            let _ = writeln!(
                out,
                "{name:<width$}  {c:>5}  {p:>6}  {f:>6}  {s:>7}  {t:>8}"
            );
        };
        row(
            &mut out, "notebook", &"cells", &"passed", &"failed", &"skipped", &"seconds",
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
        );
        if t.errors > 0 {
            let _ = writeln!(out, "{} notebook error(s)", t.errors);
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
