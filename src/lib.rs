//! attention-lab: multi-head self-attention for the classroom, with NumPy's numbers and
//! NumPy's printed text.
//!
//! The crate replays NumPy tutorials on self-attention in Rust (in evcxr Jupyter notebooks or
//! plain programs): every intermediate (Q, K, V, scores, weights, Z, the concatenation and
//! the output) agrees with NumPy's to 1e-12, prints as NumPy prints it ([`np`]), and random
//! inputs can come from NumPy's own streams ([`np::RandomState`]).
//!
//! ```
//! use attention_lab::prelude::*;
//!
//! // X = np.array([[1, 2], [3, 4]]); two heads, then M = concat @ W_O
//! let x = array![[1.0, 2.0], [3.0, 4.0]];
//! let swap = array![[0.0, 1.0], [1.0, 0.0]];
//! let head_1 = Head::new(Array2::eye(2), swap.clone(), array![[1.0, 0.0], [0.0, -1.0]])?;
//! let head_2 = Head::new(swap, Array2::eye(2), array![[0.0, 1.0], [-1.0, 0.0]])?;
//! let wo = array![[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]];
//! let layer = MultiHead::new(vec![head_1, head_2], Some(wo))?;
//! let out = layer.forward(&x, &Attend::new())?;
//! assert_eq!(out.concat.dim(), (2, 4));
//! assert!((out.heads[0].weights.row(0).sum() - 1.0).abs() < 1e-15);
//! # Ok::<(), AttentionError>(())
//! ```
//!
//! Modules, one concept each: [`attend`] (the options of every attention call: mask, causal,
//! key padding, softmax, full or streamed), [`softmax`], [`attention`], [`mask`] (causal, padding and
//! other masks), [`batch`] (`(batch, tokens, features)` arrays, per-item key padding), [`position`] (sinusoidal positional encoding), [`heads`], [`stream`] (attention
//! without the N x N matrix), [`torch`] (loading PyTorch's `nn.MultiheadAttention`), `norm` (layer norm), `feed_forward` (the GELU block), `encoder` (a BERT encoder: embeddings and layers, every intermediate kept) and `pooling` (a sentence's embedding), with the feature `encoder`, `grad` (backward passes by hand, SGD and AdamW) with the feature `learn`, [`init`] (ndarray-rand starting values), [`np`] (NumPy
//! printing, rounding and random streams), [`error`], [`html`] (escaping for HTML and SVG text), [`answers`] (a student's answers for
//! `attention-lab grade`), [`check`] (exercises inside a notebook: a learner's function checked
//! on random inputs, its mistake named).
//! Heatmaps are in the companion crate `attention-lab-plot` (workspace member `plot/`); a real
//! model's files (safetensors, tokenizer) are read by `attention-lab-model` (`model/`).
//! Everything is `f64` and concrete, so notebook cells that call it compile fast.

// The library in wings, each a private module with its rooms re-exported here, so that every
// public path (`attention_lab::softmax`, `attention_lab::decoder::Decoder`, ...) is the same as
// before: `layers` (the maths of attention and of a transformer's blocks), `models` (the encoder,
// the decoder and the interventions on their runs), `fast` (the vector paths, the streaming
// kernel and the products: all of the crate's `unsafe`), `learn` (backward passes, training,
// exercises and answers) and `np` (NumPy's printing and random streams).
mod fast;
mod layers;
mod learn;
mod models;

pub mod error;
pub mod html;
mod into;
pub mod np;
pub mod prelude;

pub use fast::{simd, stream};
#[cfg(feature = "decoder")]
pub use layers::rope;
pub use layers::{attend, attention, batch, heads, init, mask, position, softmax, torch};
#[cfg(feature = "encoder")]
pub use layers::{feed_forward, linear, norm, pooling};
pub use learn::{answers, check};
#[cfg(feature = "learn")]
pub use learn::{grad, train};
#[cfg(feature = "decoder")]
pub use models::decoder;
#[cfg(feature = "encoder")]
pub use models::{encoder, intervention, keep};

// Links the system's OpenBLAS for ndarray's products when the `blas` feature is on.
#[cfg(feature = "blas")]
extern crate blas_src;
