//! Probing a decoder as TransformerLens does: ablate or scale a head's output, patch a head's
//! output or the residual stream from another run, and read the logits out layer by layer
//! (the logit lens) or part by part (direct logit attribution).
//!
//! A run's [`DecoderOutput`] is its cache of every activation. [`Decoder::intervene`] takes a
//! clean run and an [`Intervention`] (one options value, as [`crate::attend::Attend`] is) and
//! recomputes from the first layer the intervention changes onward: the clean run's blocks
//! below it are reused as they are.
//!
//! A head's output is its slice of `z` before W_O: head `h` of a layer is the columns
//! `h d..(h + 1) d` of its `z`, `d` being the head width (transformers' `o_proj` input, split
//! per head). The residual stream entering layer `l` is the embeddings for `l = 0` and block
//! `l - 1`'s output after; `l` = the number of blocks is the stream the final norm reads.

use ndarray::{s, Array1, Array2, Axis};

use super::{BlockOutput, Decoder, DecoderOutput, Edits, Norm};
use crate::error::{AttentionError, Operand};

/// What an edit does to one head's output `z_h`.
///
/// ```
/// use attention_lab::prelude::*;
/// let halve = Edit::Head { layer: 0, head: 1, edit: HeadEdit::Scale(0.5), position: None };
/// assert_eq!(Intervention::new().edit(halve), Intervention::new().scale_head(0, 1, 0.5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HeadEdit {
    /// `z_h = 0` (zero ablation).
    Zero,
    /// `z_h` = its mean over the clean run's positions (mean ablation).
    Mean,
    /// `z_h` times a factor.
    Scale(f64),
    /// `z_h` from the source run ([`Intervention::source`]): activation patching.
    Patch,
}

/// One change to a run.
///
/// ```
/// use attention_lab::prelude::*;
/// let patch = Edit::Residual { layer: 2, position: 5 };
/// assert_eq!(Intervention::new().patch_residual(2, 5).edits(), &[patch]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Edit {
    /// A head's output before W_O, at every position (`position: None`) or one.
    Head {
        /// The block, from 0.
        layer: usize,
        /// The query head, from 0.
        head: usize,
        /// What becomes of its output.
        edit: HeadEdit,
        /// The one position changed, or every one.
        position: Option<usize>,
    },
    /// The residual stream entering `layer` (the number of blocks: what the final norm reads)
    /// at one position, taken from the source run.
    Residual {
        /// The layer the stream enters, from 0 (the embeddings) to the number of blocks.
        layer: usize,
        /// The position patched.
        position: usize,
    },
}

impl Edit {
    /// The first layer whose computation the edit changes: the head's, or the layer the
    /// residual stream enters.
    fn layer(&self) -> usize {
        match *self {
            Edit::Head { layer, .. } | Edit::Residual { layer, .. } => layer,
        }
    }
}

/// The changes of one intervened run, and the run patches are taken from.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let corrupted = Decoder::new(Array2::eye(2), vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?
///     .forward(&[1, 0])?;
/// let intervention = Intervention::new()
///     .zero_head(0, 1)
///     .mean_head(1, 0)
///     .patch_residual(1, 0)
///     .source(&corrupted);
/// assert_eq!(intervention.edits().len(), 3);
/// assert_eq!(intervention.first_layer(), Some(0));
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Intervention<'a> {
    edits: Vec<Edit>,
    source: Option<&'a DecoderOutput>,
}

