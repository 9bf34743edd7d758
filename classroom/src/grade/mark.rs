//! Judging each answer matrix: right, carried forward, or wrong with the mistake named.

use attention_lab::np::round;
use attention_lab::prelude::{MultiHeadOutput, Softmax};
use attention_lab_io::error::Result;
use ndarray::{concatenate, s, Axis};

use super::answers::{Key, Submission};
use super::M;

/// A mistake from the list students are known to make, found by recomputing the step with
/// the mistake applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mistake {
    /// `Q K^T` without the division by `sqrt(d_k)`.
    NoSqrtDk,
    /// `Q K^T / d_k`.
    DividedByDk,
    /// `Q K / sqrt(d_k)` (only possible when K is square).
    KNotTransposed,
    /// `K Q^T / sqrt(d_k)`: the scores transposed.
    KQTransposed,
    /// The softmax of each column instead of each row.
    SoftmaxColumns,
    /// `exp(s) / sum(exp(s))` where the scores overflow `exp`: NaN weights.
    NaiveSoftmax,
    /// The heads' outputs side by side, but not in the order 1, 2, ...
    HeadOrder,
    /// `W_O Z` instead of `Z W_O`.
    WoWrongSide,
    /// The concatenation `Z` handed in as the output: `W_O` not applied.
    NoOutputProjection,
    /// Numbers rounded to fewer decimals than the sheet asks, before or at this step.
    EarlyRounding(usize),
    /// On a masked sheet, the scores without the mask added: a blocked key keeps its score.
    ForgotMask,
    /// Backward: softmax's Jacobian without its second term, `dS = A * dA` instead of
    /// `A * (dA - rowsum(A * dA))`.
    JacobianDiagonalOnly,
    /// Backward: a product transposed, e.g. `V dZ^T` instead of `dZ V^T`; the detail says
    /// which was computed.
    Transposed(&'static str),
    /// Backward: the `1 / sqrt(d_k)` of the forward pass forgotten, `dQ = dS K`.
    BackwardNoSqrtDk,
}

impl Mistake {
    /// A short code for the gradebook.
    pub fn code(self) -> &'static str {
        match self {
            Mistake::NoSqrtDk => "no-sqrt-dk",
            Mistake::DividedByDk => "divided-by-dk",
            Mistake::KNotTransposed => "k-not-transposed",
            Mistake::KQTransposed => "kq-transposed",
            Mistake::SoftmaxColumns => "softmax-columns",
            Mistake::NaiveSoftmax => "naive-softmax",
            Mistake::HeadOrder => "head-order",
            Mistake::WoWrongSide => "wo-wrong-side",
            Mistake::NoOutputProjection => "no-wo",
            Mistake::EarlyRounding(_) => "early-rounding",
            Mistake::ForgotMask => "forgot-mask",
            Mistake::JacobianDiagonalOnly => "jacobian-diagonal",
            Mistake::Transposed(_) => "transposed",
            Mistake::BackwardNoSqrtDk => "backward-no-sqrt-dk",
        }
    }

    /// The mistake in words, for the student's feedback.
    pub fn describe(self) -> String {
        match self {
            Mistake::NoSqrtDk => "the scores were not divided by sqrt(d_k)".into(),
            Mistake::DividedByDk => "the scores were divided by d_k instead of sqrt(d_k)".into(),
            Mistake::KNotTransposed => "K was used instead of K^T (Q K, not Q K^T)".into(),
            Mistake::KQTransposed => "K Q^T was computed instead of Q K^T".into(),
            Mistake::SoftmaxColumns => {
                "the softmax was taken over the columns instead of each row".into()
            }
            Mistake::NaiveSoftmax => {
                "the naive softmax exp(s) / sum(exp(s)) overflowed; subtract each row's \
                 maximum first"
                    .into()
            }
            Mistake::HeadOrder => "the heads were concatenated in the wrong order".into(),
            Mistake::WoWrongSide => {
                "W_O was multiplied on the wrong side (W_O Z, not Z W_O)".into()
            }
            Mistake::NoOutputProjection => {
                "W_O was not applied: the output handed in is the concatenation Z".into()
            }
            Mistake::EarlyRounding(d) => format!(
                "numbers were rounded too early (to {d} decimal{})",
                if d == 1 { "" } else { "s" }
            ),
            Mistake::ForgotMask => {
                "the mask was not added to the scores (a blocked key's score is -inf, and its \
                 weight 0)"
                    .into()
            }
            Mistake::JacobianDiagonalOnly => {
                "softmax's Jacobian lost its second term: dS = A * dA, not \
                 A * (dA - rowsum(A * dA)) (each weight also depends on the row's other scores)"
                    .into()
            }
            Mistake::Transposed(what) => {
                format!("a product was transposed: {what}")
            }
            Mistake::BackwardNoSqrtDk => {
                "the backward pass forgot the 1/sqrt(d_k) of the scores (dQ = dS K / sqrt(d_k), \
                 dK = dS^T Q / sqrt(d_k))"
                    .into()
            }
        }
    }
}

