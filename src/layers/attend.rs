//! How to call attention: one options value, [`Attend`], for every shape, as PyTorch's
//! `F.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...)` takes its options.
//!
//! | shape | call |
//! |---|---|
//! | Q, K, V given | [`scaled_dot_product_attention`](crate::layers::attend::scaled_dot_product_attention)`(q, k, v, &attend)` |
//! | one head | [`Head::forward`]`(x, &attend)`, [`Head::forward_cross`]`(x, key, value, &attend)` |
//! | a layer | [`MultiHead::forward`], [`MultiHead::forward_cross`] |
//! | a batch | [`MultiHead::forward_batch`], [`MultiHead::forward_cross_batch`] |
//!
//! The options: a [`Mask`] ([`Attend::mask`]; boolean masks through [`Mask::from_blocked`],
//! float ones through [`Mask::additive_from`]), the causal mask of the call's own shape
//! ([`Attend::causal`]), a batch's key padding ([`Attend::key_padding`]), the softmax
//! ([`Attend::softmax`]) and the path: full, keeping every intermediate (the default), or
//! streamed ([`Attend::streaming`], with block sizes and threads), keeping only the result.
//! The path chooses what a call gives:
//!
//! | call | full ([`Full`]) | streamed ([`Streamed`]) |
//! |---|---|---|
//! | `scaled_dot_product_attention` | [`Attention`] | the output, `Array2<f64>` |
//! | `Head::forward*` | [`HeadOutput`] | `z`, `Array2<f64>` |
//! | `MultiHead::forward*` | [`MultiHeadOutput`] | the result, `Array2<f64>` |
//! | `MultiHead::forward*_batch` | [`BatchOutput`] | the results, `Array3<f64>` |
//!
//! ```
//! use attention_lab::prelude::*;
//!
//! let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
//! let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
//! let full: HeadOutput = head.forward(&x, &Attend::new().causal())?;
//! let z: Array2<f64> = head.forward(&x, &Attend::new().causal().streaming(Streaming::default()))?;
//! assert_eq!(full.weights.row(0), array![1.0, 0.0, 0.0]);
//! assert!((&z - &full.z).iter().all(|d| d.abs() < 1e-15));
//! # Ok::<(), AttentionError>(())
//! ```

use ndarray::{Array2, Array3, ArrayView2, ArrayView3};

use crate::error::AttentionError;
use crate::fast::stream::Streaming;
use crate::layers::attention::Attention;
use crate::layers::batch::BatchOutput;
#[cfg(doc)]
use crate::layers::heads::HeadOutput;
use crate::layers::heads::{Head, MultiHead, MultiHeadOutput};
use crate::layers::mask::{Mask, Masks};
use crate::layers::softmax::Softmax;

/// The options of one attention call: mask, softmax and path (full or streamed).
///
/// `Attend::new()` is the full path with no mask and each head's own softmax (the stable one
/// unless [`Head::with_softmax`] chose another); each builder method returns the options
/// with one more set.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let (q, k, v) = (array![[1.0, 0.0]], array![[1.0, 0.0], [0.0, 1.0]], array![[1.0], [3.0]]);
/// let blocked = Mask::from_blocked(&array![[false, true]]);
/// let a: Attention = scaled_dot_product_attention(&q, &k, &v, &Attend::new().mask(&blocked))?;
/// assert_eq!(a.output, array![[1.0]]); // only key 0 is seen
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attend<'a, P = Full> {
    masks: Masks<'a>,
    softmax: Option<Softmax>,
    path: P,
}

/// The full path: every intermediate kept (scores, weights, each head's Q, K, V and z).
///
/// ```
/// use attention_lab::prelude::*;
/// let full: Attend<'_, Full> = Attend::new();
/// assert_eq!(full, Attend::default());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Full;

/// The streaming path with its block sizes and threads: only the result, no N x N matrix
/// (see [`crate::fast::stream`]); PyTorch's `need_weights=False`.
///
/// ```
/// use attention_lab::prelude::*;
/// let streamed: Attend<'_, Streamed> = Attend::new().streaming(Streaming::default());
/// assert_ne!(streamed, Attend::new().streaming(Streaming { threads: 1, ..Streaming::default() }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streamed(Streaming);

