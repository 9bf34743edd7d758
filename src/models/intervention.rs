//! Interventions on a model's run as TransformerLens makes them, one options value
//! ([`Intervention`]) for the decoder (`Decoder::intervene`, with the feature `decoder`), the
//! encoder (`Encoder::intervene`) and notebook 010's attention-only model
//! (`AttentionOnly::intervene`, with the feature `learn`): zero-ablate, mean-ablate or scale a head's output, patch a
//! head's output or the residual stream at a (layer, position) from another run, and recompute
//! from the first changed layer only.
//!
//! A head's output is its slice of `z` before W_O, the heads' outputs side by side (a
//! decoder's `z`, an encoder's or an attention-only model's `concat`): head `h` of a layer is its columns of `z`
//! (transformers' `o_proj` or `attention.output.dense` input, split per head). The residual
//! stream entering layer `l` is the embeddings for `l = 0` and layer `l - 1`'s output after;
//! `l` = the number of layers is the stream after the last.

use std::ops::Range;

use ndarray::{s, Array1, Array2, Axis};

use crate::into::project_to;
use crate::layers::heads::{MultiHead, MultiHeadOutput};

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
        /// The layer (a decoder's block), from 0.
        layer: usize,
        /// The query head, from 0.
        head: usize,
        /// What becomes of its output.
        edit: HeadEdit,
        /// The one position changed, or every one.
        position: Option<usize>,
    },
    /// The residual stream entering `layer` at one position, taken from the source run: the
    /// embeddings for 0, layer `layer - 1`'s output after; the number of layers is the stream
    /// after the last (what a decoder's final norm reads, an encoder's last hidden state).
    Residual {
        /// The layer the stream enters, from 0 (the embeddings) to the number of layers.
        layer: usize,
        /// The position patched.
        position: usize,
    },
}

impl Edit {
    /// The first layer whose computation the edit changes: the head's, or the layer the
    /// residual stream enters.
    pub(crate) fn layer(&self) -> usize {
        match *self {
            Edit::Head { layer, .. } | Edit::Residual { layer, .. } => layer,
        }
    }
}

/// The changes of one intervened run, and the run patches are taken from: one options value,
/// as [`Attend`](crate::layers::attend::Attend) is, for the decoder (`Decoder::intervene`, with the
/// feature `decoder`), the encoder (`Encoder::intervene`) and the attention-only model
/// (`AttentionOnly::intervene`, with the feature `learn`).
///
/// ```
/// use attention_lab::prelude::*;
///
/// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
/// let encoder = Encoder::new(Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?, vec![])?;
/// let corrupted = encoder.forward(&[1, 0])?;
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
    source: Option<Source<'a>>,
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
    /// (`layer` = the number of layers: the stream after the last).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().patch_residual(3, 0).first_layer(), Some(3));
    /// ```
    pub fn patch_residual(self, layer: usize, position: usize) -> Intervention<'a> {
        self.edit(Edit::Residual { layer, position })
    }

    /// The run patches are taken from (a corrupted prompt's, as long as the clean one): a run
    /// of the same model, a decoder's, an encoder's or an attention-only model's ([`Source`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// let encoder = Encoder::new(Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?, vec![])?;
    /// let corrupted = encoder.forward(&[1])?;
    /// let intervention = Intervention::new().source(&corrupted).patch_residual(0, 0);
    /// assert_eq!(intervention.patched_from(), Some(Source::from(&corrupted)));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn source(mut self, run: impl Into<Source<'a>>) -> Intervention<'a> {
        self.source = Some(run.into());
        self
    }

    /// The run patches are taken from, if [`Intervention::source`] gave one.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Intervention::new().patch_head(0, 0).patched_from(), None);
    /// ```
    pub fn patched_from(&self) -> Option<Source<'a>> {
        self.source
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
    /// clean run's layers below it.
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

/// The run an intervention's patches are taken from ([`Intervention::source`]): a run of the
/// same kind of model as the clean one (a decoder's `DecoderOutput`, an encoder's
/// `EncoderOutput` or an attention-only model's `AttentionOnlyOutput`, each turned into a
/// `Source` by `From`), as long as it. Two sources are equal when they are the same run.
///
/// ```
/// use attention_lab::prelude::*;
/// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
/// let encoder = Encoder::new(Embeddings::new(Array2::eye(2), Array2::zeros((8, 2)), Array2::zeros((1, 2)), norm)?, vec![])?;
/// let run = encoder.forward(&[0, 1])?;
/// let other = encoder.forward(&[0, 1])?;
/// assert_eq!(Source::from(&run), Source::from(&run));
/// assert_ne!(Source::from(&run), Source::from(&other));
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Source<'a> {
    // A model's run, known by its type: the models' modules make and read it, so that this
    // module names neither model (each model's module uses this one).
    // Sync, so that interventions can be shared among threads (`Decoder::intervene_each`).
    run: &'a (dyn std::any::Any + Send + Sync),
}