impl<'a> Intervention<'a> {
    /// No change: the clean run.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().first_layer(), None);
    /// ```
    pub fn new() -> Intervention<'a> {
        Intervention::default()
    }

    /// With one more edit.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let edit = Edit::Head { layer: 1, head: 2, edit: HeadEdit::Scale(0.5), position: Some(3) };
    /// assert_eq!(Intervention::new().edit(edit).edits(), &[edit]);
    /// ```
    pub fn edit(mut self, edit: Edit) -> Intervention<'a> {
        self.edits.push(edit);
        self
    }

    /// Sets a head's output to zero at every position (zero ablation).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().zero_head(1, 0).first_layer(), Some(1));
    /// ```
    pub fn zero_head(self, layer: usize, head: usize) -> Intervention<'a> {
        self.head(layer, head, HeadEdit::Zero)
    }

    /// Sets a head's output at every position to its mean over the clean run's positions
    /// (mean ablation).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().mean_head(0, 3).first_layer(), Some(0));
    /// ```
    pub fn mean_head(self, layer: usize, head: usize) -> Intervention<'a> {
        self.head(layer, head, HeadEdit::Mean)
    }

    /// Multiplies a head's output at every position by `factor`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().scale_head(0, 1, 2.0).edits().len(), 1);
    /// ```
    pub fn scale_head(self, layer: usize, head: usize, factor: f64) -> Intervention<'a> {
        self.head(layer, head, HeadEdit::Scale(factor))
    }

    /// Takes a head's output at every position from the source run (activation patching).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().patch_head(2, 1).first_layer(), Some(2));
    /// ```
    pub fn patch_head(self, layer: usize, head: usize) -> Intervention<'a> {
        self.head(layer, head, HeadEdit::Patch)
    }

    /// Takes a head's output at one position from the source run.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().patch_head_at(2, 1, 4).first_layer(), Some(2));
    /// ```
    pub fn patch_head_at(self, layer: usize, head: usize, position: usize) -> Intervention<'a> {
        self.edit(Edit::Head {
            layer,
            head,
            edit: HeadEdit::Patch,
            position: Some(position),
        })
    }

    /// Takes the residual stream entering `layer` at `position` from the source run
    /// (`layer` = the number of blocks: the stream the final norm reads).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().patch_residual(3, 0).first_layer(), Some(3));
    /// ```
    pub fn patch_residual(self, layer: usize, position: usize) -> Intervention<'a> {
        self.edit(Edit::Residual { layer, position })
    }

    /// The run patches are taken from (a corrupted prompt's, as long as the clean one).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(Array2::eye(2), vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let corrupted = decoder.forward(&[1])?;
    /// assert!(Intervention::new().source(&corrupted).patch_residual(0, 0).edits().len() == 1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn source(mut self, run: &'a DecoderOutput) -> Intervention<'a> {
        self.source = Some(run);
        self
    }

    /// The edits, in the order given (applied in that order where they meet).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert!(Intervention::new().edits().is_empty());
    /// ```
    pub fn edits(&self) -> &[Edit] {
        &self.edits
    }

    /// The first layer the edits change (`None` without edits): an intervened run reuses the
    /// clean run's blocks below it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().zero_head(2, 0).patch_residual(1, 0).first_layer(), Some(1));
    /// ```
    pub fn first_layer(&self) -> Option<usize> {
        self.edits.iter().map(Edit::layer).min()
    }

    fn head(self, layer: usize, head: usize, edit: HeadEdit) -> Intervention<'a> {
        self.edit(Edit::Head {
            layer,
            head,
            edit,
            position: None,
        })
    }
}

/// Direct logit attribution: the parts of one token's logit at one position, each part of the
/// residual stream through the final norm (its scale frozen from the run) and the LM head.
/// `embedded + Σ heads + Σ mlps` equals the logit (to rounding).
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
    /// The run's logit.
    pub logit: f64,
}

