//! Seed 001: three tokens of width 5, one head in per-token and matrix form (inputs as the
//! document prints them), scipy's softmax.

mod common;

use attention_lab::prelude::*;
use common::{assert_numpy, golden, matrix};

#[test]
fn matrix_form_matches_numpy() {
    let g = golden("001");
    let head = Head::new(matrix(&g["wq"]), matrix(&g["wk"]), matrix(&g["wv"])).unwrap();
    let out = head.forward(&matrix(&g["w"]), &Attend::new()).unwrap();
    assert_numpy("Q", &out.q, &g["q"]);
    assert_numpy("K", &out.k, &g["k"]);
    assert_numpy("V", &out.v, &g["v"]);
    assert_numpy("attention", &out.z, &g["attention"]);
}

/// q_i = w_i^T W_Q for one token at a time gives the rows of the matrix form, bit for bit.
#[test]
fn per_token_form_equals_matrix_form() {
    let g = golden("001");
    let w = matrix(&g["w"]);
    for name in ["q", "k", "v"] {
        let proj = matrix(&g[format!("w{name}").as_str()]);
        let whole = w.dot(&proj);
        for (i, token) in w.rows().into_iter().enumerate() {
            let column = token.to_owned().insert_axis(Axis(1)); // w_i as NumPy's (5, 1) array
            let row = column.t().dot(&proj);
            assert_eq!(row.row(0), whole.row(i), "{name}{}", i + 1);
        }
        assert_numpy(&format!("per-token {name}"), &whole, &g["per_token"][name]);
    }
}
