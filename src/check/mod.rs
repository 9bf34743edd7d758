//! Mistakes by name, and the classifier that names them: each step of attention's forward and
//! backward passes, done right and done with each known [`Mistake`] ([`step`]), shared by
//! `attention-lab grade` (on a sheet's matrices) and the checks a notebook runs.

mod mistake;
pub mod step;

pub use mistake::Mistake;