impl Attribution {
    /// The sum of the parts: the logit, as the frozen scale makes the final norm linear.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let a = Attribution { embedded: 1.0, heads: vec![array![2.0, 3.0]], mlps: array![4.0], logit: 10.0 };
    /// assert_eq!(a.total(), 10.0);
    /// ```
    pub fn total(&self) -> f64 {
        self.embedded + self.heads.iter().map(|h| h.sum()).sum::<f64>() + self.mlps.sum()
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
    /// and no edit recomputes a layer below its own. `clean` is [`Decoder::forward`]'s run;
    /// mean ablation takes its means over `clean`'s positions. Without edits, the clean run.
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
    /// decoder as long as `clean`.
    pub fn intervene(
        &self,
        clean: &DecoderOutput,
        intervention: &Intervention<'_>,
    ) -> Result<DecoderOutput, AttentionError> {
        self.check_run("the clean run", clean, clean.embedded.nrows())?;
        for edit in &intervention.edits {
            self.check_edit(edit, clean, intervention.source)?;
        }
        let Some(start) = intervention.first_layer() else {
            return Ok(clean.clone());
        };
        let blocks: Vec<BlockOutput> = clean.blocks[..start.min(self.blocks.len())].to_vec();
        let edits = Edited {
            edits: &intervention.edits,
            clean,
            source: intervention.source,
            head_dims: self
                .blocks
                .iter()
                .map(|b| b.attention().rope().head_dim())
                .collect(),
        };
        let mut cache = self.cache();
        self.resume(
            clean.embedded.clone(),
            blocks,
            cache.layers_mut(),
            false,
            &edits,
        )
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
        let mlps = run
            .blocks
            .iter()
            .map(|out| part(&(&out.output - &out.hidden)))
            .collect();
        Ok(Attribution {
            embedded: part(&run.embedded),
            heads,
            mlps,
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
        let e = self.embed.ncols();
        let mut parts = vec![
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
        match parts.into_iter().find(|(_, got, want)| got != want) {
            None => Ok(()),
            Some((part, got, want)) => Err(AttentionError::mismatch(
                Operand::new(format!("{name}'s {part}"), &[got.0, got.1]),
                Operand::new(
                    "what the decoder makes of the clean run's tokens",
                    &[want.0, want.1],
                ),
                "a run to probe is the decoder's forward over as many tokens as the clean run, \
                 every token's logits kept",
            )),
        }
    }

    /// Checks one edit against the decoder, the clean run and the source.
    fn check_edit(
        &self,
        edit: &Edit,
        clean: &DecoderOutput,
        source: Option<&DecoderOutput>,
    ) -> Result<(), AttentionError> {
        let tokens = clean.embedded.nrows();
        let layers = self.blocks.len();
        let (position, patch, option) = match *edit {
            Edit::Head {
                layer,
                head,
                edit,
                position,
            } => {
                check_index("layer", layer, "decoder's blocks", layers)?;
                let heads = self.blocks[layer].attention().heads();
                check_index("head", head, "heads of the layer", heads)?;
                if let HeadEdit::Scale(factor) = edit {
                    if !factor.is_finite() {
                        return Err(AttentionError::Setting {
                            name: "factor",
                            value: factor.to_string(),
                            rule: "a head's output may be scaled by a finite factor only",
                        });
                    }
                }
                (
                    position,
                    edit == HeadEdit::Patch,
                    "Intervention::patch_head",
                )
            }
            Edit::Residual { layer, position } => {
                check_index("layer", layer, "residual streams (blocks + 1)", layers + 1)?;
                (Some(position), true, "Intervention::patch_residual")
            }
        };
        if let Some(position) = position {
            check_index("position", position, "positions of the clean run", tokens)?;
        }
        if !patch {
            return Ok(());
        }
        match source {
            Some(run) => self.check_run("the source run", run, tokens),
            None => Err(AttentionError::NotApplicable {
                option,
                reason: "a patch takes its values from another run: give it with \
                         Intervention::source(&run)",
            }),
        }
    }
}

/// [`OutOfRange`](AttentionError::OutOfRange) when `index` is not below `len`.
fn check_index(
    what: &'static str,
    index: usize,
    table: &str,
    len: usize,
) -> Result<(), AttentionError> {
    match index < len {
        true => Ok(()),
        false => Err(AttentionError::OutOfRange {
            what,
            index,
            table: Operand::new(table, &[len]),
        }),
    }
}

/// An intervention's edits, checked, with what they read: the clean run (for means) and the
/// source (for patches).
struct Edited<'a> {
    edits: &'a [Edit],
    clean: &'a DecoderOutput,
    source: Option<&'a DecoderOutput>,
    head_dims: Vec<usize>,
}

impl Edits for Edited<'_> {
    fn residual(&self, at: usize, x: &mut Array2<f64>) {
        for edit in self.edits {
            let Edit::Residual { layer, position } = *edit else {
                continue;
            };
            // Decoder::check_edit made sure a patch has its source, a run of every layer.
            let from = self.source.and_then(|run| run.residual(layer));
            if let (true, Some(from)) = (layer == at, from) {
                x.row_mut(position).assign(&from.row(position));
            }
        }
    }

    fn z(&self, at: usize, z: &mut Array2<f64>) {
        let d = self.head_dims[at];
        for edit in self.edits {
            let Edit::Head {
                layer,
                head,
                edit,
                position,
            } = *edit
            else {
                continue;
            };
            if layer != at {
                continue;
            }
            let columns = s![.., head * d..(head + 1) * d];
            let rows = match position {
                Some(p) => s![p..p + 1, ..],
                None => s![.., ..],
            };
            let mut zh = z.slice_mut(columns);
            let mut zh = zh.slice_mut(rows);
            match edit {
                HeadEdit::Zero => zh.fill(0.0),
                HeadEdit::Scale(factor) => zh *= factor,
                HeadEdit::Mean => {
                    let clean = self.clean.blocks[layer].attention.z.slice(columns);
                    let mean = clean.sum_axis(Axis(0)) / clean.nrows() as f64;
                    zh.assign(&mean);
                }
                HeadEdit::Patch => {
                    if let Some(source) = self.source {
                        let source = source.blocks[layer].attention.z.slice(columns);
                        zh.assign(&source.slice(rows));
                    }
                }
            }
        }
    }
}
