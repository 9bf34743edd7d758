//! Properties of masks and positional encoding that hold for every input.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use attention_lab::prelude::*;
use common::{golden, matrix as golden_matrix};
use proptest::prelude::*;

/// A rows x cols matrix with entries in [-3, 3].
fn matrix(rows: usize, cols: usize) -> impl Strategy<Value = Array2<f64>> {
    proptest::collection::vec(-3.0..3.0f64, rows * cols)
        .prop_map(move |v| Array2::from_shape_vec((rows, cols), v).unwrap())
}

/// (q, k, v, blocked) with n queries, m keys, any boolean mask (`true` = blocked).
fn masked_inputs() -> impl Strategy<Value = (Array2<f64>, Array2<f64>, Array2<f64>, Array2<bool>)> {
    (1..6usize, 1..6usize, 1..4usize, 1..4usize).prop_flat_map(|(n, m, dk, dv)| {
        let blocked = proptest::collection::vec(any::<bool>(), n * m)
            .prop_map(move |b| Array2::from_shape_vec((n, m), b).unwrap());
        (matrix(n, dk), matrix(m, dk), matrix(m, dv), blocked)
    })
}

proptest! {
    #[test]
    fn masked_positions_get_exactly_zero_weight((q, k, v, blocked) in masked_inputs()) {
        let a = scaled_dot_product_attention(&q, &k, &v, &Attend::new().mask(&Mask::from_blocked(&blocked))).unwrap();
        for ((i, j), &b) in blocked.indexed_iter() {
            if b {
                prop_assert_eq!(a.weights[[i, j]], 0.0);
            }
        }
        for (i, row) in blocked.rows().into_iter().enumerate() {
            let sum = a.weights.row(i).sum();
            if row.iter().all(|&b| b) {
                // A fully masked row: zero weights, zero output.
                prop_assert!(a.output.row(i).iter().all(|&z| z == 0.0));
            } else {
                prop_assert!((sum - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn causal_row_i_attends_only_to_keys_up_to_i(x in (1..7usize, 1..5usize).prop_flat_map(|(n, d)| matrix(n, d))) {
        let w = Array2::<f64>::eye(x.ncols());
        let out = Head::new(w.clone(), w.clone(), w).unwrap().forward(&x, &Attend::new().mask(&Mask::causal(x.nrows()))).unwrap();
        for ((i, j), &weight) in out.weights.indexed_iter() {
            if j > i {
                prop_assert_eq!(weight, 0.0);
            } else {
                prop_assert!(weight > 0.0);
            }
        }
    }
}

/// Seed 003 showed that swapping tokens only swaps the output rows; with the positional
/// encoding added to X that is no longer so.
#[test]
fn positional_encoding_breaks_seed_003_permutation_equivariance() {
    let g = golden("003");
    let perm: Vec<usize> = serde_json::from_value(g["perm"].clone()).unwrap();
    let x = golden_matrix(&g["x"]);
    let w = |key: &str| golden_matrix(&g[key]);
    let layer = MultiHead::split(&w("wq"), &w("wk"), &w("wv"), 3, None)
        .unwrap()
        .with_softmax(Softmax::Naive);
    // Without the encoding the layer only permutes (seed_003.rs checks it to 1e-12).
    let pe = positional_encoding(x.nrows(), x.ncols());
    let plain = layer.forward(&(&x + &pe), &Attend::new()).unwrap();
    let permuted = layer
        .forward(&(&x.select(Axis(0), &perm) + &pe), &Attend::new())
        .unwrap();
    let expected = plain.result().select(Axis(0), &perm);
    let largest = (permuted.result() - &expected)
        .iter()
        .fold(0.0f64, |m, d| m.max(d.abs()));
    assert!(
        largest > 1e-3,
        "still only permuted: differs by {largest:e}"
    );
}
