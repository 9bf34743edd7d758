//! The streaming path (online softmax over key blocks) against the path that keeps every
//! intermediate: the same numbers to 1e-12, the same errors, the same NaN and overflow.

use attention_lab::prelude::*;
use proptest::prelude::*;

/// Elementwise `|a - b| <= 1e-12 * max(|b|, scale)`: relative, with the matrix's largest
/// magnitude as the floor where an entry cancels to near zero.
fn assert_agrees(streamed: &Array2<f64>, full: &Array2<f64>) {
    assert_eq!(streamed.dim(), full.dim());
    let scale = full.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for ((i, j), &b) in full.indexed_iter() {
        let a = streamed[[i, j]];
        if a.is_nan() && b.is_nan() {
            continue;
        }
        assert!(
            (a - b).abs() <= 1e-12 * b.abs().max(scale),
            "entry ({i}, {j}): streamed {a:e}, full {b:e}"
        );
    }
}

/// A layer as the benchmarks build it: `rand` inputs, weights divided by D.
fn layer(n: usize, d: usize, h: usize, seed: u64) -> (Array2<f64>, MultiHead) {
    let mut rng = StdRng::seed_from_u64(seed);
    let x = random_embeddings(n, d, &mut rng).unwrap();
    let mut w = || random_projection(d, d, &mut rng).unwrap() / d as f64;
    let (wq, wk, wv, wo) = (w(), w(), w(), w());
    (x, MultiHead::split(&wq, &wk, &wv, h, Some(wo)).unwrap())
}

#[test]
fn multi_head_agrees_on_random_inputs() {
    for (n, d, h) in [(1, 4, 2), (37, 16, 4), (128, 64, 4), (300, 32, 8)] {
        let (x, layer) = layer(n, d, h, n as u64);
        assert_agrees(
            &layer.forward_streaming(&x).unwrap(),
            layer.forward(&x).unwrap().result(),
        );
    }
}

#[test]
fn large_scores_agree_too() {
    // Scores in the hundreds: the running max moves a lot, and exp(s) alone would overflow.
    let (x, _) = layer(200, 16, 2, 3);
    let mut rng = StdRng::seed_from_u64(4);
    let w = (random_projection(16, 16, &mut rng).unwrap() - 0.5) * 12.0;
    let layer = MultiHead::split(&w, &w, &w, 2, None).unwrap();
    let full = layer.forward(&x).unwrap();
    let biggest = full.heads[0]
        .scores
        .iter()
        .fold(0.0f64, |m, s| m.max(s.abs()));
    assert!(biggest > 100.0, "scores only reach {biggest}");
    assert_agrees(&layer.forward_streaming(&x).unwrap(), full.result());
}

#[test]
fn every_block_size_and_thread_count_agrees() {
    let (x, layer) = layer(23, 8, 2, 11);
    let full = layer.forward(&x).unwrap().result().clone();
    for query_block in [1, 2, 5, 23, 64] {
        for key_block in [1, 3, 8, 22, 23, 100] {
            for threads in [0, 1, 3] {
                let streaming = Streaming {
                    query_block,
                    key_block,
                    threads,
                };
                assert_agrees(&layer.forward_streaming_with(&x, streaming).unwrap(), &full);
            }
        }
    }
}

#[test]
fn zero_blocks_mean_one() {
    let (x, layer) = layer(9, 4, 2, 5);
    let zero = Streaming {
        query_block: 0,
        key_block: 0,
        threads: 0,
    };
    assert_agrees(
        &layer.forward_streaming_with(&x, zero).unwrap(),
        layer.forward(&x).unwrap().result(),
    );
}

#[test]
fn huge_blocks_mean_the_whole_input() {
    let (x, layer) = layer(9, 4, 2, 5);
    let huge = Streaming {
        query_block: usize::MAX,
        key_block: usize::MAX,
        threads: usize::MAX,
    };
    assert_agrees(
        &layer.forward_streaming_with(&x, huge).unwrap(),
        layer.forward(&x).unwrap().result(),
    );
}

#[test]
fn heads_of_different_widths_and_softmaxes() {
    let mut rng = StdRng::seed_from_u64(9);
    let x = random_embeddings(40, 6, &mut rng).unwrap() * 4.0;
    let mut w = |cols| random_projection(6, cols, &mut rng).unwrap();
    let one = Head::new(w(2), w(2), w(5)).unwrap();
    let two = Head::new(w(4), w(4), w(1))
        .unwrap()
        .with_softmax(Softmax::Naive);
    let three = Head::new(w(3), w(3), w(3)).unwrap();
    let layer = MultiHead::new(
        vec![one, two, three],
        Some(Array2::from_shape_fn((9, 4), |(i, j)| (i + j) as f64 / 9.0)),
    )
    .unwrap();
    let layer_no_wo = MultiHead::new(layer.heads().to_vec(), None).unwrap();
    let small = Streaming {
        query_block: 7,
        key_block: 6,
        threads: 2,
    };
    assert_agrees(
        &layer.forward_streaming_with(&x, small).unwrap(),
        layer.forward(&x).unwrap().result(),
    );
    let streamed = layer_no_wo.forward_streaming_with(&x, small).unwrap();
    let full = layer_no_wo.forward(&x).unwrap();
    assert_agrees(&streamed, &full.concat);
    for (i, head) in layer.heads().iter().enumerate() {
        assert_agrees(&head.forward_streaming(&x).unwrap(), &full.heads[i].z);
    }
}

