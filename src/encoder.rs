//! A BERT encoder: token embeddings, then N encoder layers. Each layer is the seed lessons'
//! multi-head attention followed by the feed-forward block, each wrapped in a residual and a
//! layer norm (post-norm, as BERT): `A = LN(X + MHA(X))`, `Y = LN(A + FFN(A))`.
//!
//! Every intermediate is kept, so a lesson can open any head of any layer; or, with
//! [`Encoder::forward_with`], only what the caller asks for ([`Keep`]), in memory the caller
//! keeps for the next pass ([`EncoderBuffers`]).

use ndarray::{s, Array2, Array4, ArrayView1, ArrayView2, ArrayViewMut3, Axis, Zip};

use crate::error::{AttentionError, Operand};
use crate::feed_forward::{FeedForward, FeedForwardOutput};
use crate::heads::{MultiHead, MultiHeadOutput};
use crate::into::fit;
use crate::mask::Mask;
use crate::norm::LayerNorm;

/// The input embeddings: each token's row of the word table, plus its position's row and its
/// token type's row, then a layer norm (BERT's `embeddings`).
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    word: Array2<f64>,
    position: Array2<f64>,
    token_type: Array2<f64>,
    norm: LayerNorm,
}

/// One encoder layer: multi-head self-attention and the feed-forward block, each followed by
/// a residual sum and a layer norm.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderLayer {
    attention: MultiHead,
    attention_norm: LayerNorm,
    feed_forward: FeedForward,
    output_norm: LayerNorm,
}

/// Every intermediate of one encoder layer on one input X.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EncoderLayerOutput {
    /// The multi-head attention on X: each head's Q, K, V, scores, weights and Z, and
    /// `output`, which W_O (and b_O) made of their concatenation.
    pub attention: MultiHeadOutput,
    /// `LN(X + attention)`: the residual sum after attention, normalised.
    pub attended: Array2<f64>,
    /// The feed-forward block on `attended`.
    pub feed_forward: FeedForwardOutput,
    /// `LN(attended + feed_forward)`: the layer's output, the next layer's X.
    pub output: Array2<f64>,
}

/// A stack of encoder layers over the embeddings.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoder {
    embeddings: Embeddings,
    layers: Vec<EncoderLayer>,
}

/// Every intermediate of an encoder on one token sequence.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EncoderOutput {
    /// The embeddings' output, the first layer's X (tokens x d).
    pub embeddings: Array2<f64>,
    /// Each layer's intermediates, in order.
    pub layers: Vec<EncoderLayerOutput>,
}

fn width_error(name: &str, shape: &[usize], d: usize, rule: &'static str) -> AttentionError {
    AttentionError::mismatch(
        Operand::new(name, shape),
        Operand::row("the layer norm's gamma", d),
        rule,
    )
}

/// Row `index` of `table`, or [`AttentionError::OutOfRange`] naming the table.
fn row<'t>(
    table: &'t Array2<f64>,
    name: &'static str,
    what: &'static str,
    index: usize,
) -> Result<ArrayView1<'t, f64>, AttentionError> {
    if index < table.nrows() {
        Ok(table.row(index))
    } else {
        Err(AttentionError::OutOfRange {
            what,
            index,
            table: Operand::new(name, table.shape()),
        })
    }
}

impl Embeddings {
    /// Embeddings from the word table (vocabulary x d), the position table (positions x d),
    /// the token-type table (types x d) and their layer norm.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((4, 2)), Array2::zeros((1, 2)), norm)?;
    /// assert_eq!(embeddings.width(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when a table or the layer norm is not d wide, d being the
    /// word table's columns.
    pub fn new(
        word: Array2<f64>,
        position: Array2<f64>,
        token_type: Array2<f64>,
        norm: LayerNorm,
    ) -> Result<Embeddings, AttentionError> {
        let d = norm.gamma().len();
        let rule = "every embedding table must have as many columns as the layer norm's gamma";
        for (name, table) in [
            ("the word embeddings", &word),
            ("the position embeddings", &position),
            ("the token type embeddings", &token_type),
        ] {
            if table.ncols() != d {
                return Err(width_error(name, table.shape(), d, rule));
            }
        }
        Ok(Embeddings {
            word,
            position,
            token_type,
            norm,
        })
    }

