//! `attention-lab show`: print .npy files exactly as NumPy's `print(a)` or `repr(a)` would.

use crate::matrices::read_npy;
use attention_lab::np::PrintOptions;
use attention_lab_io::error::{print, Result};

/// What `show` prints: the files, and NumPy's print options.
///
/// ```no_run
/// use attention_lab_classroom::show::{run, Options};
/// let options = Options { files: vec!["weights.npy".into()], precision: 3, suppress: false, repr: false };
/// assert_eq!(run(options)?, 0);
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The .npy files (float64, float32, int64, int32 or bool; any number of dimensions).
    pub files: Vec<std::path::PathBuf>,
    /// Digits after the decimal point, as `np.set_printoptions(precision=P)`.
    pub precision: usize,
    /// Never scientific notation for small numbers, as `np.set_printoptions(suppress=True)`.
    pub suppress: bool,
    /// Print `repr(a)` (`array([...])`) instead of `print(a)`.
    pub repr: bool,
}

/// Runs `show`; returns the exit status.
///
/// # Errors
/// A file that cannot be read or is not a .npy file of a supported dtype; a failing stdout.
pub fn run(args: Options) -> Result<u8> {
    print(&show(&args)?)?;
    Ok(0)
}

/// The whole output; every file is read before anything is printed, so a bad file gives
/// only its error.
fn show(args: &Options) -> Result<String> {
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
