//! Loading a layer of PyTorch's `nn.MultiheadAttention`.
//!
//! PyTorch keeps each projection as `out x in` and computes `x @ W.T + b`; this library
//! computes `X W + b`, so every matrix is transposed. With `E = embed_dim`, `h = num_heads`
//! and head `i` using columns `i*E/h .. (i+1)*E/h` of each projection:
//!
//! | PyTorch (state_dict key) | shape | here |
//! |---|---|---|
//! | `in_proj_weight[0:E]` | E x E | W_Q = its transpose, split into `h` column blocks |
//! | `in_proj_weight[E:2E]` | E x E | W_K = its transpose, split likewise |
//! | `in_proj_weight[2E:3E]` | E x E | W_V = its transpose, split likewise |
//! | `q_proj_weight` (when kdim or vdim is not E) | E x E | W_Q = its transpose, split likewise |
//! | `k_proj_weight` | E x kdim | W_K = its transpose (kdim x E), split likewise |
//! | `v_proj_weight` | E x vdim | W_V = its transpose (vdim x E), split likewise |
//! | `in_proj_bias[0:E]`, `[E:2E]`, `[2E:3E]` | 3E | b_Q, b_K, b_V, split into `h` blocks |
//! | `out_proj.weight` | E x E | W_O = its transpose |
//! | `out_proj.bias` | E | b_O |
//!
//! Both scale the scores by `1/sqrt(E/h)`. PyTorch's `bias_k`, `bias_v` (`add_bias_kv`) and
//! `add_zero_attn` are not supported. PyTorch's boolean masks mean *blocked* where `True`, as
//! [`Mask::from_blocked`](crate::layers::mask::Mask::from_blocked); its `key_padding_mask[b]` is
//! [`Mask::key_padding`](crate::layers::mask::Mask::key_padding), and its returned weights are
//! `heads[i].weights` (`average_attn_weights=False`) or
//! [`MultiHeadOutput::averaged_weights`](crate::layers::heads::MultiHeadOutput::averaged_weights).
//! A whole batch (`batch_first=True`) with its `key_padding_mask` and `attn_mask` (both given by
//! [`Attend`](crate::layers::attend::Attend)) goes through
//! [`MultiHead::forward_batch`] or [`MultiHead::forward_cross_batch`], whose
//! [`BatchOutput`](crate::layers::batch::BatchOutput) gives `attn_output` and the weights with their
//! batch axis.

use ndarray::{s, Array1, Array2, ArrayView2};

use crate::error::{AttentionError, Operand};
use crate::layers::heads::{Head, MultiHead};

/// The input projections of an `nn.MultiheadAttention`, as its `state_dict` holds them.
#[derive(Debug, Clone, PartialEq)]
pub enum InProj {
    /// `in_proj_weight`, 3E x E: Q, K and V stacked (kdim = vdim = E).
    Packed(Array2<f64>),
    /// `q_proj_weight` (E x E), `k_proj_weight` (E x kdim), `v_proj_weight` (E x vdim): what
    /// PyTorch keeps when kdim or vdim is not E.
    Separate {
        /// `q_proj_weight`, E x E.
        q_proj_weight: Array2<f64>,
        /// `k_proj_weight`, E x kdim.
        k_proj_weight: Array2<f64>,
        /// `v_proj_weight`, E x vdim.
        v_proj_weight: Array2<f64>,
    },
}

/// The arrays of an `nn.MultiheadAttention`'s `state_dict`, named as PyTorch names them.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchWeights {
    /// `in_proj_weight`, or `q_proj_weight`, `k_proj_weight` and `v_proj_weight`.
    pub in_proj: InProj,
    /// `in_proj_bias` (3E), absent with `bias=False`.
    pub in_proj_bias: Option<Array1<f64>>,
    /// `out_proj.weight`, E x E.
    pub out_proj_weight: Array2<f64>,
    /// `out_proj.bias` (E), absent with `bias=False`.
    pub out_proj_bias: Option<Array1<f64>>,
}

fn operand(name: &str, m: &Array2<f64>) -> Operand {
    Operand::new(name, m.shape())
}

impl MultiHead {
    /// A layer from the weights of PyTorch's `nn.MultiheadAttention(E, h, bias=False)`
    /// (`kdim` = `vdim` = E): [`MultiHead::from_torch_weights`] with `in_proj_weight` and
    /// `out_proj.weight` only (see [`crate::layers::torch`] for the mapping).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let in_proj = Array2::from_shape_fn((6, 2), |(i, j)| (i * 2 + j) as f64);
    /// let layer = MultiHead::from_torch(&in_proj, &Array2::eye(2), 2)?;
    /// assert_eq!(layer.heads()[0].wk(), &array![[4.0], [5.0]]); // row 2 of in_proj, transposed
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when `in_proj_weight` is not 3E x E for the E of
    /// `out_proj.weight` (E x E); [`AttentionError::Split`] when `h` does not divide E.
    pub fn from_torch(
        in_proj_weight: &Array2<f64>,
        out_proj_weight: &Array2<f64>,
        h: usize,
    ) -> Result<MultiHead, AttentionError> {
        MultiHead::from_torch_weights(
            &TorchWeights {
                in_proj: InProj::Packed(in_proj_weight.clone()),
                in_proj_bias: None,
                out_proj_weight: out_proj_weight.clone(),
                out_proj_bias: None,
            },
            h,
        )
    }