impl<'a> Source<'a> {
    /// A model's run as a source (the models' `From` impls).
    pub(crate) fn of_run<R: std::any::Any + Send + Sync>(run: &'a R) -> Source<'a> {
        Source { run }
    }

    /// The run, when it is an `R`.
    pub(crate) fn run<R: std::any::Any>(self) -> Option<&'a R> {
        self.run.downcast_ref()
    }
}

impl PartialEq for Source<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(self.run, other.run)
    }
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Source({:p})", self.run)
    }
}

/// A run's activations as the edits read them: the residual stream entering each layer and
/// each layer's heads' outputs side by side (tokens x heads d).
pub(crate) trait Activations: Sized + std::any::Any {
    /// The residual stream entering `layer` (the stream after the last for the number of
    /// layers); `None` past that.
    fn stream(&self, layer: usize) -> Option<&Array2<f64>>;
    /// The heads' outputs of `layer` side by side, before W_O.
    fn z(&self, layer: usize) -> Option<&Array2<f64>>;
    /// The run a source names, when it is a run of this kind of model.
    fn of(source: Source<'_>) -> Option<&Self> {
        source.run()
    }
}

/// [`OutOfRange`](AttentionError::OutOfRange) when `index` is not below `len`.
pub(crate) fn check_index(
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

/// A part of a run to probe: its name, its shape, and the shape the model makes of the clean
/// run's tokens.
pub(crate) type Part = (String, (usize, usize), (usize, usize));

/// [`Mismatch`](AttentionError::Mismatch) naming `run`'s first part whose shape is not what
/// `model` ("the decoder") makes of the clean run's tokens, with `rule`.
pub(crate) fn check_parts(
    run: &str,
    model: &str,
    parts: Vec<Part>,
    rule: &'static str,
) -> Result<(), AttentionError> {
    match parts.into_iter().find(|(_, got, want)| got != want) {
        None => Ok(()),
        Some((part, got, want)) => Err(AttentionError::mismatch(
            Operand::new(format!("{run}'s {part}"), &[got.0, got.1]),
            Operand::new(
                format!("what {model} makes of the clean run's tokens"),
                &[want.0, want.1],
            ),
            rule,
        )),
    }
}

/// An intervention's edits, checked against a model and its clean run, with what they read:
/// the clean run (for means) and the source (for patches). The model's pass gives it the
/// residual stream entering each layer and each layer's `z`, from the run's row `from` on
/// (0 unless [`Edited::starting_at`] says otherwise); edits are applied in the order given.
pub(crate) struct Edited<'a, R> {
    edits: &'a [Edit],
    clean: &'a R,
    source: Option<&'a R>,
    /// Each layer's heads' columns of `z`.
    columns: Vec<Vec<Range<usize>>>,
    /// The run's position of the first row the pass gives.
    from: usize,
    /// The clean run's \[PAD\] rows, which a mean leaves out.
    padded: Option<&'a [bool]>,
}

