//! `attention-lab show`: print .npy files exactly as NumPy's `print(a)` or `repr(a)` would.

use crate::matrices::read_npy;
use attention_lab::np::PrintOptions;
use attention_lab_io::error::{print, Result};
use clap::Args;

/// Arguments of `attention-lab show`.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  \
    attention-lab show --precision 3 weights.npy\n  \
    [[ 0.123 -1.5    2.   ]\n   [ 0.     0.25   1.   ]]\n\n\
    With several files each array is preceded by a line with its file name.")]
pub struct ShowArgs {
    /// The .npy files (float64, float32, int64, int32 or bool; any number of dimensions).
    #[arg(required = true, value_name = "FILE.npy")]
    pub files: Vec<std::path::PathBuf>,
    /// Digits after the decimal point, as np.set_printoptions(precision=P).
    #[arg(long, value_name = "P", default_value_t = PrintOptions::NUMPY.precision)]
    pub precision: usize,
    /// Never use scientific notation for small numbers, as np.set_printoptions(suppress=True).
    #[arg(long)]
    pub suppress: bool,
    /// Print repr(a) (`array([...])`) instead of print(a).
    #[arg(long)]
    pub repr: bool,
}

/// Runs `show`; returns the exit status.
///
/// # Errors
/// A file that cannot be read or is not a .npy file of a supported dtype; a failing stdout.
pub fn run(args: ShowArgs) -> Result<u8> {
    print(&show(&args)?)?;
    Ok(0)
}

/// The whole output; every file is read before anything is printed, so a bad file gives
/// only its error.
fn show(args: &ShowArgs) -> Result<String> {
    let opts = PrintOptions {
        precision: args.precision,
        suppress: args.suppress,
        ..PrintOptions::NUMPY
    };
    let arrays = args
        .files
        .iter()
        .map(|f| read_npy(f))
        .collect::<Result<Vec<_>, _>>()?;
    let texts: Vec<String> = args
        .files
        .iter()
        .zip(&arrays)
        .map(|(file, a)| {
            let text = if args.repr {
                a.array_repr(&opts)
            } else {
                a.array_str(&opts)
            };
            if args.files.len() == 1 {
                format!("{text}\n")
            } else {
                format!("{}:\n{text}\n", file.display())
            }
        })
        .collect();
    // A blank line between files, as `ls` does with several directories.
    Ok(texts.join("\n"))
}
