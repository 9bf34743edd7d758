//! The decoder against transformers' `LlamaForCausalLM` in float64 (scripts/decoder_goldens.py,
//! tests/data/decoder/): logits and every layer's attention weights to 1e-10, the greedy ids
//! exactly; the KV cache's steps against a full recomputation to 1e-12; grouped-query
//! attention against `F.scaled_dot_product_attention(enable_gqa=True)`.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use std::path::{Path, PathBuf};

use attention_lab::prelude::*;
use common::{ids, tensor};
use ndarray::{Array3, Ix2, Ix3};
use ndarray_npy::read_npy;
use serde_json::Value;

/// The goldens hold to this relative error (scaled by the larger magnitude, at least 1).
const TOL: f64 = 1e-10;

fn folder(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/decoder")
        .join(name)
}

fn npy<D: ndarray::Dimension>(dir: &Path, name: &str) -> Array<f64, D> {
    let path = dir.join(format!("{name}.npy"));
    read_npy(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn close<D: ndarray::Dimension>(
    what: &str,
    ours: &Array<f64, D>,
    theirs: &Array<f64, D>,
    tol: f64,
) {
    common::within(what, ours, theirs, tol);
}

/// The decoder a golden folder holds, and its config.
fn llama(name: &str) -> (Decoder, Value) {
    let dir = folder(name);
    let c = json(&dir.join("config.json"));
    let n = |key: &str| c[key].as_u64().unwrap() as usize;
    let eps = c["eps"].as_f64().unwrap();
    let rms = |w: &str| Norm::Rms(RmsNorm::new(npy(&dir, w), eps).unwrap());
    let blocks = (0..n("layers"))
        .map(|l| {
            let w = |part: &str| npy::<Ix2>(&dir, &format!("{l}.{part}"));
            let rope = Rope::new(n("head_dim"), c["theta"].as_f64().unwrap()).unwrap();
            let attention = GroupedAttention::new(
                w("wq"),
                w("wk"),
                w("wv"),
                w("wo"),
                n("heads"),
                n("kv_heads"),
                rope,
            )
            .unwrap();
            let mlp = Mlp::SwiGlu(SwiGlu::new(w("w_gate"), w("w_up"), w("w_down")).unwrap());
            DecoderBlock::new(
                rms(&format!("{l}.attn_norm")),
                attention,
                rms(&format!("{l}.mlp_norm")),
                mlp,
            )
            .unwrap()
        })
        .collect();
    let lm_head = if c["tied"].as_bool().unwrap() {
        LmHead::Tied
    } else {
        LmHead::Untied(npy(&dir, "lm_head"))
    };
    let decoder = Decoder::new(npy(&dir, "embed"), blocks, rms("norm"), lm_head).unwrap();
    (decoder, c)
}

const MODELS: [&str; 2] = ["llama_gqa", "llama_mqa_tied"];

#[test]
fn logits_and_every_layers_weights_equal_llamas() {
    for name in MODELS {
        let (decoder, c) = llama(name);
        let out = decoder.forward(&ids(&c["prompt"])).unwrap();
        close(
            &format!("{name} logits"),
            &out.logits,
            &npy(&folder(name), "logits"),
            TOL,
        );
        for (l, block) in out.blocks.iter().enumerate() {
            let theirs: Array3<f64> = npy::<Ix3>(&folder(name), &format!("{l}.weights"));
            for (h, ours) in block.attention.weights.iter().enumerate() {
                let what = format!("{name} layer {l} head {h} weights");
                close(
                    &what,
                    ours,
                    &theirs.index_axis(ndarray::Axis(0), h).to_owned(),
                    TOL,
                );
            }
        }
    }
}

#[test]
fn greedy_generation_gives_llamas_ids() {
    for name in MODELS {
        let (decoder, c) = llama(name);
        let want = ids(&c["greedy"]);
        let got = decoder
            .generate(&ids(&c["prompt"]), want.len(), Sampling::Greedy)
            .unwrap();
        assert_eq!(got, want, "{name}");
    }
}

/// A prefill, then one token at a time: each step's logits equal the last row of a full
/// recomputation over every token so far, and the cache grows by one row a layer.
#[test]
fn each_cached_step_equals_a_full_recomputation() {
    for name in MODELS {
        let (decoder, c) = llama(name);
        let mut seq = ids(&c["prompt"]);
        let mut cache = decoder.cache();
        decoder.forward_cached(&seq, &mut cache).unwrap();
        for step in 0..8 {
            let id = (step * 7 + 3) % decoder.vocab();
            seq.push(id);
            let cached = decoder.forward_cached(&[id], &mut cache).unwrap();
            let full = decoder.forward(&seq).unwrap();
            let last = full
                .logits
                .slice(ndarray::s![seq.len() - 1.., ..])
                .to_owned();
            close(&format!("{name} step {step}"), &cached.logits, &last, 1e-12);
            assert_eq!(cache.len(), seq.len());
            // The step's weights are the last row of the full pass's, for every head.
            for (b, block) in cached.blocks.iter().enumerate() {
                for (h, w) in block.attention.weights.iter().enumerate() {
                    let row = full.blocks[b].attention.weights[h]
                        .slice(ndarray::s![seq.len() - 1.., ..])
                        .to_owned();
                    close(
                        &format!("{name} step {step} block {b} head {h}"),
                        w,
                        &row,
                        1e-12,
                    );
                }
            }
        }
    }
}

#[test]
fn the_cache_holds_kv_heads_rows_only() {
    let (decoder, c) = llama("llama_gqa");
    let mut cache = decoder.cache();
    decoder
        .forward_cached(&ids(&c["prompt"]), &mut cache)
        .unwrap();
    let n = |key: &str| c[key].as_u64().unwrap() as usize;
    let per_token = 2 * n("layers") * n("kv_heads") * n("head_dim") * 8;
    assert_eq!(cache.bytes(), cache.len() * per_token);
    // Half the bytes of a cache with a key/value head for each of the 4 query heads.
    assert_eq!(n("heads") / n("kv_heads"), 2);
}

#[test]
fn a_bad_token_or_a_foreign_cache_is_an_error_that_leaves_the_cache_alone() {
    let (decoder, _) = llama("llama_gqa");
    let (other, _) = llama("llama_mqa_tied");
    let mut cache = decoder.cache();
    decoder.forward_cached(&[1, 2], &mut cache).unwrap();
    let e = decoder.forward_cached(&[3, 1000], &mut cache).unwrap_err();
    assert!(
        e.to_string().starts_with("token id 1000 is out of range"),
        "{e}"
    );
    assert!(other.forward_cached(&[1], &mut cache).is_err());
    assert_eq!(cache.len(), 2);
    assert!(decoder.generate(&[], 3, Sampling::Greedy).is_err());
    let hot = Sampling::Sample {
        temperature: 0.0,
        top_k: None,
        seed: 1,
    };
    assert!(decoder.generate(&[1], 3, hot).is_err());
}

/// Sampling is seeded: the same seed draws the same ids, and top-k = 1 is greedy.
#[test]
fn seeded_sampling_repeats_and_top_1_is_greedy() {
    let (decoder, c) = llama("llama_gqa");
    let prompt = ids(&c["prompt"]);
    let sample = |seed, top_k| {
        let s = Sampling::Sample {
            temperature: 0.8,
            top_k,
            seed,
        };
        decoder.generate(&prompt, 12, s).unwrap()
    };
    assert_eq!(sample(5, Some(4)), sample(5, Some(4)));
    assert_ne!(sample(5, None), sample(6, None));
    assert_eq!(
        sample(9, Some(1)),
        decoder.generate(&prompt, 12, Sampling::Greedy).unwrap()
    );
}

#[test]
fn grouped_query_attention_equals_torchs_sdpa() {
    let g = json(&folder("gqa.json"));
    for case in g["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        // torch stacks heads (heads, tokens, d); the library lays them side by side.
        let side_by_side = |key: &str| {
            let t = tensor(&case[key]).into_dimensionality::<Ix3>().unwrap();
            let (h, n, d) = t.dim();
            let mut m = Array2::zeros((n, h * d));
            for i in 0..h {
                m.slice_mut(ndarray::s![.., i * d..(i + 1) * d])
                    .assign(&t.index_axis(ndarray::Axis(0), i));
            }
            (m, h)
        };
        let ((q, heads), (k, kv_heads), (v, _), (z, _)) = (
            side_by_side("q"),
            side_by_side("k"),
            side_by_side("v"),
            side_by_side("z"),
        );
        let n = q.nrows();
        let mask = match (case["causal"].as_bool().unwrap(), case["window"].as_u64()) {
            (_, Some(w)) => Some(Mask::sliding_window(n, n, w as usize).unwrap()),
            (true, None) => Some(Mask::causal(n)),
            (false, None) => None,
        };
        let ours = grouped_query_attention(&q, &k, &v, heads, kv_heads, mask.as_ref()).unwrap();
        close(name, &ours, &z, 1e-12);
    }
}
