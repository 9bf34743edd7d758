//! Training by hand: a model whose every gradient this crate computes
//! ([`AttentionOnly`]), the task that grows an induction head in it ([`repeated_tokens`]),
//! and a training step over a batch with any [`Optimizer`] (SGD or AdamW).
//!
//! Modules: `task` (the data), `attention_only` (the model, its forward and backward
//! passes), `probe` (its interventions, direct logit attribution and logit lens, as the
//! decoder's); this module takes optimiser steps.

mod attention_only;
mod probe;
mod task;

pub use attention_only::{AttentionOnly, AttentionOnlyGrad, AttentionOnlyOutput};
pub use task::{repeated_tokens, Example};

use ndarray::Array2;

use crate::error::AttentionError;
use crate::fast::parallel;
use crate::learn::grad::Optimizer;

/// One optimiser step on a batch: each example's gradients (on the cores, in parallel),
/// weighted by its number of targets, so that the loss is the mean cross-entropy over every
/// target of the batch (`F.cross_entropy` of the whole batch with the other positions
/// ignored). Returns that loss, before the step.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let mut model = AttentionOnly::random(8, 12, 8, 2, 2, 0)?;
/// let mut rs = RandomState::new(1);
/// let batch: Vec<Example> = (0..4).map(|_| repeated_tokens(&mut rs, 8, 12, 2, 5)).collect::<Result<_, _>>()?;
/// let mut adamw = AdamW::new(0.01, (0.9, 0.999), 1e-8, 0.0)?;
/// let first = train_step(&mut model, &batch, &mut adamw)?;
/// for _ in 0..20 {
///     train_step(&mut model, &batch, &mut adamw)?;
/// }
/// assert!(train_step(&mut model, &batch, &mut adamw)? < first); // it learns this batch
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// As [`AttentionOnly::backward`] for any example, or the optimiser's step; an empty batch
/// is an [`AttentionError::Setting`].
pub fn train_step(
    model: &mut AttentionOnly,
    batch: &[Example],
    optimizer: &mut impl Optimizer,
) -> Result<f64, AttentionError> {
    if batch.is_empty() {
        return Err(AttentionError::Setting {
            name: "batch",
            value: "empty".into(),
            rule: "a step needs at least one example",
        });
    }
    let width = model.embed.ncols();
    let tokens = batch[0].ids.len();
    let work = batch.len() * model.layers.len() * tokens * width * (width + tokens) * 12;
    let shared: &AttentionOnly = model;
    let grads = parallel::map(batch.len(), work, |i| shared.backward(&batch[i]));
    let grads = grads.into_iter().collect::<Result<Vec<_>, _>>()?;
    let counts: Vec<f64> = batch
        .iter()
        .map(|e| e.targets.iter().flatten().count() as f64)
        .collect();
    let total: f64 = counts.iter().sum();
    let loss = grads
        .iter()
        .zip(&counts)
        .map(|(g, n)| g.loss * n)
        .sum::<f64>()
        / total;
    let mut sums: Vec<Array2<f64>> = grads[0]
        .gradients()
        .iter()
        .map(|g| Array2::zeros(g.dim()))
        .collect();
    for (grad, n) in grads.iter().zip(&counts) {
        for (sum, g) in sums.iter_mut().zip(grad.gradients()) {
            sum.scaled_add(n / total, g);
        }
    }
    let refs: Vec<&Array2<f64>> = sums.iter().collect();
    optimizer.step(&mut model.parameters_mut(), &refs)?;
    Ok(loss)
}
