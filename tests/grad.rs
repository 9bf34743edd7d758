//! The hand-written backward passes (src/learn/grad/) against torch.autograd in float64
//! (scripts/grad_goldens.py, tests/data/grad/): every gradient to 1e-10 relative, SGD's and
//! AdamW's parameters after each of 10 steps to 1e-12; and one head's dW_Q against central
//! differences, so the check does not rest on torch alone.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use std::path::PathBuf;

use attention_lab::prelude::*;
use common::{ids, matrix, within as close};
use ndarray::Array1;
use proptest::prelude::*;
use serde_json::Value;

/// Gradients hold to this relative error (scaled by the larger magnitude, at least 1).
const TOL: f64 = 1e-10;
/// The optimisers' parameters hold to this.
const OPTIM_TOL: f64 = 1e-12;

fn golden(name: &str) -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/grad/{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn vector(v: &Value) -> Array1<f64> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn mask(v: &Value) -> Mask {
    let n = v.as_array().map_or(0, Vec::len);
    let rows: Vec<Vec<bool>> = serde_json::from_value(v.clone()).expect("rows of booleans");
    let cols = rows.first().map_or(0, Vec::len);
    let flat = rows.into_iter().flatten().collect();
    Mask::from_blocked(&Array2::from_shape_vec((n, cols), flat).unwrap())
}

/// Compares matrices and vectors by name against a golden case, keeping the worst error.
struct Check<'a> {
    case: &'a Value,
    label: String,
    worst: f64,
}

impl<'a> Check<'a> {
    fn new(case: &'a Value, label: impl Into<String>) -> Self {
        Check {
            case,
            label: label.into(),
            worst: 0.0,
        }
    }
    fn m(&mut self, name: &str, ours: &Array2<f64>) {
        let what = format!("{} {name}", self.label);
        self.worst = self
            .worst
            .max(close(&what, ours, &matrix(&self.case[name]), TOL));
    }
    fn v(&mut self, name: &str, ours: &Array1<f64>) {
        let what = format!("{} {name}", self.label);
        self.worst = self
            .worst
            .max(close(&what, ours, &vector(&self.case[name]), TOL));
    }
    fn opt_v(&mut self, name: &str, ours: &Option<Array1<f64>>) {
        match (ours, self.case.get(name)) {
            (Some(ours), Some(_)) => self.v(name, ours),
            (None, None) => {}
            _ => panic!("{} {name}: present on one side only", self.label),
        }
    }
}

fn report(group: &str, worst: f64) {
    eprintln!("{group}: worst relative error {worst:e}");
}

fn head_of(case: &Value) -> Head {
    let head = Head::new(
        matrix(&case["wq"]),
        matrix(&case["wk"]),
        matrix(&case["wv"]),
    )
    .unwrap();
    match case.get("bq") {
        Some(bq) => head
            .with_biases(vector(bq), vector(&case["bk"]), vector(&case["bv"]))
            .unwrap(),
        None => head,
    }
}

fn check_head(c: &mut Check<'_>, grad: &HeadGrad) {
    for (name, ours) in [
        ("dweights", &grad.dweights),
        ("dscores", &grad.dscores),
        ("dq", &grad.dq),
        ("dk", &grad.dk),
        ("dv", &grad.dv),
        ("dwq", &grad.dwq),
        ("dwk", &grad.dwk),
        ("dwv", &grad.dwv),
    ] {
        c.m(name, ours);
    }
    c.opt_v("dbq", &grad.dbq);
    c.opt_v("dbk", &grad.dbk);
    c.opt_v("dbv", &grad.dbv);
}

#[test]
fn softmax_backward_is_autograds() {
    let cases = golden("softmax");
    let mut worst: f64 = 0.0;
    for (name, case) in cases.as_object().unwrap() {
        let scores = matrix(&case["scores"]);
        let masked = &scores + mask(&case["blocked"]).additive();
        let weights = Softmax::Stable.apply_masked(&masked);
        let mut c = Check::new(case, format!("softmax {name}"));
        c.m("weights", &weights);
        c.m(
            "dscores",
            &softmax_backward(&weights, &matrix(&case["G"])).unwrap(),
        );
        worst = worst.max(c.worst);
    }
    report("softmax", worst);
}