    /// The width d of every embedding.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(Array1::ones(3), Array1::zeros(3), 0.0)?;
    /// let e = Embeddings::new(Array2::zeros((5, 3)), Array2::zeros((2, 3)), Array2::zeros((1, 3)), norm)?;
    /// assert_eq!(e.width(), 3);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn width(&self) -> usize {
        self.word.ncols()
    }

    /// The word table, one row per token id.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0)?;
    /// let e = Embeddings::new(Array2::eye(2), Array2::zeros((2, 2)), Array2::zeros((1, 2)), norm)?;
    /// assert_eq!(e.word(), &Array2::eye(2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn word(&self) -> &Array2<f64> {
        &self.word
    }

    /// The position table, one row per position: its rows bound the tokens of an input.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0)?;
    /// let e = Embeddings::new(Array2::eye(2), Array2::zeros((7, 2)), Array2::zeros((1, 2)), norm)?;
    /// assert_eq!(e.position().nrows(), 7);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn position(&self) -> &Array2<f64> {
        &self.position
    }

    /// The embeddings of `ids`: `LN(word[id] + position[i] + token_type[type])` for the token
    /// at position `i`, one row per token.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0)?;
    /// let e = Embeddings::new(array![[1.0, 0.0], [0.0, 1.0]], Array2::zeros((4, 2)), Array2::zeros((1, 2)), norm)?;
    /// assert_eq!(e.forward(&[1, 0], &[0, 0])?, array![[-1.0, 1.0], [1.0, -1.0]]);
    /// assert!(e.forward(&[2], &[0]).is_err()); // no row for id 2
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for a token id, a position (more tokens than the position
    /// table has rows) or a token type without a row; [`AttentionError::Mismatch`] when `ids`
    /// and `token_types` differ in length.
    pub fn forward(
        &self,
        ids: &[usize],
        token_types: &[usize],
    ) -> Result<Array2<f64>, AttentionError> {
        let mut x = Array2::zeros((0, 0));
        self.forward_into(ids, token_types, &mut x)?;
        Ok(x)
    }

    /// [`Embeddings::forward`] written into `x`, reshaped to tokens x d (its memory kept
    /// when it has room).
    fn forward_into(
        &self,
        ids: &[usize],
        token_types: &[usize],
        x: &mut Array2<f64>,
    ) -> Result<(), AttentionError> {
        if ids.len() != token_types.len() {
            return Err(AttentionError::mismatch(
                Operand::row("the token ids", ids.len()),
                Operand::row("the token types", token_types.len()),
                "every token needs one token type",
            ));
        }
        fit(x, (ids.len(), self.width()));
        x.fill(0.0);
        for (i, (mut out, (&id, &kind))) in x
            .axis_iter_mut(Axis(0))
            .zip(ids.iter().zip(token_types))
            .enumerate()
        {
            out += &row(&self.word, "word embeddings", "token id", id)?;
            out += &row(&self.position, "position embeddings", "position", i)?;
            out += &row(
                &self.token_type,
                "token type embeddings",
                "token type",
                kind,
            )?;
        }
        self.norm.normalize_in_place(x.view_mut())
    }
}

