//! Helpers shared by the seed tests: NumPy's golden values and a relative comparison.
#![allow(dead_code)]

use std::path::PathBuf;

use attention_lab::prelude::{Head, MultiHead, MultiHeadOutput, Softmax};
use ndarray::{Array, Array2, ArrayD, Dimension, IxDyn};
use serde_json::Value;

/// NumPy agrees with us to this relative error on every seed value.
pub const RTOL: f64 = 1e-12;

/// The golden values written by scripts/seed_goldens.py for one seed document.
pub fn golden(seed: &str) -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/seeds/{seed}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A JSON list of rows as a matrix.
pub fn matrix(v: &Value) -> Array2<f64> {
    let rows = v.as_array().expect("a list of rows");
    let ncols = rows
        .first()
        .map_or(0, |r| r.as_array().expect("a row").len());
    let flat: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            r.as_array()
                .expect("a row")
                .iter()
                .map(|x| x.as_f64().expect("a number"))
        })
        .collect();
    Array2::from_shape_vec((rows.len(), ncols), flat).expect("rectangular rows")
}

/// Nested JSON lists of any depth (a list of matrices, a batch of them) as an array of
/// that many dimensions.
pub fn tensor(v: &Value) -> ArrayD<f64> {
    let mut shape = Vec::new();
    let mut first = v;
    while let Some(list) = first.as_array() {
        shape.push(list.len());
        match list.first() {
            Some(inner) => first = inner,
            None => break,
        }
    }
    fn flatten(v: &Value, out: &mut Vec<f64>) {
        match v.as_array() {
            Some(list) => list.iter().for_each(|x| flatten(x, out)),
            None => out.push(v.as_f64().expect("a number")),
        }
    }
    let mut flat = Vec::new();
    flatten(v, &mut flat);
    ArrayD::from_shape_vec(IxDyn(&shape), flat).expect("nested lists of equal lengths")
}

/// A matrix stored as `{"shape": [r, c], "rows": [["1.0", "nan", ...], ...]}` (Python reprs,
/// since JSON has no NaN or inf).
pub fn decode(v: &Value) -> Array2<f64> {
    let shape: (usize, usize) = serde_json::from_value(v["shape"].clone()).expect("a 2-D shape");
    let rows: Vec<Vec<String>> =
        serde_json::from_value(v["rows"].clone()).expect("rows of strings");
    let flat = rows
        .iter()
        .flatten()
        .map(|s| s.parse().expect("a float repr"))
        .collect();
    Array2::from_shape_vec(shape, flat).expect("rows that fill the shape")
}

/// Asserts `ours` equals NumPy's golden `theirs` to [`RTOL`] (see [`assert_close`]).
pub fn assert_numpy(what: &str, ours: &Array2<f64>, theirs: &Value) {
    assert_close(what, ours, &matrix(theirs));
}

/// Asserts two arrays (matrices, or batches of them) agree elementwise to [`RTOL`] relative
/// error (exactly equal values, zeros included, always pass; NaN must meet NaN).
pub fn assert_close<D: Dimension>(what: &str, ours: &Array<f64, D>, theirs: &Array<f64, D>) {
    assert_eq!(ours.shape(), theirs.shape(), "{what}: shape");
    for ((idx, &a), &b) in ours.indexed_iter().zip(theirs.iter()) {
        let ok =
            a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= RTOL * a.abs().max(b.abs());
        assert!(
            ok,
            "{what}{idx:?}: ours {a:e}, NumPy {b:e}\nours:\n{ours}\nNumPy:\n{theirs}"
        );
    }
}

/// The layer a golden file describes: its heads' W_Q, W_K, W_V and its W_O, if any.
pub fn golden_layer(g: &Value, softmax: Softmax) -> MultiHead {
    let heads = g["heads"]
        .as_array()
        .expect("a list of heads")
        .iter()
        .map(|h| {
            let head = Head::new(matrix(&h["wq"]), matrix(&h["wk"]), matrix(&h["wv"]));
            head.expect("golden projections fit").with_softmax(softmax)
        })
        .collect();
    let wo = g.get("wo").map(matrix);
    MultiHead::new(heads, wo).expect("golden heads fit W_O")
}

/// Asserts every intermediate of `out` (each head's Q, K, V, scores, weights, Z; the
/// concatenation; the output when the golden file has one) equals NumPy's.
pub fn assert_layer(what: &str, out: &MultiHeadOutput, g: &Value) {
    let heads = g["heads"].as_array().expect("a list of heads");
    assert_eq!(out.heads.len(), heads.len(), "{what}: number of heads");
    for (i, (ours, theirs)) in out.heads.iter().zip(heads).enumerate() {
        let pairs = [
            ("Q", &ours.q, "q"),
            ("K", &ours.k, "k"),
            ("V", &ours.v, "v"),
            ("scores", &ours.scores, "scores"),
            ("weights", &ours.weights, "weights"),
            ("Z", &ours.z, "z"),
        ];
        for (name, m, key) in pairs {
            assert_numpy(&format!("{what} head {} {name}", i + 1), m, &theirs[key]);
        }
    }
    assert_numpy(&format!("{what} concatenation"), &out.concat, &g["concat"]);
    if let Some(output) = g.get("output") {
        assert_numpy(&format!("{what} output"), out.result(), output);
    }
}

/// Asserts `ours` is within `tol` of `theirs` relative to the larger magnitude (at least 1,
/// so values near 0 compare absolutely), and returns the worst such error.
pub fn within<D: Dimension>(
    what: &str,
    ours: &Array<f64, D>,
    theirs: &Array<f64, D>,
    tol: f64,
) -> f64 {
    assert_eq!(ours.shape(), theirs.shape(), "{what}: shape");
    let worst = ours
        .iter()
        .zip(theirs)
        .map(|(a, b)| (a - b).abs() / a.abs().max(b.abs()).max(1.0))
        .fold(0.0, f64::max);
    assert!(
        worst <= tol,
        "{what}: off by {worst:e} (relative), more than {tol:e}"
    );
    worst
}

/// A JSON list of token ids.
pub fn ids(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("a list of ids")
        .iter()
        .map(|i| i.as_u64().expect("an id") as usize)
        .collect()
}