#[test]
fn naive_softmax_overflows_as_the_full_path_does() {
    // exp(710) is inf: the naive full path gives NaN rows, and so must the streamed one.
    let x = array![[30.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    let head = Head::new(Array2::eye(2) * 40.0, Array2::eye(2), Array2::eye(2))
        .unwrap()
        .with_softmax(Softmax::Naive);
    let full = head.forward(&x).unwrap().z;
    assert!(full.row(0).iter().all(|v| v.is_nan()));
    let streamed = head
        .forward_streaming_with(
            &x,
            Streaming {
                query_block: 1,
                key_block: 1,
                threads: 1,
            },
        )
        .unwrap();
    assert!(streamed.row(0).iter().all(|v| v.is_nan()));
    assert_agrees(
        &streamed.slice(s![1.., ..]).to_owned(),
        &full.slice(s![1.., ..]).to_owned(),
    );
    // The stable form of the same head has no NaN.
    let stable = head.clone().with_softmax(Softmax::Stable);
    assert_agrees(
        &stable.forward_streaming(&x).unwrap(),
        &stable.forward(&x).unwrap().z,
    );
}

#[test]
fn naive_softmax_sum_overflow_and_underflow_as_the_full_path() {
    // Every score is c: exp(709.5) is finite but three of them overflow the sum (weights 0),
    // and exp(-800) is 0 for every key (weights 0 / 0).
    let x = array![[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]];
    for c in [709.5, -800.0] {
        let wq = Array2::eye(2) * (c * 2f64.sqrt());
        let head = Head::new(wq, Array2::eye(2), array![[1.0, -2.0], [3.0, 4.0]])
            .unwrap()
            .with_softmax(Softmax::Naive);
        let full = head.forward(&x).unwrap();
        assert!(
            full.scores.iter().all(|&s| (s - c).abs() < 1e-9),
            "{}",
            full.scores
        );
        assert_agrees(&head.forward_streaming(&x).unwrap(), &full.z);
        let expected_nan = c < 0.0;
        assert!(
            full.z.iter().all(|v| v.is_nan() == expected_nan),
            "{}",
            full.z
        );
    }
}

#[test]
fn nan_and_infinity_spread_as_in_the_full_path() {
    let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2)).unwrap();
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let x = array![[1.0, 0.0], [0.0, 1.0], [bad, 1.0], [2.0, 2.0]];
        let full = head.forward(&x).unwrap().z;
        for key_block in [1, 2, 4] {
            let streaming = Streaming {
                query_block: 1,
                key_block,
                threads: 1,
            };
            let streamed = head.forward_streaming_with(&x, streaming).unwrap();
            for (a, b) in streamed.iter().zip(&full) {
                assert!(
                    a.is_nan() == b.is_nan()
                        && (a.is_nan() || (a - b).abs() <= 1e-12 * b.abs().max(1.0)),
                    "x has {bad}, key block {key_block}: streamed\n{streamed}\nfull\n{full}"
                );
            }
        }
    }
}

#[test]
fn no_tokens_gives_no_rows() {
    let (_, layer) = layer(1, 8, 2, 1);
    let x = Array2::<f64>::zeros((0, 8));
    assert_eq!(layer.forward_streaming(&x).unwrap().dim(), (0, 8));
}

#[test]
fn attention_alone_agrees_and_checks_shapes() {
    let mut rng = StdRng::seed_from_u64(21);
    let q = random_embeddings(30, 5, &mut rng).unwrap();
    let k = random_embeddings(44, 5, &mut rng).unwrap() * 3.0;
    let v = random_embeddings(44, 7, &mut rng).unwrap();
    let full = scaled_dot_product_attention(&q, &k, &v).unwrap();
    assert_agrees(&streaming_attention(&q, &k, &v).unwrap(), &full.output);
    // No keys: the full path gives zeros.
    let none = Array2::<f64>::zeros((0, 5));
    let z = streaming_attention(&q, &none, &Array2::zeros((0, 7))).unwrap();
    assert_eq!(
        z,
        scaled_dot_product_attention(&q, &none, &Array2::zeros((0, 7)))
            .unwrap()
            .output
    );
    for (k, v) in [
        (k.slice(s![.., ..4]).to_owned(), v.clone()),
        (k.clone(), v.slice(s![..43, ..]).to_owned()),
    ] {
        assert_eq!(
            streaming_attention(&q, &k, &v).unwrap_err(),
            scaled_dot_product_attention(&q, &k, &v).unwrap_err()
        );
    }
}

