//! The streaming path (online softmax over key blocks) against the path that keeps every
//! intermediate: the same numbers to 1e-12, the same errors, the same NaN and overflow.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;
use attention_lab::simd::SIMD_VAR;
use ndarray::Dimension;
use proptest::prelude::*;

/// Elementwise `|a - b| <= 1e-12 * max(|b|, scale)`: relative, with the array's largest
/// finite magnitude as the floor where an entry cancels to near zero. NaN agrees with NaN and
/// an infinity with itself.
fn assert_agrees<D: Dimension>(streamed: &Array<f64, D>, full: &Array<f64, D>) {
    assert_eq!(streamed.shape(), full.shape());
    let finite = full.iter().filter(|v| v.is_finite());
    let scale = finite.fold(0.0f64, |m, v| m.max(v.abs()));
    for ((at, &b), &a) in full.indexed_iter().zip(streamed) {
        if a == b || (a.is_nan() && b.is_nan()) {
            continue;
        }
        assert!(
            (a - b).abs() <= 1e-12 * b.abs().max(scale),
            "entry {at:?}: streamed {a:e}, full {b:e}"
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
            &layer
                .forward(&x, &Attend::new().streaming(Streaming::default()))
                .unwrap(),
            layer.forward(&x, &Attend::new()).unwrap().result(),
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
    let full = layer.forward(&x, &Attend::new()).unwrap();
    let biggest = full.heads[0]
        .scores
        .iter()
        .fold(0.0f64, |m, s| m.max(s.abs()));
    assert!(biggest > 100.0, "scores only reach {biggest}");
    assert_agrees(
        &layer
            .forward(&x, &Attend::new().streaming(Streaming::default()))
            .unwrap(),
        full.result(),
    );
}

#[test]
fn every_block_size_and_thread_count_agrees() {
    let (x, layer) = layer(23, 8, 2, 11);
    let full = layer.forward(&x, &Attend::new()).unwrap().result().clone();
    for query_block in [1, 2, 5, 23, 64] {
        for key_block in [1, 3, 8, 22, 23, 100] {
            for threads in [0, 1, 3] {
                let streaming = Streaming {
                    query_block,
                    key_block,
                    threads,
                    ..Streaming::default()
                };
                assert_agrees(
                    &layer
                        .forward(&x, &Attend::new().streaming(streaming))
                        .unwrap(),
                    &full,
                );
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
        ..Streaming::default()
    };
    assert_agrees(
        &layer.forward(&x, &Attend::new().streaming(zero)).unwrap(),
        layer.forward(&x, &Attend::new()).unwrap().result(),
    );
}

#[test]
fn huge_blocks_mean_the_whole_input() {
    let (x, layer) = layer(9, 4, 2, 5);
    let huge = Streaming {
        query_block: usize::MAX,
        key_block: usize::MAX,
        threads: usize::MAX,
        ..Streaming::default()
    };
    assert_agrees(
        &layer.forward(&x, &Attend::new().streaming(huge)).unwrap(),
        layer.forward(&x, &Attend::new()).unwrap().result(),
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
        ..Streaming::default()
    };
    assert_agrees(
        &layer.forward(&x, &Attend::new().streaming(small)).unwrap(),
        layer.forward(&x, &Attend::new()).unwrap().result(),
    );
    let streamed = layer_no_wo
        .forward(&x, &Attend::new().streaming(small))
        .unwrap();
    let full = layer_no_wo.forward(&x, &Attend::new()).unwrap();
    assert_agrees(&streamed, &full.concat);
    for (i, head) in layer.heads().iter().enumerate() {
        assert_agrees(
            &head
                .forward(&x, &Attend::new().streaming(Streaming::default()))
                .unwrap(),
            &full.heads[i].z,
        );
    }
}

#[test]
fn naive_softmax_overflows_as_the_full_path_does() {
    // exp(710) is inf: the naive full path gives NaN rows, and so must the streamed one.
    let x = array![[30.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    let head = Head::new(Array2::eye(2) * 40.0, Array2::eye(2), Array2::eye(2))
        .unwrap()
        .with_softmax(Softmax::Naive);
    let full = head.forward(&x, &Attend::new()).unwrap().z;
    assert!(full.row(0).iter().all(|v| v.is_nan()));
    let streamed = head
        .forward(
            &x,
            &Attend::new().streaming(Streaming {
                query_block: 1,
                key_block: 1,
                threads: 1,
                ..Streaming::default()
            }),
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
        &stable
            .forward(&x, &Attend::new().streaming(Streaming::default()))
            .unwrap(),
        &stable.forward(&x, &Attend::new()).unwrap().z,
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
        let full = head.forward(&x, &Attend::new()).unwrap();
        assert!(
            full.scores.iter().all(|&s| (s - c).abs() < 1e-9),
            "{}",
            full.scores
        );
        assert_agrees(
            &head
                .forward(&x, &Attend::new().streaming(Streaming::default()))
                .unwrap(),
            &full.z,
        );
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
        let full = head.forward(&x, &Attend::new()).unwrap().z;
        for key_block in [1, 2, 4] {
            let streaming = Streaming {
                query_block: 1,
                key_block,
                threads: 1,
                ..Streaming::default()
            };
            let streamed = head
                .forward(&x, &Attend::new().streaming(streaming))
                .unwrap();
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
    assert_eq!(
        layer
            .forward(&x, &Attend::new().streaming(Streaming::default()))
            .unwrap()
            .dim(),
        (0, 8)
    );
}

#[test]
fn attention_alone_agrees_and_checks_shapes() {
    let mut rng = StdRng::seed_from_u64(21);
    let q = random_embeddings(30, 5, &mut rng).unwrap();
    let k = random_embeddings(44, 5, &mut rng).unwrap() * 3.0;
    let v = random_embeddings(44, 7, &mut rng).unwrap();
    let full = scaled_dot_product_attention(&q, &k, &v, &Attend::new()).unwrap();
    assert_agrees(
        &scaled_dot_product_attention(&q, &k, &v, &Attend::new().streaming(Streaming::default()))
            .unwrap(),
        &full.output,
    );
    // No keys: the full path gives zeros.
    let none = Array2::<f64>::zeros((0, 5));
    let z = scaled_dot_product_attention(
        &q,
        &none,
        &Array2::zeros((0, 7)),
        &Attend::new().streaming(Streaming::default()),
    )
    .unwrap();
    assert_eq!(
        z,
        scaled_dot_product_attention(&q, &none, &Array2::zeros((0, 7)), &Attend::new())
            .unwrap()
            .output
    );
    for (k, v) in [
        (k.slice(s![.., ..4]).to_owned(), v.clone()),
        (k.clone(), v.slice(s![..43, ..]).to_owned()),
    ] {
        assert_eq!(
            scaled_dot_product_attention(
                &q,
                &k,
                &v,
                &Attend::new().streaming(Streaming::default())
            )
            .unwrap_err(),
            scaled_dot_product_attention(&q, &k, &v, &Attend::new()).unwrap_err()
        );
    }
}

#[test]
fn bad_input_width_is_the_same_error() {
    let (_, layer) = layer(4, 8, 2, 1);
    let x = Array2::<f64>::zeros((4, 7));
    assert_eq!(
        layer
            .forward(&x, &Attend::new().streaming(Streaming::default()))
            .unwrap_err()
            .to_string(),
        layer.forward(&x, &Attend::new()).unwrap_err().to_string()
    );
    let head = &layer.heads()[0];
    assert_eq!(
        head.forward(&x, &Attend::new().streaming(Streaming::default()))
            .unwrap_err()
            .to_string(),
        head.forward(&x, &Attend::new()).unwrap_err().to_string()
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
        let streaming = Streaming { query_block, key_block, threads: 2, ..Streaming::default() };
        assert_agrees(&head.forward(&x, &Attend::new().streaming(streaming)).unwrap(), &head.forward(&x, &Attend::new()).unwrap().z);
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
        let streaming = Streaming { query_block, key_block, threads: 2, ..Streaming::default() };
        let streamed = layer.forward(&x, &Attend::new().mask(&mask).streaming(streaming)).unwrap();
        let full = layer.forward(&x, &Attend::new().mask(&mask)).unwrap();
        prop_assert!(streamed.iter().all(|v| v.is_finite()));
        assert_agrees(&streamed, full.result());
        for (i, row) in blocked.rows().into_iter().enumerate() {
            if fill.is_none() && row.iter().all(|&b| b) {
                prop_assert!(full.concat.row(i).iter().all(|&z| z == 0.0));
                prop_assert!(streamed.row(i).iter().all(|&z| z == 0.0));
            }
        }
        let head = &layer.heads()[0];
        assert_agrees(&head.forward(&x, &Attend::new().mask(&mask).streaming(Streaming::default())).unwrap(), &full.heads[0].z);
        let streamed = head.forward(&x, &Attend::new().mask(&mask).streaming(streaming)).unwrap();
        assert_agrees(&streamed, &full.heads[0].z);
    }
}

#[test]
fn masked_streaming_checks_the_mask_shape() {
    let (x, layer) = layer(4, 8, 2, 1);
    let mask = Mask::causal(5);
    assert_eq!(
        layer
            .forward(
                &x,
                &Attend::new().mask(&mask).streaming(Streaming::default())
            )
            .unwrap_err()
            .to_string(),
        layer
            .forward(&x, &Attend::new().mask(&mask))
            .unwrap_err()
            .to_string()
    );
}

/// A call large enough for threads (past `SERIAL_WORK`): every thread count gives the same
/// bits (each row and column is computed by the same code, whichever thread takes it), and
/// the full path's numbers, masked or not.
#[test]
fn threads_change_no_bit_of_a_call_large_enough_for_them() {
    let (x, layer) = layer(520, 64, 4, 12);
    let work = 520 * 64 * 64 * 4 + 520 * 520 * 64 * 2;
    assert!(work > attention_lab::stream::SERIAL_WORK, "{work}");
    let causal = Mask::causal(520);
    for mask in [None, Some(&causal)] {
        let full = layer.forward(&x, &Attend::new().mask(mask)).unwrap();
        let with = |threads| {
            let streaming = Streaming {
                threads,
                ..Streaming::default()
            };
            layer
                .forward(&x, &Attend::new().mask(mask).streaming(streaming))
                .unwrap()
        };
        let one = with(1);
        assert_agrees(&one, full.result());
        for threads in [2, 3] {
            assert_eq!(with(threads), one, "{threads} threads");
        }
    }
}

#[test]
fn causal_and_padding_agree_on_a_long_input() {
    // Many key blocks, some of them wholly masked for a query (the running max stays -inf).
    let (x, layer) = layer(300, 16, 4, 8);
    let padded: Vec<bool> = (0..300).map(|j| j % 7 == 0 || j >= 290).collect();
    let mask = Mask::causal(300)
        .and(&Mask::key_padding(300, &padded))
        .unwrap();
    let full = layer.forward(&x, &Attend::new().mask(&mask)).unwrap();
    for key_block in [1, 16, 512] {
        let streaming = Streaming {
            query_block: 32,
            key_block,
            threads: 0,
            ..Streaming::default()
        };
        let streamed = layer
            .forward(&x, &Attend::new().mask(&mask).streaming(streaming))
            .unwrap();
        assert_agrees(&streamed, full.result());
        // Query 0 sees only key 0, which is padding.
        assert!(streamed.row(0).iter().all(|&z| z == 0.0));
    }
}

#[test]
fn blocks_a_mask_blocks_whole_agree_beside_infinities_and_overflow() {
    // Under a causal mask most blocks of keys are blocked whole for a panel of queries, and
    // the streaming path skips them, but only where that is exact: here one value row is
    // infinite (0 * inf = NaN for every query that may not see it, as in the full path) and
    // one query is large enough that its scores overflow (inf - inf = NaN).
    let head = Head::new(Array2::eye(4), Array2::eye(4), Array2::eye(4)).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let base = random_embeddings(120, 4, &mut rng).unwrap();
    for (row, value) in [(None, 0.0), (Some(70), f64::INFINITY), (Some(3), 1e300)] {
        let mut x = base.clone();
        if let Some(row) = row {
            x[[row, 1]] = value;
        }
        let mask = Mask::causal(120);
        let full = head.forward(&x, &Attend::new().mask(&mask)).unwrap().z;
        for key_block in [6, 24, 512] {
            let streaming = Streaming {
                query_block: 16,
                key_block,
                threads: 2,
                ..Streaming::default()
            };
            let streamed = head
                .forward(&x, &Attend::new().mask(&mask).streaming(streaming))
                .unwrap();
            assert_agrees(&streamed, &full);
        }
    }
}

fn vector(len: usize) -> impl Strategy<Value = Array1<f64>> {
    proptest::collection::vec(-4.0..4.0f64, len).prop_map(Array1::from)
}

fn tensor(items: usize, rows: usize, cols: usize) -> impl Strategy<Value = Array3<f64>> {
    proptest::collection::vec(-4.0..4.0f64, items * rows * cols)
        .prop_map(move |v| Array3::from_shape_vec((items, rows, cols), v).unwrap())
}

/// `rows x cols` with `true` = blocked, about one row in four blocked entirely.
fn blocked(rows: usize, cols: usize) -> impl Strategy<Value = Array2<bool>> {
    (
        proptest::collection::vec(any::<bool>(), rows * cols),
        proptest::collection::vec(0..4u8, rows),
    )
        .prop_map(move |(b, full)| {
            Array2::from_shape_fn((rows, cols), |(i, j)| b[i * cols + j] || full[i] == 0)
        })
}

/// A cross-attention layer: `h` heads taking queries `e` wide (d_k = `dh`), keys `kdim` and
/// values `vdim` wide (d_v = `dv`), each with or without biases, with or without W_O and b_O.
/// W_Q is scaled down so that no score falls 745 below its row's largest, where `exp`
/// underflows: there an infinite value gives `0 * inf = NaN` in the full path but may give
/// `inf` in the streamed one, which scales in two steps (large scores are tested apart, on
/// finite inputs).
fn cross_layer(
    h: usize,
    e: usize,
    dh: usize,
    kdim: usize,
    vdim: usize,
    dv: usize,
) -> impl Strategy<Value = MultiHead> {
    let head = (
        matrix(e, dh),
        matrix(kdim, dh),
        matrix(vdim, dv),
        proptest::option::of((vector(dh), vector(dh), vector(dv))),
    )
        .prop_map(|(wq, wk, wv, biases)| {
            let head = Head::cross(wq / 8.0, wk, wv).unwrap();
            match biases {
                Some((bq, bk, bv)) => head.with_biases(bq, bk, bv).unwrap(),
                None => head,
            }
        });
    let out = proptest::option::of((matrix(h * dv, 3), proptest::option::of(vector(3))));
    (proptest::collection::vec(head, h), out).prop_map(|(heads, out)| match out {
        None => MultiHead::new(heads, None).unwrap(),
        Some((wo, bo)) => {
            let layer = MultiHead::new(heads, Some(wo)).unwrap();
            match bo {
                Some(bo) => layer.with_output_bias(bo).unwrap(),
                None => layer,
            }
        }
    })
}

/// NaN, inf or -inf at one entry of one input, or nothing: (which input, where, what).
fn spoiler() -> impl Strategy<Value = Option<(usize, usize, f64)>> {
    let bad = prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY)];
    proptest::option::of((0..3usize, any::<usize>(), bad))
}

fn spoil<D: Dimension>(inputs: &mut [Array<f64, D>], spoiler: Option<(usize, usize, f64)>) {
    if let Some((which, at, bad)) = spoiler {
        let input = &mut inputs[which % inputs.len()];
        let len = input.len();
        if let Some(entry) = input.iter_mut().nth(at % len.max(1)) {
            *entry = bad;
        }
    }
}

/// (x, key, value, a cross-attention layer, a boolean mask of x's tokens x key's tokens);
/// there may be no keys at all.
type Cross = ([Array2<f64>; 3], MultiHead, Array2<bool>);

fn cross_inputs() -> impl Strategy<Value = Cross> {
    (
        1..20usize,
        0..25usize,
        1..4usize,
        1..3usize,
        1..5usize,
        1..5usize,
        1..3usize,
    )
        .prop_flat_map(|(n, m, h, dh, kdim, vdim, dv)| {
            let e = h * dh;
            let inputs = [matrix(n, e), matrix(m, kdim), matrix(m, vdim)];
            (inputs, cross_layer(h, e, dh, kdim, vdim, dv), blocked(n, m))
        })
}

proptest! {
    #[test]
    fn cross_streamed_equals_cross_full(
        (mut inputs, layer, blocked) in cross_inputs(),
        spoiler in spoiler(),
        query_block in 1..12usize,
        key_block in 1..12usize,
        fill in prop_oneof![Just(None), Just(Some(-1e6))],
    ) {
        spoil(&mut inputs, spoiler);
        let [x, key, value] = &inputs;
        let mask = Mask::from_blocked(&blocked);
        let mask = match fill { Some(f) => mask.with_fill(f), None => mask };
        let streaming = Streaming { query_block, key_block, threads: 2, ..Streaming::default() };

        let full = layer.forward_cross(x, key, value, &Attend::new()).unwrap();
        assert_agrees(&layer.forward_cross(x, key, value, &Attend::new().streaming(Streaming::default())).unwrap(), full.result());
        let streamed = layer.forward_cross(x, key, value, &Attend::new().streaming(streaming)).unwrap();
        assert_agrees(&streamed, full.result());
        for (head, out) in layer.heads().iter().zip(&full.heads) {
            assert_agrees(&head.forward_cross(x, key, value, &Attend::new().streaming(Streaming::default())).unwrap(), &out.z);
            let z = head.forward_cross(x, key, value, &Attend::new().streaming(streaming)).unwrap();
            assert_agrees(&z, &out.z);
        }

        let full = layer.forward_cross(x, key, value, &Attend::new().mask(&mask)).unwrap();
        let streamed = layer.forward_cross(x, key, value, &Attend::new().mask(&mask).streaming(Streaming::default())).unwrap();
        assert_agrees(&streamed, full.result());
        let streamed = layer
            .forward_cross(x, key, value, &Attend::new().mask(&mask).streaming(streaming))
            .unwrap();
        assert_agrees(&streamed, full.result());
        for (head, out) in layer.heads().iter().zip(&full.heads) {
            let z = head.forward_cross(x, key, value, &Attend::new().mask(&mask).streaming(Streaming::default())).unwrap();
            assert_agrees(&z, &out.z);
            let z = head
                .forward_cross(x, key, value, &Attend::new().mask(&mask).streaming(streaming))
                .unwrap();
            assert_agrees(&z, &out.z);
            if fill.is_none() && spoiler.is_none() {
                // A fully masked row is zeros, not NaN.
                for (i, row) in blocked.rows().into_iter().enumerate() {
                    if row.iter().all(|&b| b) {
                        prop_assert!(z.row(i).iter().all(|&z| z == 0.0));
                    }
                }
            }
        }
    }
}

/// (x, key, value, a layer, a key padding mask, a shared mask, whether it is
/// cross-attention); in self-attention key and value are unused (x is all three).
type Batch = (
    [Array3<f64>; 3],
    MultiHead,
    Option<Array2<bool>>,
    Option<Array2<bool>>,
    bool,
);

fn batch_inputs() -> impl Strategy<Value = Batch> {
    let shapes = (
        0..4usize,
        1..8usize,
        0..9usize,
        1..4usize,
        1..3usize,
        1..5usize,
        1..5usize,
    );
    (shapes, 1..3usize, any::<bool>()).prop_flat_map(
        |((batch, n, m, h, dh, kdim, vdim), dv, cross)| {
            let e = h * dh;
            let (m, kdim, vdim) = if cross { (m, kdim, vdim) } else { (n, e, e) };
            let inputs = [
                tensor(batch, n, e),
                tensor(batch, m, kdim),
                tensor(batch, m, vdim),
            ];
            (
                inputs,
                cross_layer(h, e, dh, kdim, vdim, dv),
                proptest::option::of(blocked(batch, m)),
                proptest::option::of(blocked(n, m)),
                Just(cross),
            )
        },
    )
}

proptest! {
    #[test]
    fn batch_streamed_equals_batch_full(
        (mut inputs, layer, padding, shared, cross) in batch_inputs(),
        spoiler in spoiler(),
        query_block in 1..6usize,
        key_block in 1..6usize,
    ) {
        let spoilable = if cross { &mut inputs[..] } else { &mut inputs[..1] };
        spoil(spoilable, spoiler);
        let [x, key, value] = &inputs;
        let (padding, shared) = (padding.as_ref(), shared.map(|b| Mask::from_blocked(&b)));
        let shared = shared.as_ref();
        let streaming = Streaming { query_block, key_block, threads: 2, ..Streaming::default() };
        if cross {
            let full = layer.forward_cross_batch(x, key, value, &Attend::new().key_padding(padding).mask(shared)).unwrap().result();
            let streamed = layer.forward_cross_batch(x, key, value, &Attend::new().key_padding(padding).mask(shared).streaming(Streaming::default()));
            assert_agrees(&streamed.unwrap(), &full);
            let streamed = layer
                .forward_cross_batch(x, key, value, &Attend::new().key_padding(padding).mask(shared).streaming(streaming));
            assert_agrees(&streamed.unwrap(), &full);
        } else {
            let full = layer.forward_batch(x, &Attend::new().key_padding(padding).mask(shared)).unwrap().result();
            assert_agrees(&layer.forward_batch(x, &Attend::new().key_padding(padding).mask(shared).streaming(Streaming::default())).unwrap(), &full);
            let streamed = layer.forward_batch(x, &Attend::new().key_padding(padding).mask(shared).streaming(streaming));
            assert_agrees(&streamed.unwrap(), &full);
        }
    }
}

proptest! {
    #[test]
    fn causal_over_is_the_last_rows_of_causal(queries in 0..12usize, cached in 0..12usize) {
        let keys = queries + cached;
        let mask = Mask::causal_over(queries, keys).unwrap();
        let causal = Mask::causal(keys);
        prop_assert_eq!(mask.additive(), &causal.additive().slice(s![cached.., ..]));
    }
}

#[test]
fn causal_over_more_queries_than_keys_is_an_error() {
    let err = Mask::causal_over(5, 3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the number of queries is 5 but the number of keys is 3: the queries are the last \
         tokens of the key sequence, so there can be no more of them than keys"
    );
    assert_eq!(Mask::causal_over(0, 0).unwrap().additive().dim(), (0, 0));
}

#[test]
fn decoding_over_a_kv_cache_agrees_with_the_whole_sequence() {
    // The last tokens as queries over every token as keys and values, under causal_over,
    // are the last rows of the whole sequence under the causal mask.
    let (tokens, layer) = layer(70, 8, 2, 12);
    let full = layer
        .forward(&tokens, &Attend::new().mask(&Mask::causal(70)))
        .unwrap();
    for new in [1, 2, 17, 70] {
        let x = tokens.slice(s![70 - new.., ..]);
        let mask = Mask::causal_over(new, 70).unwrap();
        for key_block in [1, 9, 512] {
            let streaming = Streaming {
                query_block: 4,
                key_block,
                threads: 0,
                ..Streaming::default()
            };
            let streamed = layer
                .forward_cross(
                    x,
                    &tokens,
                    &tokens,
                    &Attend::new().mask(&mask).streaming(streaming),
                )
                .unwrap();
            assert_agrees(
                &streamed,
                &full.result().slice(s![70 - new.., ..]).to_owned(),
            );
        }
    }
}

#[test]
fn key_padding_takes_any_row_of_bools() {
    let padding = array![[false, true, false], [true, false, true]];
    let row = padding.row(1);
    let want = Mask::key_padding(2, &[true, false, true]);
    let as_vec: Vec<bool> = row.to_vec();
    let as_slice: &[bool] = &as_vec;
    assert_eq!(Mask::key_padding(2, as_slice), want);
    assert_eq!(Mask::key_padding(2, &as_vec), want);
    assert_eq!(Mask::key_padding(2, row), want);
    assert_eq!(Mask::key_padding(2, &row.to_owned()), want);
}

#[test]
fn cross_streaming_errors_are_the_full_paths() {
    let mut rng = StdRng::seed_from_u64(2);
    let mut w = |rows, cols| random_projection(rows, cols, &mut rng).unwrap();
    let heads = vec![
        Head::cross(w(4, 2), w(3, 2), w(5, 2)).unwrap(),
        Head::cross(w(4, 2), w(3, 2), w(5, 1)).unwrap(),
    ];
    let layer = MultiHead::new(heads, Some(w(3, 4))).unwrap();
    let x = Array2::<f64>::zeros((6, 4));
    let (key, value) = (Array2::<f64>::zeros((7, 3)), Array2::<f64>::zeros((7, 5)));
    let wide = Array2::<f64>::zeros((7, 6));
    let short = Array2::<f64>::zeros((6, 5));
    let wrong_mask = Mask::causal(6);
    for (x, key, value, mask) in [
        (&key, &key, &value, None),
        (&x, &wide, &value, None),
        (&x, &key, &wide, None),
        (&x, &key, &short, None),
        (&x, &key, &value, Some(&wrong_mask)),
    ] {
        let full = layer
            .forward_cross(x, key, value, &Attend::new().mask(mask))
            .unwrap_err();
        let streamed = match mask {
            Some(mask) => layer.forward_cross(
                x,
                key,
                value,
                &Attend::new().mask(mask).streaming(Streaming::default()),
            ),
            None => layer.forward_cross(
                x,
                key,
                value,
                &Attend::new().streaming(Streaming::default()),
            ),
        };
        assert_eq!(streamed.unwrap_err(), full);
        let head = &layer.heads()[0];
        let full = head
            .forward_cross(x, key, value, &Attend::new().mask(mask))
            .unwrap_err();
        let streamed = match mask {
            Some(mask) => head.forward_cross(
                x,
                key,
                value,
                &Attend::new().mask(mask).streaming(Streaming::default()),
            ),
            None => head.forward_cross(
                x,
                key,
                value,
                &Attend::new().streaming(Streaming::default()),
            ),
        };
        assert_eq!(streamed.unwrap_err(), full);
    }
}

#[test]
fn streaming_batch_errors_are_the_full_paths() {
    let (_, layer) = layer(1, 4, 2, 1);
    let x = Array3::<f64>::zeros((2, 3, 4));
    let fewer = Array3::<f64>::zeros((1, 3, 4));
    let narrow = Array3::<f64>::zeros((2, 3, 5));
    let padding = Array2::from_elem((2, 4), false);
    let mask = Mask::causal(4);
    let full = layer.forward_batch(&narrow, &Attend::new()).unwrap_err();
    let streamed = layer.forward_batch(&narrow, &Attend::new().streaming(Streaming::default()));
    assert_eq!(streamed.unwrap_err(), full);
    assert!(full.to_string().starts_with("X is 2x3x5"), "{full}");
    for (padding, mask) in [(Some(&padding), None), (None, Some(&mask))] {
        let full = layer
            .forward_batch(&x, &Attend::new().key_padding(padding).mask(mask))
            .unwrap_err();
        let streamed = layer.forward_batch(
            &x,
            &Attend::new()
                .key_padding(padding)
                .mask(mask)
                .streaming(Streaming::default()),
        );
        assert_eq!(streamed.unwrap_err(), full);
    }
    let full = layer
        .forward_cross_batch(&x, &fewer, &fewer, &Attend::new())
        .unwrap_err();
    let streamed = layer.forward_cross_batch(
        &x,
        &fewer,
        &fewer,
        &Attend::new().streaming(Streaming::default()),
    );
    assert_eq!(streamed.unwrap_err(), full);
}

#[test]
fn an_empty_batch_gives_an_empty_result() {
    let (_, layer) = layer(1, 4, 2, 1);
    let x = Array3::<f64>::zeros((0, 3, 4));
    let out = layer
        .forward_batch(&x, &Attend::new().streaming(Streaming::default()))
        .unwrap();
    assert_eq!(out.dim(), (0, 3, 4));
    assert_eq!(
        out,
        layer.forward_batch(&x, &Attend::new()).unwrap().result()
    );
}

/// Every test of this file again on each vector path this CPU runs, each in a process of
/// its own with `ATTENTION_LAB_SIMD` naming the path (the variable is the process's); a path
/// the CPU lacks is reported as not run, with the reason, and naming it is an error.
#[test]
fn every_test_passes_on_every_vector_path() {
    if std::env::var_os(SIMD_VAR).is_some() {
        return; // a child of this test
    }
    let (x, layer) = layer(5, 4, 2, 9);
    for simd in Simd::ALL {
        if let Some(why) = simd.missing() {
            eprintln!("not run: the {} path ({why})", simd.name());
            let forced = Streaming {
                simd,
                ..Streaming::default()
            };
            let error = layer
                .forward(&x, &Attend::new().streaming(forced))
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("Streaming::simd") && error.contains(why),
                "{error}"
            );
            continue;
        }
        let run = std::process::Command::new(std::env::current_exe().unwrap())
            .env(SIMD_VAR, simd.name())
            .args(["--test-threads", "2", "-q"])
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "the {} path: {}{}",
            simd.name(),
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        eprintln!("ran every test on the {} path", simd.name());
    }
    // A name that is no path: one line naming the variable and its value.
    let run = std::process::Command::new(std::env::current_exe().unwrap())
        .env(SIMD_VAR, "avx9")
        .args(["--exact", "the_path_variable_is_read_and_checked", "-q"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
}

/// Under `ATTENTION_LAB_SIMD`, the path it names, or an error naming it; without it, the
/// widest path this CPU has. Each path gives the full path's numbers.
#[test]
fn the_path_variable_is_read_and_checked() {
    let (x, layer) = layer(40, 16, 2, 2);
    let full = layer.forward(&x, &Attend::new()).unwrap().result().clone();
    let streamed = layer.forward(&x, &Attend::new().streaming(Streaming::default()));
    match std::env::var(SIMD_VAR).ok().as_deref() {
        Some("avx9") => {
            let error = streamed.unwrap_err().to_string();
            assert_eq!(
                error,
                "ATTENTION_LAB_SIMD is \"avx9\": it must be auto, avx512, avx2 or portable"
            );
        }
        Some(name) => {
            let named: Simd = name.parse().unwrap();
            assert_eq!(Simd::Auto.resolve().unwrap(), named);
            assert_agrees(&streamed.unwrap(), &full);
        }
        None => {
            let widest = Simd::ALL.into_iter().find(|s| s.missing().is_none());
            assert_eq!(Simd::Auto.resolve().ok(), widest);
            assert_agrees(&streamed.unwrap(), &full);
        }
    }
}
