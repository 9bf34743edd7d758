//! What a pass keeps, one concept for the encoder's passes and the decoder's.

/// What a pass keeps: one concept for both models, the encoder's passes (`Encode::keep`) and
/// the decoder's (`Decoder::forward_with` and `Decoder::generation_with`, feature
/// `decoder`: there `Weights` and `LastHiddenState` keep the last position's final hidden row
/// and logits, the LM head run on it alone).
///
/// ```
/// use attention_lab::prelude::*;
/// assert_eq!(Keep::default(), Keep::Everything);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keep {
    /// Every intermediate of every layer, an `EncoderOutput`: each head's Q, K, V, scores,
    /// weights and z, the norms, the feed-forward block (what `Encoder::forward` gives).
    #[default]
    Everything,
    /// Every head's weights, layers x heads x tokens x tokens, and the last hidden state:
    /// what transformers returns with `output_attentions=True`.
    Weights,
    /// The last hidden state alone, tokens x d (the input of `mean_pool`).
    LastHiddenState,
}
