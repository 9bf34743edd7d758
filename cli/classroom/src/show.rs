//! The flags of `show`.

use attention_lab::np::PrintOptions;
use attention_lab_classroom::show::Options;
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

impl From<ShowArgs> for Options {
    fn from(args: ShowArgs) -> Options {
        let ShowArgs {
            files,
            precision,
            suppress,
            repr,
        } = args;
        Options {
            files,
            precision,
            suppress,
            repr,
        }
    }
}
