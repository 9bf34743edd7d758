//! Judging each answer matrix: right, carried forward, or wrong with the mistake named.

use attention_lab::check::step::{close, Step, CONCAT, OUTPUT, PROJECTION, SCORES, WEIGHTS, Z};
use attention_lab::check::Mistake;
use attention_lab::np::round;
use attention_lab::prelude::MultiHeadOutput;
use attention_lab_io::error::Result;

use super::answers::{Key, Submission};
use super::M;

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
    /// The step, done right and with each of its known mistakes.
    pub(super) step: Step,
}

fn judge(c: &Check<'_>, precision: usize) -> Verdict {
    let tol = 10f64.powi(-(precision as i32));
    let fits = |m: Option<M>| m.is_some_and(|m| close(c.answer, &m, tol));
    if close(c.answer, c.reference, tol) {
        return Verdict::Right;
    }
    if fits((c.step.right)(&c.own)) {
        return if c.own_right {
            Verdict::Right
        } else {
            Verdict::CarriedForward
        };
    }
    for &(mistake, redo) in c.step.mistakes {
        if fits(redo(&c.own, c.answer)) || fits(redo(&c.given, c.answer)) {
            return Verdict::Mistake(mistake);
        }
    }
    for d in 0..precision {
        let rounded = |ms: &[&M]| -> Vec<M> { ms.iter().map(|m| round(*m, d as i32)).collect() };
        let (own, given) = (rounded(&c.own), rounded(&c.given));
        let redone = (c.step.right)(&c.own).map(|m| round(&m, d as i32));
        if fits(Some(round(c.reference, d as i32)))
            || fits(redone)
            || fits((c.step.right)(&own.iter().collect::<Vec<_>>()))
            || fits((c.step.right)(&given.iter().collect::<Vec<_>>()))
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
#[allow(
    clippy::too_many_lines,
    reason = "one check per part in the order a student works them, each with its classifier; the sequence is the marking scheme"
)]
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
                step: PROJECTION,
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
                step: SCORES,
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
                step: WEIGHTS,
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
                step: Z,
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
        step: CONCAT,
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
            step: OUTPUT,
        }
        .mark(p),
    );
    Ok(marks)
}
