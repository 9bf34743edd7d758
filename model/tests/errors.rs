//! The model crate without the real model: a tiny synthetic BERT (tests/common) loads and
//! encodes as BERT does, and every broken file gives a one-line message naming the file and
//! the tensor or setting that is wrong.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use std::path::{Path, PathBuf};

use attention_lab::prelude::*;
use attention_lab_model::{Model, ModelError};
use common::{Spec, Tensor};
use serde_json::json;

/// The default synthetic model, loaded.
fn load(dir: &Path) -> Model {
    Model::load(dir).unwrap_or_else(|e| panic!("the synthetic model does not load: {e}"))
}

/// The error of loading `dir`, displayed; checks it is one line.
fn load_error(dir: &Path) -> String {
    let err = Model::load(dir).expect_err("the broken model loaded");
    let message = err.to_string();
    assert!(!message.contains('\n'), "not one line: {message}");
    message
}

/// Asserts `message` contains every one of `parts`.
#[track_caller]
fn assert_names(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "the message does not contain {part:?}:\n{message}"
        );
    }
}

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// A synthetic model whose model.safetensors holds `tensors` instead of the default ones.
fn with_tensors(
    edit: impl FnOnce(&mut std::collections::BTreeMap<String, Tensor>),
) -> tempfile::TempDir {
    let dir = common::synthetic();
    let mut tensors = common::tensors(&Spec::default());
    edit(&mut tensors);
    std::fs::write(
        dir.path().join("model.safetensors"),
        common::safetensors_bytes(&tensors),
    )
    .unwrap();
    dir
}

/// A synthetic model whose config.json is `edit`ed.
fn with_config(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let dir = common::synthetic();
    let mut config = common::config(&Spec::default());
    edit(&mut config);
    common::write_json(dir.path(), "config.json", &config);
    dir
}

fn tokens(encoded: &attention_lab_model::Encoded) -> Vec<&str> {
    encoded.tokens.tokens.iter().map(String::as_str).collect()
}

// ---------------------------------------------------------------------------------------
// The synthetic model loads and encodes as BERT does.

#[test]
fn synthetic_model_loads_and_encodes_without_padding() {
    let dir = common::synthetic();
    let model = load(dir.path());
    let spec = Spec::default();
    assert_eq!(model.config().hidden_size, spec.hidden);
    assert_eq!(model.encoder().layers().len(), spec.layers);
    // no sentence_bert_config.json: the longest input is max_position_embeddings
    assert_eq!(model.max_length(), spec.positions);

    let out = model.encode("The cat sat on the mat.").unwrap();
    assert_eq!(
        tokens(&out),
        ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    );
    assert_eq!(out.tokens.ids, [2, 5, 6, 7, 8, 5, 9, 12, 3]);
    assert_eq!(out.tokens.type_ids, [0; 9]);
    // the file pads to 128 tokens; the loader turns that off
    assert_eq!(out.tokens.padded, [false; 9]);
    let n = out.tokens.ids.len();
    assert_eq!(
        out.output.attentions().dim(),
        (spec.layers, spec.heads, n, n)
    );
    assert_eq!(out.output.hidden_states().len(), spec.layers + 1);
    for state in out.output.hidden_states() {
        assert_eq!(state.dim(), (n, spec.hidden));
    }
    for (l, layer) in out.output.layers.iter().enumerate() {
        for (h, head) in layer.attention.heads.iter().enumerate() {
            for (q, row) in head.weights.rows().into_iter().enumerate() {
                let sum = row.sum();
                assert!(
                    (sum - 1.0).abs() <= 1e-12,
                    "layer {l} head {h} query {q}: weights sum to {sum}"
                );
                assert!(row.iter().all(|&w| w > 0.0), "layer {l} head {h} query {q}");
            }
        }
    }
    let length = out.embedding.dot(&out.embedding).sqrt();
    assert!((length - 1.0).abs() <= 1e-12, "|embedding| = {length}");
    assert_eq!(out.embedding.len(), spec.hidden);
}

