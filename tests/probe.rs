//! The decoder's probes against transformers' `LlamaForCausalLM` with hooks in float64
//! (scripts/probe_goldens.py, tests/data/probe/): every head zeroed, mean-ablated and patched,
//! every residual (layer, position) patched, scales, single positions and a mix, to 1e-9; the
//! direct logit attribution's parts to 1e-9, summing to the logit; the logit lens; and an
//! intervention at layer L reusing the clean run's layers below L.
#![cfg(feature = "decoder")]

mod common;
#[path = "data/probe/edits.rs"]
mod edits;

use std::path::{Path, PathBuf};

use attention_lab::prelude::*;
use common::ids;
use edits::{count, edit};
use ndarray::{Ix1, Ix2, Ix3};
use ndarray_npy::read_npy;
use serde_json::Value;

/// The goldens hold to this relative error (scaled by the larger magnitude, at least 1).
const TOL: f64 = 1e-9;

const MODELS: [&str; 2] = ["llama_gqa", "llama_mqa_tied"];

fn data(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read<D: ndarray::Dimension>(path: &Path) -> Array<f64, D> {
    read_npy(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The goldens of one model (`<model>.json`) and the decoder of the folder they name.
fn golden(model: &str) -> (Decoder, Value) {
    let g = json(&data(&format!("tests/data/probe/{model}.json")));
    let dir = data(g["model"].as_str().unwrap());
    let c = json(&dir.join("config.json"));
    let part = |name: String| dir.join(format!("{name}.npy"));
    let rms = |name: String| {
        let weight = read::<Ix1>(&part(name));
        Norm::Rms(RmsNorm::new(weight, c["eps"].as_f64().unwrap()).unwrap())
    };
    let block = |l: usize| {
        let w = |name: &str| read::<Ix2>(&part(format!("{l}.{name}")));
        let rope = Rope::new(count(&c["head_dim"]), c["theta"].as_f64().unwrap()).unwrap();
        let (heads, kv_heads) = (count(&c["heads"]), count(&c["kv_heads"]));
        let attention =
            GroupedAttention::new(w("wq"), w("wk"), w("wv"), w("wo"), heads, kv_heads, rope);
        let mlp = SwiGlu::new(w("w_gate"), w("w_up"), w("w_down")).unwrap();
        let (attn_norm, mlp_norm) = (rms(format!("{l}.attn_norm")), rms(format!("{l}.mlp_norm")));
        DecoderBlock::new(attn_norm, attention.unwrap(), mlp_norm, Mlp::SwiGlu(mlp)).unwrap()
    };
    let lm_head = match c["tied"].as_bool().unwrap() {
        true => LmHead::Tied,
        false => LmHead::Untied(read(&part("lm_head".into()))),
    };
    let blocks = (0..count(&c["layers"])).map(block).collect();
    let embed: Array2<f64> = read(&part("embed".into()));
    let decoder = Decoder::new(embed, blocks, rms("norm".into()), lm_head).unwrap();
    (decoder, g)
}

/// The decoder and goldens of one model, with its runs of the clean and the corrupted prompt.
fn runs(model: &str) -> (Decoder, Value, DecoderOutput, DecoderOutput) {
    let (decoder, g) = golden(model);
    let clean = decoder.forward(&ids(&g["prompt"])).unwrap();
    let corrupted = decoder.forward(&ids(&g["corrupted"])).unwrap();
    (decoder, g, clean, corrupted)
}

/// The case of the goldens called `name`: its edits and its index.
fn case<'a>(g: &'a Value, name: &str) -> (usize, &'a Value) {
    let cases = g["cases"].as_array().unwrap();
    let i = cases.iter().position(|c| c["name"] == name).unwrap();
    (i, &cases[i]["edits"])
}

fn intervention<'a>(edits: &Value, source: &'a DecoderOutput) -> Intervention<'a> {
    let edits = edits.as_array().unwrap().iter().map(edit);
    edits.fold(Intervention::new().source(source), Intervention::edit)
}

/// Torch's logits of case `i`, tokens x vocab.
fn torch_logits(model: &str, i: usize) -> Array2<f64> {
    let all = read::<Ix3>(&data(&format!("tests/data/probe/{model}.logits.npy")));
    all.index_axis(Axis(0), i).to_owned()
}

