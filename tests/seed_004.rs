//! Seed 004: a 2x2 integer input, two heads with 2x2 integer projections, naive softmax with
//! d_k taken from Q, and a 4x2 W_O.

mod common;

use attention_lab::prelude::*;
use common::{assert_layer, golden, golden_layer, matrix};

#[test]
fn every_intermediate_matches_numpy() {
    let g = golden("004");
    let out = golden_layer(&g, Softmax::Naive)
        .forward(&matrix(&g["x"]), &Attend::new())
        .unwrap();
    assert_layer("seed 004", &out, &g);
}
