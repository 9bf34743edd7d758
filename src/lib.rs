//! attention-lab: multi-head self-attention for the classroom.
//!
//! The crate replays NumPy tutorials on self-attention in Rust, with the same numbers and
//! the same printed text. `use attention_lab::prelude::*;` brings everything a notebook needs.

pub mod attention;
pub mod error;
pub mod heads;
pub mod init;
pub mod np;
pub mod prelude;
pub mod softmax;
