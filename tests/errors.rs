//! Every bad input gives an `AttentionError` whose message names the matrices and shapes.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use attention_lab::prelude::*;
use common::{assert_close, decode};

fn zeros(r: usize, c: usize) -> Array2<f64> {
    Array2::zeros((r, c))
}

fn head(d: usize, dk: usize, dv: usize) -> Head {
    Head::new(zeros(d, dk), zeros(d, dk), zeros(d, dv)).unwrap()
}

fn message<T: std::fmt::Debug>(r: Result<T, AttentionError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn x_that_does_not_fit_w_q_names_the_head() {
    let layer = MultiHead::new(vec![head(4, 3, 3), head(4, 3, 3)], None).unwrap();
    assert_eq!(
        message(layer.forward(&zeros(2, 5), &Attend::new())),
        "X is 2x5 but W_Q of head 1 is 4x3: the columns of X must equal the rows of W_Q"
    );
    assert_eq!(
        message(head(4, 3, 3).forward(&zeros(2, 5), &Attend::new())),
        "X is 2x5 but W_Q is 4x3: the columns of X must equal the rows of W_Q"
    );
}

#[test]
fn projections_that_disagree() {
    assert_eq!(
        message(Head::new(zeros(4, 3), zeros(4, 2), zeros(4, 3))),
        "W_Q is 4x3 but W_K is 4x2: W_Q and W_K must have the same number of columns (d_k)"
    );
    assert_eq!(
        message(Head::new(zeros(4, 3), zeros(5, 3), zeros(4, 3))),
        "W_Q is 4x3 but W_K is 5x3: W_Q and W_K must have the same number of rows (the input width)"
    );
    assert_eq!(
        message(Head::new(zeros(4, 3), zeros(4, 3), zeros(3, 3))),
        "W_Q is 4x3 but W_V is 3x3: W_Q and W_V must have the same number of rows (the input width)"
    );
}

#[test]
fn split_that_does_not_divide() {
    let w = zeros(6, 6);
    assert_eq!(
        message(MultiHead::split(&w, &w, &w, 4, None)),
        "cannot split W_Q (6x6) into 4 heads: 4 does not divide its 6 columns"
    );
    assert_eq!(
        message(MultiHead::split(&w, &w, &w, 0, None)),
        "cannot split W_Q (6x6) into 0 heads: h must be at least 1"
    );
    let wv = zeros(6, 4);
    assert_eq!(
        message(MultiHead::split(&w, &w, &wv, 3, None)),
        "cannot split W_V (6x4) into 3 heads: 3 does not divide its 4 columns"
    );
}

#[test]
fn zero_heads() {
    assert_eq!(
        message(MultiHead::new(vec![], None)),
        "a multi-head layer needs at least one head, but none was given"
    );
}

#[test]
fn w_o_that_does_not_fit_the_heads() {
    assert_eq!(
        message(MultiHead::new(
            vec![head(4, 3, 3), head(4, 3, 2)],
            Some(zeros(6, 4))
        )),
        "the heads' values are 3 + 2 = 5 columns wide together but W_O is 6x4: \
         the rows of W_O must equal the total width of the heads' values"
    );
}

#[test]
fn heads_with_different_input_widths() {
    assert_eq!(
        message(MultiHead::new(vec![head(4, 3, 3), head(5, 3, 3)], None)),
        "W_Q of head 2 is 5x3 but W_Q of head 1 is 4x3: \
         all heads must take inputs of the same width (rows of W_Q)"
    );
}

#[test]
fn q_and_k_of_different_widths() {
    assert_eq!(
        message(scaled_dot_product_attention(
            &zeros(2, 3),
            &zeros(2, 4),
            &zeros(2, 3),
            &Attend::new()
        )),
        "Q is 2x3 but K is 2x4: Q and K must have the same number of columns (d_k)"
    );
    assert_eq!(
        message(scaled_dot_product_attention(
            &zeros(2, 3),
            &zeros(3, 3),
            &zeros(2, 3),
            &Attend::new()
        )),
        "K is 3x3 but V is 2x3: K and V must have the same number of rows (one per token)"
    );
}

/// Zero tokens is not an error: every result has zero rows and the expected columns.
#[test]
fn zero_tokens_give_empty_results() {
    let layer = MultiHead::new(vec![head(4, 3, 3), head(4, 3, 2)], Some(zeros(5, 4))).unwrap();
    let out = layer.forward(&zeros(0, 4), &Attend::new()).unwrap();
    assert_eq!(out.heads[0].q.dim(), (0, 3));
    assert_eq!(out.heads[1].weights.dim(), (0, 0));
    assert_eq!(out.heads[1].z.dim(), (0, 2));
    assert_eq!(out.concat.dim(), (0, 5));
    assert_eq!(out.result().dim(), (0, 4));
}

/// Queries without keys: NumPy's `w @ V` of an n x 0 by 0 x d product is all zeros.
#[test]
fn zero_keys_give_zero_output() {
    let a = scaled_dot_product_attention(&zeros(2, 3), &zeros(0, 3), &zeros(0, 2), &Attend::new())
        .unwrap();
    assert_eq!(a.weights.dim(), (2, 0));
    assert_eq!(a.output, zeros(2, 2));
}

/// NaN and inf propagate exactly as in NumPy (tests/data/seeds/propagation.json).
#[test]
fn nan_and_inf_propagate_as_in_numpy() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/seeds/propagation.json"
    );
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let head = Head::new(decode(&g["wq"]), decode(&g["wk"]), decode(&g["wv"])).unwrap();
    for case in ["nan", "inf", "neg_inf"] {
        let c = &g[case];
        let out = head.forward(&decode(&c["x"]), &Attend::new()).unwrap();
        let pairs = [
            ("q", &out.q),
            ("k", &out.k),
            ("v", &out.v),
            ("scores", &out.scores),
            ("weights", &out.weights),
            ("z", &out.z),
        ];
        for (name, ours) in pairs {
            assert_close(&format!("{case} {name}"), ours, &decode(&c[name]));
        }
    }
}

