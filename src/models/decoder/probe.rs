//! Probing a decoder as TransformerLens does: ablate or scale a head's output, patch a head's
//! output or the residual stream from another run, and read the logits out layer by layer
//! (the logit lens) or part by part (direct logit attribution).
//!
//! A run's [`DecoderOutput`] is its cache of every activation. [`Decoder::intervene`] takes a
//! clean run and an [`Intervention`] (one options value, as [`crate::layers::attend::Attend`] is, shared
//! with the encoder: [`crate::models::intervention`]) and recomputes from the first layer the
//! intervention changes onward: the clean run's blocks below it are reused as they are.
//!
//! A head's output is its slice of `z` before W_O: head `h` of a layer is the columns
//! `h d..(h + 1) d` of its `z`, `d` being the head width (transformers' `o_proj` input, split
//! per head). The residual stream entering layer `l` is the embeddings for `l = 0` and block
//! `l - 1`'s output after; `l` = the number of blocks is the stream the final norm reads.

use ndarray::{concatenate, s, Array1, Array2, Axis};

use super::{BlockOutput, Decoder, DecoderOutput, Edits, GroupedOutput, Norm};
use crate::error::{AttentionError, Operand};
use crate::models::intervention::{check_index, check_parts, Activations, Edited, Part, Source};
pub use crate::models::intervention::{Edit, HeadEdit, Intervention};

/// Direct logit attribution: the parts of one token's logit at one position, each part of the
/// residual stream through the final norm (its scale frozen from the run) and the LM head.
/// `embedded + Σ heads + Σ mlps + patched` equals the logit (to rounding).
/// `AttentionOnly::attribute` (feature `learn`) returns it too, for a model with no norm and
/// no MLPs: each part straight through the unembedding, `mlps` empty.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let norm = Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?);
/// let decoder = Decoder::new(array![[3.0, 4.0], [1.0, 0.0]], vec![], norm, LmHead::Tied)?;
/// let run = decoder.forward(&[0])?;
/// // no blocks: the embedding is the whole logit, 3 * 3 / s + 4 * 4 / s, s = sqrt(12.5)
/// let parts = decoder.attribute(&run, 0, 0)?;
/// assert!((parts.embedded - 25.0 / 12.5f64.sqrt()).abs() < 1e-12);
/// assert!((parts.total() - parts.logit).abs() < 1e-12);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Attribution {
    /// The token embedding's part.
    pub embedded: f64,
    /// Each layer's heads' parts: `heads[layer][head]`.
    pub heads: Vec<Array1<f64>>,
    /// Each layer's feed-forward part.
    pub mlps: Array1<f64>,
    /// The residual patches' part ([`ResidualPatch`]): what they added at this position; 0
    /// in a run without one.
    pub patched: f64,
    /// The run's logit.
    pub logit: f64,
}

/// What one residual patch of an intervened run ([`Intervention::patch_residual`]) added to
/// the stream entering `layer` at `position`: the source's row minus the row the run had
/// there. The run's stream holds the patched row, so without this record the difference
/// would look like a part of the block before (or of the embeddings); [`Decoder::attribute`]
/// gives it a part of its own.
///
/// ```
/// use attention_lab::decoder::ResidualPatch;
/// use attention_lab::prelude::*;
/// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
/// let (clean, corrupted) = (decoder.forward(&[0])?, decoder.forward(&[1])?);
/// let patched = decoder.intervene(&clean, &Intervention::new().patch_residual(0, 0).source(&corrupted))?;
/// assert_eq!(patched.patches, vec![ResidualPatch { layer: 0, position: 0, delta: array![-1.0, 1.0] }]);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ResidualPatch {
    /// The layer the stream enters (the number of blocks: after the last).
    pub layer: usize,
    /// The position patched.
    pub position: usize,
    /// The patched row minus the row before the patch, 1 x E.
    pub delta: Array1<f64>,
}

impl Attribution {
    /// The sum of the parts: the logit, as the frozen scale makes the final norm linear.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let a = Attribution { embedded: 1.0, heads: vec![array![2.0, 3.0]], mlps: array![3.0], patched: 1.0, logit: 10.0 };
    /// assert_eq!(a.total(), 10.0);
    /// ```
    pub fn total(&self) -> f64 {
        let heads = self.heads.iter().map(|h| h.sum()).sum::<f64>();
        self.embedded + heads + self.mlps.sum() + self.patched
    }
}

