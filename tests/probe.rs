//! The decoder's probes against transformers' `LlamaForCausalLM` with hooks in float64
//! (scripts/probe_goldens.py, tests/data/probe/): every head zeroed, mean-ablated and patched,
//! every residual (layer, position) patched, scales, single positions and a mix, to 1e-9; the
//! direct logit attribution's parts to 1e-9, summing to the logit; the logit lens; and an
//! intervention at layer L reusing the clean run's layers below L.
//!
//! The encoder's interventions against transformers' `BertModel` with the same hooks, in
//! float64: a small random BERT (tests/data/probe/bert_tiny/), every head zeroed, mean-ablated
//! and patched, every residual (layer, position) patched, scales, single positions and a mix,
//! padded or not: the last hidden state to 1e-9.
#![cfg(feature = "decoder")]

mod common;
#[path = "common/probe_edits.rs"]
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

fn intervention<'a>(edits: &Value, source: impl Into<Source<'a>>) -> Intervention<'a> {
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

/// Checks that a model's clean run's layers below an intervention's first layer are reused,
/// not recomputed: with their intermediates (and the embeddings) made NaN in the cache by
/// `poison(run, first)`, each of the cases `names` of the goldens `g` still gives torch's result
/// (`theirs(i)` for case i), and the run keeps the NaN layers below the first as it was given
/// them. `intervene` gives a run's result and whether each of its layers was recomputed.
fn check_reuse<'a, R: Clone>(
    g: &Value,
    names: [&str; 4],
    (clean, corrupted): (&R, &'a R),
    poison: impl Fn(&mut R, usize),
    intervene: impl Fn(&R, &Intervention<'a>) -> (Array2<f64>, Vec<bool>),
    theirs: impl Fn(usize) -> Array2<f64>,
) where
    &'a R: Into<Source<'a>>,
{
    for name in names {
        let (i, edits) = case(g, name);
        let probe = intervention(edits, corrupted);
        let first = probe.first_layer().unwrap();
        let mut poisoned = clean.clone();
        poison(&mut poisoned, first);
        let (ours, recomputed) = intervene(&poisoned, &probe);
        common::within(name, &ours, &theirs(i), TOL);
        for (l, recomputed) in recomputed.into_iter().enumerate() {
            assert_eq!(recomputed, l >= first, "{name}: layer {l}");
        }
    }
}

#[test]
fn an_edit_at_layer_l_recomputes_no_layer_below_l() {
    let model = "llama_gqa";
    let (decoder, g, clean, corrupted) = runs(model);
    let names = [
        "patch L1H2",
        "mean L1H0",
        "residual L1 P3",
        "residual L2 P5",
    ];
    let poison = |run: &mut DecoderOutput, first: usize| {
        run.embedded.fill(f64::NAN);
        for block in &mut run.blocks[..first] {
            block.attention.q.fill(f64::NAN);
            block.attention.z.fill(f64::NAN);
            block.attention.output.fill(f64::NAN);
            let weights = block.attention.weights.iter_mut();
            weights.for_each(|w| w.fill(f64::NAN));
            block.hidden.fill(f64::NAN);
        }
    };
    let intervene = |run: &DecoderOutput, probe: &Intervention<'_>| {
        let out = decoder.intervene(run, probe).unwrap();
        let recomputed = out.blocks.iter().map(|b| !b.hidden[[0, 0]].is_nan());
        (out.logits.clone(), recomputed.collect())
    };
    let theirs = |i| torch_logits(model, i);
    check_reuse(&g, names, (&clean, &corrupted), poison, intervene, theirs);
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

/// The small random BERT of tests/data/probe/bert_tiny/ (transformers' names, torch's layout).
fn bert() -> Encoder {
    let dir = data("tests/data/probe/bert_tiny");
    let c = json(&dir.join("config.json"));
    let vector = |name: &str| read::<Ix1>(&dir.join(format!("{name}.npy")));
    let matrix = |name: &str| read::<Ix2>(&dir.join(format!("{name}.npy")));
    let eps = c["eps"].as_f64().unwrap();
    let norm = |name: &str| {
        let (gamma, beta) = (
            vector(&format!("{name}.weight")),
            vector(&format!("{name}.bias")),
        );
        LayerNorm::new(gamma, beta, eps).unwrap()
    };
    let embeddings = Embeddings::new(
        matrix("embeddings.word_embeddings.weight"),
        matrix("embeddings.position_embeddings.weight"),
        matrix("embeddings.token_type_embeddings.weight"),
        norm("embeddings.LayerNorm"),
    )
    .unwrap();
    let layer = |l: usize| {
        let name = |part: &str| format!("encoder.layer.{l}.{part}");
        let weight = |part: &str| matrix(&name(&format!("{part}.weight")));
        let bias = |part: &str| vector(&name(&format!("{part}.bias")));
        let (q, k, v) = (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
        );
        let weights = TorchWeights {
            in_proj: InProj::Separate {
                q_proj_weight: weight(q),
                k_proj_weight: weight(k),
                v_proj_weight: weight(v),
            },
            in_proj_bias: Some(concatenate![Axis(0), bias(q), bias(k), bias(v)]),
            out_proj_weight: weight("attention.output.dense"),
            out_proj_bias: Some(bias("attention.output.dense")),
        };
        let attention = MultiHead::from_torch_weights(&weights, count(&c["heads"])).unwrap();
        let (w1, w2) = (weight("intermediate.dense"), weight("output.dense"));
        let ff = FeedForward::new(
            w1.t().to_owned(),
            bias("intermediate.dense"),
            w2.t().to_owned(),
            bias("output.dense"),
        );
        let (attention_norm, output_norm) = (
            norm(&name("attention.output.LayerNorm")),
            norm(&name("output.LayerNorm")),
        );
        EncoderLayer::new(attention, attention_norm, ff.unwrap(), output_norm).unwrap()
    };
    let layers = (0..count(&c["layers"])).map(layer).collect();
    Encoder::new(embeddings, layers).unwrap()
}

/// The encoder's goldens `name` (bert_tiny, bert_tiny_padded), their padding, and the encoder's
/// runs of the clean and the corrupted prompt with it.
fn bert_runs(encoder: &Encoder, name: &str) -> (Value, Vec<bool>, EncoderOutput, EncoderOutput) {
    let g = json(&data(&format!("tests/data/probe/{name}.json")));
    let padded: Vec<bool> = g["padded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_bool().unwrap())
        .collect();
    let types = vec![0; padded.len()];
    let run = |v: &Value| encoder.forward_padded(&ids(v), &types, &padded).unwrap();
    let (clean, corrupted) = (run(&g["prompt"]), run(&g["corrupted"]));
    (g, padded, clean, corrupted)
}

#[test]
fn every_intervened_hidden_state_of_a_bert_equals_torchs() {
    let encoder = bert();
    for name in ["bert_tiny", "bert_tiny_padded"] {
        let (g, padded, clean, corrupted) = bert_runs(&encoder, name);
        let theirs = read::<Ix3>(&data(&format!("tests/data/probe/{name}.hidden.npy")));
        let cases = g["cases"].as_array().unwrap();
        assert_eq!(theirs.len_of(Axis(0)), cases.len());
        let rows = ids(&g["rows"]);
        let mut worst: f64 = 0.0;
        for (case, theirs) in cases.iter().zip(theirs.outer_iter()) {
            let what = format!("{name} {}", case["name"]);
            let probe = intervention(&case["edits"], &corrupted);
            let ours = match padded.contains(&true) {
                true => encoder.intervene_padded(&clean, &padded, &probe),
                false => encoder.intervene(&clean, &probe),
            };
            let ours = ours.unwrap().last_hidden_state().select(Axis(0), &rows);
            assert_ne!(
                ours,
                clean.last_hidden_state().select(Axis(0), &rows),
                "{what}: no change"
            );
            worst = worst.max(common::within(&what, &ours, &theirs.to_owned(), TOL));
        }
        eprintln!("{name}: {} cases, worst error {worst:e}", cases.len());
    }
}

/// As for the decoder: the clean run's layers below the first edited one are reused (NaN in
/// the cache there changes nothing), and an edit recomputes its own layer and those after.
#[test]
fn an_encoder_edit_at_layer_l_recomputes_no_layer_below_l() {
    let encoder = bert();
    let (g, _, clean, corrupted) = bert_runs(&encoder, "bert_tiny");
    let all = read::<Ix3>(&data("tests/data/probe/bert_tiny.hidden.npy"));
    let names = [
        "patch L1H2",
        "mean L2H0",
        "residual L1 P3",
        "residual L3 P5",
    ];
    let poison = |run: &mut EncoderOutput, first: usize| {
        run.embeddings.fill(f64::NAN);
        for layer in &mut run.layers[..first] {
            layer.attention.concat.fill(f64::NAN);
            layer.attended.fill(f64::NAN);
            let heads = layer.attention.heads.iter_mut();
            heads.for_each(|h| h.weights.fill(f64::NAN));
        }
    };
    let intervene = |run: &EncoderOutput, probe: &Intervention<'_>| {
        let out = encoder.intervene(run, probe).unwrap();
        let recomputed = out.layers.iter().map(|l| !l.attended[[0, 0]].is_nan());
        (out.last_hidden_state().clone(), recomputed.collect())
    };
    let theirs = |i| all.index_axis(Axis(0), i).to_owned();
    check_reuse(&g, names, (&clean, &corrupted), poison, intervene, theirs);
}

#[test]
fn bad_encoder_edits_and_foreign_runs_are_errors() {
    let encoder = bert();
    let (g, _, clean, _) = bert_runs(&encoder, "bert_tiny");
    let prompt = ids(&g["prompt"]);
    let short = encoder.forward(&prompt[1..]).unwrap();
    let (decoder, _) = golden("llama_gqa");
    let foreign = decoder.forward(&[0, 1]).unwrap();
    let (layers, tokens) = (encoder.layers().len(), prompt.len());
    let heads = encoder.layers()[0].attention().heads().len();
    let bad = [
        (
            Intervention::new().zero_head(layers, 0),
            format!("layer {layers} is out of range"),
        ),
        (
            Intervention::new().mean_head(0, heads),
            format!("head {heads} is out of range"),
        ),
        (
            Intervention::new().patch_residual(0, tokens).source(&clean),
            format!("position {tokens} is out of range"),
        ),
        (
            Intervention::new().patch_head(0, 0),
            "Intervention::patch_head does not apply".into(),
        ),
        (
            Intervention::new().scale_head(0, 0, f64::INFINITY),
            "factor is inf".into(),
        ),
        (
            Intervention::new().patch_residual(1, 0).source(&short),
            format!("the source run's embeddings is {}x12", tokens - 1),
        ),
        (
            Intervention::new().patch_residual(1, 0).source(&foreign),
            "Intervention::source does not apply".into(),
        ),
    ];
    for (probe, message) in &bad {
        let e = encoder.intervene(&clean, probe).unwrap_err().to_string();
        assert!(e.starts_with(message.as_str()), "{probe:?}: {e}");
    }
    let e = encoder.intervene_padded(&clean, &[false], &Intervention::new().zero_head(0, 0));
    assert!(e.unwrap_err().to_string().contains("the padding"));
    // The decoder's run of an encoder's is refused as well.
    let (decoder_clean, source) = (
        decoder.forward(&[0, 1]).unwrap(),
        Intervention::new().patch_head(0, 0).source(&clean),
    );
    let e = decoder
        .intervene(&decoder_clean, &source)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("Intervention::source does not apply"), "{e}");
    // No edits: the clean run itself.
    assert_eq!(encoder.intervene(&clean, &Intervention::new()), Ok(clean));
}
