//! Attention masks: which keys each query may not look at.
//!
//! A [`Mask`] is an additive matrix, one row per query and one column per key, added to the
//! scores before the softmax: `0.0` leaves a score alone, `-inf` blocks it. Boolean masks use
//! the polarity of PyTorch's `nn.MultiheadAttention`: `true` means *blocked*, and the
//! constructor says so in its name ([`Mask::from_blocked`]). (PyTorch's
//! `F.scaled_dot_product_attention` uses the opposite polarity: there `True` means "may
//! attend".)
//!
//! # A fully masked row
//!
//! When every key of a query is blocked, this library gives that query **zero weights and a
//! zero output row**. The references disagree here:
//!
//! | library | fully masked row gives |
//! |---|---|
//! | attention-lab | weights 0, output 0 |
//! | PyTorch `nn.MultiheadAttention` | NaN (pytorch issue #41508) |
//! | PyTorch `F.scaled_dot_product_attention` (2.5 and later) | weights 0, output 0 |
//! | d2l.ai `masked_softmax` (fills with -1e6) | uniform weights 1/n |
//! | burn `MultiHeadAttention` (fills with -1e4) | uniform weights 1/n |
//!
//! To reproduce d2l's or burn's numbers, use [`Mask::with_fill`] with their fill value.

use std::ops::Range;

use std::borrow::Cow;

use ndarray::{s, Array2, ArrayView1, ArrayView2, ArrayViewMut2};

use crate::error::{AttentionError, Operand};

/// An additive mask over the scores: `0.0` where a query may attend, `-inf` where it may not.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let mask = Mask::causal(3);
/// assert!(mask.is_blocked(0, 1));
/// assert!(!mask.is_blocked(2, 0));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Mask {
    additive: Array2<f64>,
    // Some(f): blocked scores are replaced by f (d2l, burn) instead of getting -inf added.
    fill: Option<f64>,
}

impl Mask {
    /// The decoder's mask: query `i` may attend to keys `0..=i` only (the Annotated
    /// Transformer's `subsequent_mask`, PyTorch's `is_causal=True`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let mask = Mask::causal(2);
    /// assert_eq!(mask.additive(), &array![[0.0, f64::NEG_INFINITY], [0.0, 0.0]]);
    /// ```
    pub fn causal(n: usize) -> Mask {
        Mask::causal_over(n, n).expect("n queries never outnumber n keys")
    }

    /// The decoder's mask when the queries are the last `queries` of `keys` tokens, as when
    /// new tokens attend to themselves and a KV cache: query `i` is token
    /// `keys - queries + i` and may attend to keys `0..=keys - queries + i`. PyTorch names
    /// this alignment `causal_lower_right`; `causal_over(n, n)` is [`Mask::causal`]`(n)`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // two new tokens over three cached ones: five keys in all
    /// let mask = Mask::causal_over(2, 5)?;
    /// assert_eq!(mask.additive().dim(), (2, 5));
    /// assert!(!mask.is_blocked(0, 3) && mask.is_blocked(0, 4)); // token 3 cannot see token 4
    /// assert!(!mask.is_blocked(1, 4));
    /// assert_eq!(mask.additive().row(0), Mask::causal(5).additive().row(3));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when `queries` exceeds `keys`: the queries are the last of
    /// the keys' tokens, so there cannot be more of them.
    pub fn causal_over(queries: usize, keys: usize) -> Result<Mask, AttentionError> {
        let cached = keys.checked_sub(queries).ok_or_else(|| {
            AttentionError::mismatch(
                Operand::new("the number of queries", &[queries]),
                Operand::new("the number of keys", &[keys]),
                "the queries are the last tokens of the key sequence, so there can be no \
                 more of them than keys",
            )
        })?;
        let blocked = Array2::from_shape_fn((queries, keys), |(i, j)| j > cached + i);
        Ok(Mask::from_blocked(&blocked))
    }

