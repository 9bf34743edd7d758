//! Properties of attention that hold for every input, checked on random matrices.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;
use proptest::prelude::*;

/// A rows x cols matrix with entries in [-3, 3].
fn matrix(rows: usize, cols: usize) -> impl Strategy<Value = Array2<f64>> {
    proptest::collection::vec(-3.0..3.0f64, rows * cols)
        .prop_map(move |v| Array2::from_shape_vec((rows, cols), v).unwrap())
}

/// (x, W_Q, W_K, W_V) with n tokens of width d, d_k and d_v columns.
fn layer_inputs() -> impl Strategy<Value = (Array2<f64>, Array2<f64>, Array2<f64>, Array2<f64>)> {
    (1..7usize, 1..9usize, 1..5usize, 1..5usize)
        .prop_flat_map(|(n, d, dk, dv)| (matrix(n, d), matrix(d, dk), matrix(d, dk), matrix(d, dv)))
}

/// `a` and `b` agree to 1e-12 of the largest magnitude involved (rounding differs when a
/// row is summed in another order).
fn close(a: &Array2<f64>, b: &Array2<f64>, scale: f64) -> bool {
    a.dim() == b.dim()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-12 * scale.max(1.0))
}

fn max_abs(a: &Array2<f64>) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

proptest! {
    #[test]
    fn weights_rows_sum_to_one((x, wq, wk, wv) in layer_inputs(), naive in any::<bool>()) {
        let kind = if naive { Softmax::Naive } else { Softmax::Stable };
        let out = Head::new(wq, wk, wv).unwrap().with_softmax(kind).forward(&x, &Attend::new()).unwrap();
        for row in out.weights.rows() {
            prop_assert!((row.sum() - 1.0).abs() < 1e-12, "row {row} sums to {}", row.sum());
            prop_assert!(row.iter().all(|&w| (0.0..=1.0).contains(&w)));
        }
    }

    #[test]
    fn permuting_tokens_permutes_output_rows(
        (x, wq, wk, wv) in layer_inputs(),
        seed in any::<u64>(),
    ) {
        let n = x.nrows();
        let mut perm: Vec<usize> = (0..n).collect();
        // A seeded Fisher-Yates shuffle, so proptest can shrink the seed.
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            perm.swap(i, (s >> 33) as usize % (i + 1));
        }
        let head = Head::new(wq, wk, wv).unwrap();
        let plain = head.forward(&x, &Attend::new()).unwrap();
        let permuted = head.forward(&x.select(Axis(0), &perm), &Attend::new()).unwrap();
        let expected = plain.z.select(Axis(0), &perm);
        prop_assert!(close(&permuted.z, &expected, max_abs(&plain.v)), "{} vs {}", permuted.z, expected);
        let w = plain.weights.select(Axis(0), &perm).select(Axis(1), &perm);
        prop_assert!(close(&permuted.weights, &w, 1.0));
    }

    #[test]
    fn split_into_one_head_is_that_head((x, wq, wk, wv) in layer_inputs()) {
        let single = Head::new(wq.clone(), wk.clone(), wv.clone()).unwrap().forward(&x, &Attend::new()).unwrap();
        let layer = MultiHead::split(&wq, &wk, &wv, 1, None).unwrap().forward(&x, &Attend::new()).unwrap();
        prop_assert_eq!(&layer.heads[0], &single);
        prop_assert_eq!(layer.result(), &single.z);
    }

    #[test]
    fn concat_width_is_the_sum_of_value_widths(
        n in 1..5usize,
        d in 1..6usize,
        widths in proptest::collection::vec(1..5usize, 1..5),
    ) {
        let heads: Vec<Head> = widths
            .iter()
            .map(|&dv| Head::new(Array2::ones((d, 2)), Array2::ones((d, 2)), Array2::ones((d, dv))).unwrap())
            .collect();
        let total: usize = widths.iter().sum();
        let out = MultiHead::new(heads, Some(Array2::ones((total, 3)))).unwrap().forward(&Array2::ones((n, d)), &Attend::new()).unwrap();
        prop_assert_eq!(out.concat.dim(), (n, total));
        prop_assert_eq!(out.result().dim(), (n, 3));
        let mut at = 0;
        for (h, &dv) in out.heads.iter().zip(&widths) {
            prop_assert_eq!(out.concat.slice(s![.., at..at + dv]), h.z.view());
            at += dv;
        }
    }

    /// Splitting into h heads runs each head on consecutive column blocks of the projections.
    #[test]
    fn split_heads_use_column_blocks((x, wq, wk, wv) in layer_inputs(), h in 1..4usize) {
        let widen = |w: &Array2<f64>| concatenate(Axis(1), &vec![w.view(); h]).unwrap();
        let (bq, bk, bv) = (widen(&wq), widen(&wk), widen(&wv));
        let layer = MultiHead::split(&bq, &bk, &bv, h, None).unwrap().forward(&x, &Attend::new()).unwrap();
        let single = Head::new(wq, wk, wv).unwrap().forward(&x, &Attend::new()).unwrap();
        for head in &layer.heads {
            prop_assert_eq!(head, &single);
        }
    }
}
