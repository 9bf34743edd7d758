//! `attention-lab`: command line tools for the attention-lab notebooks.

use attention_lab_io::error::install_panic_hook;
use attention_lab_jupyter::kernel;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Must come first: evcxr re-runs this binary as the child process that
    // executes cells (and as its rustc wrapper); this call never returns there.
    attention_lab_jupyter::runtime_hook();
    install_panic_hook();
    // `kernel serve` re-executes this binary as evcxr_jupyter's `--control_file FILE`.
    if let Some(status) = kernel::serve_if_asked() {
        return status;
    }
    attention_lab_cli::run()
}