impl<'a, R: Activations> Edited<'a, R> {
    /// Checks `intervention`'s edits against a model whose layer `l` has heads at the columns
    /// `columns[l]` of its `z`, and `clean`'s positions; `check_run(name, run)` checks that a
    /// run is a full pass of the model as long as `clean`: `clean` itself ("the clean run")
    /// and the source ("the source run") when a patch needs it.
    pub(crate) fn new(
        intervention: &'a Intervention<'_>,
        clean: &'a R,
        columns: Vec<Vec<Range<usize>>>,
        check_run: impl Fn(&str, &R) -> Result<(), AttentionError>,
    ) -> Result<Edited<'a, R>, AttentionError> {
        check_run("the clean run", clean)?;
        let source = match intervention.source {
            None => None,
            Some(source) => Some(R::of(source).ok_or(AttentionError::NotApplicable {
                option: "Intervention::source",
                reason: "a patch takes its values from a run of the same kind of model as the \
                         clean run (a decoder's for a decoder, an encoder's for an encoder, an \
                         attention-only model's for one)",
            })?),
        };
        let tokens = clean.stream(0).map_or(0, Array2::nrows);
        let layers = columns.len();
        for edit in &intervention.edits {
            let (position, patch, option) = match *edit {
                Edit::Head {
                    layer,
                    head,
                    edit,
                    position,
                } => {
                    check_index("layer", layer, "layers of the model", layers)?;
                    check_index("head", head, "heads of the layer", columns[layer].len())?;
                    if let HeadEdit::Scale(factor) = edit {
                        if !factor.is_finite() {
                            return Err(AttentionError::Setting {
                                name: "factor",
                                value: factor.to_string(),
                                rule: "a head's output may be scaled by a finite factor only",
                            });
                        }
                    }
                    let patch = edit == HeadEdit::Patch;
                    (position, patch, "Intervention::patch_head")
                }
                Edit::Residual { layer, position } => {
                    check_index("layer", layer, "residual streams (layers + 1)", layers + 1)?;
                    (Some(position), true, "Intervention::patch_residual")
                }
            };
            if let Some(position) = position {
                check_index("position", position, "positions of the clean run", tokens)?;
            }
            match (patch, source) {
                (false, _) => {}
                (true, Some(run)) => check_run("the source run", run)?,
                (true, None) => {
                    return Err(AttentionError::NotApplicable {
                        option,
                        reason: "a patch takes its values from another run: give it with \
                                 Intervention::source(&run)",
                    })
                }
            }
        }
        Ok(Edited {
            edits: &intervention.edits,
            clean,
            source,
            columns,
            from: 0,
            padded: None,
        })
    }

    /// The first position an edit changes: 0 when one changes every position. Attention
    /// being causal, the rows above it are the clean run's at every layer.
    // Only the decoder recomputes from a row on (its KV cache holds the rows before).
    #[cfg_attr(not(feature = "decoder"), allow(dead_code))]
    pub(crate) fn first_row(&self) -> usize {
        let position = |edit: &Edit| match *edit {
            Edit::Head { position, .. } => position.unwrap_or(0),
            Edit::Residual { position, .. } => position,
        };
        self.edits.iter().map(position).min().unwrap_or(0)
    }

    /// The same edits for a pass over the run's rows from `from` on (at most
    /// [`Edited::first_row`]).
    // Only the decoder recomputes from a row on (its KV cache holds the rows before).
    #[cfg_attr(not(feature = "decoder"), allow(dead_code))]
    pub(crate) fn starting_at(self, from: usize) -> Edited<'a, R> {
        Edited { from, ..self }
    }

    /// The same edits, a mean taken over the clean run's rows not `padded` only.
    pub(crate) fn padded(self, padded: Option<&'a [bool]>) -> Edited<'a, R> {
        Edited { padded, ..self }
    }

    /// The first layer the edits change; `None` without edits.
    pub(crate) fn first_layer(&self) -> Option<usize> {
        self.edits.iter().map(Edit::layer).min()
    }

    /// Changes the residual stream entering layer `at` (its rows from `from` on, x E); what
    /// each patch added to its row, by the row's position in the run.
    pub(crate) fn residual(&self, at: usize, x: &mut Array2<f64>) -> Vec<(usize, Array1<f64>)> {
        let mut deltas = Vec::new();
        for edit in self.edits {
            let Edit::Residual { layer, position } = *edit else {
                continue;
            };
            // Edited::new made sure a patch has its source, a run that fits the clean one.
            let source = self.source.and_then(|run| run.stream(layer));
            if let (true, Some(source)) = (layer == at, source) {
                let mut row = x.row_mut(position - self.from);
                deltas.push((position, &source.row(position) - &row));
                row.assign(&source.row(position));
            }
        }
        deltas
    }

    /// Changes the heads' outputs `z` of layer `at` (its rows from `from` on, x heads d);
    /// whether an edit did.
    pub(crate) fn z(&self, at: usize, z: &mut Array2<f64>) -> bool {
        let mut changed = false;
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
            changed = true;
            let columns = s![.., self.columns[layer][head].clone()];
            // The rows of the run, and of the pass's z that starts at row `from`.
            let (rows, here) = match position {
                Some(p) => (s![p..p + 1, ..], s![p - self.from..p - self.from + 1, ..]),
                None => (s![self.from.., ..], s![.., ..]),
            };
            let mut zh = z.slice_mut(columns);
            let mut zh = zh.slice_mut(here);
            match edit {
                HeadEdit::Zero => zh.fill(0.0),
                HeadEdit::Scale(factor) => zh *= factor,
                HeadEdit::Mean => {
                    if let Some(clean) = self.clean.z(layer) {
                        zh.assign(&self.mean(clean.slice(columns)));
                    }
                }
                HeadEdit::Patch => {
                    if let Some(source) = self.source.and_then(|run| run.z(layer)) {
                        zh.assign(&source.slice(columns).slice(rows));
                    }
                }
            }
        }
        changed
    }

    /// The mean of a head's rows of the clean run, over its real (not padded) rows.
    fn mean(&self, zh: ndarray::ArrayView2<'_, f64>) -> Array1<f64> {
        let real = |i: &usize| !self.padded.is_some_and(|padded| padded[*i]);
        let rows: Vec<usize> = (0..zh.nrows()).filter(real).collect();
        zh.select(Axis(0), &rows).sum_axis(Axis(0)) / rows.len().max(1) as f64
    }
}

/// After an edit of a multi-head layer's `concat` (its heads' outputs side by side, before
/// W_O): each head's `z` its columns of `concat` again, and the output `concat W_O + b_O`
/// again.
pub(crate) fn project_edited(attention: &MultiHead, out: &mut MultiHeadOutput) {
    let mut start = 0;
    for head in &mut out.heads {
        let width = head.z.ncols();
        head.z
            .assign(&out.concat.slice(s![.., start..start + width]));
        start += width;
    }
    if let (Some(wo), Some(output)) = (attention.wo(), out.output.as_mut()) {
        project_to(out.concat.view(), wo, attention.bo(), output);
    }
}