#[test]
fn wordpiece_lowercases_splits_and_marks_unknown_words() {
    let dir = common::synthetic();
    let model = load(dir.path());
    let out = model.encode("A DOG sat on the Cats zebra").unwrap();
    assert_eq!(
        tokens(&out),
        ["[CLS]", "a", "dog", "sat", "on", "the", "cat", "##s", "[UNK]", "[SEP]"]
    );
    let empty = model.encode("").unwrap();
    assert_eq!(tokens(&empty), ["[CLS]", "[SEP]"]);
    assert_eq!(empty.output.attentions().dim(), (2, 2, 2, 2));
}

#[test]
fn batch_pads_the_shorter_text_and_leaves_its_real_tokens_unchanged() {
    let dir = common::synthetic();
    let model = load(dir.path());
    let texts = ["the cat sat on the mat.", "a dog"];
    let batch = model.encode_batch(&texts).unwrap();
    assert_eq!(batch.len(), 2);
    let n = batch[0].tokens.ids.len();
    assert_eq!(n, 9);
    assert_eq!(batch[1].tokens.ids.len(), n);
    assert_eq!(
        tokens(&batch[1]),
        ["[CLS]", "a", "dog", "[SEP]", "[PAD]", "[PAD]", "[PAD]", "[PAD]", "[PAD]"]
    );
    assert_eq!(batch[1].tokens.ids[4..], [0; 5]);
    assert_eq!(
        batch[1].tokens.padded,
        [false, false, false, false, true, true, true, true, true]
    );
    assert_eq!(batch[0].tokens.padded, [false; 9]);

    for (item, text) in batch.iter().zip(texts) {
        let alone = model.encode(text).unwrap();
        let real = alone.tokens.ids.len();
        assert_eq!(item.tokens.ids[..real], alone.tokens.ids[..]);
        // hidden states on the real rows
        for (l, (padded, unpadded)) in item
            .output
            .hidden_states()
            .into_iter()
            .zip(alone.output.hidden_states())
            .enumerate()
        {
            let diff = (&padded.slice(s![..real, ..]) - unpadded)
                .iter()
                .fold(0.0f64, |m, v| m.max(v.abs()));
            assert!(
                diff <= 1e-12,
                "{text:?}: hidden state {l} differs by {diff}"
            );
        }
        let (wp, wa) = (item.output.attentions(), alone.output.attentions());
        for ((l, h, q, k), &w) in wp.indexed_iter() {
            if item.tokens.padded[k] {
                assert_eq!(
                    w, 0.0,
                    "{text:?}: layer {l} head {h} query {q} on [PAD] key {k}"
                );
            } else if q < real {
                let diff = (w - wa[[l, h, q, k]]).abs();
                assert!(
                    diff <= 1e-12,
                    "{text:?}: weight ({l},{h},{q},{k}) differs by {diff}"
                );
            }
        }
        let diff = (&item.embedding - &alone.embedding)
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(diff <= 1e-12, "{text:?}: embedding differs by {diff}");
    }
    assert!(model.encode_batch::<&str>(&[]).unwrap().is_empty());
}

#[test]
fn f64_tensors_and_the_bert_prefix_read_the_same_encoder() {
    let dir = common::synthetic();
    let reference = load(dir.path());
    let text = "the dog sat on a mat";
    let expected = reference.encode(text).unwrap();

    let wide = with_tensors(|t| {
        for tensor in t.values_mut() {
            *tensor = tensor.widened();
        }
    });
    let prefixed = with_tensors(|t| {
        *t = std::mem::take(t)
            .into_iter()
            .map(|(name, tensor)| (format!("bert.{name}"), tensor))
            .collect();
        // a pooler, which the encoder does not use
        t.insert(
            "bert.pooler.dense.weight".into(),
            Tensor::f32(&[8, 8], &[0.5; 64]),
        );
    });
    for dir in [wide, prefixed] {
        let model = load(dir.path());
        assert_eq!(model.encoder(), reference.encoder());
        assert_eq!(model.encode(text).unwrap(), expected);
    }
}