#[test]
fn every_intervened_logit_equals_torchs() {
    for model in MODELS {
        let (decoder, g, clean, corrupted) = runs(model);
        let all = read::<Ix3>(&data(&format!("tests/data/probe/{model}.logits.npy")));
        let cases = g["cases"].as_array().unwrap();
        assert_eq!(all.len_of(Axis(0)), cases.len());
        let (mut worst, mut relative): (f64, f64) = (0.0, 0.0);
        for (case, theirs) in cases.iter().zip(all.outer_iter()) {
            let what = format!("{model} {}", case["name"]);
            let ours = decoder
                .intervene(&clean, &intervention(&case["edits"], &corrupted))
                .unwrap();
            assert_ne!(
                ours.logits, clean.logits,
                "{what}: the edit changes nothing"
            );
            let error = common::within(&what, &ours.logits, &theirs.to_owned(), TOL);
            worst = worst.max(error);
            relative = ours
                .logits
                .iter()
                .zip(theirs)
                .fold(relative, |r, (a, b)| r.max((a - b).abs() / b.abs()));
        }
        let n = cases.len();
        eprintln!("{model}: {n} cases, worst error {worst:e} (|a - b| / |b|: {relative:e})");
        // Relative to torch's logit alone too, however small it is.
        assert!(
            relative <= TOL,
            "{model}: |a - b| / |b| reaches {relative:e}"
        );
    }
}

