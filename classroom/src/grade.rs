//! `attention-lab grade`: marks students' answers against their keys, names the most likely
//! mistake of each wrong answer, and carries errors forward with half credit.
//!
//! Every answer matrix is judged in the order a student works: per head Q, K, V (part a),
//! the scores S, the weights A and Z (part b); then the concatenation (c) and Z W_O (d).
//! A matrix is *right* when each of its numbers is within the tolerance `10^-P` of the key,
//! P being the decimals the sheet asks for (`exercise --precision`, kept in the key): a
//! correctly rounded answer is off by at most half of that. A wrong matrix is recomputed from
//! the student's own earlier answers: when it agrees, the student did the step right on a
//! wrong input and earns half the point ("carried forward"). Otherwise each mistake of
//! [`Mistake`] is applied to the step (on the student's inputs and on the key's) and the
//! first that reproduces the answer is named; when none does, the feedback says so.

use crate::matrices::{matrix, matrix_from_json};
use crate::problem::Problem;
use crate::student::safe_id;
use attention_lab::np::round;
use attention_lab::prelude::{HeadOutput, Mask, MultiHeadOutput, Softmax};
use attention_lab_io::error::{io_problem, warn, write_file, Error, Result, EXIT_CHECK_FAILED};
use attention_lab_io::problem;
use clap::Args;
use ndarray::{concatenate, s, Array2, Axis};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

type M = Array2<f64>;

/// Arguments of `attention-lab grade`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example (a class made with exercise --roster roster.csv --out class):\n  \
    attention-lab grade --key class/keys --answers submissions/ --out marks\n\n\
    KEY is one key (.json, from exercise --roster) or the folder of a class's keys, found by\n\
    student id. PATH is a submission (ID.json, or a folder ID/ of .npy files) or a folder of\n\
    them. With --out, DIR/gradebook.csv has one row per student and one column per part, and\n\
    DIR/feedback/ID.txt a short text for each student. Exit status: 0 when every submission\n\
    was graded, 1 when some could not be (each is reported in one line), 2 for bad arguments."
)]
pub struct GradeArgs {
    /// The key of one sheet (ID.json) or a folder of keys, one per student id.
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// Submissions: ID.json files, ID/ folders of .npy files, or folders holding them.
    #[arg(long, value_name = "PATH", required = true, num_args = 1..)]
    pub answers: Vec<PathBuf>,
    /// Write DIR/gradebook.csv and DIR/feedback/ID.txt (DIR is created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

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
    /// Numbers rounded to fewer decimals than the sheet asks, before or at this step.
    EarlyRounding(usize),
    /// On a masked sheet, the scores without the mask added: a blocked key keeps its score.
    ForgotMask,
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
            Mistake::EarlyRounding(_) => "early-rounding",
            Mistake::ForgotMask => "forgot-mask",
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
            Mistake::EarlyRounding(d) => format!(
                "numbers were rounded too early (to {d} decimal{})",
                if d == 1 { "" } else { "s" }
            ),
            Mistake::ForgotMask => {
                "the mask was not added to the scores (a blocked key's score is -inf, and its \
                 weight 0)"
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

/// One sheet's key: the given matrices and the decimals the answers are asked in.
#[derive(Debug, Clone)]
pub struct Key {
    /// The student's id.
    pub student: String,
    /// The student's name, possibly empty.
    pub name: String,
    /// Decimals of the answers (the tolerance is `10^-precision`).
    pub precision: usize,
    /// The input.
    pub x: M,
    /// Per head projections.
    pub wq: Vec<M>,
    /// Per head.
    pub wk: Vec<M>,
    /// Per head.
    pub wv: Vec<M>,
    /// Output projection.
    pub wo: M,
    /// A masked sheet's mask, the matrix added to the scores (`"mask"` in the key).
    pub mask: Option<M>,
}

/// A field of a JSON object, named in the error.
fn field<'a>(obj: &'a Value, name: &str) -> Result<&'a Value> {
    obj.get(name)
        .ok_or_else(|| problem!("\"{name}\" is missing"))
}

fn json_matrix_field(obj: &Value, name: &str) -> Result<M> {
    matrix_from_json(field(obj, name)?).map_err(|e| problem!("\"{name}\": {e}"))
}

