//! A transformer of attention layers only: token and learned position embeddings, causal
//! multi-head layers whose outputs add to the residual stream, and an unembedding to
//! logits. No feed-forward block and no norm: the smallest model in which an induction head
//! forms (Elhage et al., "A Mathematical Framework for Transformer Circuits").

use ndarray::{concatenate, s, Array2, Axis};

use crate::error::{AttentionError, Operand};
use crate::layers::attend::Attend;
use crate::layers::heads::{MultiHead, MultiHeadOutput};
use crate::learn::grad::linear::linear_backward;
use crate::learn::grad::{cross_entropy, embedding_backward, MultiHeadGrad};
use crate::models::decoder::ResidualPatch;
use crate::models::intervention::{project_edited, Edited};
use crate::np::RandomState;

use super::task::Example;

/// The parameters of an attention-only transformer. Each layer's W_Q, W_K and W_V are one
/// E x E matrix each, split into `heads` heads by columns ([`MultiHead::split`]); W_O is
/// E x E.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionOnly {
    /// Token embeddings, vocab x E.
    pub embed: Array2<f64>,
    /// Position embeddings, context x E (learned, as GPT-2's).
    pub pos: Array2<f64>,
    /// Per layer: W_Q, W_K, W_V and W_O.
    pub layers: Vec<[Array2<f64>; 4]>,
    /// The unembedding, E x vocab.
    pub unembed: Array2<f64>,
    heads: usize,
}

/// Every intermediate of a forward pass.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionOnlyOutput {
    /// The residual stream before each layer, and after the last: layers + 1 matrices,
    /// tokens x E.
    pub residual: Vec<Array2<f64>>,
    /// Each layer's attention, every head's weights included.
    pub layers: Vec<MultiHeadOutput>,
    /// Tokens x vocab.
    pub logits: Array2<f64>,
    /// What each residual patch of an intervened run added to the stream
    /// ([`AttentionOnly::intervene`]); empty for a forward pass.
    pub patches: Vec<ResidualPatch>,
}

/// The gradients of the loss with respect to every parameter, shaped as the parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionOnlyGrad {
    /// The mean cross-entropy of the example's targets.
    pub loss: f64,
    /// dL/d(token embeddings).
    pub dembed: Array2<f64>,
    /// dL/d(position embeddings).
    pub dpos: Array2<f64>,
    /// Per layer: dW_Q, dW_K, dW_V, dW_O (each E x E).
    pub dlayers: Vec<[Array2<f64>; 4]>,
    /// dL/d(unembedding).
    pub dunembed: Array2<f64>,
    /// Each layer's backward pass, every head's gradients kept.
    pub layer_grads: Vec<MultiHeadGrad>,
}

impl AttentionOnly {
    /// A model with random starting weights from NumPy's `RandomState(seed)`, drawn in this
    /// order: the embeddings and position embeddings (standard normal), then per layer W_Q,
    /// W_K, W_V, W_O, then the unembedding (each normal with standard deviation 1/sqrt(E)).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let model = AttentionOnly::random(16, 24, 32, 2, 2, 0)?;
    /// assert_eq!(model.layers.len(), 2);
    /// assert_eq!(model.unembed.dim(), (32, 16));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Split`] when `heads` does not divide `width`;
    /// [`AttentionError::Setting`] when a size is 0 or the matrices would be too large.
    pub fn random(
        vocab: usize,
        context: usize,
        width: usize,
        heads: usize,
        layers: usize,
        seed: u32,
    ) -> Result<AttentionOnly, AttentionError> {
        if vocab == 0 || context == 0 || width == 0 {
            return Err(AttentionError::Setting {
                name: "the model's sizes",
                value: format!("vocab {vocab}, context {context}, width {width}"),
                rule: "a model needs a vocabulary, a context and a width of at least 1",
            });
        }
        let mut rs = RandomState::new(seed);
        let mut normal =
            |rows: usize, cols: usize, std: f64| -> Result<Array2<f64>, AttentionError> {
                let m = rs
                    .randn((rows, cols))
                    .map_err(|_| AttentionError::Setting {
                        name: "the model's sizes",
                        value: format!("{rows} x {cols}"),
                        rule: "each matrix must fit in memory",
                    })?;
                Ok(m * std)
            };
        let scale = 1.0 / (width as f64).sqrt();
        let embed = normal(vocab, width, 1.0)?;
        let pos = normal(context, width, 1.0)?;
        let mut weights = Vec::with_capacity(layers);
        for _ in 0..layers {
            weights.push([
                normal(width, width, scale)?,
                normal(width, width, scale)?,
                normal(width, width, scale)?,
                normal(width, width, scale)?,
            ]);
        }
        let unembed = normal(width, vocab, scale)?;
        // Checks that `heads` divides the width.
        let zero = Array2::zeros((width, width));
        MultiHead::split(&zero, &zero, &zero, heads, None)?;
        Ok(AttentionOnly {
            embed,
            pos,
            layers: weights,
            unembed,
            heads,
        })
    }

