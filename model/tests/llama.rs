//! SmolLM2-135M-Instruct from its GGUF file against transformers in float64: every tensor
//! dequantised bit for bit as gguf-py does, the logits and every layer's attention weights of
//! five prompts to 1e-9 relative, 64 greedy tokens, and seeded sampling as NumPy draws. The
//! goldens are written by scripts/smollm_goldens.py.
//!
//! The model is not in the repository: these tests read it from $ATTENTION_LAB_SMOLLM or the
//! lab's venv, and say what they skipped when it is not installed (.ci/run installs it).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use attention_lab::prelude::*;
use attention_lab_model::gguf::Gguf;
use attention_lab_model::Llama;
use ndarray::{Array1, Ix4};
use ndarray_npy::read_npy;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Relative to the largest magnitude of the reference array.
const TOLERANCE: f64 = 1e-9;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/smollm")
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_u64().unwrap() as usize)
        .collect()
}

/// The installed model's file, or `None` (and a line saying so) without it.
fn model_file(test: &str) -> Option<PathBuf> {
    let file = attention_lab_io::cache::SMOLLM.find();
    if file.is_none() {
        println!(
            "skipped {test}: SmolLM2 is not installed ({})",
            attention_lab_io::cache::SMOLLM.how_to_install()
        );
    }
    file
}

/// The model, read once for all tests.
fn model(test: &str) -> Option<&'static Llama> {
    static MODEL: OnceLock<Option<Llama>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            model_file("SmolLM2").map(|f| Llama::load(&f).unwrap_or_else(|e| panic!("{e}")))
        })
        .as_ref()
        .or_else(|| {
            model_file(test);
            None
        })
}

fn prompts() -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for n in 1.. {
        let dir = data().join(format!("prompt{n}"));
        if !dir.exists() {
            break;
        }
        out.push((
            format!("prompt{n}"),
            usizes(&json(&dir.join("ids.json"))["ids"]),
        ));
    }
    assert!(out.len() >= 5, "the goldens hold {} prompts", out.len());
    out
}

/// The largest difference relative to the largest magnitude of `theirs`.
fn relative<'a>(
    ours: impl IntoIterator<Item = &'a f64>,
    theirs: impl IntoIterator<Item = &'a f64>,
) -> f64 {
    let (mut diff, mut scale) = (0.0f64, 0.0f64);
    for (a, b) in ours.into_iter().zip(theirs) {
        diff = diff.max((a - b).abs());
        scale = scale.max(b.abs());
    }
    diff / scale
}

#[test]
fn every_tensor_dequantises_bit_for_bit_as_gguf_py() {
    let Some(file) = model_file("every_tensor_dequantises_bit_for_bit_as_gguf_py") else {
        return;
    };
    let gguf = Gguf::open(&file).unwrap();
    let golden = json(&data().join("dequant.json"));
    let tensors = golden["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), gguf.tensors().len());
    for t in tensors {
        let name = t["name"].as_str().unwrap();
        let m = gguf.matrix(name).unwrap();
        assert_eq!(m.kind().name(), t["type"].as_str().unwrap(), "{name}");
        let mut hash = Sha256::new();
        for r in 0..m.rows() {
            for v in m.row(r) {
                // Every value is an f32 widened: narrowing it back is exact.
                assert_eq!(f64::from(v as f32), v, "{name}");
                hash.update((v as f32).to_le_bytes());
            }
        }
        let hex: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, t["sha256"].as_str().unwrap(), "{name}");
    }
}