/// How one answer matrix was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the tolerance of the key (or of the step redone on right inputs).
    Right,
    /// Wrong, but the step was done right on the student's own wrong inputs: half credit.
    CarriedForward,
    /// Wrong, and explained by this mistake.
    Mistake(Mistake),
    /// Wrong, and no mistake from the list reproduces it.
    Unexplained,
}

impl Verdict {
    /// Points earned, out of 1.
    pub fn points(self) -> f64 {
        match self {
            Verdict::Right => 1.0,
            Verdict::CarriedForward => 0.5,
            _ => 0.0,
        }
    }
}

/// One judged matrix.
#[derive(Debug, Clone)]
pub struct Mark {
    /// Gradebook column: `a1`, `b2`, `c`, `d`.
    pub part: String,
    /// The matrix as the sheet names it: `Q_1`, `S_2`, `Z`, `Z W_O`.
    pub matrix: String,
    /// Its inputs, named, for the carried-forward text.
    pub inputs: String,
    /// The judgement.
    pub verdict: Verdict,
}

/// Every number of `a` within `tol` of `b`'s; NaN matches NaN and an infinity itself.
pub(super) fn close(a: &M, b: &M, tol: f64) -> bool {
    a.dim() == b.dim()
        && a.iter().zip(b).all(|(&x, &y)| {
            if x.is_nan() || y.is_nan() {
                x.is_nan() && y.is_nan()
            } else if x.is_infinite() || y.is_infinite() {
                x == y
            } else {
                // The small relative slack absorbs binary rounding of decimal answers.
                (x - y).abs() <= tol * (1.0 + 1e-9) + 1e-12 * x.abs().max(y.abs())
            }
        })
}

/// A step of the forward pass from its inputs; `None` when their shapes do not fit.
pub(super) type StepFn = fn(&[&M]) -> Option<M>;
/// A step redone with a mistake; gets the student's answer too (for the order of heads).
pub(super) type MistakeFn = fn(&[&M], &M) -> Option<M>;

pub(super) fn product(i: &[&M]) -> Option<M> {
    (i[0].ncols() == i[1].nrows()).then(|| i[0].dot(i[1]))
}

pub(super) fn sqrt_dk(k: &M) -> f64 {
    (k.ncols() as f64).sqrt()
}

/// The inputs of a score step are Q, K and, on a masked sheet, the mask.
fn scores(i: &[&M]) -> Option<M> {
    (i[0].ncols() == i[1].ncols()).then(|| masked(i[0].dot(&i[1].t()) / sqrt_dk(i[1]), i))?
}

/// `s` with the mask added when the step has one (its third input); `None` when they do not
/// fit.
fn masked(s: M, i: &[&M]) -> Option<M> {
    match i.get(2) {
        None => Some(s),
        Some(mask) => (mask.dim() == s.dim()).then(|| s + *mask),
    }
}