impl<'a> Attend<'a, Full> {
    /// The full path, no mask, each head's own softmax (the stable one for
    /// [`scaled_dot_product_attention`](crate::layers::attend::scaled_dot_product_attention)).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 0.0], [0.0, 1.0]];
    /// let out = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?.forward(&x, &Attend::new())?;
    /// assert_eq!(out.weights.dim(), (2, 2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn new() -> Attend<'a, Full> {
        Attend {
            masks: Masks::default(),
            softmax: None,
            path: Full,
        }
    }
}

impl Default for Attend<'_, Full> {
    fn default() -> Self {
        Attend::new()
    }
}

impl<'a, P: Path> Attend<'a, P> {
    /// Adds `mask` (queries x keys) to the scores before the softmax, PyTorch's `attn_mask`;
    /// `None` takes it away again. With [`Attend::causal`] or [`Attend::key_padding`] a
    /// score is blocked where any of them blocks it. A query whose every key is blocked gets
    /// zero weights and a zero output row (see [`crate::layers::mask`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 0.0], [0.0, 1.0]];
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let out = head.forward(&x, &Attend::new().mask(&Mask::key_padding(2, &[false, true])))?;
    /// assert_eq!(out.weights.column(1), array![0.0, 0.0]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn mask(mut self, mask: impl Into<Option<&'a Mask>>) -> Attend<'a, P> {
        self.masks.mask = mask.into();
        self
    }

    /// Blocks the future, PyTorch's `is_causal=True`: the causal mask of the call's own
    /// queries x keys, [`Mask::causal_over`] (lower-right aligned when there are fewer
    /// queries than keys, as for new tokens over a KV cache; PyTorch's `is_causal` aligns
    /// top-left, its `causal_lower_right` like this).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 0.0], [0.0, 1.0]];
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let out = head.forward(&x, &Attend::new().causal())?;
    /// assert_eq!(out, head.forward(&x, &Attend::new().mask(&Mask::causal(2)))?);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn causal(mut self) -> Attend<'a, P> {
        self.masks.causal = true;
        self
    }

    /// A batch's key padding, batch x key tokens with `true` where a token is padding
    /// (PyTorch's `key_padding_mask`); only for [`MultiHead::forward_batch`] and
    /// [`MultiHead::forward_cross_batch`]. For one sequence, give [`Mask::key_padding`] to
    /// [`Attend::mask`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 1, None)?;
    /// let x = Array3::<f64>::ones((2, 3, 2));
    /// let padding = array![[false, false, false], [false, true, true]];
    /// let out = layer.forward_batch(&x, &Attend::new().key_padding(&padding))?;
    /// assert_eq!(out.averaged_weights()[[1, 0, 1]], 0.0);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn key_padding(mut self, padding: impl Into<Option<&'a Array2<bool>>>) -> Attend<'a, P> {
        self.masks.key_padding = padding.into();
        self
    }

    /// The softmax of this call, in place of each head's own ([`Head::with_softmax`]);
    /// seeds 003 and 004 use [`Softmax::Naive`]. Both paths honour it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let big = array![[1000.0, 0.0]];
    /// let naive = scaled_dot_product_attention(&big, &big, &array![[1.0]], &Attend::new().softmax(Softmax::Naive))?;
    /// assert!(naive.weights[[0, 0]].is_nan()); // exp overflowed
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn softmax(mut self, softmax: Softmax) -> Attend<'a, P> {
        self.softmax = Some(softmax);
        self
    }

    /// The streaming path: the call gives only its result, computed block by block with no
    /// N x N matrix, on `streaming.threads` threads (see [`crate::fast::stream`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]];
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let tiny = Streaming { query_block: 1, key_block: 1, threads: 1, ..Streaming::default() };
    /// let z: Array2<f64> = head.forward(&x, &Attend::new().streaming(tiny))?;
    /// assert!((&z - &head.forward(&x, &Attend::new())?.z).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn streaming(self, streaming: Streaming) -> Attend<'a, Streamed> {
        Attend {
            masks: self.masks,
            softmax: self.softmax,
            path: Streamed(streaming),
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Full {}
    impl Sealed for super::Streamed {}
}

