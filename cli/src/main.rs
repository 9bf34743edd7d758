//! `attention-lab`: command line tools for the attention-lab notebooks.

mod exercise;
mod grade;
mod kernel;
mod lab;
mod matrices;
mod replay;
mod roster;
mod show;
mod solve;

use clap::{Parser, Subcommand};

/// Top-level command line.
#[derive(Debug, Parser)]
#[command(name = "attention-lab", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
enum Command {
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
    /// Open the notebooks in JupyterLab with the project's Rust kernel (sets it all up once).
    Lab(lab::LabArgs),
    /// The Rust Jupyter kernel in this binary: install or uninstall its kernelspec, or serve.
    Kernel(kernel::KernelArgs),
}

fn main() {
    // Must come first: evcxr re-runs this binary as the child process that
    // executes cells (and as its rustc wrapper); this call never returns there.
    evcxr::runtime_hook();
    install_panic_hook();
    // `kernel serve` re-executes this binary as evcxr_jupyter's `--control_file FILE`.
    if let Some(status) = kernel::serve_if_asked() {
        std::process::exit(status);
    }
    let cli = Cli::parse();
    let status = match cli.command {
        Command::Replay(args) => replay::run(args),
        Command::Show(args) => show::run(args),
        Command::Solve(args) => solve::run(args),
        Command::Exercise(args) => exercise::run(args),
        Command::Grade(args) => grade::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Kernel(args) => kernel::run(args),
    };
    std::process::exit(status);
}

/// A bug (ours or evcxr's) should give one line, not a backtrace, even though
/// RUST_BACKTRACE may be set.
fn install_panic_hook() {
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
        eprintln!("internal error in thread {name}: {payload}{location}");
    }));
}