#[test]
fn text_longer_than_max_seq_length_is_cut_with_sep_last() {
    let long = "the cat sat on the mat . ".repeat(5);
    // without sentence_bert_config.json: max_position_embeddings (16)
    let dir = common::synthetic();
    let out = load(dir.path()).encode(&long).unwrap();
    assert_eq!(out.tokens.ids.len(), 16);
    assert_eq!(tokens(&out)[0], "[CLS]");
    assert_eq!(tokens(&out)[15], "[SEP]");
    assert_eq!(
        tokens(&out)[1..15],
        ["the", "cat", "sat", "on", "the", "mat", "."].repeat(2)
    );

    // with it: max_seq_length (6)
    common::write_json(
        dir.path(),
        "sentence_bert_config.json",
        &json!({"max_seq_length": 6, "do_lower_case": false}),
    );
    let model = load(dir.path());
    assert_eq!(model.max_length(), 6);
    let out = model.encode(&long).unwrap();
    assert_eq!(tokens(&out), ["[CLS]", "the", "cat", "sat", "on", "[SEP]"]);
    assert_eq!(out.output.attentions().dim(), (2, 2, 6, 6));
    let batch = model.encode_batch(&[long.as_str(), "cat"]).unwrap();
    assert_eq!(tokens(&batch[0]), tokens(&out));
    assert_eq!(
        tokens(&batch[1]),
        ["[CLS]", "cat", "[SEP]", "[PAD]", "[PAD]", "[PAD]"]
    );

    // the shortest allowed: [CLS] and [SEP] only
    common::write_json(
        dir.path(),
        "sentence_bert_config.json",
        &json!({"max_seq_length": 2}),
    );
    let out = load(dir.path()).encode(&long).unwrap();
    assert_eq!(tokens(&out), ["[CLS]", "[SEP]"]);
}

#[test]
fn symlinked_model_folder_loads() {
    let dir = common::synthetic();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("linked-model");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    let model = load(&link);
    assert_eq!(model.dir(), link);
    let direct = load(dir.path());
    assert_eq!(
        model.encode("a cat").unwrap(),
        direct.encode("a cat").unwrap()
    );
}

/// Every entry of `dir` with its length, modification time and permissions.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let meta = std::fs::metadata(&path).unwrap();
            (
                path,
                meta.len(),
                meta.modified().unwrap(),
                meta.permissions().mode(),
            )
        })
        .collect();
    entries.sort();
    entries
}

#[test]
fn read_only_model_folder_loads_and_nothing_is_written() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::synthetic();
    common::write_json(
        dir.path(),
        "sentence_bert_config.json",
        &json!({"max_seq_length": 8}),
    );
    let set = |mode_file: u32, mode_dir: u32| {
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode_file)).unwrap();
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode_dir)).unwrap();
    };
    set(0o444, 0o555);
    let before = snapshot(dir.path());
    let result = Model::load(dir.path()).and_then(|m| m.encode_batch(&["the cat", "a dog sat"]));
    let after = snapshot(dir.path());
    set(0o644, 0o755);
    let batch = result.unwrap_or_else(|e| panic!("a read-only model does not load: {e}"));
    assert_eq!(batch.len(), 2);
    // (as root the permissions do not stop a write: compare the folder instead)
    assert_eq!(before, after, "the model folder changed");
}

// ---------------------------------------------------------------------------------------
// Broken folders and files: one line naming the file and the tensor or setting.

#[test]
fn missing_folder_names_its_config_json() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("no-such-model");
    let message = load_error(&dir);
    let config = file(&dir, "config.json");
    assert!(
        message.starts_with(&format!("{config}: cannot read:")),
        "{message}"
    );
    assert!(matches!(Model::load(&dir), Err(ModelError::Read { .. })));
}

#[test]
fn missing_model_safetensors_is_named() {
    let dir = common::synthetic();
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let message = load_error(dir.path());
    assert_names(
        &message,
        &[&format!(
            "{}: cannot read:",
            file(dir.path(), "model.safetensors")
        )],
    );
}

#[test]
fn missing_tokenizer_json_is_named() {
    let dir = common::synthetic();
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let message = load_error(dir.path());
    assert_names(
        &message,
        &[&format!(
            "{}: cannot read:",
            file(dir.path(), "tokenizer.json")
        )],
    );
}

