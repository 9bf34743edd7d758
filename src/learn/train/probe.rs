//! Probing notebook 010's kind of model ([`AttentionOnly`]) as the decoder is probed
//! ([`crate::models::decoder`]'s `intervene`, `attribute`, `logit_lens`): ablate, scale or patch a
//! head's output (its columns of a layer's `concat`, before W_O), patch the residual stream
//! from another run, recomputing from the first changed layer only ([`crate::models::intervention`]'s
//! edits, shared with the decoder and the encoder); read the logits out layer by layer or part
//! by part.
//!
//! The residual stream entering layer `l` is the run's `residual[l]`: the token and position
//! embeddings for `l = 0`, layer `l - 1`'s output after; the number of layers is the stream
//! the unembedding reads. There is no norm: a part of a logit is its vector dotted with the
//! unembedding's column of the token.

use ndarray::{s, Array1, Array2};

use super::{AttentionOnly, AttentionOnlyOutput};
use crate::error::{AttentionError, Operand};
use crate::models::decoder::Attribution;
use crate::models::intervention::{
    check_index, check_parts, Activations, Edited, Intervention, Part, Source,
};

impl Activations for AttentionOnlyOutput {
    fn stream(&self, layer: usize) -> Option<&Array2<f64>> {
        self.residual.get(layer)
    }

    fn z(&self, layer: usize) -> Option<&Array2<f64>> {
        self.layers.get(layer).map(|l| &l.concat)
    }
}

impl<'a> From<&'a AttentionOnlyOutput> for Source<'a> {
    fn from(run: &'a AttentionOnlyOutput) -> Source<'a> {
        Source::of_run(run)
    }
}

impl AttentionOnly {
    /// The run of the clean run's tokens with `intervention`'s edits, recomputed from its first
    /// layer on: the clean run's layers below it are reused as they are (its embeddings too),
    /// and no edit recomputes a layer below its own. `clean` is [`AttentionOnly::forward`]'s
    /// run; mean ablation takes its means over `clean`'s positions. Without edits, the clean
    /// run. A residual patch's difference is kept in the run's
    /// [`patches`](AttentionOnlyOutput::patches).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let model = AttentionOnly::random(8, 6, 4, 2, 2, 0)?;
    /// let (clean, corrupted) = (model.forward(&[1, 2, 3])?, model.forward(&[1, 5, 3])?);
    /// let ablated = model.intervene(&clean, &Intervention::new().zero_head(1, 0))?;
    /// assert!(ablated.layers[1].heads[0].z.iter().all(|&z| z == 0.0));
    /// assert_eq!(ablated.layers[0], clean.layers[0]); // below layer 1: the clean run's
    /// assert_ne!(ablated.logits, clean.logits);
    /// let patched = model.intervene(&clean, &Intervention::new().patch_residual(0, 1).source(&corrupted))?;
    /// assert_eq!(patched.logits.row(1), corrupted.logits.row(1));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for an edit's layer, head or position past the model's
    /// or the run's; [`AttentionError::Setting`] for a scale that is not finite;
    /// [`AttentionError::NotApplicable`] for a patch without [`Intervention::source`], or a
    /// source that is not an attention-only model's run; [`AttentionError::Mismatch`] when
    /// `clean` or the source is not a full run of this model as long as `clean`, or a
    /// parameter's shape is not the model's.
    pub fn intervene(
        &self,
        clean: &AttentionOnlyOutput,
        intervention: &Intervention<'_>,
    ) -> Result<AttentionOnlyOutput, AttentionError> {
        let tokens = clean.residual.first().map_or(0, Array2::nrows);
        let d = self.embed.ncols() / self.heads();
        let columns = (0..self.heads()).map(|h| h * d..(h + 1) * d).collect();
        let columns = vec![columns; self.layers.len()];
        let edits = Edited::new(intervention, clean, columns, |name, run| {
            self.check_run(name, run, tokens)
        })?;
        let Some(start) = edits.first_layer() else {
            return Ok(clean.clone());
        };
        let below = AttentionOnlyOutput {
            residual: clean.residual[..start].to_vec(),
            layers: clean.layers[..start].to_vec(),
            logits: Array2::zeros((0, 0)),
            patches: clean
                .patches
                .iter()
                .filter(|p| p.layer <= start)
                .cloned()
                .collect(),
        };
        self.resume(clean.residual[start].clone(), below, Some(&edits))
    }

