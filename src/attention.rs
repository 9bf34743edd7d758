//! Scaled dot-product attention: `softmax(Q K^T / sqrt(d_k)) V`.

use ndarray::{Array2, ArrayView2};

use crate::attend::{Attend, Path};
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

/// `softmax(Q K^T / sqrt(d_k)) V`, `d_k` being the columns of K, with the options of
/// `attend` (PyTorch's `F.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...)`).
///
/// On the full path (`&Attend::new()`) it gives an [`Attention`] with every step; streamed
/// ([`Attend::streaming`]) the output alone, up to rounding, without forming the scores. The
/// softmax is the stable one unless [`Attend::softmax`] chooses another.
///
/// The scores are divided by `sqrt(d_k)` (not multiplied by its inverse), as the documents'
/// NumPy code does, so they round the same way. With zero query tokens every result has zero
/// rows; with zero key tokens the weights have zero columns and the output is all zeros (as
/// NumPy's `w @ V` gives). NaN and `inf` propagate as in NumPy. Under a mask, `scores` holds
/// the masked scores (`-inf` where blocked), as the softmax sees them, and a query whose
/// every key is blocked gets zero weights and a zero output row (see [`crate::mask`] for
/// what PyTorch, d2l and burn give instead).
///
/// ```
/// use attention_lab::prelude::*;
///
/// // scores = np.dot(Q, K.T) / np.sqrt(K.shape[-1])
/// let q = array![[1.0, 0.0], [0.0, 1.0]];
/// let v = array![[1.0], [3.0]];
/// let a = scaled_dot_product_attention(&q, &q, &v, &Attend::new())?;
/// assert_eq!(a.scores, array![[1.0 / 2f64.sqrt(), 0.0], [0.0, 1.0 / 2f64.sqrt()]]);
/// assert!((a.weights.row(0).sum() - 1.0).abs() < 1e-15);
/// let causal = scaled_dot_product_attention(&q, &q, &v, &Attend::new().causal())?;
/// assert_eq!(causal.output.row(0), v.row(0)); // token 0 sees only itself
/// let z: Array2<f64> = scaled_dot_product_attention(&q, &q, &v, &Attend::new().streaming(Streaming::default()))?;
/// assert!((&z - &a.output).iter().all(|d| d.abs() < 1e-14));
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Mismatch`] when Q and K have different numbers of columns, K and V
/// different numbers of rows, or the mask is not queries x keys (and, with
/// [`Attend::causal`], when there are more queries than keys);
/// [`AttentionError::NotApplicable`] for [`Attend::key_padding`], which is for batches.
pub fn scaled_dot_product_attention<'a, P: Path>(
    q: impl Into<ArrayView2<'a, f64>>,
    k: impl Into<ArrayView2<'a, f64>>,
    v: impl Into<ArrayView2<'a, f64>>,
    attend: &Attend<'_, P>,
) -> Result<P::Attention, AttentionError> {
    P::attention(q.into(), k.into(), v.into(), attend)
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
