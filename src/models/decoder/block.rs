//! One pre-norm decoder block: `h = x + attention(norm(x))`, then `h + mlp(norm(h))`.

use ndarray::{Array2, ArrayView2};

use super::cache::LayerCache;
use super::grouped::{GroupedAttention, GroupedOutput};
use super::lean::StepTables;
use crate::error::{AttentionError, Operand};
use crate::layers::feed_forward::{FeedForward, SwiGlu};
use crate::layers::norm::{LayerNorm, RmsNorm};

/// The norm before each half of a block.
#[derive(Debug, Clone, PartialEq)]
pub enum Norm {
    /// RMSNorm (Llama).
    Rms(RmsNorm),
    /// LayerNorm (GPT-2).
    Layer(LayerNorm),
}

impl Norm {
    /// The width of the rows it normalises.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Norm::Rms(RmsNorm::new(array![1.0, 1.0, 1.0], 0.0)?).width(), 3);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn width(&self) -> usize {
        match self {
            Norm::Rms(norm) => norm.weight().len(),
            Norm::Layer(norm) => norm.gamma().len(),
        }
    }

    /// The normalised rows.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?);
    /// assert_eq!(norm.forward(&array![[3.0, -3.0]])?, array![[1.0, -1.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the norm's width.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<Array2<f64>, AttentionError> {
        match self {
            Norm::Rms(norm) => norm.forward(x),
            Norm::Layer(norm) => norm.forward(x),
        }
    }
}

/// The feed-forward half of a block.
#[derive(Debug, Clone, PartialEq)]
pub enum Mlp {
    /// `(SiLU(X W_gate) * X W_up) W_down` (Llama).
    SwiGlu(SwiGlu),
    /// `GELU(X W_1 + b_1) W_2 + b_2` (GPT-2, BERT).
    Gelu(FeedForward),
}

impl Mlp {
    /// The widths of its input and output rows (equal in a decoder block).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let mlp = Mlp::SwiGlu(SwiGlu::new(Array2::ones((4, 6)), Array2::ones((4, 6)), Array2::ones((6, 4)))?);
    /// assert_eq!(mlp.widths(), (4, 4));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn widths(&self) -> (usize, usize) {
        match self {
            Mlp::SwiGlu(mlp) => (mlp.w_gate().nrows(), mlp.w_down().ncols()),
            Mlp::Gelu(mlp) => (mlp.w1().nrows(), mlp.w2().ncols()),
        }
    }

    /// The block's output rows.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let mlp = Mlp::SwiGlu(SwiGlu::new(array![[1.0]], array![[1.0]], array![[1.0]])?);
    /// assert_eq!(mlp.forward(&array![[0.0]])?, array![[0.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the block's input width.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<Array2<f64>, AttentionError> {
        Ok(match self {
            Mlp::SwiGlu(mlp) => mlp.forward(x)?.output,
            Mlp::Gelu(mlp) => mlp.forward(x)?.output,
        })
    }
}

/// A pre-norm decoder block.
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderBlock {
    attn_norm: Norm,
    attention: GroupedAttention,
    mlp_norm: Norm,
    mlp: Mlp,
}

/// Every intermediate of one block on new tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockOutput {
    /// The attention's intermediates (its input was `norm(x)`).
    pub attention: GroupedOutput,
    /// `x + attention`: the residual stream after the first half.
    pub hidden: Array2<f64>,
    /// The block's output, `hidden + mlp(norm(hidden))`.
    pub output: Array2<f64>,
}

