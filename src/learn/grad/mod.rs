//! Backward passes written by hand, and the optimisers that use them (feature `learn`).
//!
//! Each backward pass takes what its forward pass kept (a [`HeadOutput`], an
//! [`Attention`], ...) and the upstream gradient `dL/d(output)`, and returns a struct that
//! keeps *every* intermediate gradient, named after the math (`dz`, `dweights`, `dscores`,
//! `dq`, `dwq`, `dx`), so a notebook can print each step of the chain rule. The row
//! convention is the forward pass's: `Y = X W` with W (in x out), so `dX = dY W^T` and
//! `dW = X^T dY`. `tests/grad.rs` checks every gradient against `torch.autograd` to 1e-10
//! (scripts/grad_goldens.py) and one head's `dwq` against central differences.
//!
//! ```
//! use attention_lab::prelude::*;
//!
//! // L = sum(z): dL/dz is all ones
//! let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
//! let x = array![[1.0, 0.0], [0.5, 2.0]];
//! let out = head.forward(&x, &Attend::new().causal())?;
//! let grad = head.backward(&x, &out, &Array2::ones((2, 2)))?;
//! assert_eq!(grad.dwq.dim(), (2, 2));
//! assert_eq!(grad.dscores.row(0), array![0.0, 0.0]); // token 0 sees only itself
//! let mut wq = head.wq().clone();
//! let mut opt = Sgd::new(0.1, 0.0, 0.0)?;
//! opt.step(&mut [&mut wq], &[&grad.dwq])?;
//! assert_eq!(wq, head.wq() - &(&grad.dwq * 0.1));
//! # Ok::<(), AttentionError>(())
//! ```
//!
//! Files, one concept each: `softmax` ([`softmax_backward`]), `attention`
//! ([`attention_backward`]), `heads` ([`Head::backward`], [`MultiHead::backward`]), `norm`
//! ([`LayerNorm::backward`], [`RmsNorm::backward`]), `feed_forward`
//! ([`FeedForward::backward`], [`SwiGlu::backward`]), `embedding` ([`embedding_backward`]),
//! `loss` ([`cross_entropy`]), `optim` ([`Sgd`], [`AdamW`], [`Optimizer`]) and `linear` (the `X W + b`
//! backward they share).
//!
//! [`HeadOutput`]: crate::layers::heads::HeadOutput
//! [`Attention`]: crate::layers::attention::Attention
//! [`Head::backward`]: crate::layers::heads::Head::backward
//! [`MultiHead::backward`]: crate::layers::heads::MultiHead::backward
//! [`LayerNorm::backward`]: crate::layers::norm::LayerNorm::backward
//! [`RmsNorm::backward`]: crate::layers::norm::RmsNorm::backward
//! [`FeedForward::backward`]: crate::layers::feed_forward::FeedForward::backward
//! [`SwiGlu::backward`]: crate::layers::feed_forward::SwiGlu::backward

mod attention;
mod embedding;
mod feed_forward;
mod heads;
pub(crate) mod linear;
mod loss;
mod norm;
mod optim;
mod softmax;

pub use attention::{attention_backward, AttentionGrad};
pub use embedding::embedding_backward;
pub use feed_forward::{FeedForwardGrad, SwiGluGrad};
pub use heads::{HeadGrad, MultiHeadGrad};
pub use loss::{cross_entropy, CrossEntropy};
pub use norm::{LayerNormGrad, RmsNormGrad};
pub use optim::{AdamW, Optimizer, Sgd};
pub use softmax::softmax_backward;

use crate::error::{AttentionError, Operand};

/// [`AttentionError::Mismatch`] naming both matrices unless `fits`.
pub(crate) fn require(
    fits: bool,
    left: (&str, &[usize]),
    right: (&str, &[usize]),
    rule: &'static str,
) -> Result<(), AttentionError> {
    if fits {
        return Ok(());
    }
    Err(AttentionError::mismatch(
        Operand::new(left.0, left.1),
        Operand::new(right.0, right.1),
        rule,
    ))
}

/// An upstream gradient must have the shape of what it is the gradient of.
pub(crate) fn require_same(
    grad: (&str, &[usize]),
    value: (&str, &[usize]),
) -> Result<(), AttentionError> {
    require(
        grad.1 == value.1,
        grad,
        value,
        "a gradient must have the shape of the value it is the gradient of",
    )
}
