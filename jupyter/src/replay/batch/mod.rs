//! The batch engine: a notebook compiled once, as one program, instead of one crate per cell.
//!
//! The cells go in order into one function, with a marker printed on stdout and stderr
//! before each, so the program's output splits back into cells. A cell's last expression is
//! shown as evcxr 0.22 shows it: `(expr).evcxr_display();`, and where that does not compile,
//! the `{:?}` text of the value as `text/plain`. Cells are split into statements by the parser
//! evcxr uses (`ra_ap_syntax`, in the same way), so both engines agree on which expression a
//! cell shows.
//!
//! Items (`fn`, `struct`, `impl`, `use`, `extern` blocks) stay where the cell has them: Rust
//! lets items stand in a function body, and there they are visible in the whole body, so a
//! function one cell defines is callable in the next, as in evcxr (which moves them to the
//! crate's top level). Only inner attributes (`#![...]`) move to the top of the program. What
//! evcxr does differently is left to evcxr: an item defined twice (evcxr keeps the newer, one
//! body cannot hold both: a compile error) and statics (evcxr compiles every cell into a new
//! library with its own copy of each static; one program keeps one), which send the notebook
//! back.
//!
//! The program is a cargo project in a build folder of its own under the cache
//! (`$ATTENTION_LAB_CACHE/replay-batch/NAME-HASH`), with one target folder for all notebooks,
//! so the dependencies compile once and an unchanged notebook is not compiled again. Its
//! dependencies are the `:dep` lines, with paths made absolute from the notebook's folder as
//! evcxr does; the lock file starts as a copy of the one beside a path dependency, so no index
//! is asked when the repository's is complete.
//!
//! Whatever this engine cannot reproduce exactly sends the notebook to evcxr, with the reason:
//! a compile error, a panic or a crash, an error returned through `?` (evcxr goes on with the
//! next cell), an evcxr command other than `:dep`, a cell tagged `raises-exception`.
//!
//! Modules: `program` (the cells as one program's code), `project` (its cargo project and
//! build), `run` (running it with a time limit) and `output` (its output split back into
//! cells).

mod output;
mod program;
mod project;
mod run;

use super::engine::{CellRun, Raised, Session};
use super::notebook::Notebook;
use program::Program;
use project::{build, project_folder};
use run::{run_until, RunError};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts every marker line; a control character, so no notebook prints it by chance.
const MARK: &str = "\u{1e}attention-lab batch ";

/// The longest a build may take: the first one compiles every dependency.
const BUILD_TIMEOUT: Duration = Duration::from_secs(1800);

/// The cells' outcomes, computed when the session starts, handed out one by one.
pub struct BatchSession {
    runs: HashMap<usize, CellRun>,
}

impl Session for BatchSession {
    fn run(&mut self, position: usize, _code: &str) -> CellRun {
        self.runs.remove(&position).unwrap_or_else(|| CellRun {
            outputs: Vec::new(),
            raised: Some(Raised::Lost(
                "not run: the batch program did not run this cell".into(),
            )),
            seconds: 0.0,
        })
    }

    fn lost(&self) -> Option<&str> {
        None
    }

    fn shutdown(self: Box<Self>) {}
}

/// Builds and runs `notebook` (the file `path`) as one program, in its folder. Returns the
/// session and the seconds it took, or why evcxr must run the notebook instead.
///
/// # Errors
/// The reason to fall back to evcxr, one line.
pub fn start(
    notebook: &Notebook,
    path: &Path,
    timeout: Duration,
) -> Result<(BatchSession, f64), String> {
    let started = Instant::now();
    let folder = path.parent().unwrap_or(Path::new("/"));
    let mut program = Program::new(notebook, folder)?;
    let project = project_folder(path)?;
    let executable = build(&mut program, &project)?;
    let per_cell = timeout.saturating_mul(program.cells.len().max(1) as u32);
    let mut command = Command::new(&executable);
    command.current_dir(folder).stdin(Stdio::null());
    let run = run_until(command, per_cell).map_err(|error| match error {
        RunError::TimedOut => format!(
            "the program ran past {} s ({} s a cell)",
            per_cell.as_secs_f64(),
            timeout.as_secs_f64()
        ),
        RunError::Start(error) => format!("cannot run {}: {error}", executable.display()),
    })?;
    let runs = program.split(&run)?;
    Ok((BatchSession { runs }, started.elapsed().as_secs_f64()))
}
