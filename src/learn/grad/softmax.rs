//! The backward pass of the row-wise softmax.

use ndarray::{Array2, Zip};

use crate::error::AttentionError;
use crate::learn::grad::require_same;

/// `dL/dscores` from the softmax's `weights` and `dL/dweights`: each row's Jacobian-vector
/// product `w * (g - sum(g * w))` (the stable and the naive softmax are the same function,
/// so they share it).
///
/// Under a mask it needs nothing more: a blocked entry has weight 0, so its gradient is 0,
/// and a query whose every key is blocked has a zero row of weights (the crate's
/// convention), so its whole row of gradients is 0.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let weights = softmax(&array![[0.0, 0.0]]);
/// let dscores = softmax_backward(&weights, &array![[1.0, 0.0]])?;
/// assert_eq!(dscores, array![[0.25, -0.25]]);
/// let masked = Softmax::Stable.apply_masked(&array![[0.0, f64::NEG_INFINITY], [f64::NEG_INFINITY, f64::NEG_INFINITY]]);
/// assert_eq!(softmax_backward(&masked, &array![[1.0, 2.0], [3.0, 4.0]])?, Array2::zeros((2, 2)));
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Mismatch`] when `dweights` is not the shape of `weights`.
pub fn softmax_backward(
    weights: &Array2<f64>,
    dweights: &Array2<f64>,
) -> Result<Array2<f64>, AttentionError> {
    require_same(
        ("dL/dweights", dweights.shape()),
        ("weights", weights.shape()),
    )?;
    let mut dscores = Array2::zeros(weights.dim());
    Zip::from(dscores.rows_mut())
        .and(weights.rows())
        .and(dweights.rows())
        .for_each(|mut ds, w, g| {
            let dot: f64 = w.iter().zip(g).map(|(w, g)| w * g).sum();
            Zip::from(&mut ds)
                .and(w)
                .and(g)
                .for_each(|ds, &w, &g| *ds = w * (g - dot));
        });
    Ok(dscores)
}
