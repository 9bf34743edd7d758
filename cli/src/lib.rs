//! The `attention-lab` command line: clap's arguments over the two sides of the project, the
//! Jupyter side (`attention-lab-jupyter`: replay, lab, kernel) and the classroom tools
//! (`attention-lab-classroom`: show, solve, exercise, grade), a class's JupyterHub
//! (`attention-lab-hub`: hub), and the real models
//! (`attention-lab-model`: encode, generate). Each subcommand's work is there;
//! this crate parses, dispatches, and turns the one error type (`attention_lab_io::error`)
//! into one line and an exit status.

mod encode;
mod generate;
mod hub;
mod kernel;
mod lab;
mod replay;

use attention_lab_classroom_cli as classroom;
use attention_lab_io::error;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Top-level command line.
#[derive(Debug, Parser)]
#[command(name = "attention-lab", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Subcommands.
// Parsed once per process: a large variant costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Re-run evcxr notebooks and check their stored outputs (nbval for Rust).
    Replay(replay::ReplayArgs),
    #[command(flatten)]
    Classroom(classroom::Command),
    /// Open the notebooks in JupyterLab with the project's Rust kernel (sets it all up once).
    Lab(lab::LabArgs),
    /// Serve a class: JupyterHub with a system user, the lessons and a warm kernel for every
    /// student of a roster (needs root; sets it all up once).
    Hub(hub::HubArgs),
    /// The Rust Jupyter kernel in this binary: install or uninstall its kernelspec, or serve.
    Kernel(kernel::KernelArgs),
    /// Run texts through a real model (all-MiniLM-L6-v2): tokens, every head's weights and
    /// the sentence embedding as JSON; each layer's heads as SVG.
    Encode(encode::EncodeArgs),
    /// A real language model (SmolLM2-135M-Instruct) continues a prompt: the text as it is
    /// written; each step's likeliest tokens as JSON; each layer's heads as SVG.
    Generate(generate::GenerateArgs),
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
    let cli: Cli = match classroom::parse() {
        Ok(cli) => cli,
        Err(status) => return status,
    };
    error::finish(match cli.command {
        Command::Replay(args) => attention_lab_jupyter::replay::run(args.into()),
        Command::Classroom(command) => classroom::run(command),
        Command::Lab(args) => attention_lab_jupyter::lab::run(args.into()),
        Command::Hub(args) => attention_lab_hub::run(args.into()),
        Command::Kernel(args) => attention_lab_jupyter::kernel::run(args.into()),
        Command::Encode(args) => attention_lab_model::command::run(args.into()),
        Command::Generate(args) => attention_lab_model::generate::run(args.into()),
    })
}
