//! `attention-lab-classroom`: `show`, `solve`, `exercise` and `grade` without the Jupyter side,
//! byte for byte as `attention-lab` runs them (a teacher's machine needs no evcxr for these).

use attention_lab_classroom_cli::{parse, run, Command};
use attention_lab_io::error::{finish, install_panic_hook, open_standard_streams};
use std::process::ExitCode;

/// The classroom tools.
#[derive(Debug, clap::Parser)]
#[command(name = "attention-lab-classroom", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    install_panic_hook();
    open_standard_streams();
    match parse::<Cli>() {
        Ok(cli) => finish(run(cli.command)),
        Err(status) => status,
    }
}
