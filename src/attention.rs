//! Scaled dot-product attention: `softmax(Q K^T / sqrt(d_k)) V`.

use ndarray::{Array2, ArrayView2};

use crate::error::{reserve_matrix, AttentionError, Operand};
use crate::mask::Mask;
use crate::softmax::Softmax;

/// Every step of one scaled dot-product attention.
#[derive(Debug, Clone, PartialEq)]
pub struct Attention {
    /// `Q K^T / sqrt(d_k)`, one row per query token, one column per key token.
    pub scores: Array2<f64>,
    /// The softmax of each row of `scores`: each row sums to 1.
    pub weights: Array2<f64>,
    /// `weights V`: one row per query token, one column per value dimension.
    pub output: Array2<f64>,
}

/// The full path: every step, with `mask` added to the scores when there is one.
pub(crate) fn attend(
    q: ArrayView2<'_, f64>,
    k: ArrayView2<'_, f64>,
    v: ArrayView2<'_, f64>,
    softmax: Softmax,
    mask: Option<&Mask>,
) -> Result<Attention, AttentionError> {
    if q.ncols() != k.ncols() {
        return Err(AttentionError::mismatch(
            Operand::new("Q", q.shape()),
            Operand::new("K", k.shape()),
            "Q and K must have the same number of columns (d_k)",
        ));
    }
    if k.nrows() != v.nrows() {
        return Err(AttentionError::mismatch(
            Operand::new("K", k.shape()),
            Operand::new("V", v.shape()),
            "K and V must have the same number of rows (one per token)",
        ));
    }
    // The scores are N_q x N_k: a million tokens would need 8 TB, so ask for it first.
    drop(reserve_matrix("scores (Q K^T)", q.nrows(), k.nrows())?);
    let d_k = k.ncols() as f64;
    let mut scores = q.dot(&k.t()) / d_k.sqrt();
    if let Some(mask) = mask {
        mask.apply(&mut scores)?;
    }
    let weights = match mask {
        Some(_) => softmax.apply_masked(&scores),
        None => softmax.apply(&scores),
    };
    let output = weights.dot(&v);
    Ok(Attention {
        scores,
        weights,
        output,
    })
}
