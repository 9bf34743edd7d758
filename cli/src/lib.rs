//! The `attention-lab` command line as a library: each subcommand is a module, and
//! [`run`] parses the arguments and runs one. The binary (`main.rs`) only adds the process
//! set-up evcxr needs; fuzz targets call the readers directly (for example
//! [`replay::notebook::Notebook::parse`], [`replay::compare::parse_sanitize`] and
//! [`matrices::json_matrix`]).

pub mod error;
pub mod exercise;
pub mod grade;
#[cfg(feature = "kernel")]
pub mod kernel;
#[cfg(feature = "kernel")]
pub mod lab;
pub mod matrices;
#[cfg(feature = "kernel")]
pub mod replay;
/// Without the `kernel` feature (the fuzz targets' build, which would otherwise compile evcxr
/// and rust-analyzer with sanitizers): replay's readers only.
#[cfg(not(feature = "kernel"))]
pub mod replay {
    #[path = "compare.rs"]
    pub mod compare;
    #[path = "notebook.rs"]
    pub mod notebook;
}
pub mod roster;
pub mod show;
pub mod solve;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Top-level command line.
#[derive(Debug, Parser)]
#[command(name = "attention-lab", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    #[cfg(feature = "kernel")]
    /// Re-run evcxr notebooks and check their stored outputs (nbval for Rust).
    Replay(replay::ReplayArgs),
    /// Print .npy files exactly as NumPy's print(a) or repr(a) would.
    Show(show::ShowArgs),
    /// Solve a multi-head self-attention problem step by step, as a NumPy worked example.
    Solve(solve::SolveArgs),
    /// Make a new multi-head self-attention problem sheet (Markdown or LaTeX) from a seed.
    Exercise(exercise::ExerciseArgs),
    /// Mark students' answers against their keys and name the mistake of each wrong part.
    Grade(grade::GradeArgs),
    #[cfg(feature = "kernel")]
    /// Open the notebooks in JupyterLab with the project's Rust kernel (sets it all up once).
    Lab(lab::LabArgs),
    #[cfg(feature = "kernel")]
    /// The Rust Jupyter kernel in this binary: install or uninstall its kernelspec, or serve.
    Kernel(kernel::KernelArgs),
}

/// Parses the process's arguments and runs the subcommand; returns the exit status
/// (0 ok, 1 a check failed, 2 bad input; a closed stdout ends quietly with 0).
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     attention_lab_cli::run()
/// }
/// ```
pub fn run() -> ExitCode {
    error::open_standard_streams();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version: stdout, status 0 (a closed pipe is no error here either).
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            error::warn(&one_line(&e.render().to_string()));
            return ExitCode::from(error::EXIT_BAD_INPUT);
        }
    };
    error::finish(match cli.command {
        #[cfg(feature = "kernel")]
        Command::Replay(args) => replay::run(args),
        Command::Show(args) => show::run(args),
        Command::Solve(args) => solve::run(args),
        Command::Exercise(args) => exercise::run(args),
        Command::Grade(args) => grade::run(args),
        #[cfg(feature = "kernel")]
        Command::Lab(args) => lab::run(args),
        #[cfg(feature = "kernel")]
        Command::Kernel(args) => kernel::run(args),
    })
}

/// clap's message up to its first blank line, on one line: `error: invalid value 'x' for
/// '--seed <S>': invalid digit found in string` (the usage and the `--help` tip are dropped).
fn one_line(message: &str) -> String {
    message
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A bug (ours or evcxr's) should give one line, not a backtrace, even though
/// RUST_BACKTRACE may be set; a closed stderr must not turn it into an abort.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        error::warn(&format!(
            "internal error in thread {name}: {payload}{location}"
        ));
    }));
}