#[test]
fn config_json_that_is_not_json_is_named() {
    let dir = common::synthetic();
    std::fs::write(dir.path().join("config.json"), "hidden_size = 8\n").unwrap();
    let message = load_error(dir.path());
    assert!(
        message.starts_with(&format!("{}: ", file(dir.path(), "config.json"))),
        "{message}"
    );
    assert_names(&message, &["line 1"]);
    assert!(matches!(
        Model::load(dir.path()),
        Err(ModelError::Content { .. })
    ));
}

#[test]
fn config_json_missing_a_key_names_the_key() {
    let dir = with_config(|c| {
        c.as_object_mut().unwrap().remove("intermediate_size");
    });
    let message = load_error(dir.path());
    assert_names(
        &message,
        &[
            &file(dir.path(), "config.json"),
            "missing field `intermediate_size`",
        ],
    );
}

#[test]
fn config_json_key_of_the_wrong_type_names_the_key() {
    let dir = with_config(|c| c["num_hidden_layers"] = json!("two"));
    let message = load_error(dir.path());
    assert_names(
        &message,
        &[&file(dir.path(), "config.json"), "invalid type", "\"two\""],
    );
}

#[test]
fn relu_activation_is_refused() {
    let dir = with_config(|c| c["hidden_act"] = json!("relu"));
    let message = load_error(dir.path());
    assert_names(
        &message,
        &[
            &file(dir.path(), "config.json"),
            "hidden_act is \"relu\"",
            "only \"gelu\"",
        ],
    );
}

#[test]
fn relative_position_embeddings_are_refused() {
    let dir = with_config(|c| c["position_embedding_type"] = json!("relative_key"));
    let message = load_error(dir.path());
    assert_names(
        &message,
        &[
            &file(dir.path(), "config.json"),
            "position_embedding_type is \"relative_key\"",
        ],
    );
}

#[test]
fn heads_that_do_not_divide_hidden_size_are_refused() {
    for heads in [3, 0] {
        let dir = with_config(|c| c["num_attention_heads"] = json!(heads));
        let message = load_error(dir.path());
        assert_names(
            &message,
            &[
                &file(dir.path(), "config.json"),
                &format!("num_attention_heads ({heads}) must divide hidden_size (8)"),
            ],
        );
    }
}

#[test]
fn missing_tensor_is_named() {
    let name = "encoder.layer.1.attention.self.key.bias";
    let dir = with_tensors(|t| {
        t.remove(name).unwrap();
    });
    let message = load_error(dir.path());
    assert_eq!(
        message,
        format!(
            "{}: tensor {name}: missing",
            file(dir.path(), "model.safetensors")
        )
    );
    assert!(matches!(
        Model::load(dir.path()),
        Err(ModelError::Tensor { .. })
    ));
}

#[test]
fn missing_tensor_with_the_bert_prefix_is_named_with_it() {
    let dir = with_tensors(|t| {
        *t = std::mem::take(t)
            .into_iter()
            .filter(|(name, _)| name != "encoder.layer.0.output.LayerNorm.bias")
            .map(|(name, tensor)| (format!("bert.{name}"), tensor))
            .collect();
    });
    let message = load_error(dir.path());
    assert_names(
        &message,
        &[
            &file(dir.path(), "model.safetensors"),
            "tensor bert.encoder.layer.0.output.LayerNorm.bias: missing",
        ],
    );
}