    /// Direct logit attribution of `token`'s logit at `position` in `run`: the part of each
    /// head's output (`z_h` times W_O's rows of head h) and of the embeddings (token and
    /// position), each dotted with the unembedding's column of `token` (no norm to freeze).
    /// The parts sum to the logit. A model without feed-forward blocks has no MLP parts
    /// (`mlps` is empty); a residual patch's difference is a part of its own (`patched`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let model = AttentionOnly::random(8, 6, 4, 2, 2, 0)?;
    /// let run = model.forward(&[1, 2, 3])?;
    /// let parts = model.attribute(&run, 2, 5)?;
    /// assert_eq!((parts.heads.len(), parts.heads[0].len(), parts.mlps.len()), (2, 2, 0));
    /// assert!((parts.total() - run.logits[[2, 5]]).abs() < 1e-12);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for a position past the run's or a token past the
    /// vocabulary; [`AttentionError::Mismatch`] when `run` is not a full run of this model.
    pub fn attribute(
        &self,
        run: &AttentionOnlyOutput,
        position: usize,
        token: usize,
    ) -> Result<Attribution, AttentionError> {
        let tokens = run.residual.first().map_or(0, Array2::nrows);
        self.check_run("the run", run, tokens)?;
        check_index("position", position, "positions of the run", tokens)?;
        check_index("token id", token, "token embeddings", self.embed.nrows())?;
        let direction = self.unembed.column(token);
        let d = self.embed.ncols() / self.heads();
        let heads = self.layers.iter().zip(&run.layers).map(|([.., wo], out)| {
            // W_O times the direction: head h's part is z_h . its rows h.
            let wo_direction = wo.dot(&direction);
            let z = out.concat.row(position);
            (0..self.heads())
                .map(|h| {
                    let rows = s![h * d..(h + 1) * d];
                    z.slice(rows).dot(&wo_direction.slice(rows))
                })
                .collect()
        });
        let mut embedded = run.residual[0].row(position).dot(&direction);
        let mut patched = 0.0;
        // The stream holds a patched row: the difference is the patch's part, not the
        // embeddings' (the heads' parts come from their own outputs).
        for patch in run.patches.iter().filter(|p| p.position == position) {
            let delta = patch.delta.dot(&direction);
            patched += delta;
            if patch.layer == 0 {
                embedded -= delta;
            }
        }
        Ok(Attribution {
            embedded,
            heads: heads.collect(),
            mlps: Array1::zeros(0),
            patched,
            logit: run.logits[[position, token]],
        })
    }

    /// The logit lens: the residual stream entering each layer (the embeddings, then each
    /// layer's output) through the unembedding, tokens x vocab each; the last is the run's
    /// logits.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let model = AttentionOnly::random(8, 6, 4, 2, 2, 0)?;
    /// let run = model.forward(&[1, 2, 3])?;
    /// let lens = model.logit_lens(&run)?;
    /// assert_eq!(lens.len(), 3);
    /// assert_eq!(lens[2], run.logits);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when `run` is not a full run of this model.
    pub fn logit_lens(
        &self,
        run: &AttentionOnlyOutput,
    ) -> Result<Vec<Array2<f64>>, AttentionError> {
        let tokens = run.residual.first().map_or(0, Array2::nrows);
        self.check_run("the run", run, tokens)?;
        Ok(run.residual.iter().map(|x| x.dot(&self.unembed)).collect())
    }

    /// Checks the model's shapes, and that `run` is a full pass of it over `tokens` tokens:
    /// one output a layer, every residual stream, `concat` and the logits `tokens` rows.
    fn check_run(
        &self,
        name: &str,
        run: &AttentionOnlyOutput,
        tokens: usize,
    ) -> Result<(), AttentionError> {
        self.check_shapes()?;
        let layers = self.layers.len();
        if run.layers.len() != layers || run.residual.len() != layers + 1 {
            return Err(AttentionError::mismatch(
                Operand::row(format!("{name}'s layers"), run.layers.len()),
                Operand::row("the model's layers", layers),
                "a run to probe is the model's forward: one output a layer, and a residual \
                 stream before each and after the last",
            ));
        }
        let (vocab, e) = self.embed.dim();
        let mut parts: Vec<Part> = vec![("logits".to_string(), run.logits.dim(), (tokens, vocab))];
        for (l, x) in run.residual.iter().enumerate() {
            parts.push((format!("residual stream {l}"), x.dim(), (tokens, e)));
        }
        for (l, out) in run.layers.iter().enumerate() {
            parts.push((format!("layer {l}'s concat"), out.concat.dim(), (tokens, e)));
        }
        let rule = "a run to probe is the model's forward over as many tokens as the clean run";
        check_parts(name, "the model", parts, rule)
    }
}
