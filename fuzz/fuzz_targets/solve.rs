//! Multi-head attention on arbitrary small matrices: never a panic (shape errors are fine), and
//! when every score is finite each row of every head's weights sums to 1.
#![no_main]

use arbitrary::Arbitrary;
use attention_lab::prelude::*;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// Shapes: tokens, input width, the projections' widths, heads (small, possibly mismatched).
    n: u8,
    d: u8,
    dq: u8,
    dk: u8,
    dv: u8,
    heads: u8,
    wo_rows: Option<u8>,
    naive: bool,
    values: Vec<f64>,
}

/// A rows x cols matrix cycling through `values` (zeros when there are none).
fn matrix(rows: u8, cols: u8, values: &[f64], offset: usize) -> Array2<f64> {
    let (rows, cols) = (usize::from(rows % 7), usize::from(cols % 9));
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        values
            .get((offset + i * cols + j) % values.len().max(1))
            .copied()
            .unwrap_or(0.0)
    })
}

fuzz_target!(|input: Input| {
    let v = &input.values;
    let x = matrix(input.n, input.d, v, 0);
    let wq = matrix(input.d, input.dq, v, 1);
    let wk = matrix(input.d, input.dk, v, 2);
    let wv = matrix(input.d, input.dv, v, 3);
    let wo = input.wo_rows.map(|r| matrix(r, input.d, v, 4));
    let Ok(layer) = MultiHead::split(&wq, &wk, &wv, usize::from(input.heads % 4), wo) else {
        return;
    };
    let layer = if input.naive {
        layer.with_softmax(Softmax::Naive)
    } else {
        layer
    };
    let Ok(out) = layer.forward(&x, &Attend::new()) else {
        return;
    };
    if input.naive {
        return; // The naive softmax overflows by design (a lesson of seed 001).
    }
    for head in &out.heads {
        for (scores, weights) in head.scores.rows().into_iter().zip(head.weights.rows()) {
            if scores.iter().all(|s| s.is_finite()) && !scores.is_empty() {
                let sum: f64 = weights.sum();
                assert!(
                    (sum - 1.0).abs() <= 1e-12,
                    "weights row sums to {sum} for finite scores {scores}"
                );
            }
        }
    }
});