impl EncoderLayer {
    /// A layer from its attention (with W_O), the layer norm after it, the feed-forward
    /// block and the layer norm after that.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let d = 4;
    /// let w = Array2::<f64>::eye(d);
    /// let attention = MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?;
    /// let norm = || LayerNorm::new(Array1::ones(d), Array1::zeros(d), 1e-12);
    /// let ff = FeedForward::new(Array2::zeros((d, 8)), Array1::zeros(8), Array2::zeros((8, d)), Array1::zeros(d))?;
    /// let layer = EncoderLayer::new(attention, norm()?, ff, norm()?)?;
    /// assert_eq!(layer.width(), 4);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the parts are not all d wide (d = the first layer
    /// norm's length): the heads' input, W_O's columns, W_1's rows, W_2's columns and the
    /// second layer norm.
    pub fn new(
        attention: MultiHead,
        attention_norm: LayerNorm,
        feed_forward: FeedForward,
        output_norm: LayerNorm,
    ) -> Result<EncoderLayer, AttentionError> {
        let d = attention_norm.gamma().len();
        let head = &attention.heads()[0];
        if head.wq().nrows() != d {
            return Err(width_error(
                "W_Q of head 1",
                head.wq().shape(),
                d,
                "the heads must take rows as wide as the layer norm",
            ));
        }
        let wo_shape = attention.wo().map_or([0, 0], |wo| [wo.nrows(), wo.ncols()]);
        if attention.wo().is_none() || wo_shape[1] != d {
            return Err(width_error("W_O", &wo_shape, d, "an encoder layer's attention needs a W_O with as many columns as the layer norm's gamma"));
        }
        if feed_forward.w1().nrows() != d {
            return Err(width_error(
                "W_1",
                feed_forward.w1().shape(),
                d,
                "the rows of W_1 must equal the layer's width",
            ));
        }
        if feed_forward.w2().ncols() != d {
            return Err(width_error(
                "W_2",
                feed_forward.w2().shape(),
                d,
                "the columns of W_2 must equal the layer's width",
            ));
        }
        let second = output_norm.gamma().len();
        if second != d {
            return Err(width_error(
                "the second layer norm's gamma",
                &[1, second],
                d,
                "both layer norms must be as wide as the layer",
            ));
        }
        Ok(EncoderLayer {
            attention,
            attention_norm,
            feed_forward,
            output_norm,
        })
    }

    /// The width d of the layer's input and output rows.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let w = Array2::<f64>::eye(2);
    /// # let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0);
    /// # let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 1, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// assert_eq!(layer.width(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn width(&self) -> usize {
        self.attention_norm.gamma().len()
    }

    /// The layer's multi-head attention.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let w = Array2::<f64>::eye(2);
    /// # let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0);
    /// # let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// assert_eq!(layer.attention().heads().len(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn attention(&self) -> &MultiHead {
        &self.attention
    }

    /// The layer's feed-forward block.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let w = Array2::<f64>::eye(2);
    /// # let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0);
    /// # let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// assert_eq!(layer.feed_forward().w1().ncols(), 3);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn feed_forward(&self) -> &FeedForward {
        &self.feed_forward
    }

    /// Runs the layer on X (tokens x d), with an optional [`Mask`] in every head (BERT's
    /// padding mask).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0);
    /// let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 1, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// let out = layer.forward(&array![[1.0, 0.0], [0.0, 1.0]], None)?;
    /// assert_eq!(out.output.dim(), (2, 2));
    /// assert_eq!(out.output, out.attended); // a zero feed-forward block adds nothing
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when X is not d wide or the mask is not tokens x tokens.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        mask: Option<&Mask>,
    ) -> Result<EncoderLayerOutput, AttentionError> {
        let mut out = EncoderLayerOutput::default();
        self.forward_into(x.into(), mask, &mut out, None)?;
        Ok(out)
    }

    /// [`EncoderLayer::forward`] written into `out`, whose matrices are reshaped (their
    /// memory kept when it has room); each head's weights go into `weights` (heads x tokens x
    /// tokens) instead of `out` when it is given.
    fn forward_into(
        &self,
        x: ArrayView2<'_, f64>,
        mask: Option<&Mask>,
        out: &mut EncoderLayerOutput,
        weights: Option<ArrayViewMut3<'_, f64>>,
    ) -> Result<(), AttentionError> {
        if let Some(mask) = mask {
            mask.check(x.nrows(), x.nrows())?;
        }
        self.attention
            .forward_into([x, x, x], mask, None, &mut out.attention, weights)?;
        residual(out.attention.result(), x, &mut out.attended);
        self.attention_norm
            .normalize_in_place(out.attended.view_mut())?;
        self.feed_forward
            .forward_into(out.attended.view(), &mut out.feed_forward)?;
        residual(
            &out.feed_forward.output,
            out.attended.view(),
            &mut out.output,
        );
        self.output_norm.normalize_in_place(out.output.view_mut())
    }
}