#[test]
fn cross_attention_inputs_that_do_not_fit() {
    let cross = Head::cross(zeros(4, 2), zeros(5, 2), zeros(3, 6)).unwrap();
    assert_eq!(
        message(cross.forward_cross(&zeros(2, 4), &zeros(7, 6), &zeros(7, 3), &Attend::new())),
        "key is 7x6 but W_K is 5x2: the columns of the key input must equal the rows of W_K"
    );
    assert_eq!(
        message(cross.forward_cross(&zeros(2, 4), &zeros(7, 5), &zeros(6, 3), &Attend::new())),
        "key is 7x5 but value is 6x3: key and value must have the same number of rows (one per token)"
    );
    let padding = Mask::key_padding(2, &[false; 6]);
    assert_eq!(
        message(cross.forward_cross(
            &zeros(2, 4),
            &zeros(7, 5),
            &zeros(7, 3),
            &Attend::new().mask(&padding)
        )),
        "the mask is 2x6 but the scores (queries x keys) is 2x7: \
         the mask must have one row per query and one column per key"
    );
    // A cross head run as self-attention, on either path.
    let layer = MultiHead::new(vec![cross], None).unwrap();
    let want = "X is 2x4 but W_K of head 1 is 5x2: \
                the columns of the key input must equal the rows of W_K";
    assert_eq!(message(layer.forward(&zeros(2, 4), &Attend::new())), want);
    assert_eq!(
        message(layer.forward(&zeros(2, 4), &Attend::new().streaming(Streaming::default()))),
        want
    );
}

#[test]
fn biases_and_torch_arrays_that_do_not_fit() {
    assert_eq!(
        message(head(4, 3, 2).with_biases(Array1::zeros(3), Array1::zeros(3), Array1::zeros(3))),
        "b_V is 1x3 but W_V is 4x2: a bias must have one entry per column of its projection"
    );
    let w = zeros(4, 4);
    assert_eq!(
        message(
            MultiHead::split(&w, &w, &w, 2, None)
                .unwrap()
                .with_output_bias(Array1::zeros(4))
        ),
        "b_O is 1x4 but W_O is 0x0: an output bias needs W_O, with one entry per column of W_O"
    );
    let separate = |k: Array2<f64>| TorchWeights {
        in_proj: InProj::Separate {
            q_proj_weight: zeros(4, 4),
            k_proj_weight: k,
            v_proj_weight: zeros(4, 3),
        },
        in_proj_bias: Some(Array1::zeros(12)),
        out_proj_weight: zeros(4, 4),
        out_proj_bias: Some(Array1::zeros(4)),
    };
    assert!(MultiHead::from_torch_weights(&separate(zeros(4, 5)), 2).is_ok());
    assert_eq!(
        message(MultiHead::from_torch_weights(&separate(zeros(5, 4)), 2)),
        "k_proj_weight is 5x4 but out_proj.weight is 4x4: out_proj.weight must be E x E, \
         q_proj_weight E x E, k_proj_weight E x kdim and v_proj_weight E x vdim"
    );
    let mut short_bias = separate(zeros(4, 5));
    short_bias.in_proj_bias = Some(Array1::zeros(8));
    assert_eq!(
        message(MultiHead::from_torch_weights(&short_bias, 2)),
        "in_proj_bias is 1x8 but out_proj.weight is 4x4: in_proj_bias must have 3E entries"
    );
    short_bias.in_proj_bias = None;
    short_bias.out_proj_bias = Some(Array1::zeros(3));
    assert_eq!(
        message(MultiHead::from_torch_weights(&short_bias, 2)),
        "out_proj.bias is 1x3 but out_proj.weight is 4x4: out_proj.bias must have E entries"
    );
    assert_eq!(
        message(MultiHead::from_torch_weights(&separate(zeros(4, 5)), 3)),
        "cannot split W_Q (4x4) into 3 heads: 3 does not divide its 4 columns"
    );
}

