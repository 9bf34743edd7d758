//! How to call attention: one options value, [`Attend`], for every shape, as PyTorch's
//! `F.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...)` takes its options.
//!
//! | shape | call |
//! |---|---|
//! | Q, K, V given | [`scaled_dot_product_attention`](crate::attention::scaled_dot_product_attention)`(q, k, v, &attend)` |
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

use std::borrow::Cow;

use ndarray::{Array2, Array3, ArrayView2, ArrayView3};

use crate::attention::Attention;
use crate::batch::BatchOutput;
use crate::error::AttentionError;
#[cfg(doc)]
use crate::heads::HeadOutput;
use crate::heads::{Head, MultiHead, MultiHeadOutput};
use crate::mask::Mask;
use crate::softmax::Softmax;
use crate::stream::Streaming;

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
/// (see [`crate::stream`]); PyTorch's `need_weights=False`.
///
/// ```
/// use attention_lab::prelude::*;
/// let streamed: Attend<'_, Streamed> = Attend::new().streaming(Streaming::default());
/// assert_ne!(streamed, Attend::new().streaming(Streaming { threads: 1, ..Streaming::default() }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streamed(Streaming);

/// The masks of a call, before they meet its shape.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Masks<'a> {
    mask: Option<&'a Mask>,
    causal: bool,
    key_padding: Option<&'a Array2<bool>>,
}

impl<'a> Attend<'a, Full> {
    /// The full path, no mask, each head's own softmax (the stable one for
    /// [`scaled_dot_product_attention`](crate::attention::scaled_dot_product_attention)).
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
    /// zero weights and a zero output row (see [`crate::mask`]).
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
    /// N x N matrix, on `streaming.threads` threads (see [`crate::stream`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]];
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let tiny = Streaming { query_block: 1, key_block: 1, threads: 1 };
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

impl<'a> Masks<'a> {
    /// The given mask and the causal one for `queries` x `keys`, blocked where either blocks.
    /// The given mask is checked first, so that its shape error is the usual one.
    pub(crate) fn shared(
        &self,
        queries: usize,
        keys: usize,
    ) -> Result<Option<Cow<'a, Mask>>, AttentionError> {
        if !self.causal {
            return Ok(self.mask.map(Cow::Borrowed));
        }
        let causal = Mask::causal_over(queries, keys)?;
        Ok(Some(Cow::Owned(match self.mask {
            Some(mask) => {
                mask.check(queries, keys)?;
                mask.and(&causal)?
            }
            None => causal,
        })))
    }

    /// The mask of a call on one sequence of `queries` over one of `keys`.
    ///
    /// # Errors
    /// [`AttentionError::NotApplicable`] for key padding, which has one row per batch item.
    pub(crate) fn one(
        &self,
        queries: usize,
        keys: usize,
    ) -> Result<Option<Cow<'a, Mask>>, AttentionError> {
        if self.key_padding.is_some() {
            return Err(AttentionError::NotApplicable {
                option: "Attend::key_padding",
                reason: "key padding has one row per batch item, so it goes with forward_batch \
                         and forward_cross_batch; for one sequence, give Mask::key_padding to \
                         Attend::mask",
            });
        }
        self.shared(queries, keys)
    }

    /// The batch's key padding, batch x key tokens.
    pub(crate) fn key_padding(&self) -> Option<&'a Array2<bool>> {
        self.key_padding
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
    /// What [`scaled_dot_product_attention`](crate::attention::scaled_dot_product_attention)
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
    type HeadOutput = crate::heads::HeadOutput;
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
        crate::attention::attend(q, k, v, softmax, mask.as_deref())
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
        crate::stream::attention(q, k, v, mask.as_deref(), softmax, attend.path.0)
    }

    fn head(
        head: &Head,
        inputs: [ArrayView2<'_, f64>; 3],
        attend: &Attend<'_, Streamed>,
    ) -> Result<Array2<f64>, AttentionError> {
        let (queries, keys) = tokens(&inputs);
        let mask = attend.masks.one(queries, keys)?;
        let layer = crate::stream::Layer::head(head, attend.softmax);
        crate::stream::forward(layer, inputs, mask.as_deref(), attend.path.0)
    }

    fn multi_head(
        layer: &MultiHead,
        inputs: [ArrayView2<'_, f64>; 3],
        attend: &Attend<'_, Streamed>,
    ) -> Result<Array2<f64>, AttentionError> {
        let (queries, keys) = tokens(&inputs);
        let mask = attend.masks.one(queries, keys)?;
        let layer = crate::stream::Layer::of(layer, attend.softmax);
        crate::stream::forward(layer, inputs, mask.as_deref(), attend.path.0)
    }

    fn batch(
        layer: &MultiHead,
        inputs: [ArrayView3<'_, f64>; 3],
        attend: &Attend<'_, Streamed>,
    ) -> Result<Array3<f64>, AttentionError> {
        layer.stream_batch(inputs, &attend.masks, attend.softmax, attend.path.0)
    }
}