/// `sum = a + x`, element by element, `sum` reshaped to their shape.
fn residual(a: &Array2<f64>, x: ArrayView2<'_, f64>, sum: &mut Array2<f64>) {
    fit(sum, a.dim());
    Zip::from(sum)
        .and(a)
        .and(x)
        .for_each(|s, &a, &x| *s = a + x);
}

impl Encoder {
    /// An encoder from its embeddings and layers.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?;
    /// let encoder = Encoder::new(embeddings, vec![])?;
    /// assert!(encoder.layers().is_empty());
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when a layer is not as wide as the embeddings, or has a
    /// number of heads other than the first layer's.
    pub fn new(
        embeddings: Embeddings,
        layers: Vec<EncoderLayer>,
    ) -> Result<Encoder, AttentionError> {
        let heads = |layer: &EncoderLayer| layer.attention.heads().len();
        for (i, layer) in layers.iter().enumerate() {
            if heads(layer) != heads(&layers[0]) {
                return Err(AttentionError::mismatch(
                    Operand::new(format!("the heads of layer {i}"), &[heads(layer)]),
                    Operand::new("the heads of layer 0", &[heads(&layers[0])]),
                    "every layer must have the same number of heads",
                ));
            }
            if layer.width() != embeddings.width() {
                return Err(AttentionError::mismatch(
                    Operand::row(format!("the layer norm of layer {i}"), layer.width()),
                    Operand::new("the word embeddings", embeddings.word().shape()),
                    "every layer must be as wide as the embeddings",
                ));
            }
        }
        Ok(Encoder { embeddings, layers })
    }

