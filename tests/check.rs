//! The in-notebook checks (`attention_lab::check`): every mistake they name is planted in a
//! learner's function written by hand and named; the right function passes; a panic and a
//! wrong shape get their line; and each student's inputs are their own, the same every run.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::cell::RefCell;

use attention_lab::check::step::{
    Step, CONCAT, DK, DQ, DSCORES, DV, DWEIGHTS, OUTPUT, SCORES, WEIGHTS,
};
use attention_lab::check::{seed_for, Checked, Checker, Mistake, Outcome, DEFAULT_SEED};
use ndarray::{concatenate, Array2, Axis};

type M = Array2<f64>;

/// The mistake planted in a learner's function written by hand (not through the
/// classifier); `None` for the right function.
type Plant = Option<Mistake>;

const V_DZ_T: Mistake = Mistake::Transposed("V dZ^T instead of dZ V^T");
const DS_T_K: Mistake = Mistake::Transposed("dS^T K instead of dS K");
const DS_Q: Mistake = Mistake::Transposed("dS Q instead of dS^T Q");
const A_DZ: Mistake = Mistake::Transposed("A dZ instead of A^T dZ");

/// The forward pass's mistakes that the attention, head and multi-head checks name.
const FORWARD: [Mistake; 6] = [
    Mistake::NoSqrtDk,
    Mistake::DividedByDk,
    Mistake::KNotTransposed,
    Mistake::KQTransposed,
    Mistake::SoftmaxColumns,
    Mistake::NaiveSoftmax,
];

/// The mistakes only the multi-head check names.
const MULTI_HEAD: [Mistake; 3] = [
    Mistake::HeadOrder,
    Mistake::NoOutputProjection,
    Mistake::WoWrongSide,
];

/// The backward pass's mistakes that the attention-backward check names.
const BACKWARD: [Mistake; 6] = [
    Mistake::JacobianDiagonalOnly,
    Mistake::BackwardNoSqrtDk,
    V_DZ_T,
    DS_T_K,
    DS_Q,
    A_DZ,
];

/// Seeds of several students, the default one among them.
fn seeds() -> Vec<u64> {
    let mut seeds = vec![DEFAULT_SEED, 0, 1, 2];
    seeds.extend(["ada", "alan", "grace", "s01"].map(|u| seed_for(Some(u))));
    seeds
}

/// A learner's row-wise softmax; `naive` without subtracting the row's maximum.
fn row_softmax(s: &M, naive: bool) -> M {
    let mut out = s.clone();
    for mut row in out.rows_mut() {
        let max = if naive {
            0.0
        } else {
            row.fold(f64::NEG_INFINITY, |a, &b| a.max(b))
        };
        row.mapv_inplace(|x| (x - max).exp());
        let sum = row.sum();
        row.mapv_inplace(|x| x / sum);
    }
    out
}

fn weights(p: Plant, q: &M, k: &M) -> M {
    let dk = k.ncols() as f64;
    let scores = match p {
        Some(Mistake::NoSqrtDk) => q.dot(&k.t()),
        Some(Mistake::DividedByDk) => q.dot(&k.t()) / dk,
        Some(Mistake::KNotTransposed) => q.dot(k) / dk.sqrt(),
        Some(Mistake::KQTransposed) => k.dot(&q.t()) / dk.sqrt(),
        _ => q.dot(&k.t()) / dk.sqrt(),
    };
    match p {
        Some(Mistake::SoftmaxColumns) => row_softmax(&scores.t().to_owned(), false).reversed_axes(),
        Some(Mistake::NaiveSoftmax) => row_softmax(&scores, true),
        _ => row_softmax(&scores, false),
    }
}

fn attention(p: Plant, q: &M, k: &M, v: &M) -> M {
    weights(p, q, k).dot(v)
}

fn head(p: Plant, x: &M, wq: &M, wk: &M, wv: &M) -> M {
    attention(p, &x.dot(wq), &x.dot(wk), &x.dot(wv))
}

