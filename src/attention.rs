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

/// `softmax(Q K^T / sqrt(d_k)) V` with the stable softmax, `d_k` being the columns of K.
///
/// The scores are divided by `sqrt(d_k)` (not multiplied by its inverse), as the documents'
/// NumPy code does, so they round the same way. With zero query tokens every result has zero
/// rows; with zero key tokens the weights have zero columns and the output is all zeros (as
/// NumPy's `w @ V` gives). NaN and `inf` propagate as in NumPy.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // scores = np.dot(Q, K.T) / np.sqrt(K.shape[-1])
/// let q = array![[1.0, 0.0], [0.0, 1.0]];
/// let a = scaled_dot_product_attention(&q, &q, &array![[1.0], [3.0]])?;
/// assert_eq!(a.scores, array![[1.0 / 2f64.sqrt(), 0.0], [0.0, 1.0 / 2f64.sqrt()]]);
/// assert!((a.weights.row(0).sum() - 1.0).abs() < 1e-15);
/// assert_eq!(a.output.dim(), (2, 1));
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Mismatch`] when Q and K have different numbers of columns, or K and V
/// different numbers of rows.
pub fn scaled_dot_product_attention<'a>(
    q: impl Into<ArrayView2<'a, f64>>,
    k: impl Into<ArrayView2<'a, f64>>,
    v: impl Into<ArrayView2<'a, f64>>,
) -> Result<Attention, AttentionError> {
    scaled_dot_product_attention_with(q, k, v, Softmax::Stable)
}

/// [`scaled_dot_product_attention`] with a chosen softmax (seeds 003 and 004 use the naive one).
///
/// ```
/// use attention_lab::prelude::*;
///
/// // w = np.exp(scores) / np.sum(np.exp(scores), axis=1, keepdims=True)
/// let big = array![[1000.0, 0.0]];
/// let naive = scaled_dot_product_attention_with(&big, &big, &array![[1.0]], Softmax::Naive)?;
/// assert!(naive.weights[[0, 0]].is_nan()); // exp overflowed
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// As [`scaled_dot_product_attention`].
pub fn scaled_dot_product_attention_with<'a>(
    q: impl Into<ArrayView2<'a, f64>>,
    k: impl Into<ArrayView2<'a, f64>>,
    v: impl Into<ArrayView2<'a, f64>>,
    softmax: Softmax,
) -> Result<Attention, AttentionError> {
    attend(q.into(), k.into(), v.into(), softmax, None)
}

/// [`scaled_dot_product_attention`] with a [`Mask`] added to the scores before the softmax.
///
/// `scores` then holds the masked scores (`-inf` where blocked), as the softmax sees them.
/// A query whose every key is blocked gets zero weights and a zero output row (see
/// [`crate::mask`] for what PyTorch, d2l and burn give instead).
///
/// ```
/// use attention_lab::prelude::*;
///
/// let x = array![[1.0, 0.0], [0.0, 1.0]];
/// let a = scaled_dot_product_attention_masked(&x, &x, &x, &Mask::causal(2))?;
/// assert_eq!(a.weights[[0, 1]], 0.0);
/// assert_eq!(a.output.row(0), x.row(0));
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// As [`scaled_dot_product_attention`], and [`AttentionError::Mismatch`] when the mask is not
/// queries x keys.
pub fn scaled_dot_product_attention_masked<'a>(
    q: impl Into<ArrayView2<'a, f64>>,
    k: impl Into<ArrayView2<'a, f64>>,
    v: impl Into<ArrayView2<'a, f64>>,
    mask: &Mask,
) -> Result<Attention, AttentionError> {
    attend(q.into(), k.into(), v.into(), Softmax::Stable, Some(mask))
}

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