    /// The embeddings.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// # let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?;
    /// let encoder = Encoder::new(embeddings, vec![])?;
    /// assert_eq!(encoder.embeddings().width(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn embeddings(&self) -> &Embeddings {
        &self.embeddings
    }

    /// The layers, in order.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// # let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?;
    /// let encoder = Encoder::new(embeddings, vec![])?;
    /// assert_eq!(encoder.layers().len(), 0);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn layers(&self) -> &[EncoderLayer] {
        &self.layers
    }

    /// Runs the encoder on one sequence of token ids, all of token type 0, none padded.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12);
    /// let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm()?)?;
    /// let w = Array2::<f64>::eye(2);
    /// let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// let out = Encoder::new(embeddings, vec![layer.clone(), layer])?.forward(&[0, 1, 1])?;
    /// assert_eq!(out.hidden_states().len(), 3); // the embeddings, then each layer
    /// assert_eq!(out.attentions().dim(), (2, 2, 3, 3)); // layers x heads x tokens x tokens
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Embeddings::forward`].
    pub fn forward(&self, ids: &[usize]) -> Result<EncoderOutput, AttentionError> {
        self.forward_padded(ids, &vec![0; ids.len()], &vec![false; ids.len()])
    }

    /// Runs the encoder on one row of a padded batch: `padded[j]` marks a [PAD] token, which
    /// no query attends to (BERT's `attention_mask` is its negation). Padded tokens still get
    /// rows of their own, as in PyTorch.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12);
    /// let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm()?)?;
    /// let w = Array2::<f64>::eye(2);
    /// let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 1, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// let encoder = Encoder::new(embeddings, vec![layer])?;
    /// let out = encoder.forward_padded(&[1, 0, 0], &[0, 0, 0], &[false, false, true])?;
    /// assert_eq!(out.attentions()[[0, 0, 0, 2]], 0.0); // no weight on the [PAD] token
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Embeddings::forward`], and [`AttentionError::Mismatch`] when `padded` does not
    /// have one entry per token.
    pub fn forward_padded(
        &self,
        ids: &[usize],
        token_types: &[usize],
        padded: &[bool],
    ) -> Result<EncoderOutput, AttentionError> {
        let mut buffers = EncoderBuffers::default();
        let options = Encode::new().token_types(token_types).padded(padded);
        self.forward_with(ids, &options, &mut buffers)?;
        Ok(buffers.everything)
    }

    /// Runs the encoder on one sequence of token ids with `options` (token types, padding,
    /// what to keep), writing into `buffers`: a caller that keeps them for the next pass
    /// reuses their memory (every layer's, in [`Keep::Everything`]; one layer's, shared by
    /// all the layers, otherwise) instead of asking the system for it again. What was kept
    /// is borrowed from `buffers` until the next pass.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12);
    /// let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm()?)?;
    /// let w = Array2::<f64>::eye(2);
    /// let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// let encoder = Encoder::new(embeddings, vec![layer])?;
    /// let full = encoder.forward(&[0, 1, 1])?;
    ///
    /// let mut buffers = EncoderBuffers::default();
    /// let kept = encoder.forward_with(&[0, 1, 1], &Encode::new().keep(Keep::Weights), &mut buffers)?;
    /// assert_eq!(kept.last_hidden_state(), full.last_hidden_state());
    /// assert_eq!(kept.weights(0, 1), Some(full.layers[0].attention.heads[1].weights.view()));
    /// let kept = encoder.forward_with(&[1, 0], &Encode::new().keep(Keep::LastHiddenState), &mut buffers)?;
    /// assert_eq!(kept.last_hidden_state(), encoder.forward(&[1, 0])?.last_hidden_state());
    /// assert_eq!(kept.weights(0, 0), None);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Encoder::forward_padded`].
    pub fn forward_with<'b>(
        &self,
        ids: &[usize],
        options: &Encode<'_>,
        buffers: &'b mut EncoderBuffers,
    ) -> Result<Kept<'b>, AttentionError> {
        let zeros;
        let token_types = match options.token_types {
            Some(types) => types,
            None => {
                zeros = vec![0; ids.len()];
                &zeros
            }
        };
        let padded = options.padded.unwrap_or(&[]);
        if options.padded.is_some() && padded.len() != ids.len() {
            return Err(AttentionError::mismatch(
                Operand::row("the token ids", ids.len()),
                Operand::row("the padding", padded.len()),
                "the padding must have one entry per token",
            ));
        }
        let mask = padded
            .contains(&true)
            .then(|| Mask::key_padding(ids.len(), padded));
        let mask = mask.as_ref();
        if options.keep == Keep::Everything {
            let out = &mut buffers.everything;
            self.embeddings
                .forward_into(ids, token_types, &mut out.embeddings)?;
            out.layers
                .resize_with(self.layers.len(), EncoderLayerOutput::default);
            for (i, layer) in self.layers.iter().enumerate() {
                let (before, after) = out.layers.split_at_mut(i);
                let x = before.last().map_or(&out.embeddings, |l| &l.output);
                layer.forward_into(x.view(), mask, &mut after[0], None)?;
            }
            return Ok(Kept::Everything(out));
        }
        // One layer's buffers for every layer: X goes in, and the layer's output becomes
        // the next X.
        let EncoderBuffers {
            x,
            layer: scratch,
            attentions,
            ..
        } = buffers;
        self.embeddings.forward_into(ids, token_types, x)?;
        let weights = options.keep == Keep::Weights;
        if weights {
            let heads = self.layers.first().map_or(0, |l| l.attention.heads().len());
            fit(attentions, (self.layers.len(), heads, ids.len(), ids.len()));
        }
        for (i, layer) in self.layers.iter().enumerate() {
            let into = weights.then(|| attentions.index_axis_mut(Axis(0), i));
            layer.forward_into(x.view(), mask, scratch, into)?;
            std::mem::swap(x, &mut scratch.output);
        }
        Ok(match weights {
            true => Kept::Weights {
                attentions,
                last_hidden_state: x,
            },
            false => Kept::LastHiddenState(x),
        })
    }
}