#[test]
fn attention_backward_is_autograds() {
    let cases = golden("attention");
    let mut worst: f64 = 0.0;
    for (name, case) in cases.as_object().unwrap() {
        let (q, k, v) = (matrix(&case["q"]), matrix(&case["k"]), matrix(&case["v"]));
        let mask = mask(&case["blocked"]);
        let a = scaled_dot_product_attention(&q, &k, &v, &Attend::new().mask(&mask)).unwrap();
        let grad = attention_backward(&q, &k, &v, &a, &matrix(&case["G"])).unwrap();
        let mut c = Check::new(case, format!("attention {name}"));
        c.m("weights", &a.weights);
        c.m("output", &a.output);
        for (name, ours) in [
            ("dq", &grad.dq),
            ("dk", &grad.dk),
            ("dv", &grad.dv),
            ("dscores", &grad.dscores),
            ("dweights", &grad.dweights),
        ] {
            c.m(name, ours);
        }
        worst = worst.max(c.worst);
    }
    report("attention", worst);
}

#[test]
fn head_backward_is_autograds() {
    let cases = golden("head");
    let mut worst: f64 = 0.0;
    for (name, case) in cases.as_object().unwrap() {
        let head = head_of(case);
        let x = matrix(&case["x"]);
        let mask = mask(&case["blocked"]);
        let out = head.forward(&x, &Attend::new().mask(&mask)).unwrap();
        let grad = head.backward(&x, &out, &matrix(&case["G"])).unwrap();
        let mut c = Check::new(case, format!("head {name}"));
        c.m("z", &out.z);
        c.m("dx", &grad.dx);
        check_head(&mut c, &grad);
        worst = worst.max(c.worst);
    }
    report("head", worst);
}

#[test]
fn multi_head_backward_is_autograds() {
    let cases = golden("multi_head");
    let mut worst: f64 = 0.0;
    for (name, case) in cases.as_object().unwrap() {
        let heads = case["heads"]
            .as_array()
            .unwrap()
            .iter()
            .map(head_of)
            .collect();
        let mut layer = MultiHead::new(heads, case.get("wo").map(matrix)).unwrap();
        if let Some(bo) = case.get("bo") {
            layer = layer.with_output_bias(vector(bo)).unwrap();
        }
        let x = matrix(&case["x"]);
        let mask = mask(&case["blocked"]);
        let out = layer.forward(&x, &Attend::new().mask(&mask)).unwrap();
        let grad = layer.backward(&x, &out, &matrix(&case["G"])).unwrap();
        let mut c = Check::new(case, format!("multi_head {name}"));
        c.m("result", out.result());
        c.m("dx", &grad.dx);
        c.m("dconcat", &grad.dconcat);
        assert_eq!(grad.dwo.is_some(), case.get("wo").is_some(), "{name}: dwo");
        if let Some(dwo) = &grad.dwo {
            c.m("dwo", dwo);
        }
        c.opt_v("dbo", &grad.dbo);
        worst = worst.max(c.worst);
        for (i, (head_case, head_grad)) in case["heads"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&grad.heads)
            .enumerate()
        {
            let mut c = Check::new(head_case, format!("multi_head {name} head {i}"));
            check_head(&mut c, head_grad);
            worst = worst.max(c.worst);
        }
    }
    report("multi_head", worst);
}

#[test]
fn norm_backward_is_autograds() {
    let cases = golden("norm");
    let case = &cases["layer_norm"];
    let x = matrix(&case["x"]);
    let norm = LayerNorm::new(
        vector(&case["gamma"]),
        vector(&case["beta"]),
        case["eps"].as_f64().unwrap(),
    )
    .unwrap();
    let grad = norm.backward(&x, &matrix(&case["G"])).unwrap();
    let mut c = Check::new(case, "layer_norm");
    c.m("y", &norm.forward(&x).unwrap());
    c.m("dx", &grad.dx);
    c.m("dxhat", &grad.dxhat);
    c.v("dgamma", &grad.dgamma);
    c.v("dbeta", &grad.dbeta);
    let mut worst = c.worst;

    let case = &cases["rms_norm"];
    let x = matrix(&case["x"]);
    let norm = RmsNorm::new(vector(&case["weight"]), case["eps"].as_f64().unwrap()).unwrap();
    let grad = norm.backward(&x, &matrix(&case["G"])).unwrap();
    let mut c = Check::new(case, "rms_norm");
    c.m("y", &norm.forward(&x).unwrap());
    c.m("dx", &grad.dx);
    c.m("dxhat", &grad.dxhat);
    c.v("dweight", &grad.dweight);
    worst = worst.max(c.worst);
    report("norm", worst);
}

