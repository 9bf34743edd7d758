//! The attention-only model's hand-written gradients against central finite differences of
//! its loss, for entries of every parameter; its loss against the cross-entropy recomputed
//! from the logits; and a training step that lowers the loss of the batch it saw.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;

/// The mean cross-entropy of the example's targets, from the forward pass alone.
fn loss(model: &AttentionOnly, example: &Example) -> f64 {
    let logits = model.forward(&example.ids).unwrap().logits;
    let mut total = 0.0;
    let mut count = 0.0;
    for (i, target) in example.targets.iter().enumerate() {
        if let Some(t) = target {
            let row = logits.row(i);
            let max = row.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
            total += lse - row[*t];
            count += 1.0;
        }
    }
    total / count
}

#[test]
fn every_parameters_gradient_equals_finite_differences() {
    let model = AttentionOnly::random(7, 10, 8, 2, 2, 3).unwrap();
    let example = repeated_tokens(&mut RandomState::new(4), 7, 10, 2, 4).unwrap();
    let grad = model.backward(&example).unwrap();
    assert!((grad.loss - loss(&model, &example)).abs() < 1e-12);
    let grads: Vec<Array2<f64>> = grad.gradients().into_iter().cloned().collect();
    let h = 1e-5;
    let mut checked = 0;
    for (p, g) in grads.iter().enumerate() {
        // A few entries of each parameter, spread over its rows and columns.
        let (rows, cols) = g.dim();
        for k in 0..4 {
            let (i, j) = ((k * 5 + p) % rows, (k * 3 + p) % cols);
            let nudged = |delta: f64| {
                let mut m = model.clone();
                m.parameters_mut()[p][[i, j]] += delta;
                loss(&m, &example)
            };
            let numeric = (nudged(h) - nudged(-h)) / (2.0 * h);
            let ours = g[[i, j]];
            assert!(
                (numeric - ours).abs() <= 1e-7 * ours.abs().max(1.0),
                "parameter {p} [{i}, {j}]: backward {ours:e}, finite differences {numeric:e}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 4 * (2 + 2 * 4 + 1));
}

#[test]
fn a_training_step_lowers_the_loss_of_its_batch_and_errors_are_named() {
    let mut model = AttentionOnly::random(8, 12, 8, 2, 2, 0).unwrap();
    let mut rs = RandomState::new(1);
    let batch: Vec<Example> = (0..8)
        .map(|_| repeated_tokens(&mut rs, 8, 12, 2, 5).unwrap())
        .collect();
    let mut sgd = Sgd::new(0.05, 0.0, 0.0).unwrap();
    let first = train_step(&mut model, &batch, &mut sgd).unwrap();
    let second = train_step(&mut model, &batch, &mut sgd).unwrap();
    assert!(second < first, "{second} after {first}");
    assert!(train_step(&mut model, &[], &mut sgd).is_err());
    let e = model.forward(&[1, 99]).unwrap_err().to_string();
    assert!(e.starts_with("token id 99 is out of range"), "{e}");
    assert!(
        model.forward(&[0; 13]).is_err(),
        "more tokens than the context"
    );
    assert!(
        repeated_tokens(&mut rs, 8, 12, 3, 7).is_err(),
        "two copies of 7 exceed 12"
    );
    assert!(
        AttentionOnly::random(8, 12, 9, 2, 1, 0).is_err(),
        "2 heads do not divide 9"
    );
}

/// The parameters are public; a shape that no longer fits is an error naming it, on the
/// forward and the backward pass alike.
#[test]
fn a_parameter_of_the_wrong_shape_is_named_not_a_panic() {
    let model = AttentionOnly::random(8, 12, 8, 2, 1, 0).unwrap();
    let example = repeated_tokens(&mut RandomState::new(2), 8, 12, 2, 5).unwrap();
    let mut wrong_unembed = model.clone();
    wrong_unembed.unembed = Array2::zeros((3, 3));
    let e = wrong_unembed.forward(&example.ids).unwrap_err().to_string();
    assert!(e.starts_with("the unembedding is 3x3"), "{e}");
    let mut thin_positions = model.clone();
    thin_positions.pos = Array2::zeros((12, 1));
    assert!(thin_positions.backward(&example).is_err());
    let mut wrong_wo = model;
    wrong_wo.layers[0][3] = Array2::zeros((8, 4));
    assert!(wrong_wo
        .forward(&[1, 2])
        .unwrap_err()
        .to_string()
        .starts_with("W_O is 8x4"));
    assert!(
        repeated_tokens(&mut RandomState::new(2), 8, 12, 1, 3).is_err(),
        "min_len 1"
    );
}