/// The inputs of a weight step are S and, on a masked sheet, the mask: there a row of `-inf`
/// gets zero weights, as the library's masked forward pass gives.
fn softmax_rows(i: &[&M], softmax: Softmax) -> M {
    if i.len() > 1 {
        softmax.apply_masked(i[0])
    } else {
        softmax.apply(i[0])
    }
}

fn weights(i: &[&M]) -> Option<M> {
    Some(softmax_rows(i, Softmax::Stable))
}

fn concat(i: &[&M]) -> Option<M> {
    let views: Vec<_> = i.iter().map(|m| m.view()).collect();
    concatenate(Axis(1), &views).ok()
}

const SCORE_MISTAKES: [(Mistake, MistakeFn); 5] = [
    (Mistake::NoSqrtDk, |i, _| {
        (i[0].ncols() == i[1].ncols()).then(|| masked(i[0].dot(&i[1].t()), i))?
    }),
    (Mistake::DividedByDk, |i, _| {
        (i[0].ncols() == i[1].ncols())
            .then(|| masked(i[0].dot(&i[1].t()) / i[1].ncols() as f64, i))?
    }),
    (Mistake::KNotTransposed, |i, _| {
        (i[0].ncols() == i[1].nrows()).then(|| masked(i[0].dot(i[1]) / sqrt_dk(i[1]), i))?
    }),
    (Mistake::KQTransposed, |i, _| {
        (i[0].ncols() == i[1].ncols()).then(|| masked(i[1].dot(&i[0].t()) / sqrt_dk(i[1]), i))?
    }),
    // Only a masked sheet's step has the mask to forget.
    (Mistake::ForgotMask, |i, _| {
        (i.len() > 2 && i[0].ncols() == i[1].ncols()).then(|| i[0].dot(&i[1].t()) / sqrt_dk(i[1]))
    }),
];

const WEIGHT_MISTAKES: [(Mistake, MistakeFn); 2] = [
    (Mistake::SoftmaxColumns, |i, _| {
        let columns: Vec<M> = i.iter().map(|m| m.t().to_owned()).collect();
        let columns: Vec<&M> = columns.iter().collect();
        Some(softmax_rows(&columns, Softmax::Stable).reversed_axes())
    }),
    (Mistake::NaiveSoftmax, |i, _| {
        Some(softmax_rows(i, Softmax::Naive))
    }),
];

/// The heads' outputs rearranged as the answer's blocks show them, when that is another order.
fn head_order(zs: &[&M], answer: &M) -> Option<M> {
    let mut at = 0;
    let mut order = Vec::new();
    for width in zs.iter().map(|z| z.ncols()) {
        if at + width > answer.ncols() {
            return None;
        }
        let block = answer.slice(s![.., at..at + width]).to_owned();
        // The nearest head's output; `close` on the whole rearrangement decides.
        let distance = |z: &M| {
            if z.dim() != block.dim() {
                return f64::INFINITY;
            }
            z.iter()
                .zip(&block)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max)
        };
        let j = (0..zs.len())
            .filter(|&j| distance(zs[j]).is_finite())
            .min_by(|&a, &b| distance(zs[a]).total_cmp(&distance(zs[b])))?;
        order.push(j);
        at += width;
    }
    let identity = order.iter().enumerate().all(|(i, &j)| i == j);
    if identity {
        return None;
    }
    let chosen: Vec<&M> = order.iter().map(|&j| zs[j]).collect();
    concat(&chosen)
}

const CONCAT_MISTAKES: [(Mistake, MistakeFn); 1] = [(Mistake::HeadOrder, head_order)];

const OUTPUT_MISTAKES: [(Mistake, MistakeFn); 2] = [
    (Mistake::NoOutputProjection, |i, _| Some(i[0].clone())),
    (Mistake::WoWrongSide, |i, _| {
        (i[1].ncols() == i[0].nrows()).then(|| i[1].dot(i[0]))
    }),
];