impl DecoderBlock {
    /// A block from its two norms, its attention and its feed-forward half.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 1, 1, Rope::new(2, 10.0)?)?;
    /// let norm = Norm::Rms(RmsNorm::new(array![1.0, 1.0], 1e-6)?);
    /// let mlp = Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?);
    /// let block = DecoderBlock::new(norm.clone(), attention, norm, mlp)?;
    /// let out = block.forward(&array![[1.0, 2.0]], &mut LayerCache::new(2))?;
    /// assert_eq!(out.output.dim(), (1, 2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when a part's width differs from the attention's E (the
    /// rows of W_Q): both norms, and the feed-forward's input and output.
    pub fn new(
        attn_norm: Norm,
        attention: GroupedAttention,
        mlp_norm: Norm,
        mlp: Mlp,
    ) -> Result<DecoderBlock, AttentionError> {
        let e = attention.width();
        let (mlp_in, mlp_out) = mlp.widths();
        let parts = [
            ("the attention's norm", attn_norm.width()),
            ("the feed-forward's norm", mlp_norm.width()),
            ("the feed-forward's input", mlp_in),
            ("the feed-forward's output", mlp_out),
        ];
        if let Some((name, width)) = parts.into_iter().find(|&(_, w)| w != e) {
            return Err(AttentionError::mismatch(
                Operand::row(name, width),
                Operand::row("the attention (rows of W_Q)", e),
                "every part of a block reads and writes rows of the residual stream's width E",
            ));
        }
        Ok(DecoderBlock {
            attn_norm,
            attention,
            mlp_norm,
            mlp,
        })
    }

    /// The block's attention.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 1, 1, Rope::new(2, 10.0)?)?;
    /// let norm = Norm::Rms(RmsNorm::new(array![1.0, 1.0], 1e-6)?);
    /// let block = DecoderBlock::new(norm.clone(), attention, norm, Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?))?;
    /// assert_eq!(block.attention().heads(), 1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn attention(&self) -> &GroupedAttention {
        &self.attention
    }

    /// Runs the block on new tokens `x`, extending the layer's cache.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::zeros((2, 2));
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 1, 1, Rope::new(2, 10.0)?)?;
    /// let norm = Norm::Rms(RmsNorm::new(array![1.0, 1.0], 1e-6)?);
    /// let block = DecoderBlock::new(norm.clone(), attention, norm, Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?))?;
    /// // zero weights: both halves add nothing to the residual stream
    /// let x = array![[1.0, 2.0], [3.0, 4.0]];
    /// assert_eq!(block.forward(&x, &mut LayerCache::new(2))?.output, x);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of `x` differ from the block's width, or
    /// the cache is not this layer's.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        cache: &mut LayerCache,
    ) -> Result<BlockOutput, AttentionError> {
        self.forward_edited(x.into(), cache, |_| {}, &StepTables::default())
    }

    /// Appends to `cache` the keys and values a pass over the residual rows `x` would: the
    /// attention's norm, W_K turned by RoPE, and W_V, nothing else (a prefix an intervention
    /// leaves as it was).
    pub(crate) fn append_kv(
        &self,
        x: ArrayView2<'_, f64>,
        cache: &mut LayerCache,
    ) -> Result<(), AttentionError> {
        let normed = self.attn_norm.forward(x)?;
        self.attention
            .append_kv(normed.view(), cache, &StepTables::default())
    }

    /// As [`DecoderBlock::forward`], with `edit` given the attention heads' outputs `z`
    /// before W_O (the output keeps the edited `z`), and the RoPE tables and the mask taken
    /// from `tables` when it has them.
    pub(crate) fn forward_edited(
        &self,
        x: ArrayView2<'_, f64>,
        cache: &mut LayerCache,
        edit: impl FnOnce(&mut Array2<f64>),
        tables: &StepTables<'_>,
    ) -> Result<BlockOutput, AttentionError> {
        let normed = self.attn_norm.forward(x)?;
        let mut heads = self.attention.attend_heads(normed.view(), cache, tables)?;
        edit(&mut heads.z);
        let attention = self.attention.project_out(heads);
        let hidden = &x + &attention.output;
        let output = &hidden + &self.mlp.forward(&self.mlp_norm.forward(&hidden)?)?;
        Ok(BlockOutput {
            attention,
            hidden,
            output,
        })
    }
}