#[test]
fn feed_forward_backward_is_autograds() {
    let cases = golden("feed_forward");
    let case = &cases["gelu"];
    let ff = FeedForward::new(
        matrix(&case["w1"]),
        vector(&case["b1"]),
        matrix(&case["w2"]),
        vector(&case["b2"]),
    )
    .unwrap();
    let x = matrix(&case["x"]);
    let out = ff.forward(&x).unwrap();
    let grad = ff.backward(&x, &out, &matrix(&case["G"])).unwrap();
    let mut c = Check::new(case, "feed_forward gelu");
    c.m("output", &out.output);
    for (name, ours) in [
        ("dx", &grad.dx),
        ("dw1", &grad.dw1),
        ("dw2", &grad.dw2),
        ("dhidden", &grad.dhidden),
        ("dactivated", &grad.dactivated),
    ] {
        c.m(name, ours);
    }
    c.v("db1", &grad.db1);
    c.v("db2", &grad.db2);
    let mut worst = c.worst;

    let case = &cases["swiglu"];
    let ff = SwiGlu::new(
        matrix(&case["w_gate"]),
        matrix(&case["w_up"]),
        matrix(&case["w_down"]),
    )
    .unwrap();
    let x = matrix(&case["x"]);
    let out = ff.forward(&x).unwrap();
    let grad = ff.backward(&x, &out, &matrix(&case["G"])).unwrap();
    let mut c = Check::new(case, "feed_forward swiglu");
    c.m("output", &out.output);
    for (name, ours) in [
        ("dx", &grad.dx),
        ("dw_gate", &grad.dw_gate),
        ("dw_up", &grad.dw_up),
        ("dw_down", &grad.dw_down),
        ("dgate", &grad.dgate),
        ("dup", &grad.dup),
        ("dactivated", &grad.dactivated),
    ] {
        c.m(name, ours);
    }
    worst = worst.max(c.worst);
    report("feed_forward", worst);
}

#[test]
fn embedding_backward_is_autograds() {
    let case = golden("embedding");
    let table = matrix(&case["table"]);
    let dtable =
        embedding_backward(&ids(&case["ids"]), &matrix(&case["G"]), table.nrows()).unwrap();
    let mut c = Check::new(&case, "embedding");
    c.m("dtable", &dtable);
    report("embedding", c.worst);
}

#[test]
fn cross_entropy_is_torchs() {
    let cases = golden("cross_entropy");
    let mut worst: f64 = 0.0;
    for (name, case) in cases.as_object().unwrap() {
        let ce = cross_entropy(&matrix(&case["logits"]), &ids(&case["targets"])).unwrap();
        let theirs = case["loss"].as_f64().unwrap();
        let loss_error = (ce.loss - theirs).abs() / ce.loss.abs().max(theirs.abs()).max(1.0);
        assert!(
            loss_error <= TOL,
            "cross_entropy {name} loss: {} vs {theirs}",
            ce.loss
        );
        let mut c = Check::new(case, format!("cross_entropy {name}"));
        c.m("dlogits", &ce.dlogits);
        worst = worst.max(c.worst).max(loss_error);
    }
    report("cross_entropy", worst);
}

/// Feeds torch's recorded gradients to `step` and compares the parameters after each step.
fn replay(
    case: &Value,
    label: &str,
    mut step: impl FnMut(&mut [&mut Array2<f64>], &[&Array2<f64>]),
) -> f64 {
    let (mut w1, mut w2) = (matrix(&case["w1"]), matrix(&case["w2"]));
    let mut worst: f64 = 0.0;
    let steps = case["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 10);
    for (i, s) in steps.iter().enumerate() {
        step(
            &mut [&mut w1, &mut w2],
            &[&matrix(&s["g1"]), &matrix(&s["g2"])],
        );
        worst = worst.max(close(
            &format!("{label} step {i} w1"),
            &w1,
            &matrix(&s["w1"]),
            OPTIM_TOL,
        ));
        worst = worst.max(close(
            &format!("{label} step {i} w2"),
            &w2,
            &matrix(&s["w2"]),
            OPTIM_TOL,
        ));
    }
    assert_ne!(w1, matrix(&case["w1"]), "{label}: the parameters moved");
    worst
}

#[test]
fn sgd_and_adamw_are_torchs() {
    let cases = golden("optim");
    let case = &cases["sgd"];
    let f = |name: &str| case[name].as_f64().unwrap();
    let mut sgd = Sgd::new(f("lr"), f("momentum"), f("weight_decay")).unwrap();
    let worst_sgd = replay(case, "sgd", |p, g| sgd.step(p, g).unwrap());
    report("sgd", worst_sgd);

    let case = &cases["adamw"];
    let f = |name: &str| case[name].as_f64().unwrap();
    let betas = (
        case["betas"][0].as_f64().unwrap(),
        case["betas"][1].as_f64().unwrap(),
    );
    let mut adamw = AdamW::new(f("lr"), betas, f("eps"), f("weight_decay")).unwrap();
    let worst_adamw = replay(case, "adamw", |p, g| adamw.step(p, g).unwrap());
    report("adamw", worst_adamw);
}

#[test]
fn shape_mistakes_are_errors_naming_the_matrices() {
    let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2)).unwrap();
    let x = array![[1.0, 2.0], [3.0, 4.0]];
    let out = head.forward(&x, &Attend::new()).unwrap();
    let err = head.backward(&x, &out, &Array2::zeros((3, 2))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "dL/dz is 3x2 but z is 2x2: a gradient must have the shape of the value it is the gradient of"
    );
    let err = embedding_backward(&[0, 5], &Array2::zeros((2, 3)), 4).unwrap_err();
    assert!(
        matches!(err, AttentionError::OutOfRange { index: 5, .. }),
        "{err}"
    );
    let err = cross_entropy(&Array2::zeros((2, 3)), &[0]).unwrap_err();
    assert!(matches!(err, AttentionError::Mismatch { .. }), "{err}");
    let mut sgd = Sgd::new(0.1, 0.9, 0.0).unwrap();
    let mut w = Array2::zeros((2, 2));
    let err = sgd
        .step(&mut [&mut w], &[&Array2::zeros((2, 3))])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter 0 is 2x2 but gradient 0 is 2x3: a gradient must have the shape of its parameter"
    );
    assert!(AdamW::new(0.1, (1.0, 0.999), 1e-8, 0.0).is_err());
}

