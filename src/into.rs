//! Steps that write into matrices the caller already has, so that a pass run again (or the
//! next layer) reuses the memory of the last one instead of asking the system for new pages:
//! the encoder's buffers (`EncoderBuffers`, feature `encoder`) and the full path of
//! `heads` go through these.
//!
//! The products go through `parallel::project_into` and `parallel::project_here_into`,
//! which write straight into the buffer.

use std::sync::{Mutex, PoisonError};

use ndarray::{Array, Array1, Array2, ArrayView2, Dimension, IntoDimension};

use crate::error::{reserve_matrix, AttentionError};
use crate::fast::parallel;

/// `a` given the shape `dim`, keeping its memory when it has room; its values are left as
/// they were (or zero where it grew): every caller overwrites them all.
pub(crate) fn fit<D: Dimension>(a: &mut Array<f64, D>, dim: impl IntoDimension<Dim = D>) {
    let dim = dim.into_dimension();
    if a.raw_dim() == dim && a.is_standard_layout() {
        return;
    }
    let (mut values, _) = std::mem::take(a).into_raw_vec_and_offset();
    values.resize(dim.size(), 0.0);
    *a = Array::from_shape_vec(dim, values).expect("as many values as the shape holds");
}

/// [`fit`] for a matrix that can be large (N x N scores and weights): the memory is asked
/// for first when the shape changes, so a matrix that cannot be had is
/// [`AttentionError::TooLarge`] naming it instead of an abort.
pub(crate) fn fit_matrix(
    a: &mut Array2<f64>,
    name: &str,
    (rows, cols): (usize, usize),
) -> Result<(), AttentionError> {
    if a.dim() != (rows, cols) {
        drop(reserve_matrix(name, rows, cols)?);
    }
    fit(a, (rows, cols));
    Ok(())
}

/// `f` on every one of `parts` (with its index), shared among the threads by
/// `parallel::map` (`work` multiply-adds in all decides how many); the results in order.
pub(crate) fn each<P: Send, T: Send>(
    parts: impl Iterator<Item = P>,
    work: usize,
    f: impl Fn(usize, P) -> T + Sync,
) -> Vec<T> {
    // Each part is taken once, by the one thread that computes it.
    let parts: Vec<Mutex<Option<P>>> = parts.map(|p| Mutex::new(Some(p))).collect();
    parallel::map(parts.len(), work, |i| {
        let part = parts[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("each part is computed once");
        f(i, part)
    })
}

/// `x w`, plus `b` on every row when there is a bias, into `out` ([`fit`] to its shape):
/// `parallel::project_here_into`, on the calling thread.
pub(crate) fn project_here_to(
    x: ArrayView2<'_, f64>,
    w: &Array2<f64>,
    b: Option<&Array1<f64>>,
    out: &mut Array2<f64>,
) {
    fit(out, (x.nrows(), w.ncols()));
    parallel::project_here_into(x, w, b, out.view_mut());
}

/// `x w + b` into `out` ([`fit`] to its shape): `parallel::project`, its columns shared among
/// the threads.
pub(crate) fn project_to(
    x: ArrayView2<'_, f64>,
    w: &Array2<f64>,
    b: Option<&Array1<f64>>,
    out: &mut Array2<f64>,
) {
    fit(out, (x.nrows(), w.ncols()));
    parallel::project_into(x, w, b, out.view_mut());
}