fn json_matrices_field(obj: &Value, name: &str) -> Result<Vec<M>> {
    field(obj, name)?
        .as_array()
        .ok_or_else(|| problem!("\"{name}\": expected a list of matrices, one per head"))?
        .iter()
        .enumerate()
        .map(|(i, m)| {
            matrix_from_json(m).map_err(|e| problem!("\"{name}\" of head {}: {e}", i + 1))
        })
        .collect()
}

impl Key {
    /// Parses a key written by `exercise --roster`.
    ///
    /// # Errors
    /// What is missing or wrong in the JSON.
    pub fn parse(text: &str) -> Result<Key> {
        let json: Value = serde_json::from_str(text).map_err(|e| problem!("invalid JSON: {e}"))?;
        let text_of = |name: &str| -> Result<String> {
            Ok(field(&json, name)?
                .as_str()
                .ok_or_else(|| problem!("\"{name}\" is not a string"))?
                .to_string())
        };
        let precision = field(&json, "precision")?
            .as_u64()
            .filter(|&p| p <= 16)
            .ok_or("\"precision\" is not a whole number from 0 to 16")?
            as usize;
        let key = Key {
            student: text_of("student")?,
            name: text_of("name")?,
            precision,
            x: json_matrix_field(&json, "x")?,
            wq: json_matrices_field(&json, "wq")?,
            wk: json_matrices_field(&json, "wk")?,
            wv: json_matrices_field(&json, "wv")?,
            wo: json_matrix_field(&json, "wo")?,
            mask: json
                .get("mask")
                .map(|_| json_matrix_field(&json, "mask"))
                .transpose()?,
        };
        key.solution()?;
        Ok(key)
    }

    /// The key's answers, as `solve` computes them.
    ///
    /// # Errors
    /// The library's shape message when the key's matrices do not fit together.
    pub fn solution(&self) -> Result<MultiHeadOutput> {
        Problem {
            x: self.x.clone(),
            wq: self.wq.clone(),
            wk: self.wk.clone(),
            wv: self.wv.clone(),
            wo: self.wo.clone(),
            mask: self.mask.clone().map(Mask::additive_from),
        }
        .solution()
    }
}

/// A student's submission, in the solution's layout.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The student's id (the JSON's `"student"`, else the file or folder name).
    pub student: String,
    /// The answers.
    pub answers: MultiHeadOutput,
}

/// The names of a head's six matrices in a submission (JSON keys; `NAME_i.npy` files).
const HEAD_FIELDS: [&str; 6] = ["q", "k", "v", "scores", "weights", "z"];

fn head_from(mut ms: Vec<M>) -> HeadOutput {
    let z = ms.pop().expect("six");
    let weights = ms.pop().expect("six");
    let scores = ms.pop().expect("six");
    let v = ms.pop().expect("six");
    let k = ms.pop().expect("six");
    let q = ms.pop().expect("six");
    HeadOutput {
        q,
        k,
        v,
        scores,
        weights,
        z,
    }
}

/// The file stem of `path`, as a student id.
fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

