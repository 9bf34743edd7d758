//! Seed 000 (and the problem sheet 002, which asks for the same numbers): two heads on a 2x4
//! input, stable softmax, concatenation and a 6x4 W_O.

mod common;

use attention_lab::prelude::*;
use common::{assert_layer, assert_numpy, golden, golden_layer, matrix};

fn layer(g: &serde_json::Value) -> MultiHead {
    golden_layer(g, Softmax::Stable)
}

#[test]
fn every_intermediate_matches_numpy() {
    let g = golden("000");
    let out = layer(&g).forward(&matrix(&g["x"]), &Attend::new()).unwrap();
    assert_layer("seed 000", &out, &g);
}

/// The problem sheet's parts (a) to (d) are answered by the same layer one step at a time.
#[test]
fn problem_sheet_002_step_by_step() {
    let g = golden("000");
    let x = matrix(&g["x"]);
    let layer = layer(&g);
    let mut zs = Vec::new();
    for (head, theirs) in layer.heads().iter().zip(g["heads"].as_array().unwrap()) {
        // (a) Q_i, K_i, V_i
        let (q, k, v) = (x.dot(head.wq()), x.dot(head.wk()), x.dot(head.wv()));
        assert_numpy("Q", &q, &theirs["q"]);
        // (b) Z_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i
        let a = scaled_dot_product_attention(&q, &k, &v, &Attend::new()).unwrap();
        assert_numpy("Z_i", &a.output, &theirs["z"]);
        zs.push(a.output);
    }
    // (c) Z = [Z_0 Z_1]; (d) Z W_o
    let z = concatenate(Axis(1), &[zs[0].view(), zs[1].view()]).unwrap();
    assert_numpy("Z", &z, &g["concat"]);
    assert_numpy("Z W_o", &z.dot(layer.wo().unwrap()), &g["output"]);
}
