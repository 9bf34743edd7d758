//! Seed 003: one 6x6 W_Q/W_K/W_V split by columns into H=1 or H=3 heads, naive softmax, and
//! the permutation experiment (swapping the first two tokens).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use attention_lab::prelude::*;
use common::{assert_close, assert_layer, assert_numpy, golden, matrix};
use serde_json::Value;

fn split(g: &Value, h: usize) -> MultiHead {
    let (wq, wk, wv) = (matrix(&g["wq"]), matrix(&g["wk"]), matrix(&g["wv"]));
    MultiHead::split(&wq, &wk, &wv, h, None)
        .unwrap()
        .with_softmax(Softmax::Naive)
}

fn check(g: &Value, x_key: &str, layer_key: &str, h: usize) {
    let layer = split(g, h);
    let theirs = &g[layer_key];
    // NumPy indexes W_Q[:, idx] for each block of columns: the same blocks as ours.
    for (i, (ours, t)) in layer
        .heads()
        .iter()
        .zip(theirs["heads"].as_array().unwrap())
        .enumerate()
    {
        assert_numpy(
            &format!("{layer_key} head {} W_Q block", i + 1),
            ours.wq(),
            &t["wq"],
        );
    }
    let out = layer.forward(&matrix(&g[x_key]), &Attend::new()).unwrap();
    assert_layer(layer_key, &out, theirs);
    // No W_O: no projected output, and the layer's result is the concatenation.
    assert_eq!(out.output, None);
    assert_eq!(
        out.result(),
        &out.concat,
        "no W_O: the result is the concatenation"
    );
}

#[test]
fn one_head_matches_numpy() {
    check(&golden("003"), "x", "h1", 1);
}

#[test]
fn three_heads_match_numpy() {
    check(&golden("003"), "x", "h3", 3);
}

#[test]
fn permuted_input_matches_numpy() {
    let g = golden("003");
    let perm: Vec<usize> = serde_json::from_value(g["perm"].clone()).unwrap();
    assert_numpy(
        "X after permutation",
        &matrix(&g["x"]).select(Axis(0), &perm),
        &g["x_perm"],
    );
    check(&g, "x_perm", "h1_perm", 1);
    check(&g, "x_perm", "h3_perm", 3);
}

/// The document's answer to its second question: permuting the tokens permutes the output
/// rows and both the rows and columns of every head's weights.
#[test]
fn permutation_permutes_outputs_and_weights() {
    let g = golden("003");
    let perm: Vec<usize> = serde_json::from_value(g["perm"].clone()).unwrap();
    let x = matrix(&g["x"]);
    for h in [1, 3] {
        let layer = split(&g, h);
        let plain = layer.forward(&x, &Attend::new()).unwrap();
        let permuted = layer
            .forward(&x.select(Axis(0), &perm), &Attend::new())
            .unwrap();
        // Equal up to rounding: a permuted row is summed in another order.
        assert_close(
            "output",
            permuted.result(),
            &plain.result().select(Axis(0), &perm),
        );
        for (p, o) in permuted.heads.iter().zip(&plain.heads) {
            assert_close(
                "weights",
                &p.weights,
                &o.weights.select(Axis(0), &perm).select(Axis(1), &perm),
            );
        }
    }
}
