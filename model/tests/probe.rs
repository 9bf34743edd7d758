//! The decoder's probes on SmolLM2-135M-Instruct against transformers' `LlamaForCausalLM` with
//! hooks in float64 (scripts/probe_goldens.py, tests/data/probe/smollm2.*): the issue's
//! indirect-object prompt and its corrupted twin (the names swapped), every intervened logit at
//! the kept columns to 1e-9 relative, the direct logit attribution's parts to 1e-9 and summing
//! to the logit, and the logit lens. And the encoder's on all-MiniLM-L6-v2 against
//! transformers' `BertModel` with the same hooks (tests/data/probe/minilm.*): the same prompts
//! with [CLS] and [SEP], every intervened last hidden state at the kept rows to 1e-9.
//!
//! The models are not in the repository: these tests read them from $ATTENTION_LAB_SMOLLM and
//! $ATTENTION_LAB_MODEL or the lab's venv, and say what they skipped when one is not installed
//! (.ci/run installs them).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use attention_lab::prelude::*;
use attention_lab_model::{Llama, Model};
use ndarray::Array3;
use ndarray_npy::read_npy;
use serde_json::Value;

#[path = "../../tests/common/probe_edits.rs"]
mod edits;
use edits::{count, edit};

/// The goldens hold to this relative error.
const TOL: f64 = 1e-9;

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/probe")
        .join(file)
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn counts(v: &Value) -> Vec<usize> {
    v.as_array().expect("a list").iter().map(count).collect()
}

fn number(v: &Value) -> f64 {
    v.as_f64().expect("a number")
}

/// The model, its goldens and its runs of the clean and the corrupted prompt, made once for
/// all tests; `None` (and a line saying what `test` skipped) when SmolLM2 is not installed.
struct Probe {
    model: Llama,
    golden: Value,
    clean: DecoderOutput,
    corrupted: DecoderOutput,
}

fn probe(test: &str) -> Option<&'static Probe> {
    static PROBE: OnceLock<Option<Probe>> = OnceLock::new();
    let probe = PROBE.get_or_init(|| {
        let file = attention_lab_io::cache::SMOLLM.find()?;
        let started = Instant::now();
        let model = Llama::load(&file).unwrap_or_else(|e| panic!("{e}"));
        let golden = json(&data("smollm2.json"));
        let clean = model.decoder().forward(&counts(&golden["prompt"])).unwrap();
        let corrupted = model
            .decoder()
            .forward(&counts(&golden["corrupted"]))
            .unwrap();
        eprintln!("SmolLM2 loaded, two runs in {:?}", started.elapsed());
        Some(Probe {
            model,
            golden,
            clean,
            corrupted,
        })
    });
    if probe.is_none() {
        println!(
            "skipped {test}: SmolLM2 is not installed ({})",
            attention_lab_io::cache::SMOLLM.how_to_install()
        );
    }
    probe.as_ref()
}

/// The worst errors of pairs (ours, torch's): relative to the larger magnitude (at least 1),
/// each pair within [`TOL`] by it, and relative to torch's value alone (which the logits'
/// tests hold to [`TOL`] too; a hidden state's entries near 0 are compared by the first).
#[derive(Debug, Default, Clone, Copy)]
struct Worst {
    scaled: f64,
    relative: f64,
}

impl Worst {
    fn check(&mut self, what: &str, ours: f64, theirs: f64) {
        let diff = (ours - theirs).abs();
        let scaled = diff / ours.abs().max(theirs.abs()).max(1.0);
        let relative = diff / theirs.abs();
        assert!(
            scaled <= TOL,
            "{what}: ours {ours}, torch's {theirs}, off by {scaled:e} (relative)"
        );
        self.scaled = self.scaled.max(scaled);
        self.relative = self.relative.max(relative);
    }

    /// The worst errors, as the tests print them after `what`.
    fn said(&self, what: &str) -> String {
        format!(
            "{what}, worst error {:e} (|a - b| / |b|: {:e})",
            self.scaled, self.relative
        )
    }

    /// Prints the worst errors and checks the plain relative one too.
    fn finish(&self, what: &str) {
        eprintln!("{}", self.said(what));
        assert!(
            self.relative <= TOL,
            "|a - b| / |b| reaches {:e}",
            self.relative
        );
    }
}

/// Checks `ours` (tokens x vocab) at the goldens' positions and columns against `theirs`
/// (positions x columns).
fn check_kept(
    worst: &mut Worst,
    what: &str,
    g: &Value,
    ours: &Array2<f64>,
    theirs: ArrayView2<f64>,
) {
    let columns = counts(&g["columns"]);
    for (r, p) in counts(&g["positions"]).into_iter().enumerate() {
        for (c, &column) in columns.iter().enumerate() {
            let at = format!("{what} position {p} column {column}");
            worst.check(&at, ours[[p, column]], theirs[[r, c]]);
        }
    }
}

