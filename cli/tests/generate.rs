//! `attention-lab generate` on a tiny Llama that the repository ships
//! (model/tests/data/tiny-llama.gguf, scripts/tiny_llama_gguf.py): the text streamed, the JSON's
//! ids equal to the library's own generation, each step's ten likeliest tokens, an SVG a
//! layer; and every bad input one line with status 2: an empty prompt, flags that do not fit,
//! and GGUF files that are truncated, not GGUF, or hold offsets, counts or sizes past the file.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use attention_lab_model::prelude::*;
use serde_json::Value;

fn tiny() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/data/tiny-llama.gguf")
}

fn generate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attention-lab"))
        .arg("generate")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn folder(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("generate-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Status 2 and one line on stderr that says `want`.
fn refused(out: &Output, want: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(want), "{err:?} should say {want:?}");
    assert!(
        !err.contains("panicked") && !err.contains("internal"),
        "{err}"
    );
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_u64().unwrap() as usize)
        .collect()
}

#[test]
fn the_json_holds_the_librarys_own_generation_and_each_steps_likeliest_tokens() {
    let dir = folder("json");
    let json = dir.join("out.json");
    let svg = dir.join("heads");
    let out = generate(&[
        "--model",
        tiny().to_str().unwrap(),
        "--max-tokens",
        "6",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "the cat",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let record: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let model = Llama::load(&tiny()).unwrap();
    let prompt = model.tokenizer().encode("the cat", true).unwrap();
    assert_eq!(usizes(&record["prompt_ids"]), prompt);
    let ids = usizes(&record["ids"]);
    let eos = model.tokenizer().eos().unwrap();
    // Greedy: the library's ids, up to and with the end of the answer.
    let want = model
        .decoder()
        .generate(&prompt, 6, Sampling::Greedy)
        .unwrap();
    let end = want.iter().position(|&id| id == eos).map_or(6, |i| i + 1);
    assert_eq!(ids, want[..end]);
    assert_eq!(record["text"], model.tokenizer().decode(&ids, true));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout,
        format!("{}\n", model.tokenizer().decode(&ids, true))
    );
    let tokens: Vec<&str> = record["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tokens, model.tokenizer().tokens(&ids));
    for (step, id) in record["steps"].as_array().unwrap().iter().zip(&ids) {
        let top = step["top"].as_array().unwrap();
        assert_eq!(top.len(), 10);
        // Greedy picks the likeliest; the probabilities fall and sum to at most 1.
        assert_eq!(top[0]["id"].as_u64().unwrap() as usize, *id);
        let p: Vec<f64> = top.iter().map(|c| c["p"].as_f64().unwrap()).collect();
        assert!(p.windows(2).all(|w| w[0] >= w[1]), "{p:?}");
        assert!(p.iter().sum::<f64>() <= 1.0 + 1e-12);
    }
    for l in 0..model.config().layers {
        let drawn = std::fs::read_to_string(svg.join(format!("layer{l}.svg"))).unwrap();
        assert!(drawn.contains("<svg"));
    }
}

#[test]
fn seeded_sampling_repeats_and_a_closed_stdout_ends_quietly() {
    let model = tiny();
    let args = [
        "--model",
        model.to_str().unwrap(),
        "--max-tokens",
        "8",
        "--temperature",
        "1.5",
        "--top-k",
        "20",
        "--seed",
        "7",
        "the",
    ];
    let (a, b) = (generate(&args), generate(&args));
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(a.stdout, b.stdout);
    // `| head -c 1`: the reader goes away; generate stops without a word.
    let mut child = Command::new(env!("CARGO_BIN_EXE_attention-lab"))
        .arg("generate")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn bad_flags_are_one_line_and_status_2() {
    let model = tiny();
    let model = model.to_str().unwrap();
    refused(&generate(&["--model", model, ""]), "the prompt: empty");
    refused(
        &generate(&["--model", model, "--max-tokens", "40", "the cat"]),
        "--max-tokens 40",
    );
    refused(
        &generate(&[
            "--model",
            model,
            "--max-tokens",
            "18446744073709551615",
            "a",
        ]),
        "--max-tokens",
    );
    refused(
        &generate(&["--model", model, "--temperature", "0", "a"]),
        "--temperature",
    );
    refused(
        &generate(&["--model", model, "--temperature", "NaN", "a"]),
        "--temperature",
    );
    refused(
        &generate(&["--model", model, "--top-k", "0", "a"]),
        "--top-k",
    );
    refused(
        &generate(&["--model", "/no/such.gguf", "a"]),
        "/no/such.gguf: cannot read",
    );
}

#[test]
fn hostile_gguf_files_are_one_line_and_status_2() {
    let dir = folder("hostile");
    let good = std::fs::read(tiny()).unwrap();
    let u64_at = |bytes: &mut Vec<u8>, at: usize, v: u64| {
        bytes[at..at + 8].copy_from_slice(&v.to_le_bytes())
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "truncated"),
        (
            "magic",
            [b"GGML".to_vec(), good[4..].to_vec()].concat(),
            "not a GGUF file",
        ),
        ("header", good[..100].to_vec(), "truncated"),
        // The data cut short: the last tensors' offsets run past the end.
        (
            "data",
            good[..good.len() - 4096].to_vec(),
            "past the file's end",
        ),
        (
            "tensors",
            {
                let mut b = good.clone();
                u64_at(&mut b, 8, 1 << 62);
                b
            },
            "tensors cannot fit",
        ),
        (
            "pairs",
            {
                let mut b = good.clone();
                u64_at(&mut b, 16, u64::MAX);
                b
            },
            "metadata pairs cannot fit",
        ),
    ];
    for (name, bytes, want) in cases {
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, bytes).unwrap();
        let out = generate(&["--model", path.to_str().unwrap(), "the cat"]);
        refused(&out, want);
        assert!(
            stderr(&out).contains(path.to_str().unwrap()),
            "{}",
            stderr(&out)
        );
    }
}
