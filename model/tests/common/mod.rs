//! A tiny synthetic BERT written into a folder: config.json, model.safetensors (F32 tensors
//! named as model/src/weights.rs documents them, deterministic values) and a WordPiece
//! tokenizer.json shaped like all-MiniLM-L6-v2's (padding Fixed 128 included), so the model
//! crate can be tested without the real model.
#![allow(dead_code)]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::{json, Value};

/// The words of the synthetic vocabulary, in id order: the five special tokens first.
pub const VOCAB: [&str; 14] = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog",
    ".", "##s",
];

/// The shapes of the synthetic encoder.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub hidden: usize,
    pub heads: usize,
    pub layers: usize,
    pub intermediate: usize,
    pub vocab: usize,
    pub positions: usize,
    pub types: usize,
}

impl Default for Spec {
    fn default() -> Spec {
        Spec {
            hidden: 8,
            heads: 2,
            layers: 2,
            intermediate: 16,
            vocab: VOCAB.len(),
            positions: 16,
            types: 2,
        }
    }
}

/// One tensor as safetensors stores it: its type, shape and little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl Tensor {
    /// An F32 tensor of `shape` from `values` (row-major).
    pub fn f32(shape: &[usize], values: &[f32]) -> Tensor {
        assert_eq!(values.len(), shape.iter().product::<usize>());
        Tensor {
            dtype: Dtype::F32,
            shape: shape.to_vec(),
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// An F64 tensor with the same values as this F32 one (widened exactly).
    pub fn widened(&self) -> Tensor {
        assert_eq!(self.dtype, Dtype::F32);
        let data = self
            .data
            .chunks_exact(4)
            .flat_map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_le_bytes())
            .collect();
        Tensor {
            dtype: Dtype::F64,
            shape: self.shape.clone(),
            data,
        }
    }

    /// An I64 tensor of `shape` (all ones).
    pub fn i64(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor {
            dtype: Dtype::I64,
            shape: shape.to_vec(),
            data: (0..n).flat_map(|_| 1i64.to_le_bytes()).collect(),
        }
    }
}

/// splitmix64: a deterministic stream seeded by the tensor's name.
fn stream(name: &str) -> impl FnMut() -> f32 {
    // FNV-1a of the name.
    let mut state = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // uniform on [-0.5, 0.5), exactly representable in f32
        ((z >> 40) as f32) / (1u64 << 24) as f32 - 0.5
    }
}

/// A tensor of `shape` with deterministic values: uniform on [-scale/2, scale/2) around
/// `centre`.
fn values(name: &str, shape: &[usize], centre: f32, scale: f32) -> Tensor {
    let mut next = stream(name);
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| centre + scale * next()).collect();
    Tensor::f32(shape, &v)
}

/// Every tensor of the synthetic encoder, named as transformers names them (no `bert.`).
pub fn tensors(spec: &Spec) -> BTreeMap<String, Tensor> {
    let (d, ff) = (spec.hidden, spec.intermediate);
    let mut t = BTreeMap::new();
    let mut put = |name: String, shape: &[usize], centre: f32, scale: f32| {
        let tensor = values(&name, shape, centre, scale);
        t.insert(name, tensor);
    };
    put(
        "embeddings.word_embeddings.weight".into(),
        &[spec.vocab, d],
        0.0,
        2.0,
    );
    put(
        "embeddings.position_embeddings.weight".into(),
        &[spec.positions, d],
        0.0,
        1.0,
    );
    put(
        "embeddings.token_type_embeddings.weight".into(),
        &[spec.types, d],
        0.0,
        0.5,
    );
    put("embeddings.LayerNorm.weight".into(), &[d], 1.0, 0.2);
    put("embeddings.LayerNorm.bias".into(), &[d], 0.0, 0.2);
    for l in 0..spec.layers {
        let name = |part: &str| format!("encoder.layer.{l}.{part}");
        for part in [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
        ] {
            put(name(&format!("{part}.weight")), &[d, d], 0.0, 1.0);
            put(name(&format!("{part}.bias")), &[d], 0.0, 0.2);
        }
        put(name("intermediate.dense.weight"), &[ff, d], 0.0, 1.0);
        put(name("intermediate.dense.bias"), &[ff], 0.0, 0.2);
        put(name("output.dense.weight"), &[d, ff], 0.0, 0.5);
        put(name("output.dense.bias"), &[d], 0.0, 0.2);
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            put(name(&format!("{norm}.weight")), &[d], 1.0, 0.2);
            put(name(&format!("{norm}.bias")), &[d], 0.0, 0.2);
        }
    }
    t
}

/// The bytes of a safetensors file holding `tensors`.
pub fn safetensors_bytes(tensors: &BTreeMap<String, Tensor>) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, t)| {
            let view = TensorView::new(t.dtype, t.shape.clone(), &t.data).expect("a tensor");
            (name.clone(), view)
        })
        .collect();
    safetensors::serialize(views, None).expect("serialised")
}

/// config.json as transformers writes it for `spec`.
pub fn config(spec: &Spec) -> Value {
    json!({
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": spec.hidden,
        "initializer_range": 0.02,
        "intermediate_size": spec.intermediate,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": spec.positions,
        "model_type": "bert",
        "num_attention_heads": spec.heads,
        "num_hidden_layers": spec.layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": spec.types,
        "vocab_size": spec.vocab
    })
}

/// A WordPiece BERT tokenizer.json over [`VOCAB`], shaped like all-MiniLM-L6-v2's: truncation
/// at 128 and padding Fixed 128 (which the loader must turn off).
pub fn tokenizer() -> Value {
    let id = |token: &str| VOCAB.iter().position(|&t| t == token).unwrap();
    let added: Vec<Value> = VOCAB[..5]
        .iter()
        .map(|&t| {
            json!({"id": id(t), "special": true, "content": t, "single_word": false,
                   "lstrip": false, "rstrip": false, "normalized": false})
        })
        .collect();
    let vocab: serde_json::Map<String, Value> = VOCAB
        .iter()
        .enumerate()
        .map(|(i, &t)| (t.to_owned(), json!(i)))
        .collect();
    json!({
        "version": "1.0",
        "truncation": {"max_length": 128, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 128}, "direction": "Right", "pad_to_multiple_of": null,
                    "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [id("[CLS]")], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [id("[SEP]")], "tokens": ["[SEP]"]}
            }
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    })
}

/// Writes `value` as pretty JSON to `dir/name`.
pub fn write_json(dir: &Path, name: &str, value: &Value) {
    std::fs::write(dir.join(name), serde_json::to_string_pretty(value).unwrap()).unwrap();
}

/// Writes the three files of the synthetic model for `spec` into `dir`.
pub fn write_model(dir: &Path, spec: &Spec) {
    write_json(dir, "config.json", &config(spec));
    write_json(dir, "tokenizer.json", &tokenizer());
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors_bytes(&tensors(spec)),
    )
    .unwrap();
}

/// A fresh temporary folder holding the default synthetic model.
pub fn synthetic() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path(), &Spec::default());
    dir
}