#[test]
fn every_intervened_logit_equals_torchs() {
    let Some(p) = probe("every_intervened_logit_equals_torchs") else {
        return;
    };
    let g = &p.golden;
    let theirs: Array3<f64> = read_npy(data("smollm2.logits.npy")).unwrap();
    let cases = g["cases"].as_array().unwrap();
    assert_eq!(theirs.len_of(Axis(0)), cases.len());
    let started = Instant::now();
    let mut worst = Worst::default();
    for (case, theirs) in cases.iter().zip(theirs.outer_iter()) {
        let what = case["name"].as_str().unwrap();
        let edits = case["edits"].as_array().unwrap().iter().map(edit);
        let probe = edits.fold(Intervention::new().source(&p.corrupted), Intervention::edit);
        let ours = p.model.decoder().intervene(&p.clean, &probe).unwrap();
        assert_ne!(
            ours.logits, p.clean.logits,
            "{what}: the edit changes nothing"
        );
        check_kept(&mut worst, what, g, &ours.logits, theirs);
    }
    worst.finish(&format!(
        "SmolLM2: {} cases in {:?}",
        cases.len(),
        started.elapsed()
    ));
}

#[test]
fn attributions_equal_torchs_and_sum_to_the_logit() {
    let Some(p) = probe("attributions_equal_torchs_and_sum_to_the_logit") else {
        return;
    };
    let mut worst = Worst::default();
    let attributions = p.golden["attributions"].as_array().unwrap();
    assert!(!attributions.is_empty());
    for a in attributions {
        let run = match a["run"].as_str().unwrap() {
            "clean" => &p.clean,
            _ => &p.corrupted,
        };
        let (position, token) = (count(&a["position"]), count(&a["token"]));
        let what = format!("{} position {position} token {token}", a["run"]);
        let ours = p.model.decoder().attribute(run, position, token).unwrap();
        worst.check(
            &format!("{what} embedded"),
            ours.embedded,
            number(&a["embedded"]),
        );
        worst.check(&format!("{what} logit"), ours.logit, number(&a["logit"]));
        let layers = a["heads"].as_array().unwrap();
        assert_eq!(ours.heads.len(), layers.len(), "{what}: layers");
        for (l, heads) in layers.iter().enumerate() {
            let heads = heads.as_array().unwrap();
            assert_eq!(
                ours.heads[l].len(),
                heads.len(),
                "{what}: heads of layer {l}"
            );
            for (h, theirs) in heads.iter().enumerate() {
                worst.check(
                    &format!("{what} L{l}H{h}"),
                    ours.heads[l][h],
                    number(theirs),
                );
            }
            worst.check(
                &format!("{what} MLP {l}"),
                ours.mlps[l],
                number(&a["mlps"][l]),
            );
        }
        // The frozen scale makes the final norm linear: the parts are the logit.
        let sum = (ours.total() - ours.logit).abs() / ours.logit.abs().max(1.0);
        assert!(
            sum <= 1e-12,
            "{what}: the parts sum to the logit but for {sum:e}"
        );
    }
    worst.finish("SmolLM2: attributions");
}

#[test]
fn the_logit_lens_equals_torchs() {
    let Some(p) = probe("the_logit_lens_equals_torchs") else {
        return;
    };
    let lens = p.model.decoder().logit_lens(&p.clean).unwrap();
    let theirs: Array3<f64> = read_npy(data("smollm2.lens.npy")).unwrap();
    assert_eq!(lens.len(), theirs.len_of(Axis(0)), "layers + 1");
    let mut worst = Worst::default();
    for (l, (ours, theirs)) in lens.iter().zip(theirs.outer_iter()).enumerate() {
        check_kept(&mut worst, &format!("lens {l}"), &p.golden, ours, theirs);
    }
    assert_eq!(lens.last(), Some(&p.clean.logits), "the last is the run's");
    worst.finish("SmolLM2: the lens");
}

#[test]
fn every_intervened_hidden_state_of_minilm_equals_torchs() {
    let test = "every_intervened_hidden_state_of_minilm_equals_torchs";
    let Some(dir) = attention_lab_io::cache::model_dir() else {
        println!(
            "skipped {test}: the MiniLM model is not installed ({})",
            attention_lab_io::cache::MINILM.how_to_install()
        );
        return;
    };
    let model = Model::load(&dir).unwrap_or_else(|e| panic!("{e}"));
    let encoder = model.encoder();
    let g = json(&data("minilm.json"));
    let clean = encoder.forward(&counts(&g["prompt"])).unwrap();
    let corrupted = encoder.forward(&counts(&g["corrupted"])).unwrap();
    let theirs: Array3<f64> = read_npy(data("minilm.hidden.npy")).unwrap();
    let cases = g["cases"].as_array().unwrap();
    assert_eq!(theirs.len_of(Axis(0)), cases.len());
    let rows = counts(&g["rows"]);
    let started = Instant::now();
    let mut worst = Worst::default();
    for (case, theirs) in cases.iter().zip(theirs.outer_iter()) {
        let what = case["name"].as_str().unwrap();
        let edits = case["edits"].as_array().unwrap().iter().map(edit);
        let probe = edits.fold(Intervention::new().source(&corrupted), Intervention::edit);
        let ours = encoder.intervene(&clean, &probe).unwrap();
        let ours = ours.last_hidden_state().select(Axis(0), &rows);
        for ((r, d), &ours) in ours.indexed_iter() {
            worst.check(
                &format!("{what} row {} column {d}", rows[r]),
                ours,
                theirs[[r, d]],
            );
        }
    }
    eprintln!(
        "{}",
        worst.said(&format!(
            "MiniLM: {} cases in {:?}",
            cases.len(),
            started.elapsed()
        ))
    );
}