fn multi_head(p: Plant, x: &M, wq: &[M], wk: &[M], wv: &[M], wo: &M) -> M {
    let mut zs: Vec<M> = (0..wq.len())
        .map(|i| head(p, x, &wq[i], &wk[i], &wv[i]))
        .collect();
    if p == Some(Mistake::HeadOrder) {
        zs.reverse();
    }
    let views: Vec<_> = zs.iter().map(|z| z.view()).collect();
    let concat = concatenate(Axis(1), &views).unwrap();
    match p {
        Some(Mistake::NoOutputProjection) => concat,
        Some(Mistake::WoWrongSide) => wo.dot(&concat),
        _ => concat.dot(wo),
    }
}

fn softmax_backward(p: Plant, a: &M, da: &M) -> M {
    if p == Some(Mistake::JacobianDiagonalOnly) {
        return a * da;
    }
    let rowsum = (a * da).sum_axis(Axis(1)).insert_axis(Axis(1));
    a * &(da - &rowsum)
}

fn attention_backward(p: Plant, q: &M, k: &M, v: &M, dz: &M) -> (M, M, M) {
    let a = weights(p, q, k);
    let da = if p == Some(V_DZ_T) {
        v.dot(&dz.t())
    } else {
        dz.dot(&v.t())
    };
    let ds = softmax_backward(p, &a, &da);
    let scale = if p == Some(Mistake::BackwardNoSqrtDk) {
        1.0
    } else {
        (k.ncols() as f64).sqrt()
    };
    let dq = if p == Some(DS_T_K) {
        ds.t().dot(k)
    } else {
        ds.dot(k)
    };
    let dk = if p == Some(DS_Q) {
        ds.dot(q)
    } else {
        ds.t().dot(q)
    };
    let dv = if p == Some(A_DZ) {
        a.dot(dz)
    } else {
        a.t().dot(dz)
    };
    (dq / scale, dk / scale, dv)
}

/// The checks of a learner's functions with `plant` in them.
fn check_attention(c: &Checker, plant: Plant) -> Checked {
    c.attention(|q: &M, k: &M, v: &M| attention(plant, q, k, v))
}

fn check_head(c: &Checker, plant: Plant) -> Checked {
    c.head(|x: &M, wq: &M, wk: &M, wv: &M| head(plant, x, wq, wk, wv))
}

fn check_multi_head(c: &Checker, plant: Plant) -> Checked {
    c.multi_head(|x: &M, wq: &[M], wk: &[M], wv: &[M], wo: &M| multi_head(plant, x, wq, wk, wv, wo))
}

fn check_softmax_backward(c: &Checker, plant: Plant) -> Checked {
    c.softmax_backward(|a: &M, da: &M| softmax_backward(plant, a, da))
}

fn check_attention_backward(c: &Checker, plant: Plant) -> Checked {
    c.attention_backward(|q: &M, k: &M, v: &M, dz: &M| attention_backward(plant, q, k, v, dz))
}

#[test]
fn the_right_functions_pass_for_every_student() {
    for seed in seeds() {
        let c = Checker::new(seed);
        let right = check_attention(&c, None);
        assert_eq!(
            right.to_string(),
            "right: your attention matches on 3 random inputs"
        );
        assert!(right.is_right());
        assert!(c.softmax(|s: &M| row_softmax(s, false)).is_right());
        assert!(check_head(&c, None).is_right());
        assert_eq!(
            check_multi_head(&c, None).to_string(),
            "right: your multi-head attention matches on 3 random inputs"
        );
    }
}

