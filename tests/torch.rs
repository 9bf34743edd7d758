//! The masked layer against PyTorch's own numbers (scripts/torch_goldens.py, float64 on CPU).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use std::path::PathBuf;

use attention_lab::prelude::*;
use common::{assert_close, decode, matrix, tensor};
use serde_json::Value;

fn golden() -> Value {
    golden_file("masks.json")
}

fn golden_file(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn items(v: &Value) -> &Vec<Value> {
    v.as_array().expect("a list")
}

/// A case's key_padding_mask (batch x key tokens, `true` = padding), if it has one.
fn torch_padding(case: &Value) -> Option<Array2<bool>> {
    let rows: Vec<Vec<bool>> = serde_json::from_value(case["padded"].clone()).ok()?;
    let keys = rows[0].len();
    Some(Array2::from_shape_fn((rows.len(), keys), |(b, j)| {
        rows[b][j]
    }))
}

/// A case's attn_mask, shared by every item: causal or none.
fn torch_attn_mask(case: &Value, queries: usize) -> Option<Mask> {
    case["causal"]
        .as_bool()
        .unwrap()
        .then(|| Mask::causal(queries))
}

/// A batch of nested JSON lists as a (batch, tokens, features) array.
fn batch(v: &Value) -> Array3<f64> {
    tensor(v)
        .into_dimensionality()
        .expect("a batch of matrices")
}

/// The batch's result and weights, per head and averaged, against torch's.
fn assert_batch_matches(name: &str, out: &BatchOutput, case: &Value) {
    let items = items(&case["x"]).len();
    assert!((1..=3).contains(&items), "{name}: a batch of 1 to 3");
    assert_eq!(out.items().len(), items);
    assert_close(name, &out.result(), &batch(&case["output"]));
    let weights: Array4<f64> = tensor(&case["weights"]).into_dimensionality().unwrap();
    assert_close(
        &format!("{name} weights per head"),
        &out.weights(),
        &weights,
    );
    assert_close(
        &format!("{name} averaged weights"),
        &out.averaged_weights(),
        &batch(&case["averaged"]),
    );
}

#[test]
fn goldens_come_from_torch_2() {
    assert!(golden()["torch"].as_str().unwrap().starts_with("2."));
    assert!(golden_file("cross.json")["torch"]
        .as_str()
        .unwrap()
        .starts_with("2."));
}

fn vector(v: &Value) -> Array1<f64> {
    items(v).iter().map(|x| x.as_f64().unwrap()).collect()
}

/// The layer a case of cross.json saved: packed or separate input projections, with biases.
fn torch_layer(case: &Value) -> MultiHead {
    let in_proj = if case["in_proj_weight"].is_null() {
        InProj::Separate {
            q_proj_weight: matrix(&case["q_proj_weight"]),
            k_proj_weight: matrix(&case["k_proj_weight"]),
            v_proj_weight: matrix(&case["v_proj_weight"]),
        }
    } else {
        InProj::Packed(matrix(&case["in_proj_weight"]))
    };
    let weights = TorchWeights {
        in_proj,
        in_proj_bias: Some(vector(&case["in_proj_bias"])),
        out_proj_weight: matrix(&case["out_proj_weight"]),
        out_proj_bias: Some(vector(&case["out_proj_bias"])),
    };
    MultiHead::from_torch_weights(&weights, case["h"].as_u64().unwrap() as usize).unwrap()
}

#[test]
fn biases_and_cross_attention_match_torch() {
    let g = golden_file("cross.json");
    let mut kinds = (false, false);
    for case in items(&g["mha"]) {
        let name = case["name"].as_str().unwrap();
        let layer = torch_layer(case);
        let separate = !case["q_proj_weight"].is_null();
        kinds = (kinds.0 | separate, kinds.1 | !separate);
        let (x, key, value) = (
            batch(&case["x"]),
            batch(&case["key"]),
            batch(&case["value"]),
        );
        let padding = torch_padding(case);
        let mask = torch_attn_mask(case, x.dim().1);
        let out = if separate {
            layer.forward_cross_batch(
                &x,
                &key,
                &value,
                &Attend::new()
                    .key_padding(padding.as_ref())
                    .mask(mask.as_ref()),
            )
        } else {
            assert_eq!((&x, &x), (&key, &value), "{name}: self-attention");
            layer.forward_batch(
                &x,
                &Attend::new()
                    .key_padding(padding.as_ref())
                    .mask(mask.as_ref()),
            )
        }
        .unwrap();
        assert_batch_matches(name, &out, case);
        if !separate {
            // The streaming path (one item at a time) with biases and masks gives the same.
            for (b, item) in out.items().iter().enumerate() {
                let x = x.index_axis(Axis(0), b);
                let padded = padding
                    .as_ref()
                    .map_or(vec![false; x.nrows()], |p| p.row(b).to_vec());
                let mut item_mask = Mask::key_padding(x.nrows(), &padded);
                if let Some(shared) = &mask {
                    item_mask = shared.and(&item_mask).unwrap();
                }
                let streamed = layer
                    .forward(
                        x,
                        &Attend::new()
                            .mask(&item_mask)
                            .streaming(Streaming::default()),
                    )
                    .unwrap();
                assert_close(
                    &format!("{name} item {b} streamed"),
                    &streamed,
                    item.result(),
                );
            }
        }
    }
    assert_eq!(kinds, (true, true), "both packed and separate projections");
}

#[test]
fn multihead_attention_with_masks_matches_torch() {
    let g = golden();
    for case in items(&g["mha"]) {
        let name = case["name"].as_str().unwrap();
        let h = case["h"].as_u64().unwrap() as usize;
        let layer = MultiHead::from_torch(
            &matrix(&case["in_proj_weight"]),
            &matrix(&case["out_proj_weight"]),
            h,
        )
        .unwrap();
        let x = batch(&case["x"]);
        let mask = torch_attn_mask(case, x.dim().1);
        let out = layer
            .forward_batch(
                &x,
                &Attend::new()
                    .key_padding(torch_padding(case).as_ref())
                    .mask(mask.as_ref()),
            )
            .unwrap();
        assert_batch_matches(name, &out, case);
    }
}

#[test]
fn fully_masked_row_matches_sdpa() {
    let g = &golden()["sdpa_fully_masked"];
    // SDPA's boolean mask means "may attend": flip it for Mask::from_blocked.
    let allowed: Vec<Vec<bool>> = serde_json::from_value(g["allowed"].clone()).unwrap();
    let blocked = Array2::from_shape_fn((allowed.len(), allowed[0].len()), |(i, j)| !allowed[i][j]);
    let a = scaled_dot_product_attention(
        &matrix(&g["q"]),
        &matrix(&g["k"]),
        &matrix(&g["v"]),
        &Attend::new().mask(&Mask::from_blocked(&blocked)),
    )
    .unwrap();
    assert_close("SDPA output", &a.output, &matrix(&g["output"]));
    assert!(a.weights.row(1).iter().all(|&w| w == 0.0));
    assert!(a.output.row(1).iter().all(|&z| z == 0.0));
}

#[test]
fn positional_encoding_matches_torch() {
    let g = &golden()["positional"];
    let pe = positional_encoding(
        g["tokens"].as_u64().unwrap() as usize,
        g["d_model"].as_u64().unwrap() as usize,
    );
    assert_close("positional encoding", &pe, &matrix(&g["pe"]));
}

/// Notebook 005's cell on conventions: each library's numbers on one example, made here with
/// `Mask` and `softmax`, against PyTorch running each convention.
#[test]
fn mask_conventions_of_notebook_005_match_torch() {
    let g = golden_file("conventions.json");
    let (q, k, v) = (matrix(&g["q"]), matrix(&g["k"]), matrix(&g["v"]));
    let blocked: Vec<Vec<bool>> = serde_json::from_value(g["blocked"].clone()).unwrap();
    let blocked = Array2::from_shape_fn((2, 3), |(i, j)| blocked[i][j]);
    let mask = Mask::from_blocked(&blocked);
    let ours = scaled_dot_product_attention(&q, &k, &v, &Attend::new().mask(&mask)).unwrap();
    // SDPA (PyTorch 2.5 and later) gives what this library gives.
    assert_close("SDPA output", &ours.output, &decode(&g["sdpa"]["output"]));
    assert!(ours.output.row(1).iter().all(|&z| z == 0.0));
    // nn.MultiheadAttention: the softmax of a row of -inf, NaN.
    let mha_weights = softmax(&ours.scores);
    assert_close("MHA weights", &mha_weights, &decode(&g["mha"]["weights"]));
    let mha_output = mha_weights.dot(&v);
    assert_close("MHA output", &mha_output, &decode(&g["mha"]["output"]));
    assert!(mha_output.row(1).iter().all(|z| z.is_nan()));
    for (name, fill) in [("d2l", -1e6), ("burn", -1e4)] {
        let theirs =
            scaled_dot_product_attention(&q, &k, &v, &Attend::new().mask(&mask.with_fill(fill)))
                .unwrap();
        assert_close(name, &theirs.weights, &decode(&g[name]["weights"]));
        assert_close(name, &theirs.output, &decode(&g[name]["output"]));
    }
}