    /// The causal mask of [`Mask::causal_over`] that also forgets: each query sees only the
    /// `window` most recent keys up to its own position (itself included), as Mistral's
    /// sliding-window attention does. With `window >= keys` it is the causal mask.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let mask = Mask::sliding_window(4, 4, 2)?;
    /// assert!(!mask.is_blocked(3, 3) && !mask.is_blocked(3, 2));
    /// assert!(mask.is_blocked(3, 1)); // three back: out of the window
    /// assert!(mask.is_blocked(1, 2)); // the future
    /// assert_eq!(Mask::sliding_window(3, 5, 5)?, Mask::causal_over(3, 5)?);
    /// assert_eq!(Mask::sliding_window(3, 5, usize::MAX)?, Mask::causal_over(3, 5)?);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Mask::causal_over`], and [`AttentionError::Setting`] when `window` is 0 (a query
    /// that sees no key, not even itself).
    pub fn sliding_window(
        queries: usize,
        keys: usize,
        window: usize,
    ) -> Result<Mask, AttentionError> {
        if window == 0 {
            return Err(AttentionError::Setting {
                name: "window",
                value: "0".into(),
                rule: "a sliding window holds at least the query's own token",
            });
        }
        let causal = Mask::causal_over(queries, keys)?;
        let cached = keys - queries;
        let blocked = Array2::from_shape_fn((queries, keys), |(i, j)| {
            // Past the causal test j <= cached + i, so the difference cannot underflow.
            causal.is_blocked(i, j) || cached + i - j >= window
        });
        Ok(Mask::from_blocked(&blocked))
    }

    /// Blocks the keys marked `true` in `padded` for every one of `queries` queries: the mask
    /// of one batch item, PyTorch's `key_padding_mask[b]` (where `True` means padding).
    /// `padded` is a slice, an array, a `Vec`, or a row of a batch's padding array as it is
    /// (`padding.row(b)`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let mask = Mask::key_padding(2, &[false, false, true]);
    /// assert!(mask.is_blocked(0, 2) && mask.is_blocked(1, 2));
    /// assert!(!mask.is_blocked(1, 1));
    /// let padding = array![[false, true, false], [false, false, true]];
    /// assert_eq!(Mask::key_padding(2, padding.row(1)), mask);
    /// ```
    pub fn key_padding<'a>(queries: usize, padded: impl Into<ArrayView1<'a, bool>>) -> Mask {
        let padded = padded.into();
        Mask::from_blocked(&Array2::from_shape_fn((queries, padded.len()), |(_, j)| {
            padded[j]
        }))
    }

    /// A boolean mask where `true` means **blocked**, as in `nn.MultiheadAttention`'s
    /// `attn_mask` (not as in `F.scaled_dot_product_attention`, where `True` means allowed).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let mask = Mask::from_blocked(&array![[false, true]]);
    /// assert_eq!(mask.additive(), &array![[0.0, f64::NEG_INFINITY]]);
    /// ```
    pub fn from_blocked(blocked: &Array2<bool>) -> Mask {
        Mask::additive_from(blocked.mapv(|b| if b { f64::NEG_INFINITY } else { 0.0 }))
    }

    /// A float mask added to the scores as it is (PyTorch's float `attn_mask`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let mask = Mask::additive_from(array![[0.0, -1.0]]);
    /// assert!(!mask.is_blocked(0, 1)); // only -inf blocks
    /// ```
    pub fn additive_from(additive: Array2<f64>) -> Mask {
        Mask {
            additive,
            fill: None,
        }
    }

    /// Both masks at once: blocked where either blocks (their sum).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let both = Mask::causal(2).and(&Mask::key_padding(2, &[true, false]))?;
    /// assert!(both.is_blocked(0, 0) && both.is_blocked(0, 1) && !both.is_blocked(1, 1));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the two masks have different shapes.
    pub fn and(&self, other: &Mask) -> Result<Mask, AttentionError> {
        if self.additive.dim() != other.additive.dim() {
            return Err(AttentionError::mismatch(
                Operand::new("the first mask", self.additive.shape()),
                Operand::new("the second mask", other.additive.shape()),
                "masks combined must have the same shape",
            ));
        }
        Ok(Mask {
            additive: &self.additive + &other.additive,
            fill: self.fill.or(other.fill),
        })
    }

    /// The same mask, but a blocked score is *replaced* by `fill` rather than sent to `-inf`:
    /// `-1e6` gives d2l's `masked_softmax`, `-1e4` burn's. A fully masked row then comes out
    /// uniform, and a blocked key keeps a weight of about `exp(fill)`, which underflows to 0
    /// for these fills.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let d2l = Mask::from_blocked(&array![[true, true]]).with_fill(-1e6);
    /// let a = scaled_dot_product_attention(&array![[1.0]], &array![[1.0], [2.0]], &array![[1.0], [3.0]], &Attend::new().mask(&d2l))?;
    /// assert_eq!(a.weights, array![[0.5, 0.5]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn with_fill(&self, fill: f64) -> Mask {
        Mask {
            additive: self.additive.clone(),
            fill: Some(fill),
        }
    }

    /// The matrix added to the scores (queries x keys).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Mask::causal(4).additive().dim(), (4, 4));
    /// ```
    pub fn additive(&self) -> &Array2<f64> {
        &self.additive
    }

    /// Whether query `i` may not look at key `j` at all.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert!(Mask::causal(2).is_blocked(0, 1));
    /// ```
    pub fn is_blocked(&self, i: usize, j: usize) -> bool {
        self.additive[[i, j]] == f64::NEG_INFINITY
    }

    /// Masks `scores` (queries x keys) in place.
    pub(crate) fn apply(&self, scores: &mut Array2<f64>) -> Result<(), AttentionError> {
        self.check(scores.nrows(), scores.ncols())?;
        let fill = self.fill;
        scores.zip_mut_with(&self.additive, |s, &m| *s = masked(*s, m, fill));
        Ok(())
    }

    /// The error when this mask is not `queries x keys`.
    pub(crate) fn check(&self, queries: usize, keys: usize) -> Result<(), AttentionError> {
        if self.additive.dim() != (queries, keys) {
            return Err(AttentionError::mismatch(
                Operand::new("the mask", self.additive.shape()),
                Operand::new("the scores (queries x keys)", &[queries, keys]),
                "the mask must have one row per query and one column per key",
            ));
        }
        Ok(())
    }

    /// What the mask does to the block of scores at rows `rows` and columns `cols` of the
    /// whole matrix (the streaming path sees one block at a time).
    pub(crate) fn block(&self, rows: Range<usize>, cols: Range<usize>) -> Block {
        let part = self.additive.slice(s![rows, cols]);
        if part.iter().all(|&m| m == 0.0) {
            Block::Open
        } else if self.fill.is_none() && part.iter().all(|&m| m == f64::NEG_INFINITY) {
            Block::Blocked
        } else {
            Block::Mixed
        }
    }

    /// Masks a block of the scores stored key by key, `lanes` apart: the scores of query
    /// `row + l` and key `col + j` at `scores[j * lanes + l]`, for `l < rows` and `j < keys`.
    pub(crate) fn apply_lanes(
        &self,
        scores: &mut [f64],
        lanes: usize,
        (row, rows): (usize, usize),
        (col, keys): (usize, usize),
    ) {
        let part = self.additive.slice(s![row..row + rows, col..col + keys]);
        for (l, additive) in part.rows().into_iter().enumerate() {
            let scores = scores[l..].iter_mut().step_by(lanes);
            scores
                .zip(additive)
                .for_each(|(s, &m)| *s = masked(*s, m, self.fill));
        }
    }
}