#[test]
fn every_forward_mistake_is_named_by_attention_head_and_multi_head() {
    for seed in seeds() {
        let c = Checker::new(seed);
        for named in FORWARD {
            let at = check_attention(&c, Some(named));
            assert_eq!(at.mistake(), Some(named), "attention, seed {seed}");
            assert_eq!(at.to_string(), format!("not yet: {}", named.describe()));
            let h = check_head(&c, Some(named));
            assert_eq!(h.mistake(), Some(named), "head, seed {seed}");
            let m = check_multi_head(&c, Some(named));
            assert_eq!(m.mistake(), Some(named), "multi-head, seed {seed}");
        }
    }
}

#[test]
fn the_heads_order_and_w_o_are_named_by_multi_head() {
    for seed in seeds() {
        let c = Checker::new(seed);
        for named in MULTI_HEAD {
            let m = check_multi_head(&c, Some(named));
            assert_eq!(m.mistake(), Some(named), "seed {seed}");
        }
    }
    let order = check_multi_head(&Checker::new(DEFAULT_SEED), Some(Mistake::HeadOrder));
    assert_eq!(
        order.to_string(),
        "not yet: the heads were concatenated in the wrong order"
    );
}

#[test]
fn the_softmax_check_names_columns_and_the_naive_softmax() {
    for seed in seeds() {
        let c = Checker::new(seed);
        let columns = c.softmax(|s: &M| row_softmax(&s.t().to_owned(), false).reversed_axes());
        assert_eq!(columns.mistake(), Some(Mistake::SoftmaxColumns));
        let naive = c.softmax(|s: &M| row_softmax(s, true));
        assert_eq!(naive.mistake(), Some(Mistake::NaiveSoftmax), "seed {seed}");
    }
}

#[test]
fn softmax_backward_names_the_jacobians_diagonal_only() {
    for seed in seeds() {
        let c = Checker::new(seed);
        assert_eq!(
            check_softmax_backward(&c, None).to_string(),
            "right: your softmax backward matches on 3 random inputs"
        );
        let diagonal = check_softmax_backward(&c, Some(Mistake::JacobianDiagonalOnly));
        assert_eq!(diagonal.mistake(), Some(Mistake::JacobianDiagonalOnly));
    }
}

#[test]
fn attention_backward_names_every_backward_and_forward_mistake() {
    // The naive softmax is right on inputs that do not overflow, as a backward check's are.
    let forward = FORWARD.into_iter().filter(|&m| m != Mistake::NaiveSoftmax);
    let planted: Vec<Mistake> = BACKWARD.into_iter().chain(forward).collect();
    for seed in seeds() {
        let c = Checker::new(seed);
        assert!(check_attention_backward(&c, None).is_right(), "seed {seed}");
        for &named in &planted {
            let result = check_attention_backward(&c, Some(named));
            assert_eq!(result.mistake(), Some(named), "seed {seed}");
        }
    }
    let transposed = check_attention_backward(&Checker::new(DEFAULT_SEED), Some(A_DZ));
    assert_eq!(
        transposed.to_string(),
        "not yet: a product was transposed: A dZ instead of A^T dZ"
    );
}

/// Every mistake that a check's steps know is planted by a test above: a mistake added to a
/// step without a learner's function that makes it fails here.
#[test]
fn the_planted_mistakes_are_every_mistake_the_checks_can_name() {
    let same = |steps: &[Step], planted: &[Mistake]| {
        let mut known: Vec<Mistake> = Vec::new();
        for &(m, _) in steps.iter().flat_map(|s| s.mistakes) {
            if m != Mistake::ForgotMask && !known.contains(&m) {
                known.push(m);
            }
        }
        assert_eq!(known.len(), planted.len(), "{known:?}");
        assert!(known.iter().all(|m| planted.contains(m)), "{known:?}");
    };
    // attention, head (its projections and A V know no mistake) and softmax
    same(&[SCORES, WEIGHTS], &FORWARD);
    same(&[CONCAT, OUTPUT], &MULTI_HEAD);
    same(&[DWEIGHTS, DSCORES, DQ, DK, DV], &BACKWARD);
    // The mask is forgotten only on a masked sheet: a check's scores have none to forget.
    let (forgot, redo) = SCORES.mistakes[4];
    assert_eq!(forgot, Mistake::ForgotMask);
    let q = Array2::eye(2);
    assert_eq!(redo(&[&q, &q], &q), None);
}