/// One step to judge.
pub(super) struct Check<'a> {
    pub(super) part: String,
    pub(super) matrix: String,
    pub(super) inputs: String,
    pub(super) answer: &'a M,
    pub(super) reference: &'a M,
    /// The student's own inputs to the step, and whether all of them were right.
    pub(super) own: Vec<&'a M>,
    pub(super) own_right: bool,
    /// The key's inputs to the step.
    pub(super) given: Vec<&'a M>,
    pub(super) step: StepFn,
    pub(super) mistakes: &'a [(Mistake, MistakeFn)],
}

fn judge(c: &Check<'_>, precision: usize) -> Verdict {
    let tol = 10f64.powi(-(precision as i32));
    let fits = |m: Option<M>| m.is_some_and(|m| close(c.answer, &m, tol));
    if close(c.answer, c.reference, tol) {
        return Verdict::Right;
    }
    if fits((c.step)(&c.own)) {
        return if c.own_right {
            Verdict::Right
        } else {
            Verdict::CarriedForward
        };
    }
    for &(mistake, redo) in c.mistakes {
        if fits(redo(&c.own, c.answer)) || fits(redo(&c.given, c.answer)) {
            return Verdict::Mistake(mistake);
        }
    }
    for d in 0..precision {
        let rounded = |ms: &[&M]| -> Vec<M> { ms.iter().map(|m| round(*m, d as i32)).collect() };
        let (own, given) = (rounded(&c.own), rounded(&c.given));
        let redone = (c.step)(&c.own).map(|m| round(&m, d as i32));
        if fits(Some(round(c.reference, d as i32)))
            || fits(redone)
            || fits((c.step)(&own.iter().collect::<Vec<_>>()))
            || fits((c.step)(&given.iter().collect::<Vec<_>>()))
        {
            return Verdict::Mistake(Mistake::EarlyRounding(d));
        }
    }
    Verdict::Unexplained
}

impl Check<'_> {
    /// Judges the step and makes its mark.
    pub(super) fn mark(self, precision: usize) -> Mark {
        let verdict = judge(&self, precision);
        Mark {
            part: self.part,
            matrix: self.matrix,
            inputs: self.inputs,
            verdict,
        }
    }
}

/// A step's inputs followed by the mask, when there is one.
fn with_mask<'m>(mut inputs: Vec<&'m M>, mask: Option<&'m M>) -> Vec<&'m M> {
    inputs.extend(mask);
    inputs
}

