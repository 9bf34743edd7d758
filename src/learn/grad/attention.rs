//! The backward pass of scaled dot-product attention, `softmax(Q K^T / sqrt(d_k)) V`.

use ndarray::{Array2, ArrayView2};

use crate::error::AttentionError;
use crate::layers::attention::Attention;
use crate::learn::grad::softmax::softmax_backward;
use crate::learn::grad::{require, require_same};

/// Every gradient of one scaled dot-product attention, from `dL/doutput` back to Q, K, V.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let q = array![[1.0, 2.0], [0.0, 1.0]];
/// let a = scaled_dot_product_attention(&q, &q, &q, &Attend::new())?;
/// let grad: AttentionGrad = attention_backward(&q, &q, &q, &a, &Array2::ones((2, 2)))?;
/// assert_eq!(grad.dweights.dim(), (2, 2)); // queries x keys, as the weights
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionGrad {
    /// `dL/dweights = dL/doutput V^T`.
    pub dweights: Array2<f64>,
    /// `dL/dscores`, through the softmax ([`softmax_backward`]); zero where a key is blocked.
    pub dscores: Array2<f64>,
    /// `dL/dQ = dscores K / sqrt(d_k)`.
    pub dq: Array2<f64>,
    /// `dL/dK = dscores^T Q / sqrt(d_k)`.
    pub dk: Array2<f64>,
    /// `dL/dV = weights^T dL/doutput`.
    pub dv: Array2<f64>,
}

/// The gradients of [`scaled_dot_product_attention`](crate::layers::attend::scaled_dot_product_attention)
/// from its inputs `q`, `k`, `v`, what it kept (`attention`, masked or not) and
/// `doutput = dL/doutput`. A mask needs no argument: its blocked weights are 0, so their
/// gradients are too.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let q = array![[1.0, 0.0], [0.0, 1.0]];
/// let v = array![[1.0], [3.0]];
/// let a = scaled_dot_product_attention(&q, &q, &v, &Attend::new().causal())?;
/// let grad = attention_backward(&q, &q, &v, &a, &array![[1.0], [1.0]])?;
/// assert_eq!(grad.dv, array![[1.0 + a.weights[[1, 0]]], [a.weights[[1, 1]]]]);
/// assert_eq!(grad.dscores.row(0), array![0.0, 0.0]); // one key: the weight is always 1
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Mismatch`] when Q and K differ in columns, K and V in rows, the weights
/// are not queries x keys, or `doutput` is not the shape of the output.
pub fn attention_backward<'a>(
    q: impl Into<ArrayView2<'a, f64>>,
    k: impl Into<ArrayView2<'a, f64>>,
    v: impl Into<ArrayView2<'a, f64>>,
    attention: &Attention,
    doutput: &Array2<f64>,
) -> Result<AttentionGrad, AttentionError> {
    require_same(
        ("dL/doutput", doutput.shape()),
        ("output", attention.output.shape()),
    )?;
    backward(q.into(), k.into(), v.into(), &attention.weights, doutput)
}

/// The chain rule through `weights V`, the softmax and `Q K^T / sqrt(d_k)`.
pub(crate) fn backward(
    q: ArrayView2<'_, f64>,
    k: ArrayView2<'_, f64>,
    v: ArrayView2<'_, f64>,
    weights: &Array2<f64>,
    doutput: &Array2<f64>,
) -> Result<AttentionGrad, AttentionError> {
    require(
        q.ncols() == k.ncols(),
        ("Q", q.shape()),
        ("K", k.shape()),
        "Q and K must have the same number of columns (d_k)",
    )?;
    require(
        k.nrows() == v.nrows(),
        ("K", k.shape()),
        ("V", v.shape()),
        "K and V must have the same number of rows (one per token)",
    )?;
    require(
        weights.dim() == (q.nrows(), k.nrows()),
        ("weights", weights.shape()),
        ("Q K^T", &[q.nrows(), k.nrows()]),
        "the weights must be queries x keys, as Q K^T",
    )?;
    require(
        doutput.dim() == (q.nrows(), v.ncols()),
        ("dL/doutput", doutput.shape()),
        ("weights V", &[q.nrows(), v.ncols()]),
        "a gradient must have the shape of the value it is the gradient of",
    )?;
    let dweights = doutput.dot(&v.t());
    let dv = weights.t().dot(doutput);
    let dscores = softmax_backward(weights, &dweights)?;
    // The forward pass divides by sqrt(d_k), so the backward pass does too.
    let scale = (k.ncols() as f64).sqrt();
    let dq = dscores.dot(&k) / scale;
    let dk = dscores.t().dot(&q) / scale;
    Ok(AttentionGrad {
        dweights,
        dscores,
        dq,
        dk,
        dv,
    })
}
