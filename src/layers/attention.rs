//! Scaled dot-product attention: `softmax(Q K^T / sqrt(d_k)) V`.

use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use crate::error::{reserve_matrix, AttentionError, Operand};
use crate::into::fit_matrix;
use crate::layers::mask::Mask;
use crate::layers::softmax::Softmax;

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

/// The name of the scores in an error.
pub(crate) const SCORES: &str = "scores (Q K^T)";

/// The full path: every step, with `mask` added to the scores when there is one.
pub(crate) fn attend(
    q: ArrayView2<'_, f64>,
    k: ArrayView2<'_, f64>,
    v: ArrayView2<'_, f64>,
    softmax: Softmax,
    mask: Option<&Mask>,
) -> Result<Attention, AttentionError> {
    check([q, k, v])?;
    // The scores are N_q x N_k: a million tokens would need 8 TB, so ask for it first.
    drop(reserve_matrix(SCORES, q.nrows(), k.nrows())?);
    let mut a = Attention {
        scores: Array2::zeros((0, 0)),
        weights: Array2::zeros((q.nrows(), k.nrows())),
        output: Array2::zeros((q.nrows(), v.ncols())),
    };
    attend_into(
        [q, k, v],
        softmax,
        mask,
        &mut a.scores,
        a.weights.view_mut(),
        a.output.view_mut(),
    )?;
    Ok(a)
}

/// [`attend`] written into matrices the caller has: `scores` is made N_q x N_k (its memory
/// kept when it has room), `weights` must be N_q x N_k and `output` N_q x d_v.
pub(crate) fn attend_into(
    [q, k, v]: [ArrayView2<'_, f64>; 3],
    softmax: Softmax,
    mask: Option<&Mask>,
    scores: &mut Array2<f64>,
    weights: ArrayViewMut2<'_, f64>,
    output: ArrayViewMut2<'_, f64>,
) -> Result<(), AttentionError> {
    let apply = |scores: ArrayView2<'_, f64>, weights: ArrayViewMut2<'_, f64>, masked| {
        softmax.apply_into(scores, weights, masked)
    };
    attend_with([q, k, v], apply, mask, scores, weights, output)
}

/// [`attend_into`] with the encoder's softmax (`exp` on whole vectors).
#[cfg(feature = "encoder")]
pub(crate) fn attend_fast_into(
    qkv: [ArrayView2<'_, f64>; 3],
    softmax: Softmax,
    mask: Option<&Mask>,
    scores: &mut Array2<f64>,
    weights: ArrayViewMut2<'_, f64>,
    output: ArrayViewMut2<'_, f64>,
) -> Result<(), AttentionError> {
    let apply = |scores: ArrayView2<'_, f64>, weights: ArrayViewMut2<'_, f64>, masked| {
        crate::layers::softmax::apply_fast_into(softmax, scores, weights, masked)
    };
    attend_with(qkv, apply, mask, scores, weights, output)
}

/// [`attend_into`], the softmax (scores, weights, whether masked) given by `apply`.
fn attend_with(
    [q, k, v]: [ArrayView2<'_, f64>; 3],
    apply: impl FnOnce(ArrayView2<'_, f64>, ArrayViewMut2<'_, f64>, bool),
    mask: Option<&Mask>,
    scores: &mut Array2<f64>,
    mut weights: ArrayViewMut2<'_, f64>,
    mut output: ArrayViewMut2<'_, f64>,
) -> Result<(), AttentionError> {
    check([q, k, v])?;
    fit_matrix(scores, SCORES, (q.nrows(), k.nrows()))?;
    let d_k = k.ncols() as f64;
    general_mat_mul(1.0, &q, &k.t(), 0.0, scores);
    *scores /= d_k.sqrt();
    if let Some(mask) = mask {
        mask.apply(scores)?;
    }
    apply(scores.view(), weights.view_mut(), mask.is_some());
    general_mat_mul(1.0, &weights, &v, 0.0, &mut output);
    Ok(())
}

/// Q and K must share d_k, K and V their rows.
fn check([q, k, v]: [ArrayView2<'_, f64>; 3]) -> Result<(), AttentionError> {
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
    Ok(())
}
