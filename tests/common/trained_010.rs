//! Notebook 010's training, step for step: its model, data and AdamW settings. Shared by
//! examples/trained_010_weights.rs (which writes the weights tests/data/probe/attention_only_010
//! holds) and tests/probe.rs (which checks that training reproduces them).

use attention_lab::prelude::*;

/// The notebook's sizes: vocabulary, context, width, heads per layer, layers.
pub const SIZES: (usize, usize, usize, usize, usize) = (16, 24, 32, 2, 2);
/// `AttentionOnly::random`'s seed and the data's `RandomState` seed.
pub const SEEDS: (u32, u32) = (0, 1);
/// A repeat's shortest and longest length.
pub const REPEAT: (usize, usize) = (4, 8);
/// Examples a step, steps, and AdamW's learning rate.
pub const BATCH: usize = 32;
pub const STEPS: usize = 600;
pub const LR: f64 = 0.01;

/// The model after the notebook's training, and each step's loss (before its step).
pub fn train() -> Result<(AttentionOnly, Vec<f64>), AttentionError> {
    let (vocab, context, width, heads, layers) = SIZES;
    let mut data = RandomState::new(SEEDS.1);
    let mut example = || repeated_tokens(&mut data, vocab, context, REPEAT.0, REPEAT.1);
    // The notebook shows one example first: its draws come before the batches'.
    example()?;
    let mut model = AttentionOnly::random(vocab, context, width, heads, layers, SEEDS.0)?;
    let mut adamw = AdamW::new(LR, (0.9, 0.999), 1e-8, 0.0)?;
    let mut losses = Vec::with_capacity(STEPS);
    for _ in 0..STEPS {
        let batch = (0..BATCH)
            .map(|_| example())
            .collect::<Result<Vec<_>, _>>()?;
        losses.push(train_step(&mut model, &batch, &mut adamw)?);
    }
    Ok((model, losses))
}