/// What an encoder pass keeps (see [`Encode::keep`]).
///
/// ```
/// use attention_lab::prelude::*;
/// assert_eq!(Keep::default(), Keep::Everything);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keep {
    /// Every intermediate of every layer, an [`EncoderOutput`]: each head's Q, K, V, scores,
    /// weights and z, the norms, the feed-forward block (what [`Encoder::forward`] gives).
    #[default]
    Everything,
    /// Every head's weights, layers x heads x tokens x tokens, and the last hidden state:
    /// what transformers returns with `output_attentions=True`.
    Weights,
    /// The last hidden state alone, tokens x d (the input of [`mean_pool`](crate::pooling::mean_pool)).
    LastHiddenState,
}

/// The options of one encoder pass ([`Encoder::forward_with`]): the token types, the padding
/// and what to keep. `Encode::new()` is token type 0 for every token, no padding and
/// [`Keep::Everything`]; each builder method returns the options with one more set.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let options = Encode::new().token_types(&[0, 0, 1]).padded(&[false, false, true]).keep(Keep::Weights);
/// assert_eq!(options.kept(), Keep::Weights);
/// assert_eq!(Encode::new().kept(), Keep::Everything);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Encode<'a> {
    token_types: Option<&'a [usize]>,
    padded: Option<&'a [bool]>,
    keep: Keep,
}

impl<'a> Encode<'a> {
    /// Token type 0 for every token, no padding, every intermediate kept.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Encode::new(), Encode::default());
    /// ```
    pub fn new() -> Encode<'a> {
        Encode::default()
    }

    /// Each token's type (BERT's `token_type_ids`), one per token id.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_ne!(Encode::new().token_types(&[0, 1]), Encode::new());
    /// ```
    pub fn token_types(self, token_types: &'a [usize]) -> Encode<'a> {
        Encode {
            token_types: Some(token_types),
            ..self
        }
    }

    /// Which tokens are [PAD] (true), one per token id: no query attends to them, as in
    /// [`Encoder::forward_padded`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_ne!(Encode::new().padded(&[false, true]), Encode::new());
    /// ```
    pub fn padded(self, padded: &'a [bool]) -> Encode<'a> {
        Encode {
            padded: Some(padded),
            ..self
        }
    }

    /// What the pass keeps.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Encode::new().keep(Keep::LastHiddenState).kept(), Keep::LastHiddenState);
    /// ```
    pub fn keep(self, keep: Keep) -> Encode<'a> {
        Encode { keep, ..self }
    }

    /// What a pass with these options keeps.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Encode::new().kept(), Keep::Everything);
    /// ```
    pub fn kept(&self) -> Keep {
        self.keep
    }
}

/// The memory an encoder pass writes into ([`Encoder::forward_with`]), kept by the caller so
/// that the next pass (of any number of tokens) reuses it. Empty until the first pass.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
/// let encoder = Encoder::new(Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?, vec![])?;
/// let mut buffers = EncoderBuffers::default();
/// for ids in [&[0, 1][..], &[1, 1, 0]] {
///     let kept = encoder.forward_with(ids, &Encode::new(), &mut buffers)?;
///     assert_eq!(kept.last_hidden_state().nrows(), ids.len());
/// }
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct EncoderBuffers {
    /// [`Keep::Everything`]: every layer's intermediates.
    everything: EncoderOutput,
    /// Otherwise: the layer's input X, then (after the last layer) the last hidden state.
    x: Array2<f64>,
    /// Otherwise: one layer's intermediates, written by each layer in turn.
    layer: EncoderLayerOutput,
    /// [`Keep::Weights`]: every head's weights, layers x heads x tokens x tokens.
    attentions: Array4<f64>,
}

