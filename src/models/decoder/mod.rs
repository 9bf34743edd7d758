//! A decoder-only transformer, as transformers' Llama computes it: token embeddings, pre-norm
//! blocks of causal grouped-query attention with RoPE and a feed-forward half, a final norm,
//! and the LM head. Every intermediate is kept, as [`crate::layers::heads`] keeps them; a pass with a
//! [`Keep`] ([`Decoder::forward_with`], the encoder's idiom) keeps less.
//!
//! Generation runs the prompt once (the prefill), then one token at a time against the
//! [`KvCache`]: a step computes one row per layer, and its logits equal a full recomputation's
//! last row. [`Decoder::generate`]'s steps are lean: the RoPE tables and the mask made once a
//! step, no intermediate kept, the LM head on the last position.
//!
//! Modules: `cache` (the KV cache), `grouped` (the attention), `block` (one block),
//! `generate` (greedy and sampled decoding), `lean` (passes that keep what a [`Keep`] asks),
//! `probe` (ablation, patching, direct logit attribution and the logit lens); this module ties
//! them into a model.

mod block;
mod cache;
mod generate;
mod grouped;
mod lean;
mod probe;

/// What a pass keeps: the encoder's [`Keep`](crate::models::encoder::Keep), one concept for both
/// models ([`Decoder::forward_with`]).
pub use crate::models::keep::Keep;
pub use block::{BlockOutput, DecoderBlock, Mlp, Norm};
pub use cache::{KvCache, LayerCache};
pub use generate::{Generation, Sampler, Sampling, Step};
pub use grouped::{grouped_query_attention, GroupedAttention, GroupedOutput};
pub use lean::DecoderKept;
pub use probe::{Attribution, Edit, HeadEdit, Intervention, ResidualPatch};

use ndarray::{Array1, Array2, ArrayView2};

use crate::error::{AttentionError, Operand};
use crate::fast::parallel;
use crate::layers::linear::Linear;
use lean::StepTables;

/// The LM head: the final hidden rows times the token embeddings, transposed (tied, as
/// GPT-2), or times a matrix of its own (E x vocab).
#[derive(Debug, Clone, PartialEq)]
pub enum LmHead {
    /// Logits `H E^T`, E being the embedding table.
    Tied,
    /// Logits `H W`, W being E x vocab.
    Untied(Array2<f64>),
}

/// A decoder-only transformer.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoder {
    embed: Linear,
    blocks: Vec<DecoderBlock>,
    norm: Norm,
    lm_head: LmHead,
}

/// Every intermediate of a pass over new tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderOutput {
    /// The new tokens' embeddings, tokens x E.
    pub embedded: Array2<f64>,
    /// Each block's intermediates, in order.
    pub blocks: Vec<BlockOutput>,
    /// The final norm of the last block's output.
    pub hidden: Array2<f64>,
    /// One row of logits per new token: tokens x vocab (the last token's only, 1 x vocab, in
    /// [`Decoder::generation`]'s prefill).
    pub logits: Array2<f64>,
    /// What each residual patch of an intervened run added to the stream (none in a plain
    /// pass): the patched rows are in the stream, and this keeps the parts summing to it
    /// ([`Decoder::attribute`]).
    pub patches: Vec<ResidualPatch>,
}

impl Decoder {
    /// A decoder from its embedding table (vocab x E), its blocks, the final norm and the LM
    /// head.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 1, 1, Rope::new(2, 10.0)?)?;
    /// let norm = Norm::Rms(RmsNorm::new(array![1.0, 1.0], 1e-6)?);
    /// let mlp = Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?);
    /// let block = DecoderBlock::new(norm.clone(), attention, norm.clone(), mlp)?;
    /// let embed = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    /// let decoder = Decoder::new(embed, vec![block], norm, LmHead::Tied)?;
    /// assert_eq!(decoder.vocab(), 3);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when a block or the final norm is not as wide as the
    /// embeddings, or an untied head is not E x vocab.
    pub fn new(
        embed: impl Into<Linear>,
        blocks: Vec<DecoderBlock>,
        norm: Norm,
        lm_head: LmHead,
    ) -> Result<Decoder, AttentionError> {
        let embed = embed.into();
        let e = embed.ncols();
        let widths = blocks
            .iter()
            .map(|b| ("a block (rows of its W_Q)", b.attention().width()))
            .chain([("the final norm", norm.width())]);
        for (name, width) in widths {
            if width != e {
                return Err(AttentionError::mismatch(
                    Operand::row(name, width),
                    Operand::new("the embeddings", &embed.shape()),
                    "every block and the final norm must be as wide as an embedding (E)",
                ));
            }
        }
        if let LmHead::Untied(w) = &lm_head {
            if w.dim() != (e, embed.nrows()) {
                return Err(AttentionError::mismatch(
                    Operand::new("the LM head", w.shape()),
                    Operand::new("the embeddings", &embed.shape()),
                    "the LM head must be E x vocab when the embeddings are vocab x E",
                ));
            }
        }
        Ok(Decoder {
            embed,
            blocks,
            norm,
            lm_head,
        })
    }

