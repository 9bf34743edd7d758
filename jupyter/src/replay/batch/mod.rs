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
use std::fmt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts every marker line; a control character, so no notebook prints it by chance.
const MARK: &str = "\u{1e}attention-lab batch ";

/// The longest a build may take: the first one compiles every dependency.
const BUILD_TIMEOUT: Duration = Duration::from_secs(1800);

/// Why the batch engine hands a notebook to evcxr: what it cannot reproduce exactly, or what
/// kept it from building or running the program. Its text is one line for the report.
///
/// ```
/// use attention_lab_jupyter::replay::Fallback;
/// let why = Fallback::Cell { cell: 3, why: "defines a static".into() };
/// assert_eq!(why.to_string(), "cell 3 defines a static");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// A cell the engine does not compile (1-based), and why: a tag, a shell or evcxr
    /// command, a static, a `:dep` it cannot read.
    Cell {
        /// The cell's number.
        cell: usize,
        /// What it has.
        why: String,
    },
    /// A cell (or the program around the cells) that does not compile as part of one program.
    Compile {
        /// `cell N` or `the program`.
        place: String,
        /// rustc's message.
        message: String,
    },
    /// The build failed without naming a line.
    Build(String),
    /// The program stopped early at `place`: a panic, an error through `?`, an exit status.
    Raised {
        /// `cell N` or `before the first cell`.
        place: String,
        /// What happened.
        why: String,
    },
    /// The program's output does not split back into its cells.
    Split,
    /// The build or the run took longer than its limit.
    TimedOut(String),
    /// The cache, the project's files, cargo or the executable could not be used.
    Environment(String),
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::Cell { cell, why } => write!(f, "cell {cell} {why}"),
            Fallback::Compile { place, message } => {
                write!(f, "{place} does not compile as part of one program: {message}")
            }
            Fallback::Raised { place, why } => write!(f, "{place} {why}"),
            Fallback::Split => write!(
                f,
                "the program's output does not split into its cells (a cell printed the marker, or the program ended early)"
            ),
            Fallback::Build(text) | Fallback::TimedOut(text) | Fallback::Environment(text) => {
                f.write_str(text)
            }
        }
    }
}

impl std::error::Error for Fallback {}

/// The cells' outcomes, computed when the session starts, handed out one by one, each to
/// the text it was computed from.
pub struct BatchSession {
    runs: HashMap<usize, CellRun>,
    sources: HashMap<usize, String>,
}

impl Session for BatchSession {
    fn run(&mut self, position: usize, code: &str) -> CellRun {
        let lost = |why: &str| CellRun {
            outputs: Vec::new(),
            raised: Some(Raised::Lost(format!("not run: {why}"))),
            seconds: 0.0,
        };
        if self
            .sources
            .get(&position)
            .is_some_and(|source| source != code)
        {
            return lost("the batch program was built from another text of this cell");
        }
        self.runs
            .remove(&position)
            .unwrap_or_else(|| lost("the batch program did not run this cell"))
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
/// The reason to fall back to evcxr ([`Fallback`]).
pub fn start(
    notebook: &Notebook,
    path: &Path,
    timeout: Duration,
) -> Result<(BatchSession, f64), Fallback> {
    let started = Instant::now();
    let folder = path.parent().unwrap_or(Path::new("/"));
    let mut program = Program::new(notebook, folder)?;
    let project = project_folder(path)?;
    let executable = build(&mut program, &project)?;
    let per_cell = timeout.saturating_mul(program.cells.len().max(1) as u32);
    let mut command = Command::new(&executable);
    command.current_dir(folder).stdin(Stdio::null());
    let run = run_until(command, per_cell).map_err(|error| match error {
        RunError::TimedOut => Fallback::TimedOut(format!(
            "the program ran past {} s ({} s a cell)",
            per_cell.as_secs_f64(),
            timeout.as_secs_f64()
        )),
        RunError::Start(error) => {
            Fallback::Environment(format!("cannot run {}: {error}", executable.display()))
        }
    })?;
    let runs = program.split(&run)?;
    let sources = program
        .cells
        .iter()
        .filter_map(|c| Some((c.position, notebook.cells.get(c.position)?.source.text())))
        .collect();
    Ok((
        BatchSession { runs, sources },
        started.elapsed().as_secs_f64(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::notebook::Notebook;

    /// A cell's source and its tags.
    type Cell<'a> = (&'a str, &'a [&'a str]);

    fn notebook(cells: &[Cell]) -> Notebook {
        let cells: Vec<serde_json::Value> = cells
            .iter()
            .map(|(source, tags)| {
                serde_json::json!({"cell_type": "code", "execution_count": null, "metadata": {"tags": tags},
                    "outputs": [], "source": source})
            })
            .collect();
        let text =
            serde_json::json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
        Notebook::parse(&text.to_string()).unwrap()
    }

    #[test]
    fn what_the_batch_engine_cannot_reproduce_is_named_by_kind_and_cell() {
        let folder = Path::new("/");
        let cases: [(&[Cell], Fallback); 3] = [
            (
                &[("let a = 1;", &[]), ("static S: u8 = 1;", &[])],
                Fallback::Cell {
                    cell: 2,
                    why: "defines a static (evcxr gives every cell its own copy, one program has one)".into(),
                },
            ),
            (
                &[("panic!()", &["raises-exception"])],
                Fallback::Cell {
                    cell: 1,
                    why: "is tagged raises-exception (a program that stops there runs no further)".into(),
                },
            ),
            (
                &[(":timing", &[])],
                Fallback::Cell {
                    cell: 1,
                    why: "uses the evcxr command :timing (the batch engine compiles only :dep)".into(),
                },
            ),
        ];
        for (cells, expected) in cases {
            let error = Program::new(&notebook(cells), folder)
                .err()
                .expect("refused");
            assert_eq!(error, expected);
        }
    }

    #[test]
    fn a_cell_is_answered_only_for_the_text_it_was_built_from() {
        let ran = CellRun {
            outputs: Vec::new(),
            raised: None,
            seconds: 0.5,
        };
        let mut session = BatchSession {
            runs: HashMap::from([(0, ran.clone()), (1, ran)]),
            sources: HashMap::from([(0, "let a = 1;".to_owned()), (1, "a".to_owned())]),
        };
        assert_eq!(session.run(0, "let a = 1;").raised, None);
        let changed = session.run(1, "a + 1");
        assert!(
            matches!(&changed.raised, Some(Raised::Lost(why)) if why.contains("another text")),
            "{:?}",
            changed.raised
        );
        // A cell the program never ran (or already handed out) is lost, never invented.
        assert!(matches!(
            session.run(0, "let a = 1;").raised,
            Some(Raised::Lost(_))
        ));
    }
}
