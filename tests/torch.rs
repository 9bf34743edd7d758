//! The masked layer against PyTorch's own numbers (scripts/torch_goldens.py, float64 on CPU).

mod common;

use std::path::PathBuf;

use attention_lab::prelude::*;
use common::{assert_close, decode, matrix};
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

/// The mask nn.MultiheadAttention applied to batch item `b`, for (queries, keys) tokens.
fn torch_mask(case: &Value, b: usize, (queries, keys): (usize, usize)) -> Mask {
    let padded: Vec<bool> = match case["padded"].as_array() {
        Some(p) => items(&p[b]).iter().map(|v| v.as_bool().unwrap()).collect(),
        None => vec![false; keys],
    };
    let padding = Mask::key_padding(queries, &padded);
    if case["causal"].as_bool().unwrap() {
        Mask::causal(queries).and(&padding).unwrap()
    } else {
        padding
    }
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
        let batch = items(&case["x"]);
        assert!((1..=3).contains(&batch.len()));
        for (b, x) in batch.iter().enumerate() {
            let (x, key, value) = (
                matrix(x),
                matrix(&case["key"][b]),
                matrix(&case["value"][b]),
            );
            let tokens = (x.nrows(), key.nrows());
            let mask = (tokens.0 == tokens.1 || !case["padded"].is_null())
                .then(|| torch_mask(case, b, tokens));
            let out = if separate {
                layer.forward_cross(&x, &key, &value, mask.as_ref())
            } else {
                assert_eq!((&x, &x), (&key, &value), "{name}: self-attention");
                match &mask {
                    Some(mask) => layer.forward_masked(&x, mask),
                    None => layer.forward(&x),
                }
            }
            .unwrap();
            let what = format!("{name} item {b}");
            assert_close(&what, out.result(), &matrix(&case["output"][b]));
            for (i, head) in out.heads.iter().enumerate() {
                let theirs = matrix(&case["weights"][b][i]);
                assert_close(&format!("{what} head {i} weights"), &head.weights, &theirs);
            }
            assert_close(
                &format!("{what} averaged weights"),
                &out.averaged_weights(),
                &matrix(&case["averaged"][b]),
            );
            if !separate {
                // The streaming path with biases and masks gives the same output.
                let streamed = match &mask {
                    Some(mask) => layer.forward_streaming_masked(&x, mask),
                    None => layer.forward_streaming(&x),
                }
                .unwrap();
                assert_close(&format!("{what} streamed"), &streamed, out.result());
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
        let batch = items(&case["x"]);
        assert!((1..=3).contains(&batch.len()));
        for (b, x) in batch.iter().enumerate() {
            let x = matrix(x);
            let out = layer
                .forward_masked(&x, &torch_mask(case, b, (x.nrows(), x.nrows())))
                .unwrap();
            let what = format!("{name} item {b}");
            assert_close(&what, out.result(), &matrix(&case["output"][b]));
            let mut sum = Array2::<f64>::zeros(out.heads[0].weights.dim());
            for (i, head) in out.heads.iter().enumerate() {
                let theirs = matrix(&case["weights"][b][i]);
                assert_close(&format!("{what} head {i} weights"), &head.weights, &theirs);
                sum += &head.weights;
            }
            let averaged = sum / h as f64;
            assert_close(
                &format!("{what} averaged weights"),
                &averaged,
                &matrix(&case["averaged"][b]),
            );
        }
    }
}

#[test]
fn fully_masked_row_matches_sdpa() {
    let g = &golden()["sdpa_fully_masked"];
    // SDPA's boolean mask means "may attend": flip it for Mask::from_blocked.
    let allowed: Vec<Vec<bool>> = serde_json::from_value(g["allowed"].clone()).unwrap();
    let blocked = Array2::from_shape_fn((allowed.len(), allowed[0].len()), |(i, j)| !allowed[i][j]);
    let a = scaled_dot_product_attention_masked(
        &matrix(&g["q"]),
        &matrix(&g["k"]),
        &matrix(&g["v"]),
        &Mask::from_blocked(&blocked),
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
    let ours = scaled_dot_product_attention_masked(&q, &k, &v, &mask).unwrap();
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
            scaled_dot_product_attention_masked(&q, &k, &v, &mask.with_fill(fill)).unwrap();
        assert_close(name, &theirs.weights, &decode(&g[name]["weights"]));
        assert_close(name, &theirs.output, &decode(&g[name]["output"]));
    }
}
