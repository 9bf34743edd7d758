//! Chooses and starts the engine for a notebook: the batch engine when asked and able, else
//! evcxr. The one module that knows both engines; the seam they implement ([`super::engine`])
//! knows neither.

use super::batch;
use super::engine::{EngineKind, KernelOptions, Session};
use super::notebook::Notebook;
use super::runner::Kernel;
use indicatif::ProgressBar;
use std::path::Path;

/// Settings for every notebook's engine.
///
/// ```
/// use attention_lab_jupyter::replay::engine::{EngineKind, KernelOptions};
/// use attention_lab_jupyter::replay::launch::EngineOptions;
/// let kernel = KernelOptions { timeout: std::time::Duration::from_secs(60), cache_mib: 500 };
/// let options = EngineOptions { kind: EngineKind::Batch, kernel };
/// assert_eq!(options.kind, EngineKind::Batch);
/// ```
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// The engine asked for.
    pub kind: EngineKind,
    /// evcxr's settings (also the batch engine's timeout per cell).
    pub kernel: KernelOptions,
}

/// A started session and how it came to be (what [`start`] gives).
///
/// ```no_run
/// # use attention_lab_jupyter::replay::{engine::*, launch::*, notebook::Notebook};
/// # let notebook = Notebook::parse(r#"{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"#).unwrap();
/// # let kernel = KernelOptions { timeout: std::time::Duration::from_secs(60), cache_mib: 500 };
/// # let options = EngineOptions { kind: EngineKind::Batch, kernel };
/// # let path = std::path::Path::new("empty.ipynb");
/// if let Ok(started) = start(&notebook, path, "empty", &options, &indicatif::ProgressBar::hidden()) {
///     println!("{} in {:.1} s", started.engine, started.startup_seconds);
/// }
/// ```
pub struct Started {
    /// The session.
    pub session: Box<dyn Session>,
    /// The engine that runs the cells.
    pub engine: EngineKind,
    /// Why the batch engine handed the notebook to evcxr.
    pub fallback: Option<String>,
    /// Seconds to start: evcxr's start-up, or the batch engine's build and run.
    pub startup_seconds: f64,
}

/// Why no engine could start, and whether the batch engine had fallen back first (what
/// [`start`] gives when it fails).
///
/// ```no_run
/// # use attention_lab_jupyter::replay::{engine::*, launch::*, notebook::Notebook};
/// # let notebook = Notebook::parse(r#"{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"#).unwrap();
/// # let kernel = KernelOptions { timeout: std::time::Duration::from_secs(60), cache_mib: 500 };
/// # let options = EngineOptions { kind: EngineKind::Evcxr, kernel };
/// # let path = std::path::Path::new("empty.ipynb");
/// if let Err(failed) = start(&notebook, path, "empty", &options, &indicatif::ProgressBar::hidden()) {
///     eprintln!("{} (fallback: {:?})", failed.error, failed.fallback);
/// }
/// ```
pub struct NotStarted {
    /// The error.
    pub error: String,
    /// Why the batch engine handed the notebook to evcxr.
    pub fallback: Option<String>,
}

/// Starts the engine for `notebook`, the file `path` (whose folder is the current one;
/// `label` names it on the progress bar): the batch engine when asked and able, else evcxr.
///
/// ```no_run
/// use attention_lab_jupyter::replay::engine::{EngineKind, KernelOptions};
/// use attention_lab_jupyter::replay::launch::{start, EngineOptions};
/// use attention_lab_jupyter::replay::notebook::Notebook;
/// let path = std::path::Path::new("notebooks/002_problem_sheet.ipynb");
/// let notebook = Notebook::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
/// let kernel = KernelOptions { timeout: std::time::Duration::from_secs(120), cache_mib: 500 };
/// let options = EngineOptions { kind: EngineKind::Batch, kernel };
/// let bar = indicatif::ProgressBar::hidden();
/// if let Ok(started) = start(&notebook, path, "002", &options, &bar) {
///     println!("{} ({:?})", started.engine, started.fallback);
///     started.session.shutdown();
/// }
/// ```
///
/// # Errors
/// Neither engine started: evcxr's error, and the batch engine's reason to fall back.
pub fn start(
    notebook: &Notebook,
    path: &Path,
    label: &str,
    options: &EngineOptions,
    progress: &ProgressBar,
) -> Result<Started, NotStarted> {
    let mut fallback = None;
    if options.kind == EngineKind::Batch {
        progress.set_message(format!("{label} (building it as one program)"));
        match batch::start(notebook, path, options.kernel.timeout) {
            Ok((session, seconds)) => {
                return Ok(Started {
                    session: Box::new(session),
                    engine: EngineKind::Batch,
                    fallback: None,
                    startup_seconds: seconds,
                })
            }
            Err(reason) => fallback = Some(reason.to_string()),
        }
    }
    progress.set_message(format!("{label} (starting evcxr)"));
    match Kernel::start(&options.kernel) {
        Ok((kernel, seconds)) => Ok(Started {
            session: Box::new(kernel),
            engine: EngineKind::Evcxr,
            fallback,
            startup_seconds: seconds,
        }),
        Err(error) => Err(NotStarted {
            error: error.to_string(),
            fallback,
        }),
    }
}