#[test]
fn tensor_of_the_wrong_shape_shows_both_shapes_and_their_source() {
    // transposed: 8x16 instead of transformers' out x in, 16x8
    let name = "encoder.layer.0.intermediate.dense.weight";
    let dir = with_tensors(|t| {
        t.insert(name.into(), Tensor::f32(&[8, 16], &[0.25; 128]));
    });
    let message = load_error(dir.path());
    assert_eq!(
        message,
        format!(
            "{}: tensor {name}: is 8x16 but must be 16x8 (intermediate_size x hidden_size in config.json)",
            file(dir.path(), "model.safetensors")
        )
    );

    // a word table with fewer rows than vocab_size
    let name = "embeddings.word_embeddings.weight";
    let dir = with_tensors(|t| {
        t.insert(name.into(), Tensor::f32(&[10, 8], &[0.25; 80]));
    });
    assert_names(
        &load_error(dir.path()),
        &[
            &file(dir.path(), "model.safetensors"),
            name,
            "is 10x8 but must be 14x8",
            "vocab_size x hidden_size in config.json",
        ],
    );

    // a layer norm's gamma of the wrong length
    let name = "encoder.layer.1.attention.output.LayerNorm.weight";
    let dir = with_tensors(|t| {
        t.insert(name.into(), Tensor::f32(&[7], &[1.0; 7]));
    });
    assert_names(
        &load_error(dir.path()),
        &[name, "is 7 but must be 8 (hidden_size in config.json)"],
    );
}

/// FAILS (message bug in model/src/weights.rs): a bias's expected length is said to come from
/// "intermediate_size x hidden_size" (the weight's source), not from intermediate_size.
#[test]
fn bias_of_the_wrong_length_names_the_setting_its_length_comes_from() {
    let name = "encoder.layer.0.intermediate.dense.bias";
    let dir = with_tensors(|t| {
        t.insert(name.into(), Tensor::f32(&[15], &[0.0; 15]));
    });
    assert_names(
        &load_error(dir.path()),
        &[
            name,
            "is 15 but must be 16 (intermediate_size in config.json)",
        ],
    );
    let name = "encoder.layer.0.attention.self.query.bias";
    let dir = with_tensors(|t| {
        t.insert(name.into(), Tensor::f32(&[7], &[0.0; 7]));
    });
    assert_names(
        &load_error(dir.path()),
        &[name, "is 7 but must be 8 (hidden_size in config.json)"],
    );
}

#[test]
fn integer_tensor_is_refused_with_its_dtype() {
    let name = "embeddings.position_embeddings.weight";
    let dir = with_tensors(|t| {
        t.insert(name.into(), Tensor::i64(&[16, 8]));
    });
    let message = load_error(dir.path());
    assert_eq!(
        message,
        format!(
            "{}: tensor {name}: is I64; only F32 and F64 are read",
            file(dir.path(), "model.safetensors")
        )
    );
}

#[test]
fn truncated_or_garbage_safetensors_is_not_a_safetensors_file() {
    let dir = common::synthetic();
    let path = dir.path().join("model.safetensors");
    let whole = std::fs::read(&path).unwrap();
    let prefix = format!("{}: not a safetensors file:", path.display());
    for bytes in [
        whole[..whole.len() / 2].to_vec(),
        whole[..whole.len() - 1].to_vec(),
        whole[..5].to_vec(),
        b"this is not a model".to_vec(),
        Vec::new(),
        // a header length far past the end of the file
        u64::MAX.to_le_bytes().to_vec(),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let message = load_error(dir.path());
        assert!(
            message.starts_with(&prefix),
            "{} bytes: {message}",
            bytes.len()
        );
    }
}

#[test]
fn garbage_tokenizer_json_is_not_a_tokenizer() {
    let dir = common::synthetic();
    let path = dir.path().join("tokenizer.json");
    for text in ["not json at all", "{\"version\": \"1.0\"}", "[]"] {
        std::fs::write(&path, text).unwrap();
        let message = load_error(dir.path());
        assert!(
            message.starts_with(&format!("{}: not a tokenizer:", path.display())),
            "{text:?}: {message}"
        );
    }
}

#[test]
fn max_seq_length_past_the_positions_is_refused() {
    let dir = common::synthetic();
    common::write_json(
        dir.path(),
        "sentence_bert_config.json",
        &json!({"max_seq_length": 32, "do_lower_case": false}),
    );
    let message = load_error(dir.path());
    assert_eq!(
        message,
        format!(
            "{}: max_seq_length (32) is more than max_position_embeddings (16) in config.json",
            file(dir.path(), "sentence_bert_config.json")
        )
    );
}