/// The path of a call, [`Full`] or [`Streamed`], and what each shape of call gives on it.
///
/// ```
/// use attention_lab::attend::Path;
/// use attention_lab::prelude::*;
///
/// // the result of a layer on either path
/// fn result<P: Path>(layer: &MultiHead, x: &Array2<f64>, attend: &Attend<'_, P>) -> Result<P::MultiHeadOutput, AttentionError> {
///     layer.forward(x, attend)
/// }
/// let w = Array2::<f64>::eye(2);
/// let layer = MultiHead::split(&w, &w, &w, 2, None)?;
/// let x = array![[1.0, 2.0]];
/// assert_eq!(result(&layer, &x, &Attend::new())?.concat, result(&layer, &x, &Attend::new().streaming(Streaming::default()))?);
/// # Ok::<(), AttentionError>(())
/// ```
pub trait Path: sealed::Sealed + Copy {
    /// What [`scaled_dot_product_attention`](crate::layers::attend::scaled_dot_product_attention)
    /// gives: [`Attention`], or the output alone.
    type Attention;
    /// What [`Head::forward`] gives: [`HeadOutput`], or `z` alone.
    type HeadOutput;
    /// What [`MultiHead::forward`] gives: [`MultiHeadOutput`], or the result alone.
    type MultiHeadOutput;
    /// What [`MultiHead::forward_batch`] gives: [`BatchOutput`], or the results alone.
    type BatchOutput;

    /// Attention of `q`, `k` and `v` on this path.
    #[doc(hidden)]
    fn attention(
        q: ArrayView2<'_, f64>,
        k: ArrayView2<'_, f64>,
        v: ArrayView2<'_, f64>,
        attend: &Attend<'_, Self>,
    ) -> Result<Self::Attention, AttentionError>;