/// A score `s` under the mask's entry `m`: `s + m`, or the fill where `m` blocks.
#[inline(always)]
fn masked(s: f64, m: f64, fill: Option<f64>) -> f64 {
    match fill {
        Some(fill) if m == f64::NEG_INFINITY => fill,
        _ => s + m,
    }
}

/// What a mask does to a block of scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block {
    /// Adds 0 everywhere: nothing.
    Open,
    /// Adds `-inf` everywhere: every key of the block is blocked for every query.
    Blocked,
    /// Anything else.
    Mixed,
}

/// Sets the weights of every row whose scores are all `-inf` to zero (the softmax gave NaN).
pub(crate) fn zero_blocked_rows(scores: ArrayView2<'_, f64>, mut weights: ArrayViewMut2<'_, f64>) {
    for (s, mut w) in scores.rows().into_iter().zip(weights.rows_mut()) {
        if s.iter().all(|&x| x == f64::NEG_INFINITY) {
            w.fill(0.0);
        }
    }
}

/// The masks of a call, before they meet its shape.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Masks<'a> {
    pub(crate) mask: Option<&'a Mask>,
    pub(crate) causal: bool,
    pub(crate) key_padding: Option<&'a Array2<bool>>,
}

impl<'a> Masks<'a> {
    /// The given mask and the causal one for `queries` x `keys`, blocked where either blocks.
    /// The causal mask is made first (more queries than keys is its error); then the given
    /// mask's shape is checked, so that its error is the usual one.
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