#[test]
fn another_layers_forward_pass_is_an_error_not_a_panic() {
    let w = Array2::<f64>::eye(4);
    let x = array![[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0]];
    let layer = MultiHead::split(&w, &w, &w, 2, Some(Array2::ones((4, 3)))).unwrap();
    let wider = MultiHead::split(&w, &w, &w, 2, Some(Array2::ones((4, 5)))).unwrap();
    let out = wider.forward(&x, &Attend::new()).unwrap();
    let err = layer.backward(&x, &out, &Array2::ones((2, 5))).unwrap_err();
    assert!(matches!(err, AttentionError::Mismatch { .. }), "{err}");
    let ff = FeedForward::new(
        Array2::ones((4, 3)),
        Array1::zeros(3),
        Array2::ones((3, 4)),
        Array1::zeros(4),
    )
    .unwrap();
    let other = FeedForward::new(
        Array2::ones((4, 3)),
        Array1::zeros(3),
        Array2::ones((3, 2)),
        Array1::zeros(2),
    )
    .unwrap();
    let out = other.forward(&x).unwrap();
    let err = ff.backward(&x, &out, &Array2::ones((2, 2))).unwrap_err();
    assert!(matches!(err, AttentionError::Mismatch { .. }), "{err}");
}

/// L = sum(z * G) for a head whose W_Q is `wq`.
fn head_loss(head: &Head, wq: &Array2<f64>, x: &Array2<f64>, g: &Array2<f64>) -> f64 {
    let (bq, bk, bv) = head.biases().unwrap();
    let moved = Head::new(wq.clone(), head.wk().clone(), head.wv().clone())
        .unwrap()
        .with_biases(bq.clone(), bk.clone(), bv.clone())
        .unwrap();
    let z = moved.forward(x, &Attend::new().causal()).unwrap().z;
    (z * g).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// dW_Q by central differences: (L(W_Q + h E_ij) - L(W_Q - h E_ij)) / 2h, with no torch.
    #[test]
    fn head_dwq_matches_central_differences(seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut random = |r, c| random_projection(r, c, &mut rng).unwrap() * 2.0 - 1.0;
        let (x, g) = (random(4, 3), random(4, 2));
        let head = Head::new(random(3, 2), random(3, 2), random(3, 2)).unwrap()
            .with_biases(random(1, 2).row(0).to_owned(), random(1, 2).row(0).to_owned(), random(1, 2).row(0).to_owned())
            .unwrap();
        let out = head.forward(&x, &Attend::new().causal()).unwrap();
        let grad = head.backward(&x, &out, &g).unwrap();
        let h = 1e-5;
        for ((i, j), &analytic) in grad.dwq.indexed_iter() {
            let mut plus = head.wq().clone();
            plus[[i, j]] += h;
            let mut minus = head.wq().clone();
            minus[[i, j]] -= h;
            let numeric = (head_loss(&head, &plus, &x, &g) - head_loss(&head, &minus, &x, &g)) / (2.0 * h);
            prop_assert!(
                (numeric - analytic).abs() <= 1e-7 * analytic.abs().max(1.0),
                "dW_Q[{i},{j}]: central differences {numeric}, backward {analytic}"
            );
        }
    }
}