    /// One head, queries from `inputs[0]`, keys from `inputs[1]`, values from `inputs[2]`.
    #[doc(hidden)]
    fn head(
        head: &Head,
        inputs: [ArrayView2<'_, f64>; 3],
        attend: &Attend<'_, Self>,
    ) -> Result<Self::HeadOutput, AttentionError>;

    /// A layer, with the inputs of [`Path::head`].
    #[doc(hidden)]
    fn multi_head(
        layer: &MultiHead,
        inputs: [ArrayView2<'_, f64>; 3],
        attend: &Attend<'_, Self>,
    ) -> Result<Self::MultiHeadOutput, AttentionError>;

    /// A layer on each item of a batch.
    #[doc(hidden)]
    fn batch(
        layer: &MultiHead,
        inputs: [ArrayView3<'_, f64>; 3],
        attend: &Attend<'_, Self>,
    ) -> Result<Self::BatchOutput, AttentionError>;
}

/// The queries and keys of 2-D inputs.
fn tokens(inputs: &[ArrayView2<'_, f64>; 3]) -> (usize, usize) {
    (inputs[0].nrows(), inputs[1].nrows())
}

impl Path for Full {
    type Attention = Attention;
    type HeadOutput = crate::layers::heads::HeadOutput;
    type MultiHeadOutput = MultiHeadOutput;
    type BatchOutput = BatchOutput;

    fn attention(
        q: ArrayView2<'_, f64>,
        k: ArrayView2<'_, f64>,
        v: ArrayView2<'_, f64>,
        attend: &Attend<'_, Full>,
    ) -> Result<Attention, AttentionError> {
        let mask = attend.masks.one(q.nrows(), k.nrows())?;
        let softmax = attend.softmax.unwrap_or_default();
        crate::layers::attention::attend(q, k, v, softmax, mask.as_deref())
    }

    fn head(
        head: &Head,
        inputs: [ArrayView2<'_, f64>; 3],
        attend: &Attend<'_, Full>,
    ) -> Result<Self::HeadOutput, AttentionError> {
        let (queries, keys) = tokens(&inputs);
        let mask = attend.masks.one(queries, keys)?;
        head.forward_in(inputs, None, mask.as_deref(), attend.softmax)
    }

    fn multi_head(
        layer: &MultiHead,
        inputs: [ArrayView2<'_, f64>; 3],
        attend: &Attend<'_, Full>,
    ) -> Result<MultiHeadOutput, AttentionError> {
        let (queries, keys) = tokens(&inputs);
        let mask = attend.masks.one(queries, keys)?;
        layer.forward_in(inputs, mask.as_deref(), attend.softmax)
    }

    fn batch(
        layer: &MultiHead,
        inputs: [ArrayView3<'_, f64>; 3],
        attend: &Attend<'_, Full>,
    ) -> Result<BatchOutput, AttentionError> {
        layer.forward_batch_in(inputs, &attend.masks, attend.softmax)
    }
}

impl Path for Streamed {
    type Attention = Array2<f64>;
    type HeadOutput = Array2<f64>;
    type MultiHeadOutput = Array2<f64>;
    type BatchOutput = Array3<f64>;

    fn attention(
        q: ArrayView2<'_, f64>,
        k: ArrayView2<'_, f64>,
        v: ArrayView2<'_, f64>,
        attend: &Attend<'_, Streamed>,
    ) -> Result<Array2<f64>, AttentionError> {
        let mask = attend.masks.one(q.nrows(), k.nrows())?;
        let softmax = attend.softmax.unwrap_or_default();
        crate::fast::stream::attention(q, k, v, mask.as_deref(), softmax, attend.path.0)
    }

    fn head(
        head: &Head,
        inputs: [ArrayView2<'_, f64>; 3],
        attend: &Attend<'_, Streamed>,
    ) -> Result<Array2<f64>, AttentionError> {
        let (queries, keys) = tokens(&inputs);
        let mask = attend.masks.one(queries, keys)?;
        let layer = crate::fast::stream::Layer::head(head, attend.softmax);
        crate::fast::stream::forward(layer, inputs, mask.as_deref(), attend.path.0)
    }

    fn multi_head(
        layer: &MultiHead,
        inputs: [ArrayView2<'_, f64>; 3],
        attend: &Attend<'_, Streamed>,
    ) -> Result<Array2<f64>, AttentionError> {
        let (queries, keys) = tokens(&inputs);
        let mask = attend.masks.one(queries, keys)?;
        let layer = crate::fast::stream::Layer::of(layer, attend.softmax);
        crate::fast::stream::forward(layer, inputs, mask.as_deref(), attend.path.0)
    }

    fn batch(
        layer: &MultiHead,
        inputs: [ArrayView3<'_, f64>; 3],
        attend: &Attend<'_, Streamed>,
    ) -> Result<Array3<f64>, AttentionError> {
        layer.stream_batch(inputs, &attend.masks, attend.softmax, attend.path.0)
    }
}

/// The calls that take an [`Attend`], one per shape. They live here, above the modules that
/// compute ([`crate::layers::attention`], [`crate::layers::heads`], [`crate::layers::batch`], [`crate::fast::stream`]),
/// which never import this one.
impl Head {
    /// Self-attention: runs the head on `x` (one row per token) with the options of
    /// `attend` (mask, softmax, path). The full path (`&Attend::new()`) keeps every
    /// intermediate ([`HeadOutput`]); streamed ([`Attend::streaming`]) it gives `z` alone, up
    /// to rounding, with no N x N matrix and on every core. Under a mask `scores` keeps the
    /// masked scores, and a query whose every key is blocked gets zero weights and a zero `z`
    /// row.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let x = array![[1.0, 0.0], [0.0, 1.0]];
    /// let out = head.forward(&x, &Attend::new())?;
    /// assert_eq!(out.weights.dim(), (2, 2));
    /// assert_eq!(out.z.row(0).sum(), 1.0); // each z row mixes the value rows
    /// let causal = head.forward(&x, &Attend::new().causal())?;
    /// assert_eq!(causal.weights.row(0), array![1.0, 0.0]);
    /// let z: Array2<f64> = head.forward(&x, &Attend::new().causal().streaming(Streaming::default()))?;
    /// assert!((&z - &causal.z).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of `x` differ from the rows of W_Q, or
    /// the mask is not tokens x tokens; [`AttentionError::NotApplicable`] for
    /// [`Attend::key_padding`], which is for batches.
    pub fn forward<'x, P: Path>(
        &self,
        x: impl Into<ArrayView2<'x, f64>>,
        attend: &Attend<'_, P>,
    ) -> Result<P::HeadOutput, AttentionError> {
        let x = x.into();
        P::head(self, [x, x, x], attend)
    }

    /// Cross-attention: queries from `x`, keys from `key` and values from `value` (PyTorch's
    /// `query`, `key` and `value`), with the options of `attend`; a mask is x's tokens x
    /// key's tokens. `key` and `value` have one row per token of the other sequence. With
    /// [`Attend::causal`] the queries are the last tokens of the keys' sequence, as new
    /// tokens over a KV cache ([`Mask::causal_over`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let decoder = array![[1.0, 0.0]];
    /// let encoder = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    /// let padding = Mask::key_padding(1, &[false, false, true]);
    /// let out = head.forward_cross(&decoder, &encoder, &encoder, &Attend::new().mask(&padding))?;
    /// assert_eq!(out.weights.dim(), (1, 3));
    /// assert_eq!(out.weights[[0, 2]], 0.0);
    /// let streamed = Attend::new().mask(&padding).streaming(Streaming::default());
    /// let z: Array2<f64> = head.forward_cross(&decoder, &encoder, &encoder, &streamed)?;
    /// assert!((&z - &out.z).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of `x`, `key` or `value` differ from the
    /// rows of W_Q, W_K or W_V, when `key` and `value` have different numbers of rows, or when
    /// the mask is not x's tokens x key's tokens (with [`Attend::causal`], when x has more
    /// tokens than key); [`AttentionError::NotApplicable`] for [`Attend::key_padding`].
    pub fn forward_cross<'x, P: Path>(
        &self,
        x: impl Into<ArrayView2<'x, f64>>,
        key: impl Into<ArrayView2<'x, f64>>,
        value: impl Into<ArrayView2<'x, f64>>,
        attend: &Attend<'_, P>,
    ) -> Result<P::HeadOutput, AttentionError> {
        P::head(self, [x.into(), key.into(), value.into()], attend)
    }
}

impl MultiHead {
    /// Self-attention in every head on `x`, then the concatenation times W_O, with the
    /// options of `attend` (one mask for every head). The full path (`&Attend::new()`)
    /// keeps every intermediate ([`MultiHeadOutput`]); streamed ([`Attend::streaming`]) it
    /// gives the layer's result alone, up to rounding, with no N x N matrix and on every
    /// core.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // Z = np.concatenate((Z_1, Z_2), axis=1); result = np.dot(Z, W_0)
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, Some(Array2::eye(4)))?;
    /// let x = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]];
    /// let out = layer.forward(&x, &Attend::new())?;
    /// assert_eq!(out.heads.len(), 2);
    /// assert_eq!(out.output, Some(out.concat)); // W_O is the identity
    /// let causal = layer.forward(&x, &Attend::new().causal())?;
    /// assert_eq!(causal.result().row(0), x.row(0)); // token 0 sees only itself
    /// let serial = Streaming { threads: 1, ..Streaming::default() };
    /// let result: Array2<f64> = layer.forward(&x, &Attend::new().causal().streaming(serial))?;
    /// assert!((&result - causal.result()).iter().all(|d| d.abs() < 1e-12));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward`], naming the head.
    pub fn forward<'x, P: Path>(
        &self,
        x: impl Into<ArrayView2<'x, f64>>,
        attend: &Attend<'_, P>,
    ) -> Result<P::MultiHeadOutput, AttentionError> {
        let x = x.into();
        P::multi_head(self, [x, x, x], attend)
    }

    /// Cross-attention in every head: queries from `x`, keys from `key`, values from `value`
    /// (PyTorch's `mha(query, key, value)`), with the options of `attend`; a mask is x's
    /// tokens x key's tokens. Build the layer with [`Head::cross`] heads, or from PyTorch
    /// with [`MultiHead::from_torch_weights`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // E = 2 with two heads of width 1; keys 3 wide (kdim), values 1 wide (vdim)
    /// let heads = vec![
    ///     Head::cross(array![[1.0], [0.0]], Array2::ones((3, 1)), array![[1.0]])?,
    ///     Head::cross(array![[0.0], [1.0]], Array2::ones((3, 1)), array![[-1.0]])?,
    /// ];
    /// let layer = MultiHead::new(heads, Some(Array2::eye(2)))?;
    /// let decoder = array![[1.0, 2.0], [0.0, 1.0]];
    /// let encoder_k = Array2::<f64>::zeros((4, 3));
    /// let encoder_v = array![[1.0], [2.0], [3.0], [4.0]];
    /// let out = layer.forward_cross(&decoder, &encoder_k, &encoder_v, &Attend::new())?;
    /// assert_eq!(out.result().row(0), array![2.5, -2.5]); // equal scores: the mean of the values
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward_cross`], naming the head.
    pub fn forward_cross<'x, P: Path>(
        &self,
        x: impl Into<ArrayView2<'x, f64>>,
        key: impl Into<ArrayView2<'x, f64>>,
        value: impl Into<ArrayView2<'x, f64>>,
        attend: &Attend<'_, P>,
    ) -> Result<P::MultiHeadOutput, AttentionError> {
        P::multi_head(self, [x.into(), key.into(), value.into()], attend)
    }

    /// Self-attention on each item of a `(batch, tokens, features)` array `x`, with the
    /// options of `attend`: the key padding ([`Attend::key_padding`], batch x tokens, PyTorch's
    /// `key_padding_mask`) and the mask every item shares ([`Attend::mask`], [`Attend::causal`],
    /// PyTorch's `attn_mask`); a score is blocked where any of them blocks it. The full path
    /// gives a [`BatchOutput`]; streamed ([`Attend::streaming`], each item in turn) the stacked
    /// results alone, `(batch, tokens, width)`, as streaming keeps no weights.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 1, None)?;
    /// let x: Array3<f64> = array![[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 2.0], [9.0, 9.0]]];
    /// // item 1's last token is padding
    /// let padding = array![[false, false, false], [false, false, true]];
    /// let attend = Attend::new().key_padding(&padding).causal();
    /// let out = layer.forward_batch(&x, &attend)?;
    /// let weights = out.averaged_weights();
    /// assert_eq!(weights[[1, 2, 2]], 0.0); // padding gets no weight
    /// assert_eq!(weights[[0, 0, 1]], 0.0); // nor does the future
    /// let streamed: Array3<f64> = layer.forward_batch(&x, &attend.streaming(Streaming::default()))?;
    /// assert!((&streamed - &out.result()).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the key padding mask is not batch x tokens, the
    /// shared mask not tokens x tokens, or the features of `x` differ from the rows of W_Q
    /// (naming `x` with its batch shape).
    pub fn forward_batch<'x, P: Path>(
        &self,
        x: impl Into<ArrayView3<'x, f64>>,
        attend: &Attend<'_, P>,
    ) -> Result<P::BatchOutput, AttentionError> {
        let x = x.into();
        P::batch(self, [x, x, x], attend)
    }

    /// Cross-attention on each item of a batch: queries from `x` (batch, tokens, E), keys
    /// from `key` (batch, key tokens, kdim) and values from `value` (batch, key tokens,
    /// vdim), PyTorch's `mha(query, key, value)` with `batch_first=True`, with the options of
    /// `attend`. The key padding mask is batch x key tokens; the shared mask is tokens x key
    /// tokens (with [`Attend::causal`], [`Mask::causal_over`]: new tokens over a KV cache).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // E = 2, one head; keys 3 wide, values 1 wide
    /// let head = Head::cross(Array2::eye(2), Array2::zeros((3, 2)), array![[1.0, -1.0]])?;
    /// let layer = MultiHead::new(vec![head], None)?;
    /// let x = Array3::<f64>::ones((2, 1, 2));
    /// let key = Array3::<f64>::zeros((2, 2, 3));
    /// let value: Array3<f64> = array![[[1.0], [3.0]], [[4.0], [5.0]]];
    /// let padding = array![[false, false], [false, true]];
    /// let out = layer.forward_cross_batch(&x, &key, &value, &Attend::new().key_padding(&padding))?;
    /// // equal scores: item 0 averages its two values, item 1 sees only its first
    /// assert_eq!(out.result(), array![[[2.0, -2.0]], [[4.0, -4.0]]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when `x`, `key` and `value` have different numbers of
    /// items, `key` and `value` different numbers of tokens, their features differ from the
    /// rows of W_Q, W_K or W_V, the key padding mask is not batch x key tokens or the shared
    /// mask not tokens x key tokens.
    pub fn forward_cross_batch<'x, P: Path>(
        &self,
        x: impl Into<ArrayView3<'x, f64>>,
        key: impl Into<ArrayView3<'x, f64>>,
        value: impl Into<ArrayView3<'x, f64>>,
        attend: &Attend<'_, P>,
    ) -> Result<P::BatchOutput, AttentionError> {
        P::batch(self, [x.into(), key.into(), value.into()], attend)
    }
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
/// every key is blocked gets zero weights and a zero output row (see [`crate::layers::mask`] for
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
