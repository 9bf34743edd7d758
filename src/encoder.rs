//! A BERT encoder: token embeddings, then N encoder layers. Each layer is the seed lessons'
//! multi-head attention followed by the feed-forward block, each wrapped in a residual and a
//! layer norm (post-norm, as BERT): `A = LN(X + MHA(X))`, `Y = LN(A + FFN(A))`.
//!
//! Every intermediate is kept, so a lesson can open any head of any layer.

use ndarray::{Array2, Array4, ArrayView1, ArrayView2, Axis};

use crate::attend::Attend;
use crate::error::{AttentionError, Operand};
use crate::feed_forward::{FeedForward, FeedForwardOutput};
use crate::heads::{MultiHead, MultiHeadOutput};
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
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
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
        if ids.len() != token_types.len() {
            return Err(AttentionError::mismatch(
                Operand::row("the token ids", ids.len()),
                Operand::row("the token types", token_types.len()),
                "every token needs one token type",
            ));
        }
        let mut x = Array2::zeros((ids.len(), self.width()));
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
        self.norm.normalize(x)
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
        let x = x.into();
        let attention = self.attention.forward(x, &Attend::new().mask(mask))?;
        let attended = self.attention_norm.normalize(attention.result() + &x)?;
        let feed_forward = self.feed_forward.forward(&attended)?;
        let output = self
            .output_norm
            .normalize(&feed_forward.output + &attended)?;
        Ok(EncoderLayerOutput {
            attention,
            attended,
            feed_forward,
            output,
        })
    }
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
        if padded.len() != ids.len() {
            return Err(AttentionError::mismatch(
                Operand::row("the token ids", ids.len()),
                Operand::row("the padding", padded.len()),
                "the padding must have one entry per token",
            ));
        }
        let embeddings = self.embeddings.forward(ids, token_types)?;
        let mask = padded
            .contains(&true)
            .then(|| Mask::key_padding(ids.len(), padded));
        let mut layers: Vec<EncoderLayerOutput> = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let x = layers.last().map_or(&embeddings, |l| &l.output);
            let out = layer.forward(x, mask.as_ref())?;
            layers.push(out);
        }
        Ok(EncoderOutput { embeddings, layers })
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
