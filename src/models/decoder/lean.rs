//! A lean pass: what a [`Keep`] asks for and no more. The RoPE tables and the causal mask are
//! made once for every layer of the pass ([`StepTables`]), each block's intermediates are
//! dropped as soon as the next block has its input, and the final norm and the LM head run on
//! the last position only: what generation reads. Its numbers are the teaching pass's, bit
//! for bit (tests/generation_lean.rs).

use std::borrow::Cow;

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis};

use super::{Decoder, DecoderBlock, DecoderOutput, KvCache};
use crate::error::AttentionError;
use crate::layers::mask::Mask;
use crate::layers::rope::Rope;
use crate::models::keep::Keep;

/// What a decoder pass kept ([`Decoder::forward_with`]).
///
/// ```
/// use attention_lab::prelude::*;
/// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
/// let kept = decoder.forward_with(&[0, 1], &mut decoder.cache(), Keep::LastHiddenState)?;
/// assert_eq!(kept.logits(), Some(decoder.forward(&[0, 1])?.logits.row(1)));
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum DecoderKept {
    /// [`Keep::Everything`]: every intermediate, one row of logits per new token (what
    /// [`Decoder::forward_cached`] gives).
    Everything(DecoderOutput),
    /// [`Keep::Weights`]: each layer's heads' weights (new tokens x all tokens), and the last
    /// position's final hidden row and logits.
    Weights {
        /// `weights[layer][head]`, as [`GroupedOutput::weights`](super::GroupedOutput::weights).
        weights: Vec<Vec<Array2<f64>>>,
        /// The final norm of the last position's row, E wide.
        hidden: Array1<f64>,
        /// The LM head on `hidden`: the next token's logits, vocab wide.
        logits: Array1<f64>,
    },
    /// [`Keep::LastHiddenState`]: the last position's final hidden row and logits alone.
    LastHiddenState {
        /// The final norm of the last position's row, E wide.
        hidden: Array1<f64>,
        /// The LM head on `hidden`: the next token's logits, vocab wide.
        logits: Array1<f64>,
    },
}

impl DecoderKept {
    /// The last position's logits (the next token's), whatever was kept; `None` after a pass
    /// over no token.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let kept = DecoderKept::LastHiddenState { hidden: array![1.0], logits: array![0.5, 2.0] };
    /// assert_eq!(kept.logits(), Some(array![0.5, 2.0].view()));
    /// ```
    pub fn logits(&self) -> Option<ArrayView1<'_, f64>> {
        match self {
            DecoderKept::Everything(out) => out.logits.rows().into_iter().next_back(),
            DecoderKept::Weights { logits, .. } | DecoderKept::LastHiddenState { logits, .. } => {
                Some(logits.view())
            }
        }
    }

    /// The final norm of the last position's row, whatever was kept; `None` after a pass over
    /// no token.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let kept = DecoderKept::LastHiddenState { hidden: array![1.0], logits: array![0.5, 2.0] };
    /// assert_eq!(kept.hidden(), Some(array![1.0].view()));
    /// ```
    pub fn hidden(&self) -> Option<ArrayView1<'_, f64>> {
        match self {
            DecoderKept::Everything(out) => out.hidden.rows().into_iter().next_back(),
            DecoderKept::Weights { hidden, .. } | DecoderKept::LastHiddenState { hidden, .. } => {
                Some(hidden.view())
            }
        }
    }

    /// The weights of head `head` of layer `layer` (new tokens x all tokens), when they were
    /// kept and the decoder has that head.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let kept = DecoderKept::Weights { weights: vec![vec![array![[1.0]]]], hidden: array![1.0], logits: array![0.0] };
    /// assert_eq!(kept.weights(0, 0), Some(array![[1.0]].view()));
    /// assert_eq!(kept.weights(0, 1), None);
    /// ```
    pub fn weights(&self, layer: usize, head: usize) -> Option<ArrayView2<'_, f64>> {
        match self {
            DecoderKept::Everything(out) => out
                .blocks
                .get(layer)
                .and_then(|b| b.attention.weights.get(head)),
            DecoderKept::Weights { weights, .. } => weights.get(layer).and_then(|l| l.get(head)),
            DecoderKept::LastHiddenState { .. } => None,
        }
        .map(|w| w.view())
    }
}

/// A lean pass's last position: each layer's heads' weights when asked, the final hidden row
/// and the logits.
pub(crate) struct LastPosition {
    pub(crate) weights: Vec<Vec<Array2<f64>>>,
    pub(crate) hidden: Array1<f64>,
    pub(crate) logits: Array1<f64>,
}

impl Decoder {
    /// The tokens `ids` after those already in `cache`, extending it, keeping what `keep`
    /// asks for: [`Keep::Everything`] is [`Decoder::forward_cached`]; the others keep the last
    /// position's final hidden row and logits (and every head's weights for
    /// [`Keep::Weights`]), the RoPE tables and the mask made once for every layer, and each
    /// block's intermediates dropped as the next block starts. The numbers are
    /// [`Decoder::forward_cached`]'s, bit for bit.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let mut cache = decoder.cache();
    /// decoder.forward_with(&[0, 1], &mut cache, Keep::LastHiddenState)?;
    /// let step = decoder.forward_with(&[1], &mut cache, Keep::LastHiddenState)?;
    /// assert_eq!(step.logits(), Some(decoder.forward(&[0, 1, 1])?.logits.row(2)));
    /// assert_eq!(step.weights(0, 0), None);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Decoder::forward_cached`]: [`AttentionError::OutOfRange`] for a token id past the
    /// vocabulary, [`AttentionError::Mismatch`] for a cache made for another decoder (nothing
    /// is cached then); and [`AttentionError::Setting`] for no token with a lean `keep` (it
    /// keeps the last position's).
    pub fn forward_with(
        &self,
        ids: &[usize],
        cache: &mut KvCache,
        keep: Keep,
    ) -> Result<DecoderKept, AttentionError> {
        self.kept_pass(ids, cache, keep, false)
    }