    /// Heads per layer.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(AttentionOnly::random(4, 6, 8, 2, 1, 0)?.heads(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// Layer `l` as a [`MultiHead`] (with W_O), built from the current weights.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let model = AttentionOnly::random(4, 6, 8, 2, 1, 0)?;
    /// assert_eq!(model.layer(0)?.heads().len(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Split`] when the heads do not divide the width;
    /// [`AttentionError::OutOfRange`] for a layer the model does not have.
    pub fn layer(&self, l: usize) -> Result<MultiHead, AttentionError> {
        let Some([wq, wk, wv, wo]) = self.layers.get(l) else {
            return Err(AttentionError::OutOfRange {
                what: "layer",
                index: l,
                table: Operand::row("layers", self.layers.len()),
            });
        };
        MultiHead::split(wq, wk, wv, self.heads, Some(wo.clone()))
    }

    /// The forward pass over `ids` (at most `context` tokens), every intermediate kept.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let model = AttentionOnly::random(4, 6, 8, 2, 2, 0)?;
    /// let out = model.forward(&[1, 2, 3])?;
    /// assert_eq!(out.logits.dim(), (3, 4));
    /// assert_eq!(out.layers[1].heads[0].weights[[0, 1]], 0.0); // causal
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for a token id past the vocabulary, or more tokens
    /// than the context.
    pub fn forward(&self, ids: &[usize]) -> Result<AttentionOnlyOutput, AttentionError> {
        self.check_shapes()?;
        let (vocab, context) = (self.embed.nrows(), self.pos.nrows());
        if let Some(&id) = ids.iter().find(|&&id| id >= vocab) {
            return Err(AttentionError::OutOfRange {
                what: "token id",
                index: id,
                table: Operand::new("token embeddings", self.embed.shape()),
            });
        }
        if ids.len() > context {
            return Err(AttentionError::OutOfRange {
                what: "position",
                index: ids.len() - 1,
                table: Operand::new("position embeddings", self.pos.shape()),
            });
        }
        let x = self.embed.select(Axis(0), ids) + self.pos.slice(s![..ids.len(), ..]);
        let start = AttentionOnlyOutput {
            residual: Vec::with_capacity(self.layers.len() + 1),
            layers: Vec::with_capacity(self.layers.len()),
            logits: Array2::zeros((0, 0)),
            patches: Vec::new(),
        };
        self.resume(x, start, None)
    }

    /// The pass from the stream `x` entering layer `out.layers.len()` on, each layer's
    /// intermediates appended to `out`'s, with `edits` applied (to the residual stream before
    /// a layer reads it, to the heads' outputs before W_O); the logits from the last stream.
    pub(super) fn resume(
        &self,
        mut x: Array2<f64>,
        mut out: AttentionOnlyOutput,
        edits: Option<&Edited<'_, AttentionOnlyOutput>>,
    ) -> Result<AttentionOnlyOutput, AttentionError> {
        let patch = |l: usize, x: &mut Array2<f64>, patches: &mut Vec<ResidualPatch>| {
            let deltas = edits.map(|e| e.residual(l, x)).unwrap_or_default();
            let made = deltas.into_iter();
            patches.extend(made.map(|(position, delta)| ResidualPatch {
                layer: l,
                position,
                delta,
            }));
        };
        for l in out.layers.len()..self.layers.len() {
            patch(l, &mut x, &mut out.patches);
            let layer = self.layer(l)?;
            let mut attended = layer.forward(&x, &Attend::new().causal())?;
            if edits.is_some_and(|e| e.z(l, &mut attended.concat)) {
                project_edited(&layer, &mut attended);
            }
            let next = &x + attended.result();
            out.residual.push(x);
            out.layers.push(attended);
            x = next;
        }
        patch(self.layers.len(), &mut x, &mut out.patches);
        out.logits = x.dot(&self.unembed);
        out.residual.push(x);
        Ok(out)
    }