/// What an encoder pass kept, borrowed from its [`EncoderBuffers`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kept<'b> {
    /// [`Keep::Everything`]: every intermediate.
    Everything(&'b EncoderOutput),
    /// [`Keep::Weights`]: every head's weights and the last hidden state.
    Weights {
        /// layers x heads x tokens x tokens, as [`EncoderOutput::attentions`].
        attentions: &'b Array4<f64>,
        /// The last layer's output, tokens x d.
        last_hidden_state: &'b Array2<f64>,
    },
    /// [`Keep::LastHiddenState`]: the last layer's output, tokens x d.
    LastHiddenState(&'b Array2<f64>),
}

impl<'b> Kept<'b> {
    /// The last layer's output (the embeddings' when there is no layer), whatever was kept.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// # let encoder = Encoder::new(Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?, vec![])?;
    /// let mut buffers = EncoderBuffers::default();
    /// let kept = encoder.forward_with(&[0, 1], &Encode::new().keep(Keep::LastHiddenState), &mut buffers)?;
    /// assert_eq!(kept.last_hidden_state().dim(), (2, 2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn last_hidden_state(&self) -> &'b Array2<f64> {
        match *self {
            Kept::Everything(out) => out.last_hidden_state(),
            Kept::Weights {
                last_hidden_state, ..
            } => last_hidden_state,
            Kept::LastHiddenState(x) => x,
        }
    }

    /// The weights of head `head` of layer `layer` (tokens x tokens), when they were kept
    /// and the encoder has that head.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// # let encoder = Encoder::new(Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?, vec![])?;
    /// let mut buffers = EncoderBuffers::default();
    /// let kept = encoder.forward_with(&[0, 1], &Encode::new().keep(Keep::Weights), &mut buffers)?;
    /// assert_eq!(kept.weights(0, 0), None); // no layer
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn weights(&self, layer: usize, head: usize) -> Option<ArrayView2<'b, f64>> {
        match *self {
            Kept::Everything(out) => out
                .layers
                .get(layer)
                .and_then(|l| l.attention.heads.get(head))
                .map(|h| h.weights.view()),
            Kept::Weights { attentions, .. } => {
                let (layers, heads, _, _) = attentions.dim();
                (layer < layers && head < heads)
                    .then(|| attentions.view().slice_move(s![layer, head, .., ..]))
            }
            Kept::LastHiddenState(_) => None,
        }
    }
}

impl EncoderOutput {
    /// The last layer's output (the embeddings' when there is no layer): BERT's
    /// `last_hidden_state`.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// # let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?;
    /// let out = Encoder::new(embeddings, vec![])?.forward(&[0, 1])?;
    /// assert_eq!(out.last_hidden_state(), &out.embeddings);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn last_hidden_state(&self) -> &Array2<f64> {
        self.layers.last().map_or(&self.embeddings, |l| &l.output)
    }

    /// The embeddings' output, then each layer's: PyTorch's `hidden_states`
    /// (`output_hidden_states=True`), layers + 1 matrices of tokens x d.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// # let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?;
    /// let out = Encoder::new(embeddings, vec![])?.forward(&[0, 1])?;
    /// assert_eq!(out.hidden_states(), vec![&out.embeddings]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn hidden_states(&self) -> Vec<&Array2<f64>> {
        std::iter::once(&self.embeddings)
            .chain(self.layers.iter().map(|l| &l.output))
            .collect()
    }

    /// Every head's softmax weights, layers x heads x tokens x tokens: PyTorch's
    /// `attentions` (`output_attentions=True`) for one sequence.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// # let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?;
    /// let out = Encoder::new(embeddings, vec![])?.forward(&[0, 1])?;
    /// assert_eq!(out.attentions().dim(), (0, 0, 2, 2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn attentions(&self) -> Array4<f64> {
        let n = self.embeddings.nrows();
        let h = self.layers.first().map_or(0, |l| l.attention.heads.len());
        Array4::from_shape_fn((self.layers.len(), h, n, n), |(l, i, q, k)| {
            self.layers[l].attention.heads[i].weights[[q, k]]
        })
    }
}