impl DecoderOutput {
    /// The residual stream entering `layer` (tokens x E): the embeddings for 0, block
    /// `layer - 1`'s output after, what the final norm reads for the number of blocks; `None`
    /// past that.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let run = decoder.forward(&[1])?;
    /// assert_eq!(run.residual(0), Some(&array![[0.0, 1.0]]));
    /// assert_eq!(run.residual(1), None);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn residual(&self, layer: usize) -> Option<&Array2<f64>> {
        match layer {
            0 => Some(&self.embedded),
            l => self.blocks.get(l - 1).map(|b| &b.output),
        }
    }
}

impl Decoder {
    /// The run of the clean run's tokens with `intervention`'s edits, recomputed from its first
    /// layer on: the clean run's blocks below it are reused as they are (its embeddings too),
    /// and no edit recomputes a layer below its own. Attention being causal, the positions
    /// before the first one an edit changes are the clean run's at every layer: when every
    /// edit names a position (a head's output at one position, a residual patch), only the
    /// rows from that position on are recomputed, against the clean run's keys and values
    /// of the rows before (as a KV-cached step would be). `clean` is [`Decoder::forward`]'s
    /// run; mean ablation takes its means over `clean`'s positions. Without edits, the clean
    /// run. A residual patch's difference is kept in the run's
    /// [`patches`](DecoderOutput::patches).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // E = 4: two heads of 2
    /// let w = Array2::<f64>::eye(4);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 2, 2, Rope::new(2, 10.0)?)?;
    /// let norm = Norm::Rms(RmsNorm::new(Array1::ones(4), 1e-6)?);
    /// let block = DecoderBlock::new(norm.clone(), attention, norm.clone(), Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?))?;
    /// let embed = array![[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, -1.0], [1.0, 1.0, 0.5, 0.0]];
    /// let decoder = Decoder::new(embed, vec![block], norm, LmHead::Tied)?;
    /// let clean = decoder.forward(&[0, 2, 1])?;
    /// let ablated = decoder.intervene(&clean, &Intervention::new().zero_head(0, 1))?;
    /// assert!(ablated.blocks[0].attention.z.slice(s![.., 2..]).iter().all(|&z| z == 0.0));
    /// assert_ne!(ablated.logits, clean.logits);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for an edit's layer, head or position past the
    /// decoder's or the run's; [`AttentionError::Setting`] for a scale that is not finite;
    /// [`AttentionError::NotApplicable`] for a patch without [`Intervention::source`];
    /// [`AttentionError::Mismatch`] when `clean` or the source is not a full run of this
    /// decoder as long as `clean` (a KV-cached continuation is not: its keys reach past its
    /// tokens).
    pub fn intervene(
        &self,
        clean: &DecoderOutput,
        intervention: &Intervention<'_>,
    ) -> Result<DecoderOutput, AttentionError> {
        let tokens = clean.embedded.nrows();
        let columns = self.blocks.iter().map(|b| {
            let d = b.attention().rope().head_dim();
            (0..b.attention().heads())
                .map(|h| h * d..(h + 1) * d)
                .collect()
        });
        let edits = Edited::new(intervention, clean, columns.collect(), |name, run| {
            self.check_run(name, run, tokens)
        })?;
        let Some(start) = edits.first_layer() else {
            return Ok(clean.clone());
        };
        let from = edits.first_row();
        let edits = edits.starting_at(from);
        let mut cache = self.cache();
        let layers = self.blocks.iter().zip(cache.layers_mut()).enumerate();
        for (l, (block, layer)) in layers.skip(start).filter(|_| from > 0) {
            // check_run made sure every stream below the last is there.
            if let Some(x) = clean.residual(l) {
                block.append_kv(x.slice(s![..from, ..]), layer)?;
            }
        }
        let x = clean.residual(start).map_or(&clean.embedded, |x| x);
        let x = x.slice(s![from.., ..]).to_owned();
        let rows = self.resume(x, start, cache.layers_mut(), false, &edits)?;
        Ok(splice(clean, rows, start, from))
    }