    /// The number of tokens of the vocabulary.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(Array2::zeros((5, 2)), vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// assert_eq!(decoder.vocab(), 5);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn vocab(&self) -> usize {
        self.embed.nrows()
    }

    /// The embedding table, vocab x E (the tied LM head's weights too).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(Array2::zeros((5, 2)), vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// assert_eq!(decoder.embed().dim(), (5, 2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn embed(&self) -> &Linear {
        &self.embed
    }

    /// The LM head.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(Array2::zeros((5, 2)), vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// assert_eq!(decoder.lm_head(), &LmHead::Tied);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn lm_head(&self) -> &LmHead {
        &self.lm_head
    }

    /// The blocks, in order.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(Array2::zeros((5, 2)), vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// assert!(decoder.blocks().is_empty());
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn blocks(&self) -> &[DecoderBlock] {
        &self.blocks
    }

    /// An empty KV cache for this decoder.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(Array2::zeros((5, 2)), vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// assert!(decoder.cache().is_empty());
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn cache(&self) -> KvCache {
        let widths: Vec<usize> = self
            .blocks
            .iter()
            .map(|b| b.attention().kv_width())
            .collect();
        KvCache::new(&widths)
    }

    /// The whole sequence `ids` at once, from an empty cache: the full recomputation.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let out = decoder.forward(&[0, 1, 1])?;
    /// assert_eq!(out.logits.dim(), (3, 2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for a token id past the vocabulary.
    pub fn forward(&self, ids: &[usize]) -> Result<DecoderOutput, AttentionError> {
        self.forward_cached(ids, &mut self.cache())
    }

    /// The tokens `ids` after those already in `cache` (the prompt for an empty cache, the
    /// prefill; then one token at a time), extending it; positions continue from the cache's
    /// length.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let mut cache = decoder.cache();
    /// let prefill = decoder.forward_cached(&[0, 1], &mut cache)?;
    /// let step = decoder.forward_cached(&[1], &mut cache)?;
    /// assert_eq!(step.logits.row(0), decoder.forward(&[0, 1, 1])?.logits.row(2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for a token id past the vocabulary (nothing is cached
    /// then); [`AttentionError::Mismatch`] for a cache made for another decoder.
    pub fn forward_cached(
        &self,
        ids: &[usize],
        cache: &mut KvCache,
    ) -> Result<DecoderOutput, AttentionError> {
        self.pass(ids, cache, false)
    }

    /// As [`Decoder::forward_cached`], with the logits of the last token only when `last` (a
    /// prefill for generation: the LM head is a large product, and only its last row picks the
    /// next token).
    pub(crate) fn pass(
        &self,
        ids: &[usize],
        cache: &mut KvCache,
        last: bool,
    ) -> Result<DecoderOutput, AttentionError> {
        self.check_pass(ids, cache)?;
        let embedded = self.embed.rows(ids);
        self.resume(embedded, 0, cache.layers_mut(), last, &())
    }

    /// A pass's input checked whole before any layer appends, so that an error leaves the
    /// cache as it was: every id in the vocabulary, and a cache made for this decoder.
    fn check_pass(&self, ids: &[usize], cache: &KvCache) -> Result<(), AttentionError> {
        if let Some(&id) = ids.iter().find(|&&id| id >= self.vocab()) {
            return Err(AttentionError::OutOfRange {
                what: "token id",
                index: id,
                table: Operand::new("token embeddings", &self.embed.shape()),
            });
        }
        let widths = cache.layers().iter().map(LayerCache::width);
        if !widths.eq(self.blocks.iter().map(|b| b.attention().kv_width())) {
            return Err(AttentionError::mismatch(
                Operand::row("the cache's layers", cache.layers().len()),
                Operand::row("the decoder's blocks", self.blocks.len()),
                "a KV cache holds one layer per block, as wide as its keys: make it with \
                 Decoder::cache",
            ));
        }
        Ok(())
    }

    /// Runs the blocks from `start` on over `x`, the residual stream entering block `start`
    /// (the embeddings for 0), then the final norm and the LM head (for the last token only
    /// when `last`). The stream entering each block, and after the last, is given to
    /// `edits.residual` first, and each block's heads' outputs `z` to `edits.z` before W_O;
    /// the output keeps the edited values, with `x` (edited) as its `embedded` and the blocks
    /// from `start` only. `layers` holds every block's KV cache; those below `start` are left
    /// alone.
    pub(crate) fn resume(
        &self,
        mut x: Array2<f64>,
        start: usize,
        layers: &mut [LayerCache],
        last: bool,
        edits: &impl Edits,
    ) -> Result<DecoderOutput, AttentionError> {
        let mut blocks: Vec<BlockOutput> = Vec::with_capacity(self.blocks.len() - start);
        let mut patches = Vec::new();
        let mut patch = |layer: usize, x: &mut Array2<f64>| {
            let deltas = edits.residual(layer, x).into_iter();
            patches.extend(deltas.map(|(position, delta)| ResidualPatch {
                layer,
                position,
                delta,
            }));
        };
        for (l, (block, layer)) in self.blocks.iter().zip(layers).enumerate().skip(start) {
            let x = residual_mut(&mut x, &mut blocks);
            patch(l, x);
            let out =
                block.forward_edited(x.view(), layer, |z| edits.z(l, z), &StepTables::default())?;
            blocks.push(out);
        }
        let mut embedded = x;
        let x = residual_mut(&mut embedded, &mut blocks);
        patch(self.blocks.len(), x);
        let hidden = self.norm.forward(&*x)?;
        let rows = match last {
            true => hidden.slice(ndarray::s![hidden.nrows().saturating_sub(1).., ..]),
            false => hidden.view(),
        };
        let logits = self.unembed(rows);
        Ok(DecoderOutput {
            embedded,
            blocks,
            hidden,
            logits,
            patches,
        })
    }

    /// The logits of final-norm rows: the LM head's product.
    pub(crate) fn unembed(&self, rows: ArrayView2<'_, f64>) -> Array2<f64> {
        match &self.lm_head {
            LmHead::Tied => self.embed.project_t(rows),
            LmHead::Untied(w) => parallel::project(rows, w, None),
        }
    }
}

/// The residual stream after the last block run (`embedded` before any).
fn residual_mut<'a>(
    embedded: &'a mut Array2<f64>,
    blocks: &'a mut [BlockOutput],
) -> &'a mut Array2<f64> {
    match blocks.last_mut() {
        Some(block) => &mut block.output,
        None => embedded,
    }
}

/// What a pass may change on its way ([`Decoder::resume`]): the residual stream entering a
/// layer (`layer` = the number of blocks: after the last), and a layer's heads' outputs `z`
/// before W_O. `()` changes nothing. The edits are checked before the pass, which they
/// cannot fail.
pub(crate) trait Edits {
    /// Changes the residual stream entering `layer`, tokens x E; what each changed row got
    /// added, by its position in the run.
    fn residual(&self, layer: usize, x: &mut Array2<f64>) -> Vec<(usize, Array1<f64>)>;
    /// Changes the heads' outputs of `layer`, tokens x heads d.
    fn z(&self, layer: usize, z: &mut Array2<f64>);
}

impl Edits for () {
    fn residual(&self, _: usize, _: &mut Array2<f64>) -> Vec<(usize, Array1<f64>)> {
        Vec::new()
    }

    fn z(&self, _: usize, _: &mut Array2<f64>) {}
}
