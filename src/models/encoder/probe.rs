//! Interventions on an encoder's run, as on a decoder's ([`crate::models::intervention`]): zero-ablate,
//! mean-ablate or scale a head's output (its columns of `concat`, before W_O), patch a head's
//! output or the residual stream entering a layer at a position from another run, recomputing
//! from the first changed layer only.
//!
//! The residual stream entering layer `l` is the embeddings' output for `l = 0` and layer
//! `l - 1`'s output after (BERT's `hidden_states[l]`, post-norm); the number of layers is the
//! last hidden state.

use std::ops::Range;

use ndarray::Array2;

use super::{padding_mask, Encoder, EncoderOutput};
use crate::error::{AttentionError, Operand};
use crate::models::intervention::{check_parts, Activations, Edited, Intervention, Part, Source};

impl Activations for EncoderOutput {
    fn stream(&self, layer: usize) -> Option<&Array2<f64>> {
        match layer {
            0 => Some(&self.embeddings),
            l => self.layers.get(l - 1).map(|l| &l.output),
        }
    }

    fn z(&self, layer: usize) -> Option<&Array2<f64>> {
        self.layers.get(layer).map(|l| &l.attention.concat)
    }
}

impl<'a> From<&'a EncoderOutput> for Source<'a> {
    fn from(run: &'a EncoderOutput) -> Source<'a> {
        Source::of_run(run)
    }
}

impl Encoder {
    /// The run of the clean run's tokens with `intervention`'s edits, recomputed from its first
    /// layer on: the clean run's layers below it are reused as they are (its embeddings too),
    /// and no edit recomputes a layer below its own. `clean` is [`Encoder::forward`]'s run
    /// (no padding; [`Encoder::intervene_padded`] for a padded one); mean ablation takes its
    /// means over `clean`'s positions. Without edits, the clean run.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = || LayerNorm::new(Array1::ones(4), Array1::zeros(4), 1e-12);
    /// let embeddings = Embeddings::new(array![[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, -1.0], [1.0, 1.0, 0.5, 0.0]], Array2::zeros((8, 4)), Array2::zeros((1, 4)), norm()?)?;
    /// let w = Array2::<f64>::eye(4);
    /// let ff = FeedForward::new(Array2::zeros((4, 8)), Array1::zeros(8), Array2::zeros((8, 4)), Array1::zeros(4))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// let encoder = Encoder::new(embeddings, vec![layer])?;
    /// let clean = encoder.forward(&[0, 2, 1])?;
    /// let ablated = encoder.intervene(&clean, &Intervention::new().zero_head(0, 1))?;
    /// assert!(ablated.layers[0].attention.heads[1].z.iter().all(|&z| z == 0.0));
    /// assert_ne!(ablated.last_hidden_state(), clean.last_hidden_state());
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Encoder::intervene_padded`].
    pub fn intervene(
        &self,
        clean: &EncoderOutput,
        intervention: &Intervention<'_>,
    ) -> Result<EncoderOutput, AttentionError> {
        self.intervene_with_padding(clean, None, intervention)
    }

    /// As [`Encoder::intervene`], for a clean run of a padded row ([`Encoder::forward_padded`]
    /// with `padded`): the layers recomputed attend to no \[PAD\] token either, and mean
    /// ablation takes its means over the real tokens only.
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
    /// let padded = [false, false, true];
    /// let clean = encoder.forward_padded(&[1, 0, 0], &[0, 0, 0], &padded)?;
    /// let scaled = encoder.intervene_padded(&clean, &padded, &Intervention::new().scale_head(0, 0, 2.0))?;
    /// assert_eq!(scaled.attentions()[[0, 0, 0, 2]], 0.0); // still no weight on the [PAD] token
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for an edit's layer, head or position past the
    /// encoder's or the run's; [`AttentionError::Setting`] for a scale that is not finite;
    /// [`AttentionError::NotApplicable`] for a patch without [`Intervention::source`], or a
    /// source that is not an encoder's run; [`AttentionError::Mismatch`] when `clean` or the
    /// source is not a full run of this encoder as long as `clean`, or `padded` does not have
    /// one entry per token.
    pub fn intervene_padded(
        &self,
        clean: &EncoderOutput,
        padded: &[bool],
        intervention: &Intervention<'_>,
    ) -> Result<EncoderOutput, AttentionError> {
        self.intervene_with_padding(clean, Some(padded), intervention)
    }

    fn intervene_with_padding(
        &self,
        clean: &EncoderOutput,
        padded: Option<&[bool]>,
        intervention: &Intervention<'_>,
    ) -> Result<EncoderOutput, AttentionError> {
        let tokens = clean.embeddings.nrows();
        let mask = padding_mask(tokens, padded)?;
        let columns = self.layers.iter().map(|l| columns(&head_widths(l)));
        let edits = Edited::new(intervention, clean, columns.collect(), |name, run| {
            self.check_run(name, run, tokens)
        })?
        .padded(padded);
        let Some(start) = edits.first_layer() else {
            return Ok(clean.clone());
        };
        let mut out = EncoderOutput {
            embeddings: clean.embeddings.clone(),
            layers: clean.layers[..start.min(self.layers.len())].to_vec(),
        };
        self.run_layers(&mut out, start, mask.as_ref(), Some(&edits))?;
        Ok(out)
    }

    /// Checks that `run` is a full pass of this encoder over `tokens` tokens: one output a
    /// layer, the embeddings, every layer's heads' outputs and output `tokens` rows.
    fn check_run(
        &self,
        name: &str,
        run: &EncoderOutput,
        tokens: usize,
    ) -> Result<(), AttentionError> {
        if run.layers.len() != self.layers.len() {
            return Err(AttentionError::mismatch(
                Operand::row(format!("{name}'s layers"), run.layers.len()),
                Operand::row("the encoder's layers", self.layers.len()),
                "a run to probe is the encoder's forward: one output a layer",
            ));
        }
        let d = self.embeddings.width();
        let mut parts: Vec<Part> =
            vec![("embeddings".to_string(), run.embeddings.dim(), (tokens, d))];
        for (l, (layer, out)) in self.layers.iter().zip(&run.layers).enumerate() {
            let z = (tokens, head_widths(layer).iter().sum());
            parts.push((format!("layer {l}'s concat"), out.attention.concat.dim(), z));
            parts.push((format!("layer {l}'s output"), out.output.dim(), (tokens, d)));
        }
        let rule = "a run to probe is the encoder's forward over as many tokens as the clean run";
        check_parts(name, "the encoder", parts, rule)
    }
}

/// The widths of a layer's heads' outputs, in order.
fn head_widths(layer: &super::EncoderLayer) -> Vec<usize> {
    let heads = layer.attention().heads();
    heads.iter().map(|h| h.wv().ncols()).collect()
}

/// Each head's columns of the heads' outputs side by side, from their widths.
fn columns(widths: &[usize]) -> Vec<Range<usize>> {
    let ends = widths.iter().scan(0, |end, w| {
        *end += w;
        Some(*end)
    });
    ends.zip(widths).map(|(end, w)| end - w..end).collect()
}