#[test]
fn bad_input_width_is_the_same_error() {
    let (_, layer) = layer(4, 8, 2, 1);
    let x = Array2::<f64>::zeros((4, 7));
    assert_eq!(
        layer.forward_streaming(&x).unwrap_err().to_string(),
        layer.forward(&x).unwrap_err().to_string()
    );
    let head = &layer.heads()[0];
    assert_eq!(
        head.forward_streaming(&x).unwrap_err().to_string(),
        head.forward(&x).unwrap_err().to_string()
    );
}

fn matrix(rows: usize, cols: usize) -> impl Strategy<Value = Array2<f64>> {
    proptest::collection::vec(-4.0..4.0f64, rows * cols)
        .prop_map(move |v| Array2::from_shape_vec((rows, cols), v).unwrap())
}

proptest! {
    #[test]
    fn streamed_equals_full_for_any_shape_and_blocks(
        (x, wq, wk, wv) in (1..40usize, 1..7usize, 1..5usize, 1..5usize).prop_flat_map(
            |(n, d, dk, dv)| (matrix(n, d), matrix(d, dk), matrix(d, dk), matrix(d, dv))
        ),
        query_block in 1..12usize,
        key_block in 1..12usize,
        naive in any::<bool>(),
    ) {
        // The naive form only where it neither overflows nor underflows (tested apart).
        let (kind, wq) = if naive { (Softmax::Naive, wq * 0.01) } else { (Softmax::Stable, wq) };
        let head = Head::new(wq, wk, wv).unwrap().with_softmax(kind);
        let streaming = Streaming { query_block, key_block, threads: 2 };
        assert_agrees(&head.forward_streaming_with(&x, streaming).unwrap(), &head.forward(&x).unwrap().z);
    }
}

/// (x, a layer of `h` heads with W_O, a boolean mask with `true` = blocked): about one row
/// in four of the mask is all blocked, so the fully masked row is always exercised.
fn masked_layer() -> impl Strategy<Value = (Array2<f64>, MultiHead, Array2<bool>)> {
    (1..30usize, 1..4usize, 1..3usize).prop_flat_map(|(n, h, dh)| {
        let d = h * dh;
        let blocked = (
            proptest::collection::vec(any::<bool>(), n * n),
            proptest::collection::vec(0..4u8, n),
        )
            .prop_map(move |(b, full)| {
                Array2::from_shape_fn((n, n), |(i, j)| b[i * n + j] || full[i] == 0)
            });
        let layer = (matrix(d, d), matrix(d, d), matrix(d, d), matrix(d, 3)).prop_map(
            move |(wq, wk, wv, wo)| MultiHead::split(&wq, &wk, &wv, h, Some(wo)).unwrap(),
        );
        (matrix(n, d), layer, blocked)
    })
}

proptest! {
    #[test]
    fn masked_streamed_equals_masked_full(
        (x, layer, blocked) in masked_layer(),
        query_block in 1..12usize,
        key_block in 1..12usize,
        fill in prop_oneof![Just(None), Just(Some(-1e6)), Just(Some(-1e4))],
    ) {
        let mask = Mask::from_blocked(&blocked);
        let mask = match fill { Some(f) => mask.with_fill(f), None => mask };
        let streaming = Streaming { query_block, key_block, threads: 2 };
        let streamed = layer.forward_streaming_masked_with(&x, &mask, streaming).unwrap();
        let full = layer.forward_masked(&x, &mask).unwrap();
        prop_assert!(streamed.iter().all(|v| v.is_finite()));
        assert_agrees(&streamed, full.result());
        for (i, row) in blocked.rows().into_iter().enumerate() {
            if fill.is_none() && row.iter().all(|&b| b) {
                prop_assert!(full.concat.row(i).iter().all(|&z| z == 0.0));
                prop_assert!(streamed.row(i).iter().all(|&z| z == 0.0));
            }
        }
        let head = &layer.heads()[0];
        assert_agrees(&head.forward_streaming_masked(&x, &mask).unwrap(), &full.heads[0].z);
    }
}

#[test]
fn masked_streaming_checks_the_mask_shape() {
    let (x, layer) = layer(4, 8, 2, 1);
    let mask = Mask::causal(5);
    assert_eq!(
        layer
            .forward_streaming_masked(&x, &mask)
            .unwrap_err()
            .to_string(),
        layer.forward_masked(&x, &mask).unwrap_err().to_string()
    );
}

#[test]
fn causal_and_padding_agree_on_a_long_input() {
    // Many key blocks, some of them wholly masked for a query (the running max stays -inf).
    let (x, layer) = layer(300, 16, 4, 8);
    let padded: Vec<bool> = (0..300).map(|j| j % 7 == 0 || j >= 290).collect();
    let mask = Mask::causal(300)
        .and(&Mask::key_padding(300, &padded))
        .unwrap();
    let full = layer.forward_masked(&x, &mask).unwrap();
    for key_block in [1, 16, 512] {
        let streaming = Streaming {
            query_block: 32,
            key_block,
            threads: 0,
        };
        let streamed = layer
            .forward_streaming_masked_with(&x, &mask, streaming)
            .unwrap();
        assert_agrees(&streamed, full.result());
        // Query 0 sees only key 0, which is padding.
        assert!(streamed.row(0).iter().all(|&z| z == 0.0));
    }
}
