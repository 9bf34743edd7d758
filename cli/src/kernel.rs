//! The flags of `kernel` and its subcommands.

use attention_lab_jupyter::kernel::Action;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `attention-lab kernel ...`
#[derive(Debug, Args)]
pub struct KernelArgs {
    #[command(subcommand)]
    pub command: KernelCommand,
}

#[derive(Debug, Subcommand)]
pub enum KernelCommand {
    /// Write the kernelspec "Rust (attention-lab)" (name attention-lab-rust), pointing at this binary.
    Install(SpecArgs),
    /// Remove the kernelspec that `install` wrote (and nothing else).
    Uninstall(SpecArgs),
    /// Serve one kernel for Jupyter (what the kernelspec runs).
    Serve {
        /// The connection file Jupyter passes as {connection_file}.
        #[arg(long = "control-file", value_name = "FILE")]
        control_file: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct SpecArgs {
    /// Jupyter data folder holding `kernels/` (default: the user's, $JUPYTER_DATA_DIR or
    /// ~/.local/share/jupyter).
    #[arg(long = "jupyter-path", value_name = "DIR")]
    pub jupyter_path: Option<PathBuf>,
}

impl From<KernelArgs> for Action {
    fn from(args: KernelArgs) -> Action {
        match args.command {
            KernelCommand::Install(SpecArgs { jupyter_path }) => Action::Install { jupyter_path },
            KernelCommand::Uninstall(SpecArgs { jupyter_path }) => {
                Action::Uninstall { jupyter_path }
            }
            KernelCommand::Serve { control_file } => Action::Serve { control_file },
        }
    }
}
