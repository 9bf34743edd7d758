//! Both softmax forms against NumPy on overflowing, NaN, inf, signed-zero and empty rows
//! (tests/data/seeds/softmax_edges.json, written by scripts/seed_goldens.py).

mod common;

use attention_lab::prelude::*;
use common::{assert_close, decode};
use serde_json::Value;

#[test]
fn edge_rows_match_numpy() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/seeds/softmax_edges.json"
    );
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let scores = decode(&case["scores"]);
        let what = format!("scores {scores}");
        assert_close(
            &format!("stable softmax of {what}"),
            &softmax(&scores),
            &decode(&case["stable"]),
        );
        assert_close(
            &format!("scipy softmax of {what}"),
            &softmax(&scores),
            &decode(&case["scipy"]),
        );
        assert_close(
            &format!("naive softmax of {what}"),
            &softmax_naive(&scores),
            &decode(&case["naive"]),
        );
    }
}

/// NumPy's np.max raises on rows with no columns; we define the softmax of an n x 0 matrix
/// as an n x 0 matrix, so attention with no keys is well defined.
#[test]
fn rows_without_columns_stay_empty() {
    let empty = Array2::<f64>::zeros((2, 0));
    assert_eq!(softmax(&empty).dim(), (2, 0));
    assert_eq!(softmax_naive(&empty).dim(), (2, 0));
}

#[test]
fn views_are_accepted() {
    let scores = array![[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]];
    let w = softmax(scores.slice(s![.., ..2]));
    assert_eq!(w, softmax(&array![[1.0, 2.0], [3.0, 2.0]]));
    assert_eq!(Softmax::Stable.apply(scores.view()), softmax(&scores));
}