/// The library's own backward passes (feature `learn`) are right by the checks.
#[cfg(feature = "learn")]
#[test]
fn the_librarys_backward_passes_are_right() {
    use attention_lab::prelude::{attention_backward, scaled_dot_product_attention, Attend};
    for seed in seeds() {
        let c = Checker::new(seed);
        let softmax = c.softmax_backward(|a: &M, da: &M| {
            attention_lab::prelude::softmax_backward(a, da).unwrap()
        });
        assert!(softmax.is_right(), "{softmax}");
        let attention = c.attention_backward(|q: &M, k: &M, v: &M, dz: &M| {
            let out = scaled_dot_product_attention(q, k, v, &Attend::new()).unwrap();
            let g = attention_backward(q, k, v, &out, dz).unwrap();
            (g.dq, g.dk, g.dv)
        });
        assert!(attention.is_right(), "{attention}");
    }
}

#[test]
fn a_panic_is_a_line_not_a_panic_out_of_the_check() {
    let result = Checker::new(DEFAULT_SEED).attention(|q: &M, k: &M, v: &M| {
        // Q K without its transpose, on an input where it does not fit.
        let s = q.dot(&k.slice(ndarray::s![..1, ..]));
        s.dot(v)
    });
    assert!(matches!(
        result.outcome(),
        Outcome::Panicked { input: 1, .. }
    ));
    assert!(
        result
            .to_string()
            .starts_with("not yet: your attention panicked on input 1 of 3: "),
        "{result}"
    );
    let message = Checker::new(DEFAULT_SEED)
        .head(|_: &M, _: &M, _: &M, _: &M| -> M { panic!("my own message {}", 7) });
    assert!(
        message.to_string().ends_with(": my own message 7"),
        "{message}"
    );
}

#[test]
fn a_wrong_shape_is_named_with_the_shape_it_should_have() {
    let result = Checker::new(DEFAULT_SEED).attention(|q: &M, _: &M, _: &M| q.clone());
    assert_eq!(
        result.outcome(),
        &Outcome::Shape {
            input: 1,
            output: "z",
            got: (3, 3),
            expected: (3, 2)
        }
    );
    assert_eq!(
        result.to_string(),
        "not yet: your attention gave z as a 3x3 matrix on input 1 of 3; it should be 3x2"
    );
}

#[test]
fn a_wrong_answer_no_mistake_explains_is_said_without_the_expected_matrix() {
    let result =
        Checker::new(DEFAULT_SEED).attention(|q: &M, k: &M, v: &M| attention(None, q, k, v) * 2.0);
    assert_eq!(
        result.to_string(),
        "not yet: your attention gives a wrong z on input 1 of 3, and no mistake from the list \
         explains it"
    );
}

#[test]
fn each_student_gets_their_own_inputs_and_the_same_on_every_run() {
    assert_eq!(seed_for(Some("ada")), seed_for(Some("ada")));
    assert_ne!(seed_for(Some("ada")), seed_for(Some("alan")));
    assert_eq!(seed_for(None), DEFAULT_SEED);
    // 64-bit FNV-1a: stable across machines and runs.
    assert_eq!(seed_for(Some("a")), 0xaf63_dc4c_8601_ec8c);
    let first_q = |seed: u64| {
        let seen = RefCell::new(None);
        Checker::new(seed).attention(|q: &M, k: &M, v: &M| {
            seen.borrow_mut().get_or_insert_with(|| q.clone());
            attention(None, q, k, v)
        });
        seen.into_inner().unwrap()
    };
    let ada = first_q(seed_for(Some("ada")));
    assert_eq!(ada, first_q(seed_for(Some("ada"))));
    assert_ne!(ada, first_q(seed_for(Some("alan"))));
}