impl Submission {
    /// Parses a JSON submission; `fallback_id` names the student when it has no `"student"`.
    ///
    /// # Errors
    /// What is missing or not a matrix of numbers.
    pub fn parse_json(text: &str, fallback_id: &str) -> Result<Submission> {
        let json: Value = serde_json::from_str(text).map_err(|e| problem!("invalid JSON: {e}"))?;
        let student = match json.get("student") {
            None => fallback_id.to_string(),
            Some(v) => v.as_str().ok_or("\"student\" is not a string")?.to_string(),
        };
        let heads = field(&json, "heads")?
            .as_array()
            .ok_or("\"heads\": expected a list, one object per head")?
            .iter()
            .enumerate()
            .map(|(i, h)| {
                HEAD_FIELDS
                    .iter()
                    .map(|f| json_matrix_field(h, f).map_err(|e| problem!("head {}: {e}", i + 1)))
                    .collect::<Result<Vec<M>>>()
                    .map(head_from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Submission {
            student,
            answers: MultiHeadOutput {
                heads,
                concat: json_matrix_field(&json, "concat")?,
                output: Some(json_matrix_field(&json, "output")?),
            },
        })
    }

    /// Reads a folder of .npy files: `q_1.npy` ... `z_H.npy` for each head, `concat.npy` and
    /// `output.npy`; the folder's name is the student's id.
    ///
    /// # Errors
    /// The first file that is missing or not a 2-D matrix.
    pub fn read_npy_dir(dir: &Path) -> Result<Submission> {
        let read = |name: &str| -> Result<M> {
            let path = dir.join(format!("{name}.npy"));
            if !path.exists() {
                return Err(problem!("{name}.npy is missing"));
            }
            matrix(name, &path.to_string_lossy()).map_err(|e| {
                // The flag-like prefix is the file's own name; keep the message short.
                let text = e.to_string();
                Error::Input(
                    text.strip_prefix(&format!("{name}: "))
                        .unwrap_or(&text)
                        .to_string(),
                )
            })
        };
        let mut heads = Vec::new();
        for i in 1.. {
            if !dir.join(format!("q_{i}.npy")).exists() && i > 1 {
                break;
            }
            let ms = HEAD_FIELDS
                .iter()
                .map(|f| read(&format!("{f}_{i}")))
                .collect::<Result<Vec<M>>>()?;
            heads.push(head_from(ms));
        }
        Ok(Submission {
            student: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            answers: MultiHeadOutput {
                heads,
                concat: read("concat")?,
                output: Some(read("output")?),
            },
        })
    }

    /// Every matrix's shape agrees with the key's solution.
    ///
    /// # Errors
    /// The first matrix whose shape differs, or a different number of heads.
    pub fn check_shapes(&self, solution: &MultiHeadOutput) -> Result<()> {
        let (mine, want) = (&self.answers, solution);
        if mine.heads.len() != want.heads.len() {
            return Err(problem!(
                "{} heads answered, the sheet has {}",
                mine.heads.len(),
                want.heads.len()
            ));
        }
        let shape = |m: &M| format!("({}, {})", m.nrows(), m.ncols());
        let mut pairs: Vec<(String, &M, &M)> = Vec::new();
        for (i, (h, w)) in mine.heads.iter().zip(&want.heads).enumerate() {
            let a = [&h.q, &h.k, &h.v, &h.scores, &h.weights, &h.z];
            let b = [&w.q, &w.k, &w.v, &w.scores, &w.weights, &w.z];
            for (n, name) in HEAD_FIELDS.iter().enumerate() {
                pairs.push((format!("head {}: \"{name}\"", i + 1), a[n], b[n]));
            }
        }
        pairs.push(("\"concat\"".into(), &mine.concat, &want.concat));
        pairs.push(("\"output\"".into(), mine.result(), want.result()));
        for (name, a, b) in pairs {
            if a.dim() != b.dim() {
                return Err(problem!(
                    "{name} has shape {}, the sheet's is {}",
                    shape(a),
                    shape(b)
                ));
            }
        }
        Ok(())
    }
}

/// Every number of `a` within `tol` of `b`'s; NaN matches NaN and an infinity itself.
fn close(a: &M, b: &M, tol: f64) -> bool {
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
type StepFn = fn(&[&M]) -> Option<M>;
/// A step redone with a mistake; gets the student's answer too (for the order of heads).
type MistakeFn = fn(&[&M], &M) -> Option<M>;

fn product(i: &[&M]) -> Option<M> {
    (i[0].ncols() == i[1].nrows()).then(|| i[0].dot(i[1]))
}

fn sqrt_dk(k: &M) -> f64 {
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

const OUTPUT_MISTAKES: [(Mistake, MistakeFn); 1] = [(Mistake::WoWrongSide, |i, _| {
    (i[1].ncols() == i[0].nrows()).then(|| i[1].dot(i[0]))
})];

/// One step to judge.
struct Check<'a> {
    part: String,
    matrix: String,
    inputs: String,
    answer: &'a M,
    reference: &'a M,
    /// The student's own inputs to the step, and whether all of them were right.
    own: Vec<&'a M>,
    own_right: bool,
    /// The key's inputs to the step.
    given: Vec<&'a M>,
    step: StepFn,
    mistakes: &'a [(Mistake, MistakeFn)],
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

/// A step's inputs followed by the mask, when there is one.
fn with_mask<'m>(mut inputs: Vec<&'m M>, mask: Option<&'m M>) -> Vec<&'m M> {
    inputs.extend(mask);
    inputs
}

/// Judges every matrix of `sub` against `key`, in the order a student works.
///
/// # Errors
/// The key's shape message, or the submission's first wrong shape.
pub fn grade(key: &Key, sub: &Submission) -> Result<Vec<Mark>> {
    let solution = key.solution()?;
    sub.check_shapes(&solution)?;
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
            let verdict = judge(
                &Check {
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
                },
                p,
            );
            right[m] = verdict == Verdict::Right;
            marks.push(Mark {
                part: format!("a{i}"),
                matrix: format!("{name}_{i}"),
                inputs: String::new(),
                verdict,
            });
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
            let verdict = judge(&check, p);
            previous_right = verdict == Verdict::Right;
            marks.push(Mark {
                part: check.part,
                matrix: check.matrix,
                inputs: check.inputs,
                verdict,
            });
        }
        heads_right.push(previous_right);
    }
    let names: Vec<String> = (1..=mine.heads.len()).map(|i| format!("Z_{i}")).collect();
    let c = judge(
        &Check {
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
        },
        p,
    );
    marks.push(Mark {
        part: "c".into(),
        matrix: "Z".into(),
        inputs: names.join(", "),
        verdict: c,
    });
    let d = judge(
        &Check {
            part: "d".into(),
            matrix: "Z W_O".into(),
            inputs: "Z".into(),
            answer: mine.result(),
            reference: solution.result(),
            own: vec![&mine.concat, &key.wo],
            own_right: c == Verdict::Right,
            given: vec![&solution.concat, &key.wo],
            step: product,
            mistakes: &OUTPUT_MISTAKES,
        },
        p,
    );
    marks.push(Mark {
        part: "d".into(),
        matrix: "Z W_O".into(),
        inputs: "Z".into(),
        verdict: d,
    });
    Ok(marks)
}

/// The gradebook's part columns for `heads` heads: `a1..aH, b1..bH, c, d`.
pub fn part_columns(heads: usize) -> Vec<String> {
    let mut cols: Vec<String> = (1..=heads).map(|i| format!("a{i}")).collect();
    cols.extend((1..=heads).map(|i| format!("b{i}")));
    cols.extend(["c".to_string(), "d".to_string()]);
    cols
}

/// Points as the gradebook writes them: `3`, `2.5`.
fn points(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The points of each part column.
pub fn part_points(marks: &[Mark], columns: &[String]) -> Vec<f64> {
    columns
        .iter()
        .map(|c| {
            marks
                .iter()
                .filter(|m| &m.part == c)
                .map(|m| m.verdict.points())
                .sum()
        })
        .collect()
}

/// `S_1:no-sqrt-dk A_2:unknown`: each wrong matrix with its mistake's code.
fn mistake_codes(marks: &[Mark]) -> String {
    marks
        .iter()
        .filter_map(|m| match m.verdict {
            Verdict::Mistake(x) => Some(format!("{}:{}", m.matrix.replace(' ', ""), x.code())),
            Verdict::Unexplained => Some(format!("{}:unknown", m.matrix.replace(' ', ""))),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The student's feedback text.
pub fn feedback(student: &str, name: &str, key: &Key, marks: &[Mark]) -> String {
    let total: f64 = marks.iter().map(|m| m.verdict.points()).sum();
    let who = if name.is_empty() {
        student.to_string()
    } else {
        format!("{name} ({student})")
    };
    let mut text = format!(
        "{who}: {} of {} points.\nA number counts as right within {} of the key.\n",
        points(total),
        marks.len(),
        format_tolerance(key.precision)
    );
    let columns = part_columns(key.wq.len());
    for column in &columns {
        let in_part: Vec<&Mark> = marks.iter().filter(|m| &m.part == column).collect();
        let got: f64 = in_part.iter().map(|m| m.verdict.points()).sum();
        let _ = write!(text, "\n({column}) {} of {}", points(got), in_part.len());
        if in_part.iter().all(|m| m.verdict == Verdict::Right) {
            let names: Vec<&str> = in_part.iter().map(|m| m.matrix.as_str()).collect();
            let _ = writeln!(text, ": {} right.", names.join(", "));
            continue;
        }
        text.push_str(":\n");
        for m in in_part {
            let line = match m.verdict {
                Verdict::Right => "right.".to_string(),
                Verdict::CarriedForward => format!(
                    "differs from the key, but it is right for your own {} (an earlier error \
                     carried forward): half a point.",
                    m.inputs
                ),
                Verdict::Mistake(x) => format!("wrong: {}.", x.describe()),
                Verdict::Unexplained => {
                    "wrong, and none of the usual mistakes explains it; check this step by hand."
                        .to_string()
                }
            };
            let _ = writeln!(text, "  {}: {line}", m.matrix);
        }
    }
    text
}

/// `0.0001` for 4 decimals.
fn format_tolerance(precision: usize) -> String {
    format!("{:.precision$}", 10f64.powi(-(precision as i32)))
}

/// The keys to grade with: one for everybody, or a folder of `ID.json`.
enum Keys {
    One(Box<Key>),
    Folder(PathBuf),
}

impl Keys {
    fn open(path: &Path) -> Result<Keys> {
        if path.is_dir() {
            return Ok(Keys::Folder(path.to_path_buf()));
        }
        read_key(path).map(|k| Keys::One(Box::new(k)))
    }

    fn for_student(&self, id: &str) -> Result<Key> {
        match self {
            Keys::One(key) => Ok((**key).clone()),
            Keys::Folder(dir) => {
                let path = dir.join(format!("{id}.json"));
                if !path.is_file() {
                    return Err(problem!("no key for student {id:?} in {}", dir.display()));
                }
                read_key(&path)
            }
        }
    }
}

fn read_key(path: &Path) -> Result<Key> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(&shown, "read", e))?;
    Key::parse(&text).map_err(|e| Error::at(&shown, e))
}

/// One submission found under a PATH, not yet read.
enum Found {
    Json(PathBuf),
    NpyDir(PathBuf),
}

impl Found {
    fn path(&self) -> &Path {
        match self {
            Found::Json(p) | Found::NpyDir(p) => p,
        }
    }

    fn read(&self) -> Result<Submission> {
        match self {
            Found::Json(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| io_problem("read", &e))?;
                Submission::parse_json(&text, &stem(path))
            }
            Found::NpyDir(dir) => Submission::read_npy_dir(dir),
        }
    }
}

fn has_npy(dir: &Path) -> bool {
    dir.join("q_1.npy").exists()
}

/// The submissions under `path`, in name order: a file, an .npy folder, or a folder of them.
fn find(path: &Path) -> Vec<Found> {
    if !path.is_dir() {
        return vec![Found::Json(path.to_path_buf())];
    }
    if has_npy(path) {
        return vec![Found::NpyDir(path.to_path_buf())];
    }
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(path) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => return vec![Found::Json(path.to_path_buf())],
    };
    entries.sort();
    entries
        .into_iter()
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .filter_map(|p| {
            if p.is_dir() {
                Some(Found::NpyDir(p))
            } else if p.extension().is_some_and(|e| e == "json") {
                Some(Found::Json(p))
            } else {
                None
            }
        })
        .collect()
}

/// One student's outcome.
struct Outcome {
    student: String,
    name: String,
    heads: usize,
    result: Result<Vec<Mark>>,
    key: Option<Key>,
}

fn grade_one(keys: &Keys, found: &Found) -> Outcome {
    let fallback = match found {
        Found::Json(p) => stem(p),
        Found::NpyDir(p) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let sub = match found.read() {
        Ok(sub) => sub,
        Err(e) => {
            // The gradebook still shows the student's name when the key is there.
            let name = keys
                .for_student(&fallback)
                .map(|k| k.name)
                .unwrap_or_default();
            return Outcome {
                student: fallback,
                name,
                heads: 0,
                result: Err(e),
                key: None,
            };
        }
    };
    // The id names files (a key, a feedback text): only plain ids are taken.
    let key = match Some(&sub.student)
        .filter(|id| safe_id(id))
        .ok_or_else(|| {
            problem!(
                "the student id {:?} may only hold letters, digits, '-', '_' and '.'",
                sub.student
            )
        })
        .and_then(|id| keys.for_student(id))
    {
        Ok(key) => key,
        Err(e) => {
            return Outcome {
                student: sub.student,
                name: String::new(),
                heads: 0,
                result: Err(e),
                key: None,
            }
        }
    };
    // One key for a whole class carries one student's name: show names only from own keys.
    let name = if key.student == sub.student {
        key.name.clone()
    } else {
        String::new()
    };
    Outcome {
        student: sub.student.clone(),
        name,
        heads: key.wq.len(),
        result: grade(&key, &sub),
        key: Some(key),
    }
}

/// The gradebook: `student,name,a1..,b1..,c,d,total,max,mistakes`.
fn gradebook(outcomes: &[Outcome]) -> Result<String> {
    let heads = outcomes.iter().map(|o| o.heads).max().unwrap_or(0);
    let columns = part_columns(heads);
    let mut csv = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let mut header = vec!["student".to_string(), "name".to_string()];
    header.extend(columns.iter().cloned());
    header.extend(["total", "max", "mistakes"].map(String::from));
    csv.write_record(&header)
        .map_err(|e| Error::Input(e.to_string()))?;
    for o in outcomes {
        let mut row = vec![o.student.clone(), o.name.clone()];
        match &o.result {
            Ok(marks) => {
                let got = part_points(marks, &columns);
                let mine = part_columns(o.heads);
                row.extend(columns.iter().zip(&got).map(|(c, &g)| {
                    if mine.contains(c) {
                        points(g)
                    } else {
                        String::new()
                    }
                }));
                row.push(points(marks.iter().map(|m| m.verdict.points()).sum()));
                row.push(marks.len().to_string());
                row.push(mistake_codes(marks));
            }
            Err(_) => {
                row.extend(columns.iter().map(|_| String::new()));
                row.extend([String::new(), String::new(), "not-graded".to_string()]);
            }
        }
        csv.write_record(&row)
            .map_err(|e| Error::Input(e.to_string()))?;
    }
    let bytes = csv.into_inner().map_err(|e| Error::Input(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| Error::Input(e.to_string()))
}

/// Runs `grade`; returns the exit status: 0 every submission graded, 1 some could not be.
///
/// # Errors
/// An unreadable key, no submissions, an output file that cannot be written, a failing stdout.
pub fn run(args: GradeArgs) -> Result<u8> {
    let keys = Keys::open(&args.key).map_err(|e| Error::at("--key", e))?;
    let found: Vec<Found> = args.answers.iter().flat_map(|p| find(p)).collect();
    if found.is_empty() {
        return Err(Error::at(
            "--answers",
            "no submissions found (ID.json files or ID/ folders of .npy files)",
        ));
    }
    let mut outcomes: Vec<Outcome> = found.iter().map(|f| grade_one(&keys, f)).collect();
    // A second submission for the same student is not graded: say so rather than guess.
    let mut seen = std::collections::BTreeSet::new();
    for (o, f) in outcomes.iter_mut().zip(&found) {
        if o.result.is_ok() && !seen.insert(o.student.clone()) {
            o.result = Err(problem!(
                "a second submission for student {:?} ({})",
                o.student,
                f.path().display()
            ));
        }
    }
    let mut failed = false;
    let mut stdout_error = None;
    for (o, f) in outcomes.iter().zip(&found) {
        match &o.result {
            Ok(marks) => {
                let total: f64 = marks.iter().map(|m| m.verdict.points()).sum();
                let codes = mistake_codes(marks);
                // A closed pipe (`grade ... | head`) ends the listing quietly; the files of
                // --out are still written.
                let line = writeln!(
                    std::io::stdout(),
                    "{}: {} of {}{}",
                    o.student,
                    points(total),
                    marks.len(),
                    if codes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({codes})")
                    }
                );
                if let Err(e) = line {
                    stdout_error.get_or_insert(e);
                }
            }
            Err(e) => {
                failed = true;
                warn(&format!(
                    "error: {}: student {:?} not graded: {}",
                    f.path().display(),
                    o.student,
                    e.to_string().replace(['\n', '\r'], " ")
                ));
            }
        }
    }
    if let Some(out) = &args.out {
        write_out(out, &outcomes)?;
    }
    if let Some(e) = stdout_error.filter(|e| e.kind() != std::io::ErrorKind::BrokenPipe) {
        return Err(Error::Stdout(e));
    }
    Ok(if failed { EXIT_CHECK_FAILED } else { 0 })
}

fn write_out(out: &Path, outcomes: &[Outcome]) -> Result<()> {
    let shown = out.display().to_string();
    let feedback_dir = out.join("feedback");
    std::fs::create_dir_all(&feedback_dir).map_err(|e| Error::io(&shown, "create", e))?;
    let book = gradebook(outcomes).map_err(|e| Error::at(&shown, e))?;
    let path = out.join("gradebook.csv");
    write_file(&path, book.as_bytes())?;
    for o in outcomes {
        let text = match (&o.result, &o.key) {
            (Ok(marks), Some(key)) => feedback(&o.student, &o.name, key, marks),
            (Err(e), _) => format!("{}: not graded: {e}\n", o.student),
            (Ok(_), None) => continue,
        };
        // Ids from submissions may hold anything; only plain ones name a file.
        if !safe_id(&o.student) {
            continue;
        }
        let path = feedback_dir.join(format!("{}.txt", o.student));
        write_file(&path, text.as_bytes())?;
    }
    Ok(())
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
