//! The flags of `replay`.

use attention_lab_jupyter::replay::engine::EngineKind;
use attention_lab_jupyter::{kernel, replay};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// The flags of `replay`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Cell tags (metadata.tags), as nbval: nbval-skip (not run), nbval-ignore-output
(run, not compared), raises-exception (must raise: error output or panic).
Compared: stream text and text/plain exactly; other MIME types only with
--compare-html. Each notebook runs in its own folder, like a Jupyter kernel:
--engine batch (the default) compiles it as one program, in a build folder under
the cache ($ATTENTION_LAB_CACHE/replay-batch), and hands it to evcxr when it
cannot (a compile error, a panic, an error through `?`, an evcxr command other
than :dep, a raises-exception cell); --engine evcxr gives every notebook a
fresh evcxr context that compiles one cell at a time.

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
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0, value_parser = replay::timeout_seconds)]
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
    #[arg(long, value_name = "MIB", default_value_t = kernel::EVCXR_CACHE_MIB)]
    pub cache: u64,
    /// Which engine runs the cells: the whole notebook as one program, or evcxr cell by cell.
    #[arg(long, value_enum, default_value_t = EngineArg::Batch)]
    pub engine: EngineArg,
    /// Off a terminal, one line on stderr per notebook done, with the time left (for `lab`
    /// and `hub`, which discard stdout).
    #[arg(long, hide = true)]
    pub progress_lines: bool,
}

/// The `--engine` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// The whole notebook as one compiled program; falls back to evcxr when it cannot.
    Batch,
    /// One evcxr context, each cell compiled on its own (as the Jupyter kernel does).
    Evcxr,
}

impl From<EngineArg> for EngineKind {
    fn from(engine: EngineArg) -> EngineKind {
        match engine {
            EngineArg::Batch => EngineKind::Batch,
            EngineArg::Evcxr => EngineKind::Evcxr,
        }
    }
}

impl From<ReplayArgs> for replay::Options {
    fn from(args: ReplayArgs) -> replay::Options {
        let ReplayArgs {
            paths,
            update,
            timeout,
            compare_html,
            sanitize,
            json,
            cache,
            engine,
            progress_lines,
        } = args;
        let engine = engine.into();
        replay::Options {
            paths,
            update,
            timeout,
            compare_html,
            sanitize,
            json,
            cache,
            engine,
            progress_lines,
        }
    }
}
