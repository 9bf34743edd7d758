//! The classroom side of attention-lab: worked solutions (`solve`), problem sheets
//! (`exercise`), a sheet and a key for every student of a roster (`roster`), marking
//! (`grade`), and the readers of `.npy` files and inline JSON matrices they share (`show`,
//! `matrices`). No Jupyter and no evcxr: the binary `attention-lab` adds those
//! (`attention-lab-jupyter`), and `attention-lab-classroom` is these tools alone.
//!
//! Modules, bottom up: `matrices` → `answers` (the answers JSON: its one writer and reader) → `backward` → `solve` → `problem` → `exercise` → `roster`; `student`
//! (ids, the roster file, seeds) under `roster` and `grade`; `grade` over `problem`. No module
//! imports one above it.
//!
//! Each command's module takes its options as a plain value (`show::Options`,
//! `solve::Options`, `exercise::Options`, `grade::Options`); the flags that fill them are
//! the command line's (`attention-lab-classroom-cli`).
//!
//! ```
//! use attention_lab_classroom::exercise::{draw, Options};
//! let problem = draw(&Options { seed: Some(7), ..Options::default() }, 7)?;
//! assert_eq!(problem.wq.len(), 2); // two heads
//! # Ok::<(), attention_lab_io::error::Error>(())
//! ```

pub mod answers;
pub mod backward;
pub mod exercise;
pub mod grade;
pub mod matrices;
pub mod problem;
pub mod roster;
pub mod show;
pub mod solve;
pub mod student;

use attention_lab_io::error::Result;

/// Makes the sheet `exercise` asks for: one to stdout or `output`, or with a roster a sheet
/// and a key for every student.
///
/// ```no_run
/// use attention_lab_classroom::{exercise, make_sheets};
/// make_sheets(&exercise::Options { seed: Some(7), ..exercise::Options::default() })?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// Bad options, a bad roster or secret, a file that cannot be written, a failing stdout.
pub fn make_sheets(options: &exercise::Options) -> Result<()> {
    if options.roster.is_some() {
        roster::run(options)
    } else {
        exercise::run(options)
    }
}