#[test]
fn attributions_equal_torchs_and_sum_to_the_logit() {
    for model in MODELS {
        let (decoder, g, clean, corrupted) = runs(model);
        let mut worst: f64 = 0.0;
        for a in g["attributions"].as_array().unwrap() {
            let run = match a["run"].as_str().unwrap() {
                "clean" => &clean,
                _ => &corrupted,
            };
            let (position, token) = (count(&a["position"]), count(&a["token"]));
            let what = format!("{model} {} position {position} token {token}", a["run"]);
            let ours = decoder.attribute(run, position, token).unwrap();
            let number = |v: &Value| v.as_f64().unwrap();
            let heads: Vec<Array1<f64>> = a["heads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|layer| layer.as_array().unwrap().iter().map(number).collect())
                .collect();
            let mlps: Array1<f64> = a["mlps"].as_array().unwrap().iter().map(number).collect();
            let theirs = Attribution {
                embedded: number(&a["embedded"]),
                heads,
                mlps,
                logit: number(&a["logit"]),
            };
            assert_eq!(ours.heads.len(), theirs.heads.len(), "{what}: layers");
            let pairs = [
                ("embedded", array![ours.embedded], array![theirs.embedded]),
                ("logit", array![ours.logit], array![theirs.logit]),
                ("mlps", ours.mlps.clone(), theirs.mlps.clone()),
            ];
            let layers = ours.heads.iter().zip(&theirs.heads).enumerate();
            let heads = layers.map(|(l, (o, t))| (l, o.clone(), t.clone()));
            let heads = heads.map(|(l, o, t)| (format!("heads of layer {l}"), o, t));
            let pairs = pairs.map(|(n, o, t)| (n.to_string(), o, t));
            for (name, o, t) in pairs.into_iter().chain(heads) {
                worst = worst.max(common::within(&format!("{what} {name}"), &o, &t, TOL));
            }
            // The frozen scale makes the final norm linear: the parts are the logit.
            let sum = (ours.total() - ours.logit).abs() / ours.logit.abs().max(1.0);
            assert!(
                sum <= 1e-12,
                "{what}: the parts sum to the logit but for {sum:e}"
            );
        }
        eprintln!("{model}: attributions' worst error {worst:e}");
    }
}

#[test]
fn the_logit_lens_equals_torchs() {
    for model in MODELS {
        let (decoder, g) = golden(model);
        let clean = decoder.forward(&ids(&g["prompt"])).unwrap();
        let lens = decoder.logit_lens(&clean).unwrap();
        let theirs = read::<Ix3>(&data(&format!("tests/data/probe/{model}.lens.npy")));
        assert_eq!(lens.len(), theirs.len_of(Axis(0)), "{model}: layers + 1");
        for (l, (ours, theirs)) in lens.iter().zip(theirs.outer_iter()).enumerate() {
            common::within(&format!("{model} lens {l}"), ours, &theirs.to_owned(), TOL);
        }
        assert_eq!(
            lens.last(),
            Some(&clean.logits),
            "{model}: the last is the run's"
        );
    }
}

/// The clean run's blocks below the first edited layer are reused, not recomputed: with their
/// intermediates (and the embeddings) made NaN in the cache, an edit at layer L still gives
/// torch's logits, and the run keeps the NaN blocks below L as it was given them.
#[test]
fn an_edit_at_layer_l_recomputes_no_layer_below_l() {
    let model = "llama_gqa";
    let (decoder, g, clean, corrupted) = runs(model);
    let layers = decoder.blocks().len();
    for name in [
        "patch L1H2",
        "mean L1H0",
        "residual L1 P3",
        "residual L2 P5",
    ] {
        let (i, edits) = case(&g, name);
        let probe = intervention(edits, &corrupted);
        let first = probe.first_layer().unwrap();
        let mut poisoned = clean.clone();
        poisoned.embedded.fill(f64::NAN);
        for block in &mut poisoned.blocks[..first] {
            block.attention.q.fill(f64::NAN);
            block.attention.z.fill(f64::NAN);
            block.attention.output.fill(f64::NAN);
            block
                .attention
                .weights
                .iter_mut()
                .for_each(|w| w.fill(f64::NAN));
            block.hidden.fill(f64::NAN);
        }
        let ours = decoder.intervene(&poisoned, &probe).unwrap();
        common::within(name, &ours.logits, &torch_logits(model, i), TOL);
        for (l, block) in ours.blocks.iter().enumerate() {
            let recomputed = !block.hidden[[0, 0]].is_nan();
            assert_eq!(recomputed, l >= first, "{name}: block {l} of {layers}");
        }
    }
}

#[test]
fn bad_edits_and_foreign_runs_are_errors() {
    let (decoder, g) = golden("llama_gqa");
    let prompt = ids(&g["prompt"]);
    let clean = decoder.forward(&prompt).unwrap();
    let short = decoder.forward(&prompt[1..]).unwrap();
    let (layers, tokens) = (decoder.blocks().len(), prompt.len());
    let heads = decoder.blocks()[0].attention().heads();
    let width = decoder.embed().ncols();
    let bad = [
        (
            Intervention::new().zero_head(layers, 0),
            format!("layer {layers} is out of range"),
        ),
        (
            Intervention::new().zero_head(0, heads),
            format!("head {heads} is out of range"),
        ),
        (
            Intervention::new()
                .patch_head_at(0, 0, tokens)
                .source(&clean),
            format!("position {tokens} is out of range"),
        ),
        (
            Intervention::new()
                .patch_residual(layers + 1, 0)
                .source(&clean),
            format!("layer {} is out of range", layers + 1),
        ),
        (
            Intervention::new().patch_head(0, 0),
            "Intervention::patch_head does not apply".into(),
        ),
        (
            Intervention::new().patch_residual(0, 0),
            "Intervention::patch_residual does not apply".into(),
        ),
        (
            Intervention::new().scale_head(0, 0, f64::NAN),
            "factor is NaN".into(),
        ),
        (
            Intervention::new().patch_residual(0, 0).source(&short),
            format!("the source run's embeddings is {}x{width}", tokens - 1),
        ),
    ];
    for (probe, message) in &bad {
        let e = decoder.intervene(&clean, probe).unwrap_err().to_string();
        assert!(e.starts_with(message.as_str()), "{probe:?}: {e}");
    }
    let e = decoder.attribute(&clean, tokens, 0).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("position {tokens} is out of range")),
        "{e}"
    );
    let e = decoder.attribute(&clean, 0, decoder.vocab()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("token id {} is out of range", decoder.vocab())),
        "{e}"
    );
    let (other, _) = golden("llama_mqa_tied");
    let e = other.logit_lens(&clean).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("the run's embeddings is {tokens}x{width}")),
        "{e}"
    );
    // A run of other tokens is a clean run of its own; no edits: the clean run itself.
    assert!(decoder.intervene(&short, &Intervention::new()).is_ok());
    assert_eq!(decoder.intervene(&clean, &Intervention::new()), Ok(clean));
}