    /// Many interventions on one clean run, shared among the cores: `read` of each
    /// intervened run ([`Decoder::intervene`]), in the order given. Only what `read` takes is
    /// kept, not the runs (270 of a real model's would not fit in a kernel's memory). Each run
    /// is computed by the same code as `intervene`'s, whichever thread computes it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 2, 2, Rope::new(2, 10.0)?)?;
    /// let norm = Norm::Rms(RmsNorm::new(Array1::ones(4), 1e-6)?);
    /// let block = DecoderBlock::new(norm.clone(), attention, norm.clone(), Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?))?;
    /// let embed = array![[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, -1.0], [1.0, 1.0, 0.5, 0.0]];
    /// let decoder = Decoder::new(embed, vec![block], norm, LmHead::Tied)?;
    /// let clean = decoder.forward(&[0, 2, 1])?;
    /// let each = [Intervention::new().zero_head(0, 0), Intervention::new().zero_head(0, 1)];
    /// let last = decoder.intervene_each(&clean, &each, |run| run.logits[[2, 0]])?;
    /// assert_eq!(last[1], decoder.intervene(&clean, &each[1])?.logits[[2, 0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// The first of the interventions' errors, as [`Decoder::intervene`]'s.
    pub fn intervene_each<T: Send>(
        &self,
        clean: &DecoderOutput,
        interventions: &[Intervention<'_>],
        read: impl Fn(&DecoderOutput) -> T + Sync,
    ) -> Result<Vec<T>, AttentionError> {
        let e = self.embed.ncols();
        // A run's work: at most every block's products over every token.
        let work = interventions.len() * clean.embedded.nrows() * self.blocks.len() * e * e;
        let each = |i: usize| {
            self.intervene(clean, &interventions[i])
                .map(|run| read(&run))
        };
        crate::fast::parallel::map(interventions.len(), work, each)
            .into_iter()
            .collect()
    }

    /// Direct logit attribution of `token`'s logit at `position` in `run`: the part of each
    /// head's output (`z_h W_O`'s rows of head h), each feed-forward half and the embeddings,
    /// each through the final RMS norm with its scale frozen from `run` and the LM head.
    /// The parts sum to the logit.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 2, 2, Rope::new(2, 10.0)?)?;
    /// let norm = Norm::Rms(RmsNorm::new(array![1.0, 2.0, 0.5, 1.0], 1e-6)?);
    /// let block = DecoderBlock::new(norm.clone(), attention, norm.clone(), Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?))?;
    /// let embed = array![[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, -1.0], [1.0, 1.0, 0.5, 0.0]];
    /// let decoder = Decoder::new(embed, vec![block], norm, LmHead::Tied)?;
    /// let run = decoder.forward(&[0, 2, 1])?;
    /// let parts = decoder.attribute(&run, 2, 0)?;
    /// assert_eq!(parts.heads[0].len(), 2);
    /// assert!((parts.total() - run.logits[[2, 0]]).abs() < 1e-12);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for a position past the run's or a token past the
    /// vocabulary; [`AttentionError::NotApplicable`] for a decoder whose final norm is a
    /// LayerNorm; [`AttentionError::Mismatch`] when `run` is not a full run of this decoder.
    pub fn attribute(
        &self,
        run: &DecoderOutput,
        position: usize,
        token: usize,
    ) -> Result<Attribution, AttentionError> {
        let tokens = run.embedded.nrows();
        self.check_run("the run", run, tokens)?;
        check_index("position", position, "positions of the run", tokens)?;
        check_index("token id", token, "token embeddings", self.vocab())?;
        let Norm::Rms(norm) = &self.norm else {
            return Err(AttentionError::NotApplicable {
                option: "Decoder::attribute",
                reason: "direct logit attribution freezes the scale of a final RMS norm; this \
                         decoder's final norm is a LayerNorm",
            });
        };
        // The final norm with its scale frozen is linear: each part p adds p . direction.
        let last = run.residual(self.blocks.len()).unwrap_or(&run.embedded);
        let x = last.row(position);
        let scale = (x.dot(&x) / x.len() as f64 + norm.eps()).sqrt();
        let unembedding = match &self.lm_head {
            super::LmHead::Tied => self.embed.rows(&[token]).row(0).to_owned(),
            super::LmHead::Untied(w) => w.column(token).to_owned(),
        };
        let direction = unembedding * norm.weight() / scale;
        let part = |rows: &Array2<f64>| rows.row(position).dot(&direction);
        let heads = self
            .blocks
            .iter()
            .zip(&run.blocks)
            .map(|(block, out)| {
                let attention = block.attention();
                let d = attention.rope().head_dim();
                // W_O times the direction, 1 x (heads d): head h's part is z_h . its columns h.
                let wo_direction = attention
                    .wo()
                    .project_t(direction.view().insert_axis(Axis(0)));
                let z = out.attention.z.row(position);
                (0..attention.heads())
                    .map(|h| {
                        let columns = s![h * d..(h + 1) * d];
                        z.slice(columns).dot(&wo_direction.row(0).slice(columns))
                    })
                    .collect()
            })
            .collect();
        let mut mlps: Array1<f64> = run
            .blocks
            .iter()
            .map(|out| part(&(&out.output - &out.hidden)))
            .collect();
        let mut embedded = part(&run.embedded);
        let mut patched = 0.0;
        // A patch's difference sits in the stream the block before wrote (or the embeddings):
        // it is taken out of that part and given its own.
        for patch in run.patches.iter().filter(|p| p.position == position) {
            let delta = patch.delta.dot(&direction);
            patched += delta;
            match patch.layer.checked_sub(1) {
                None => embedded -= delta,
                Some(l) => mlps[l] -= delta,
            }
        }
        Ok(Attribution {
            embedded,
            heads,
            mlps,
            patched,
            logit: run.logits[[position, token]],
        })
    }

    /// The logit lens: the residual stream entering each layer (the embeddings, then each
    /// block's output) through the final norm and the LM head, tokens x vocab each; the last
    /// is the run's logits.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let run = decoder.forward(&[0, 1])?;
    /// let lens = decoder.logit_lens(&run)?;
    /// assert_eq!(lens, vec![run.logits.clone()]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when `run` is not a full run of this decoder.
    pub fn logit_lens(&self, run: &DecoderOutput) -> Result<Vec<Array2<f64>>, AttentionError> {
        self.check_run("the run", run, run.embedded.nrows())?;
        (0..=self.blocks.len())
            .filter_map(|l| run.residual(l))
            .map(|x| Ok(self.unembed(self.norm.forward(x)?.view())))
            .collect()
    }

    /// The logit lens at one position: the row of `run`'s residual stream entering each layer
    /// at `position`, then after the last block, through the final norm and the LM head:
    /// (layers + 1) x vocab, the last row the run's logits there. [`Decoder::logit_lens`]'s
    /// rows at `position`, in one product of layers + 1 rows (the LM head is the largest
    /// product of a small model).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let run = decoder.forward(&[0, 1])?;
    /// assert_eq!(decoder.logit_lens_at(&run, 1)?.row(0), run.logits.row(1));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for a position past the run's;
    /// [`AttentionError::Mismatch`] when `run` is not a full run of this decoder.
    pub fn logit_lens_at(
        &self,
        run: &DecoderOutput,
        position: usize,
    ) -> Result<Array2<f64>, AttentionError> {
        let tokens = run.embedded.nrows();
        self.check_run("the run", run, tokens)?;
        check_index("position", position, "positions of the run", tokens)?;
        let mut x = Array2::zeros((self.blocks.len() + 1, run.embedded.ncols()));
        for (l, mut row) in x.rows_mut().into_iter().enumerate() {
            // check_run made sure every stream is there, as wide as the embeddings.
            if let Some(stream) = run.residual(l) {
                row.assign(&stream.row(position));
            }
        }
        Ok(self.unembed(self.norm.forward(&x)?.view()))
    }

    /// Checks that `run` is a full pass of this decoder over `tokens` tokens: one output a
    /// block, every layer's residual stream and heads' outputs `tokens` rows, logits for
    /// every token.
    fn check_run(
        &self,
        name: &str,
        run: &DecoderOutput,
        tokens: usize,
    ) -> Result<(), AttentionError> {
        if run.blocks.len() != self.blocks.len() {
            return Err(AttentionError::mismatch(
                Operand::row(format!("{name}'s blocks"), run.blocks.len()),
                Operand::row("the decoder's blocks", self.blocks.len()),
                "a run to probe is the decoder's forward: one output a block",
            ));
        }
        let mut weights = run
            .blocks
            .iter()
            .enumerate()
            .flat_map(|(l, b)| b.attention.weights.iter().map(move |w| (l, w.dim())));
        if let Some((l, (queries, keys))) = weights.find(|(_, (q, k))| q != k) {
            return Err(AttentionError::mismatch(
                Operand::new(format!("{name}'s weights in block {l}"), &[queries, keys]),
                Operand::new(format!("{name}'s tokens"), &[queries, queries]),
                "a run to probe is a pass from an empty cache (Decoder::forward), whose tokens \
                 are all its keys; a KV-cached continuation's keys reach back past its tokens",
            ));
        }
        let e = self.embed.ncols();
        let mut parts: Vec<Part> = vec![
            ("embeddings".to_string(), run.embedded.dim(), (tokens, e)),
            (
                "logits".to_string(),
                run.logits.dim(),
                (tokens, self.vocab()),
            ),
        ];
        for (l, (block, out)) in self.blocks.iter().zip(&run.blocks).enumerate() {
            let attention = block.attention();
            let z = (tokens, attention.heads() * attention.rope().head_dim());
            parts.push((format!("block {l}'s z"), out.attention.z.dim(), z));
            parts.push((format!("block {l}'s hidden"), out.hidden.dim(), (tokens, e)));
            parts.push((format!("block {l}'s output"), out.output.dim(), (tokens, e)));
        }
        let rule = "a run to probe is the decoder's forward over as many tokens as the clean run, \
                    every token's logits kept";
        check_parts(name, "the decoder", parts, rule)
    }
}

/// The run made of `clean` and `rows`, the pass over `clean`'s rows from `from` on through the
/// blocks from `start` on ([`Decoder::resume`]): `clean`'s blocks below `start`, with the
/// stream entering `start` (the last of them's output, or the embeddings) as `rows` left it
/// from row `from` on; above, each intermediate's rows before `from` are `clean`'s, the rest
/// `rows`'. `clean`'s own patches are kept where its rows are.
fn splice(clean: &DecoderOutput, rows: DecoderOutput, start: usize, from: usize) -> DecoderOutput {
    let stack = |top: &Array2<f64>, below: Array2<f64>| match from {
        0 => below,
        _ => concatenate![Axis(0), top.slice(s![..from, ..]), below],
    };
    let mut embedded = clean.embedded.clone();
    let mut blocks = clean.blocks[..start].to_vec();
    let entering = blocks.last_mut().map_or(&mut embedded, |b| &mut b.output);
    entering.slice_mut(s![from.., ..]).assign(&rows.embedded);
    for (top, below) in clean.blocks[start..].iter().zip(rows.blocks) {
        let (a, b) = (&top.attention, below.attention);
        let weights = a.weights.iter().zip(b.weights);
        blocks.push(BlockOutput {
            attention: GroupedOutput {
                q: stack(&a.q, b.q),
                weights: weights.map(|(top, below)| stack(top, below)).collect(),
                z: stack(&a.z, b.z),
                output: stack(&a.output, b.output),
            },
            hidden: stack(&top.hidden, below.hidden),
            output: stack(&top.output, below.output),
        });
    }
    let kept = clean
        .patches
        .iter()
        .filter(|p| p.layer <= start || p.position < from);
    DecoderOutput {
        embedded,
        blocks,
        hidden: stack(&clean.hidden, rows.hidden),
        logits: stack(&clean.logits, rows.logits),
        patches: kept.cloned().chain(rows.patches).collect(),
    }
}

impl Activations for DecoderOutput {
    fn stream(&self, layer: usize) -> Option<&Array2<f64>> {
        self.residual(layer)
    }

    fn z(&self, layer: usize) -> Option<&Array2<f64>> {
        self.blocks.get(layer).map(|b| &b.attention.z)
    }
}

impl<'a> From<&'a DecoderOutput> for Source<'a> {
    fn from(run: &'a DecoderOutput) -> Source<'a> {
        Source::of_run(run)
    }
}

impl Edits for Edited<'_, DecoderOutput> {
    fn residual(&self, layer: usize, x: &mut Array2<f64>) -> Vec<(usize, Array1<f64>)> {
        Edited::residual(self, layer, x)
    }

    fn z(&self, layer: usize, z: &mut Array2<f64>) {
        Edited::z(self, layer, z);
    }
}