#[test]
fn logits_hidden_states_and_every_heads_weights_equal_transformers_in_float64() {
    let Some(model) = model("logits_hidden_states_and_every_heads_weights_equal_transformers")
    else {
        return;
    };
    let columns = usizes(&json(&data().join("columns.json"))["columns"]);
    for (name, ids) in prompts() {
        let dir = data().join(&name);
        let out = model.decoder().forward(&ids).unwrap();
        let t = ids.len();
        let last: Array1<f64> = read_npy(dir.join("logits_last.npy")).unwrap();
        let r = relative(out.logits.row(t - 1), &last);
        assert!(r < TOLERANCE, "{name}: last logits differ by {r:e}");
        let cols: Array2<f64> = read_npy(dir.join("logits_cols.npy")).unwrap();
        let ours = out.logits.select(Axis(1), &columns);
        let r = relative(&ours, &cols);
        assert!(
            r < TOLERANCE,
            "{name}: logits at the kept columns differ by {r:e}"
        );
        let hidden: Array2<f64> = read_npy(dir.join("hidden_last.npy")).unwrap();
        let layers = out.blocks.len();
        for l in 0..=layers {
            let ours = match l {
                0 => out.embedded.row(t - 1),
                l if l == layers => out.hidden.row(t - 1),
                l => out.blocks[l - 1].output.row(t - 1),
            };
            let r = relative(ours, hidden.row(l));
            assert!(r < TOLERANCE, "{name}: hidden state {l} differs by {r:e}");
        }
        let weights = read_npy::<_, ndarray::ArrayD<f64>>(dir.join("attentions.npy"))
            .unwrap()
            .into_dimensionality::<Ix4>()
            .unwrap();
        for (l, block) in out.blocks.iter().enumerate() {
            for (h, ours) in block.attention.weights.iter().enumerate() {
                let theirs = weights.slice(s![l, h, .., ..]);
                let r = relative(ours, theirs);
                assert!(
                    r < TOLERANCE,
                    "{name}: layer {l} head {h} weights differ by {r:e}"
                );
            }
        }
    }
}

#[test]
fn the_query_and_key_rows_must_be_put_back_in_transformers_order() {
    let test = "the_query_and_key_rows_must_be_put_back_in_transformers_order";
    let Some(file) = model_file(test) else {
        return;
    };
    // Left in llama.cpp's order the model still runs, but it is another model.
    let as_stored = Llama::load_as_stored(&file).unwrap();
    let (name, ids) = &prompts()[0];
    let last: Array1<f64> = read_npy(data().join(name).join("logits_last.npy")).unwrap();
    let out = as_stored.decoder().forward(ids).unwrap();
    let r = relative(out.logits.row(ids.len() - 1), &last);
    assert!(
        r > 1e-2,
        "{name}: logits differ by only {r:e} without the reordering"
    );
}

#[test]
fn greedy_generation_gives_transformers_64_tokens() {
    let Some(model) = model("greedy_generation_gives_transformers_64_tokens") else {
        return;
    };
    let golden = json(&data().join("greedy.json"));
    assert_eq!(golden["new_tokens"], 64);
    let cases = golden["prompts"].as_array().unwrap();
    assert_eq!(cases.len(), prompts().len());
    for ((name, ids), case) in prompts().into_iter().zip(cases) {
        let want = usizes(&case["ids"]);
        assert_eq!(want.len(), 64);
        let got = model
            .decoder()
            .generate(&ids, 64, Sampling::Greedy)
            .unwrap();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn seeded_sampling_draws_as_numpy() {
    let Some(model) = model("seeded_sampling_draws_as_numpy") else {
        return;
    };
    let golden = json(&data().join("sampling.json"));
    let prompts = prompts();
    for case in golden["runs"].as_array().unwrap() {
        // The prompt by its text, among the goldens' prompts.
        let text = case["prompt"].as_str().unwrap();
        let (name, _) = prompts
            .iter()
            .find(|(name, _)| json(&data().join(name).join("ids.json"))["text"] == text)
            .unwrap();
        let prompt = usizes(&json(&data().join(name).join("ids.json"))["ids"]);
        let want = usizes(&case["ids"]);
        assert_eq!(want.len(), 32);
        let sampling = Sampling::Sample {
            temperature: case["temperature"].as_f64().unwrap(),
            top_k: case["top_k"].as_u64().map(|k| k as usize),
            seed: case["seed"].as_u64().unwrap() as u32,
        };
        let got = model
            .decoder()
            .generate(&prompt, want.len(), sampling)
            .unwrap();
        assert_eq!(got, want, "{case}");
    }
}