    /// [`Decoder::forward_with`], with the logits of the last token only for
    /// [`Keep::Everything`] when `last` (as [`Decoder::generation`]'s prefill).
    pub(crate) fn kept_pass(
        &self,
        ids: &[usize],
        cache: &mut KvCache,
        keep: Keep,
        last: bool,
    ) -> Result<DecoderKept, AttentionError> {
        if keep == Keep::Everything {
            return self.pass(ids, cache, last).map(DecoderKept::Everything);
        }
        let LastPosition {
            weights,
            hidden,
            logits,
        } = self.last_position(ids, cache, keep == Keep::Weights)?;
        Ok(match keep {
            Keep::Weights => DecoderKept::Weights {
                weights,
                hidden,
                logits,
            },
            _ => DecoderKept::LastHiddenState { hidden, logits },
        })
    }

    /// The lean pass: the blocks on `ids` with one [`StepTables`], each block's
    /// intermediates dropped (its heads' weights kept when `weights`), then the final norm
    /// and the LM head on the last position.
    pub(crate) fn last_position(
        &self,
        ids: &[usize],
        cache: &mut KvCache,
        weights: bool,
    ) -> Result<LastPosition, AttentionError> {
        self.check_pass(ids, cache)?;
        if ids.is_empty() {
            return Err(AttentionError::Setting {
                name: "ids",
                value: "empty".into(),
                rule: "a lean pass keeps the last position's logits: it needs a token",
            });
        }
        let tables = StepTables::new(&self.blocks, cache.len(), ids.len())?;
        let mut x = self.embed.rows(ids);
        let mut kept = Vec::with_capacity(if weights { self.blocks.len() } else { 0 });
        for (block, layer) in self.blocks.iter().zip(cache.layers_mut()) {
            let out = block.forward_edited(x.view(), layer, |_| {}, &tables)?;
            if weights {
                kept.push(out.attention.weights);
            }
            x = out.output;
        }
        // The norm works row by row: the last row's alone is that row of the whole.
        let hidden = self.norm.forward(x.slice(s![x.nrows() - 1.., ..]))?;
        let logits = self.unembed(hidden.view());
        Ok(LastPosition {
            weights: kept,
            hidden: hidden.index_axis_move(Axis(0), 0),
            logits: logits.index_axis_move(Axis(0), 0),
        })
    }
}

/// The RoPE tables (cosines and sines of the pass's positions, one pair per distinct
/// [`Rope`] of the blocks) and the masks (one per distinct window) of one pass, made once
/// and read by every layer. What it has not (all, for `StepTables::default()`: the teaching
/// path) is made where it is asked for, as [`Rope::rotate`] and [`Mask::causal_over`] make it.
#[derive(Default)]
pub(crate) struct StepTables<'r> {
    start: usize,
    rows: usize,
    angles: Vec<(&'r Rope, Array2<f64>, Array2<f64>)>,
    masks: Vec<(Option<usize>, Mask)>,
}

impl<'r> StepTables<'r> {
    /// The tables of `rows` new tokens at positions `start..`, for `blocks`.
    pub(crate) fn new(
        blocks: &'r [DecoderBlock],
        start: usize,
        rows: usize,
    ) -> Result<StepTables<'r>, AttentionError> {
        let mut tables = StepTables {
            start,
            rows,
            ..StepTables::default()
        };
        for attention in blocks.iter().map(DecoderBlock::attention) {
            let rope = attention.rope();
            if !tables.angles.iter().any(|(r, ..)| *r == rope) {
                let (cos, sin) = rope.angles(start..start + rows);
                tables.angles.push((rope, cos, sin));
            }
            let window = attention.window();
            if !tables.masks.iter().any(|(w, _)| *w == window) {
                let mask = causal(window, rows, start + rows)?;
                tables.masks.push((window, mask));
            }
        }
        Ok(tables)
    }

    /// `x` (tokens at positions `start, start + 1, ...`) turned as [`Rope::rotate`] turns it.
    pub(crate) fn rotate(
        &self,
        rope: &Rope,
        x: ArrayView2<'_, f64>,
        start: usize,
    ) -> Result<Array2<f64>, AttentionError> {
        let found = self.angles.iter().find(|(r, ..)| *r == rope);
        match found {
            Some((_, cos, sin)) if (start, x.nrows()) == (self.start, self.rows) => {
                rope.rotate_with(x, cos, sin)
            }
            _ => rope.rotate(x, start),
        }
    }

    /// The mask of `queries` new tokens over `keys`, sliding for a `window`.
    pub(crate) fn mask(
        &self,
        window: Option<usize>,
        queries: usize,
        keys: usize,
    ) -> Result<Cow<'_, Mask>, AttentionError> {
        let found = self.masks.iter().find(|(w, _)| *w == window);
        match found {
            Some((_, mask)) if (queries, keys) == (self.rows, self.start + self.rows) => {
                Ok(Cow::Borrowed(mask))
            }
            _ => causal(window, queries, keys).map(Cow::Owned),
        }
    }
}

/// The mask of `queries` new tokens over `keys`: [`Mask::causal_over`], or
/// [`Mask::sliding_window`] for a `window`.
fn causal(window: Option<usize>, queries: usize, keys: usize) -> Result<Mask, AttentionError> {
    match window {
        Some(window) => Mask::sliding_window(queries, keys, window),
        None => Mask::causal_over(queries, keys),
    }
}