    /// A layer from any `nn.MultiheadAttention(E, h, bias=.., kdim=.., vdim=..)`: its
    /// packed or separate input projections, its biases and its output projection (the
    /// table in [`crate::layers::torch`]). With kdim or vdim not E, run it with
    /// [`MultiHead::forward_cross`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // nn.MultiheadAttention(2, 1, kdim=3, vdim=1)
    /// let weights = TorchWeights {
    ///     in_proj: InProj::Separate {
    ///         q_proj_weight: Array2::eye(2),
    ///         k_proj_weight: Array2::ones((2, 3)),
    ///         v_proj_weight: array![[1.0], [2.0]],
    ///     },
    ///     in_proj_bias: Some(array![0.0, 0.0, 0.0, 0.0, 0.5, 0.5]),
    ///     out_proj_weight: Array2::eye(2),
    ///     out_proj_bias: Some(array![1.0, -1.0]),
    /// };
    /// let layer = MultiHead::from_torch_weights(&weights, 1)?;
    /// assert_eq!(layer.heads()[0].wv(), &array![[1.0, 2.0]]); // vdim x E
    /// let out = layer.forward_cross(&array![[1.0, 0.0]], &Array2::zeros((1, 3)), &array![[2.0]], &Attend::new())?;
    /// assert_eq!(out.output, Some(array![[3.5, 3.5]])); // v = [2.5, 4.5], plus b_O
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] naming the PyTorch arrays whose shapes do not fit one E
    /// (out_proj.weight E x E, in_proj_weight 3E x E, q_proj_weight E x E, k_proj_weight and
    /// v_proj_weight with E rows, in_proj_bias 3E, out_proj.bias E);
    /// [`AttentionError::Split`] when `h` is 0 or does not divide E.
    pub fn from_torch_weights(w: &TorchWeights, h: usize) -> Result<MultiHead, AttentionError> {
        let out = &w.out_proj_weight;
        let e = out.nrows();
        let (wq, wk, wv): (
            ArrayView2<'_, f64>,
            ArrayView2<'_, f64>,
            ArrayView2<'_, f64>,
        ) = match &w.in_proj {
            InProj::Packed(in_proj) => {
                if out.ncols() != e || in_proj.dim() != (3 * e, e) {
                    return Err(AttentionError::mismatch(
                        operand("in_proj_weight", in_proj),
                        operand("out_proj.weight", out),
                        "in_proj_weight must be 3E x E and out_proj.weight E x E",
                    ));
                }
                let block = |i: usize| in_proj.slice(s![i * e..(i + 1) * e, ..]).reversed_axes();
                (block(0), block(1), block(2))
            }
            InProj::Separate {
                q_proj_weight,
                k_proj_weight,
                v_proj_weight,
            } => {
                for (name, m) in [
                    ("q_proj_weight", q_proj_weight),
                    ("k_proj_weight", k_proj_weight),
                    ("v_proj_weight", v_proj_weight),
                ] {
                    let square = name != "q_proj_weight" || m.ncols() == e;
                    if out.ncols() != e || m.nrows() != e || !square {
                        return Err(AttentionError::mismatch(
                            operand(name, m),
                            operand("out_proj.weight", out),
                            "out_proj.weight must be E x E, q_proj_weight E x E, \
                                 k_proj_weight E x kdim and v_proj_weight E x vdim",
                        ));
                    }
                }
                (q_proj_weight.t(), k_proj_weight.t(), v_proj_weight.t())
            }
        };
        if h == 0 || !e.is_multiple_of(h) {
            return Err(AttentionError::Split {
                matrix: Operand::new("W_Q", wq.shape()),
                h,
            });
        }
        let width = e / h;
        let bias = match &w.in_proj_bias {
            Some(b) if b.len() != 3 * e => {
                return Err(AttentionError::mismatch(
                    Operand::row("in_proj_bias", b.len()),
                    operand("out_proj.weight", out),
                    "in_proj_bias must have 3E entries",
                ))
            }
            b => b.as_ref(),
        };
        let heads = (0..h)
            .map(|i| {
                let cols = i * width..(i + 1) * width;
                let block = |m: &ArrayView2<'_, f64>| m.slice(s![.., cols.clone()]).to_owned();
                let head = Head::cross(block(&wq), block(&wk), block(&wv))?;
                match bias {
                    Some(b) => {
                        let part = |j: usize| {
                            b.slice(s![j * e + i * width..j * e + (i + 1) * width])
                                .to_owned()
                        };
                        head.with_biases(part(0), part(1), part(2))
                    }
                    None => Ok(head),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let layer = MultiHead::new(heads, Some(out.t().to_owned()))?;
        match &w.out_proj_bias {
            Some(bo) => layer.with_output_bias(bo.clone()).map_err(|_| {
                AttentionError::mismatch(
                    Operand::row("out_proj.bias", bo.len()),
                    operand("out_proj.weight", out),
                    "out_proj.bias must have E entries",
                )
            }),
            None => Ok(layer),
        }
    }
}