#[test]
fn max_seq_length_that_is_not_a_length_is_refused() {
    let dir = common::synthetic();
    let sbert = file(dir.path(), "sentence_bert_config.json");
    for value in [json!(1), json!(0), json!(-3), json!(2.5), json!("256")] {
        common::write_json(
            dir.path(),
            "sentence_bert_config.json",
            &json!({"max_seq_length": value}),
        );
        let message = load_error(dir.path());
        assert_names(
            &message,
            &[&sbert, &format!("max_seq_length is {value}"), "at least 2"],
        );
    }
    std::fs::write(dir.path().join("sentence_bert_config.json"), "{").unwrap();
    assert!(load_error(dir.path()).starts_with(&format!("{sbert}: ")));
    // a file without the key: max_position_embeddings
    common::write_json(
        dir.path(),
        "sentence_bert_config.json",
        &json!({"do_lower_case": false}),
    );
    assert_eq!(load(dir.path()).max_length(), 16);
}

#[test]
fn ids_and_lengths_past_the_tables_are_out_of_range_in_the_encoder() {
    // The tokenizer cannot give an id past its vocabulary, and Model::load refuses a
    // max_seq_length past the positions: both are reached through the encoder itself.
    let dir = common::synthetic();
    let model = load(dir.path());
    let encoder = model.encoder();
    let err = encoder.forward(&[2, 14, 3]).unwrap_err();
    assert!(matches!(
        err,
        AttentionError::OutOfRange {
            what: "token id",
            index: 14,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "token id 14 is out of range: the word embeddings have rows 0 to 13 (14x8)"
    );
    let ids = vec![5; 17];
    let err = encoder.forward(&ids).unwrap_err();
    assert_eq!(
        err.to_string(),
        "position 16 is out of range: the position embeddings have rows 0 to 15 (16x8)"
    );
    assert!(encoder.forward(&ids[..16]).is_ok());
    let err = encoder
        .forward_padded(&[2, 3], &[0, 2], &[false, false])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "token type 2 is out of range: the token type embeddings have rows 0 to 1 (2x8)"
    );
}

#[test]
fn tokenizer_larger_than_vocab_size_fails_at_encode_naming_the_text_and_the_table() {
    // config.json and the word table say 10 words; tokenizer.json has 14.
    let dir = tempfile::tempdir().unwrap();
    common::write_model(
        dir.path(),
        &Spec {
            vocab: 10,
            ..Spec::default()
        },
    );
    let model = load(dir.path());
    assert!(model.encode("the cat sat").is_ok());
    let err = model.encode("the dog").unwrap_err();
    assert!(matches!(err, ModelError::Attention { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: encoding \"the dog\": token id 11 is out of range: the word embeddings have rows 0 to 9 (10x8)",
            dir.path().display()
        )
    );
    assert!(model.encode_batch(&["a cat", "a dog"]).is_err());
}

// ---------------------------------------------------------------------------------------
// Model::installed, in a child process: the environment is process-wide.

const CHILD: &str = "ATTENTION_LAB_MODEL_ERRORS_CHILD";

/// Run only as a child of `installed_reads_attention_lab_model`: prints what
/// `Model::installed()` gave.
#[test]
fn installed_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    match Model::installed() {
        Ok(model) => println!("RESULT ok {}", model.dir().display()),
        Err(e) => println!("RESULT err {e}"),
    }
}

fn installed_with(model_dir: &Path) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "installed_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env(attention_lab_io::cache::MODEL_VAR, model_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, result)| result))
        .unwrap_or_else(|| panic!("no RESULT line:\n{stdout}"))
        .to_owned()
}

#[test]
fn installed_reads_attention_lab_model() {
    let parent = tempfile::tempdir().unwrap();
    let missing = parent.path().join("moved-away");
    let result = installed_with(&missing);
    assert!(
        result.starts_with(&format!(
            "err {}: cannot read:",
            missing.join("config.json").display()
        )),
        "{result}"
    );
    let dir = common::synthetic();
    assert_eq!(
        installed_with(dir.path()),
        format!("ok {}", dir.path().display())
    );
}