/// A million tokens: Q, K and V are small (16 MB each), but the scores would be 10^6 x 10^6,
/// 8 TB. The forward pass says so instead of aborting on the allocation.
#[test]
fn scores_too_large_for_memory_are_an_error_naming_them() {
    let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2)).unwrap();
    let x = Array2::<f64>::zeros((1_000_000, 2));
    let err = head.forward(&x, &Attend::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "scores (Q K^T) would be 1000000x1000000, 8000000000000 bytes: more than memory can hold"
    );
}

#[test]
fn batches_and_their_masks_that_do_not_fit_name_the_batch_shapes() {
    let layer = MultiHead::new(vec![head(4, 3, 3), head(4, 3, 3)], None).unwrap();
    let x = Array3::<f64>::zeros((3, 4, 4));
    let padding = |items, keys| Array2::from_elem((items, keys), false);
    assert_eq!(
        message(layer.forward_batch(&x, &Attend::new().key_padding(&padding(2, 4)))),
        "the key padding mask is 2x4 but X is 3x4x4: the key padding mask must have one row \
         per batch item and one column per key token"
    );
    assert_eq!(
        message(layer.forward_batch(&x, &Attend::new().key_padding(&padding(3, 5)))),
        "the key padding mask is 3x5 but X is 3x4x4: the key padding mask must have one row \
         per batch item and one column per key token"
    );
    assert_eq!(
        message(layer.forward_batch(&x, &Attend::new().mask(&Mask::causal(3)))),
        "the mask is 3x3 but the scores (queries x keys) is 4x4: the mask must have one row per \
         query and one column per key"
    );
    assert_eq!(
        message(layer.forward_batch(&Array3::zeros((3, 2, 5)), &Attend::new())),
        "X is 3x2x5 but W_Q of head 1 is 4x3: the columns of X must equal the rows of W_Q"
    );
    let cross = MultiHead::new(
        vec![Head::cross(zeros(4, 2), zeros(3, 2), zeros(2, 2)).unwrap()],
        None,
    )
    .unwrap();
    let (key, value) = (Array3::zeros((3, 5, 3)), Array3::zeros((3, 5, 2)));
    assert_eq!(
        message(cross.forward_cross_batch(&x, &Array3::zeros((2, 5, 3)), &value, &Attend::new())),
        "key is 2x5x3 but X is 3x4x4: X, key and value must have the same number of batch items"
    );
    assert_eq!(
        message(cross.forward_cross_batch(&x, &key, &Array3::zeros((3, 6, 2)), &Attend::new())),
        "key is 3x5x3 but value is 3x6x2: key and value must have the same number of rows (one \
         per token)"
    );
    assert_eq!(
        message(cross.forward_cross_batch(&x, &key, &Array3::zeros((3, 5, 1)), &Attend::new())),
        "value is 3x5x1 but W_V of head 1 is 2x2: the columns of the value input must equal the \
         rows of W_V"
    );
    assert_eq!(
        message(cross.forward_cross_batch(
            &x,
            &key,
            &value,
            &Attend::new().key_padding(&padding(3, 4))
        )),
        "the key padding mask is 3x4 but key is 3x5x3: the key padding mask must have one row \
         per batch item and one column per key token"
    );
    // An empty batch is no error: its stacked arrays have no items.
    let out = cross
        .forward_cross_batch(
            &Array3::zeros((0, 4, 4)),
            &Array3::zeros((0, 5, 3)),
            &Array3::zeros((0, 5, 2)),
            &Attend::new(),
        )
        .unwrap();
    assert_eq!(out.result().dim(), (0, 4, 2));
    assert_eq!(out.weights().dim(), (0, 1, 4, 5));
}
