//! The learning rooms: exercises checked in a notebook and a student's answers (every build),
//! and (feature `learn`) backward passes by hand and training. Each room is re-exported at the
//! crate's root.

pub mod answers;
pub mod check;
#[cfg(feature = "learn")]
pub mod grad;
#[cfg(feature = "learn")]
pub mod train;
