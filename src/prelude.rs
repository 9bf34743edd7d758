//! Everything a notebook cell needs: `use attention_lab::prelude::*;`.

pub use crate::np;
pub use crate::np::*;
pub use ndarray::{array, s, Array1, Array2, ArrayView2, Axis};
