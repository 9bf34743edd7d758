//! The options of an encoder pass ([`Encode`], [`Keep`]), the memory it writes into
//! ([`EncoderBuffers`]) and what it kept ([`Kept`]).

use ndarray::{s, Array2, Array4, ArrayView2};

use super::{EncoderLayerOutput, EncoderOutput};
use crate::models::keep::Keep;

/// The options of one encoder pass ([`Encoder::forward_with`](super::Encoder::forward_with)): the token types, the padding
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
    pub(super) token_types: Option<&'a [usize]>,
    pub(super) padded: Option<&'a [bool]>,
    pub(super) keep: Keep,
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

    /// Which tokens are \[PAD\] (true), one per token id: no query attends to them, as in
    /// [`Encoder::forward_padded`](super::Encoder::forward_padded).
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

/// The memory an encoder pass writes into ([`Encoder::forward_with`](super::Encoder::forward_with)), kept by the caller so
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
    pub(super) everything: EncoderOutput,
    /// Otherwise: the layer's input X, then (after the last layer) the last hidden state.
    pub(super) x: Array2<f64>,
    /// Otherwise: one layer's intermediates, written by each layer in turn.
    pub(super) layer: EncoderLayerOutput,
    /// [`Keep::Weights`]: every head's weights, layers x heads x tokens x tokens.
    pub(super) attentions: Array4<f64>,
}

/// What an encoder pass kept, borrowed from its [`EncoderBuffers`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kept<'b> {
    /// [`Keep::Everything`]: every intermediate.
    Everything(&'b EncoderOutput),
    /// [`Keep::Weights`]: every head's weights and the last hidden state.
    Weights {
        /// layers x heads x tokens x tokens, as [`EncoderOutput::attentions`](super::EncoderOutput::attentions).
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
