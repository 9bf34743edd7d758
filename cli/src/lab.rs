//! The flags of `lab`.

use attention_lab_jupyter::lab::Options;
use clap::Args;
use std::path::PathBuf;

/// `attention-lab lab [DIR]`
#[derive(Debug, Args)]
pub struct LabArgs {
    /// Folder JupyterLab opens (the notebooks).
    #[arg(default_value = "notebooks")]
    pub dir: PathBuf,
    /// Port on 127.0.0.1.
    #[arg(long, default_value_t = 8888)]
    pub port: u16,
    /// Do not open a browser; just print the URL.
    #[arg(long = "no-browser")]
    pub no_browser: bool,
}

impl From<LabArgs> for Options {
    fn from(args: LabArgs) -> Options {
        let LabArgs {
            dir,
            port,
            no_browser,
        } = args;
        Options {
            dir,
            port,
            no_browser,
        }
    }
}