    /// The loss on one example (the mean cross-entropy of its targets) and the gradient of
    /// every parameter, by hand: cross-entropy, unembedding, each layer's multi-head
    /// backward pass plus the residual's identity, then both embeddings.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let model = AttentionOnly::random(6, 8, 8, 2, 2, 0)?;
    /// let example = repeated_tokens(&mut RandomState::new(1), 6, 8, 2, 3)?;
    /// let grad = model.backward(&example)?;
    /// assert!(grad.loss > 0.0);
    /// assert_eq!(grad.dembed.dim(), model.embed.dim());
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`AttentionOnly::forward`]; [`AttentionError::Setting`] for an example without
    /// targets.
    pub fn backward(&self, example: &Example) -> Result<AttentionOnlyGrad, AttentionError> {
        let out = self.forward(&example.ids)?;
        let rows: Vec<usize> = (0..example.ids.len())
            .filter(|&i| example.targets.get(i).copied().flatten().is_some())
            .collect();
        let targets: Vec<usize> = rows.iter().filter_map(|&i| example.targets[i]).collect();
        if targets.is_empty() {
            return Err(AttentionError::Setting {
                name: "targets",
                value: "none".into(),
                rule: "an example must have at least one token to predict",
            });
        }
        let ce = cross_entropy(&out.logits.select(Axis(0), &rows), &targets)?;
        let mut dlogits = Array2::zeros(out.logits.dim());
        for (k, &i) in rows.iter().enumerate() {
            dlogits.row_mut(i).assign(&ce.dlogits.row(k));
        }
        let last = &out.residual[self.layers.len()];
        let unembedded = linear_backward(last.view(), &self.unembed, &dlogits);
        let mut dx = unembedded.dinput;
        let mut dlayers = Vec::with_capacity(self.layers.len());
        let mut layer_grads = Vec::with_capacity(self.layers.len());
        for l in (0..self.layers.len()).rev() {
            let grad = self
                .layer(l)?
                .backward(&out.residual[l], &out.layers[l], &dx)?;
            // The residual passes dx through unchanged; the layer adds its own.
            dx += &grad.dx;
            let joined = |pick: fn(&crate::learn::grad::HeadGrad) -> &Array2<f64>| {
                let views: Vec<_> = grad.heads.iter().map(|h| pick(h).view()).collect();
                concatenate(Axis(1), &views).expect("heads of one width")
            };
            dlayers.push([
                joined(|h| &h.dwq),
                joined(|h| &h.dwk),
                joined(|h| &h.dwv),
                grad.dwo.clone().expect("the layer has W_O"),
            ]);
            layer_grads.push(grad);
        }
        dlayers.reverse();
        layer_grads.reverse();
        let dembed = embedding_backward(&example.ids, &dx, self.embed.nrows())?;
        let mut dpos = Array2::zeros(self.pos.dim());
        dpos.slice_mut(s![..dx.nrows(), ..]).assign(&dx);
        Ok(AttentionOnlyGrad {
            loss: ce.loss,
            dembed,
            dpos,
            dlayers,
            dunembed: unembedded.dw,
            layer_grads,
        })
    }

    /// The parameters are public (an optimiser and a notebook change them): their shapes are
    /// checked on every pass, so that a wrong one is an error naming it, not a panic.
    pub(super) fn check_shapes(&self) -> Result<(), AttentionError> {
        let (vocab, width) = self.embed.dim();
        let mut expected = vec![
            (
                "the position embeddings",
                &self.pos,
                (self.pos.nrows(), width),
            ),
            ("the unembedding", &self.unembed, (width, vocab)),
        ];
        for layer in &self.layers {
            for (name, w) in ["W_Q", "W_K", "W_V", "W_O"].into_iter().zip(layer) {
                expected.push((name, w, (width, width)));
            }
        }
        match expected.into_iter().find(|(_, w, want)| w.dim() != *want) {
            Some((name, w, _)) => Err(AttentionError::mismatch(
                Operand::new(name, w.shape()),
                Operand::new("the token embeddings", self.embed.shape()),
                "positions are context x E, each layer's W_Q, W_K, W_V and W_O E x E, and the \
                 unembedding E x vocab, E and vocab being the token embeddings'",
            )),
            None => Ok(()),
        }
    }

    /// Every parameter, in a fixed order (embeddings, positions, each layer's W_Q, W_K,
    /// W_V, W_O, the unembedding), for an optimiser's step.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let mut model = AttentionOnly::random(4, 6, 8, 2, 2, 0)?;
    /// assert_eq!(model.parameters_mut().len(), 2 + 2 * 4 + 1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn parameters_mut(&mut self) -> Vec<&mut Array2<f64>> {
        let mut all: Vec<&mut Array2<f64>> = vec![&mut self.embed, &mut self.pos];
        for layer in &mut self.layers {
            all.extend(layer.iter_mut());
        }
        all.push(&mut self.unembed);
        all
    }
}

impl AttentionOnlyGrad {
    /// The gradients in [`AttentionOnly::parameters_mut`]'s order.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let model = AttentionOnly::random(6, 8, 8, 2, 1, 0)?;
    /// let example = repeated_tokens(&mut RandomState::new(1), 6, 8, 2, 3)?;
    /// assert_eq!(model.backward(&example)?.gradients().len(), 2 + 4 + 1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn gradients(&self) -> Vec<&Array2<f64>> {
        let mut all: Vec<&Array2<f64>> = vec![&self.dembed, &self.dpos];
        for layer in &self.dlayers {
            all.extend(layer.iter());
        }
        all.push(&self.dunembed);
        all
    }
}