/// The forward parts (a) to (d) of `sub`, judged against `key` and its solution
/// (`key.solution()`), in the order a student works.
///
/// # Errors
/// The submission's first wrong shape.
pub(crate) fn grade_forward(
    key: &Key,
    solution: &MultiHeadOutput,
    sub: &Submission,
) -> Result<Vec<Mark>> {
    sub.check_shapes(solution)?;
    let mine = &sub.answers;
    let p = key.precision;
    // A masked sheet's score and weight steps take the mask as their last input.
    let mask = key.mask.as_ref();
    let mut marks: Vec<Mark> = Vec::new();
    let mut heads_right = Vec::new();
    // Part (a) of every head first, then part (b), as the gradebook's columns.
    let mut projections_right = Vec::new();
    for (n, (h, w)) in mine.heads.iter().zip(&solution.heads).enumerate() {
        let i = n + 1;
        let mut right = [false; 3];
        for (m, (name, answer, reference, wm)) in [
            ("Q", &h.q, &w.q, &key.wq[n]),
            ("K", &h.k, &w.k, &key.wk[n]),
            ("V", &h.v, &w.v, &key.wv[n]),
        ]
        .into_iter()
        .enumerate()
        {
            let mark = Check {
                part: format!("a{i}"),
                matrix: format!("{name}_{i}"),
                inputs: String::new(),
                answer,
                reference,
                own: vec![&key.x, wm],
                own_right: true,
                given: vec![&key.x, wm],
                step: product,
                mistakes: &[],
            }
            .mark(p);
            right[m] = mark.verdict == Verdict::Right;
            marks.push(mark);
        }
        projections_right.push(right);
    }
    for (n, (h, w)) in mine.heads.iter().zip(&solution.heads).enumerate() {
        let i = n + 1;
        let [q_ok, k_ok, v_ok] = projections_right[n];
        let checks = [
            Check {
                part: format!("b{i}"),
                matrix: format!("S_{i}"),
                inputs: format!("Q_{i} and K_{i}"),
                answer: &h.scores,
                reference: &w.scores,
                own: with_mask(vec![&h.q, &h.k], mask),
                own_right: q_ok && k_ok,
                given: with_mask(vec![&w.q, &w.k], mask),
                step: scores,
                mistakes: &SCORE_MISTAKES,
            },
            Check {
                part: format!("b{i}"),
                matrix: format!("A_{i}"),
                inputs: format!("S_{i}"),
                answer: &h.weights,
                reference: &w.weights,
                own: with_mask(vec![&h.scores], mask),
                own_right: false, // set below from S's verdict
                given: with_mask(vec![&w.scores], mask),
                step: weights,
                mistakes: &WEIGHT_MISTAKES,
            },
            Check {
                part: format!("b{i}"),
                matrix: format!("Z_{i}"),
                inputs: format!("A_{i} and V_{i}"),
                answer: &h.z,
                reference: &w.z,
                own: vec![&h.weights, &h.v],
                own_right: false,
                given: vec![&w.weights, &w.v],
                step: product,
                mistakes: &[],
            },
        ];
        let mut previous_right = true;
        for (m, mut check) in checks.into_iter().enumerate() {
            match m {
                1 => check.own_right = previous_right,
                2 => check.own_right = previous_right && v_ok,
                _ => {}
            }
            let mark = check.mark(p);
            previous_right = mark.verdict == Verdict::Right;
            marks.push(mark);
        }
        heads_right.push(previous_right);
    }
    let names: Vec<String> = (1..=mine.heads.len()).map(|i| format!("Z_{i}")).collect();
    let c = Check {
        part: "c".into(),
        matrix: "Z".into(),
        inputs: names.join(", "),
        answer: &mine.concat,
        reference: &solution.concat,
        own: mine.heads.iter().map(|h| &h.z).collect(),
        own_right: heads_right.iter().all(|&r| r),
        given: solution.heads.iter().map(|h| &h.z).collect(),
        step: concat,
        mistakes: &CONCAT_MISTAKES,
    }
    .mark(p);
    let c_right = c.verdict == Verdict::Right;
    marks.push(c);
    marks.push(
        Check {
            part: "d".into(),
            matrix: "Z W_O".into(),
            inputs: "Z".into(),
            answer: mine.result(),
            reference: solution.result(),
            own: vec![&mine.concat, &key.wo],
            own_right: c_right,
            given: vec![&solution.concat, &key.wo],
            step: product,
            mistakes: &OUTPUT_MISTAKES,
        }
        .mark(p),
    );
    Ok(marks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn head_order_finds_any_rearrangement_but_not_the_right_one() {
        let zs = [
            array![[1.0], [2.0]],
            array![[3.0], [4.0]],
            array![[5.0], [6.0]],
        ];
        let refs: Vec<&M> = zs.iter().collect();
        let rotated = concat(&[&zs[1], &zs[2], &zs[0]]).unwrap();
        assert_eq!(head_order(&refs, &rotated), Some(rotated));
        let right = concat(&refs).unwrap();
        assert_eq!(head_order(&refs, &right), None);
    }

    #[test]
    fn close_matches_nan_with_nan_and_an_infinity_with_itself() {
        let a = array![[f64::NAN, f64::INFINITY, 0.5]];
        assert!(close(&a, &array![[f64::NAN, f64::INFINITY, 0.50009]], 1e-4));
        assert!(!close(&a, &array![[0.0, f64::INFINITY, 0.5]], 1e-4));
        assert!(!close(
            &a,
            &array![[f64::NAN, f64::NEG_INFINITY, 0.5]],
            1e-4
        ));
        assert!(!close(&a, &array![[f64::NAN, f64::INFINITY, 0.5002]], 1e-4));
    }
}
