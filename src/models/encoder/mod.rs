//! A BERT encoder: token embeddings, then N encoder layers. Each layer is the seed lessons'
//! multi-head attention followed by the feed-forward block, each wrapped in a residual and a
//! layer norm (post-norm, as BERT): `A = LN(X + MHA(X))`, `Y = LN(A + FFN(A))`.
//!
//! Every intermediate is kept, so a lesson can open any head of any layer; or, with
//! [`Encoder::forward_with`], only what the caller asks for ([`Keep`]), in memory the caller
//! keeps for the next pass ([`EncoderBuffers`]).

mod embeddings;
mod layer;
mod options;
mod probe;

pub use crate::models::keep::Keep;
pub use embeddings::Embeddings;
pub use layer::{EncoderLayer, EncoderLayerOutput};
pub use options::{Encode, EncoderBuffers, Kept};

use ndarray::{Array2, Array4, Axis};

use crate::models::intervention::Edited;

use crate::error::{AttentionError, Operand};
use crate::into::fit;
use crate::layers::mask::Mask;
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
        let heads = |layer: &EncoderLayer| layer.attention().heads().len();
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

    /// Runs the encoder on one row of a padded batch: `padded[j]` marks a \[PAD\] token, which
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
        let mask = padding_mask(ids.len(), options.padded)?;
        let mask = mask.as_ref();
        if options.keep == Keep::Everything {
            let out = &mut buffers.everything;
            self.embeddings
                .forward_into(ids, token_types, &mut out.embeddings)?;
            self.run_layers(out, 0, mask, None)?;
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
            let heads = self
                .layers
                .first()
                .map_or(0, |l| l.attention().heads().len());
            fit(attentions, (self.layers.len(), heads, ids.len(), ids.len()));
        }
        for (i, layer) in self.layers.iter().enumerate() {
            let into = weights.then(|| attentions.index_axis_mut(Axis(0), i));
            layer.forward_into(x.view(), mask, scratch, into, |_| false)?;
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

    /// Runs the layers from `start` on, into `out` (every intermediate), the layers below
    /// `start` being in `out` already (their outputs reused as they are; the embeddings'
    /// for `start` = 0). The residual stream entering each layer run, and after the last, is
    /// given to `edits` first, and each layer's heads' outputs (`concat`) before W_O; `out`
    /// keeps the edited values.
    fn run_layers(
        &self,
        out: &mut EncoderOutput,
        start: usize,
        mask: Option<&Mask>,
        edits: Option<&Edited<'_, EncoderOutput>>,
    ) -> Result<(), AttentionError> {
        out.layers
            .resize_with(self.layers.len(), EncoderLayerOutput::default);
        for (i, layer) in self.layers.iter().enumerate().skip(start) {
            let (before, after) = out.layers.split_at_mut(i);
            let x = before
                .last_mut()
                .map_or(&mut out.embeddings, |l| &mut l.output);
            if let Some(edits) = edits {
                edits.residual(i, x);
            }
            let edit = |z: &mut Array2<f64>| edits.is_some_and(|e| e.z(i, z));
            layer.forward_into(x.view(), mask, &mut after[0], None, edit)?;
        }
        if let Some(edits) = edits {
            let last = out
                .layers
                .last_mut()
                .map_or(&mut out.embeddings, |l| &mut l.output);
            edits.residual(self.layers.len(), last);
        }
        Ok(())
    }
}

/// The key padding mask of `tokens` tokens with `padded[j]` marking a [PAD] token; `None`
/// without padding.
fn padding_mask(tokens: usize, padded: Option<&[bool]>) -> Result<Option<Mask>, AttentionError> {
    let Some(padded) = padded else {
        return Ok(None);
    };
    if padded.len() != tokens {
        return Err(AttentionError::mismatch(
            Operand::row("the token ids", tokens),
            Operand::row("the padding", padded.len()),
            "the padding must have one entry per token",
        ));
    }
    Ok(padded
        .contains(&true)
        .then(|| Mask::key_padding(tokens, padded)))
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
