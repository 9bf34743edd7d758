//! Exercises inside a notebook: a learner writes a function (their own scaled dot-product
//! attention, one head's forward pass, multi-head attention with W_O, softmax's backward
//! pass, attention's backward pass) and a check runs it on random inputs, then says that it
//! is right or names the mistake. It never shows the expected matrix.
//!
//! The mistakes are named by the classifier `attention-lab grade` uses on a sheet ([`step`]:
//! each step of the pass, done right and done with each known [`Mistake`]). A learner's
//! answer is wrong when any number of it is off by more than `1e-8`; the check then redoes
//! the whole pass with one mistake at a time (wherever a step knows it, the other steps
//! right) and names the first that gives the learner's answer on every input. A function
//! that panics, or returns a matrix of another shape, gets a line that says so. Every check,
//! the backward ones too, works without the feature `learn`: the hub's kernel loads the
//! library without it, and its assignments call these checks.
//!
//! The inputs differ for each student: they are drawn from [`student_seed`], a hash of the
//! hub's `JUPYTERHUB_USER` ([`DEFAULT_SEED`] without one), so one student gets the same
//! inputs on every run. [`Checker::new`] takes another seed (a sheet's). The last input of a
//! forward check has large scores, which overflow a naive softmax's `exp`.
//!
//! ```
//! use attention_lab::prelude::*;
//!
//! fn my_attention(q: &Array2<f64>, k: &Array2<f64>, v: &Array2<f64>) -> Array2<f64> {
//!     let scores = q.dot(&k.t()); // forgot / sqrt(d_k)
//!     softmax(&scores).dot(v)
//! }
//! let result = check::attention(my_attention);
//! assert_eq!(result.to_string(), "not yet: the scores were not divided by sqrt(d_k)");
//! assert!(!result.is_right()); // what an nbgrader test cell asserts
//! ```
//!
//! Files: `mistake` ([`Mistake`]), [`step`] (the classifier), `inputs` (seeds and random
//! inputs) and this one (the checks and their result).

mod inputs;
mod mistake;
pub mod step;

use std::cell::Cell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use ndarray::Array2;

pub use inputs::{seed_for, student_seed, DEFAULT_SEED};
pub use mistake::Mistake;

use inputs::Draw;
use step::{
    close, Step, CONCAT, DK, DQ, DSCORES, DV, DWEIGHTS, OUTPUT, PROJECTION, SCORES, WEIGHTS, Z,
};

type M = Array2<f64>;

/// How far a learner's number may be from the right one.
const TOLERANCE: f64 = 1e-8;

/// What a check found.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let result = check::softmax(|s: &Array2<f64>| softmax(&s.t().to_owned()).reversed_axes());
/// assert_eq!(result.outcome(), &check::Outcome::Mistake(check::Mistake::SoftmaxColumns));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Right on every input.
    Right,
    /// Wrong, and this mistake gives the learner's answer on every input.
    Mistake(Mistake),
    /// The function panicked on this input (from 1), with this message.
    Panicked {
        /// The input, from 1.
        input: usize,
        /// The panic's message.
        message: String,
    },
    /// The function returned a matrix of another shape.
    Shape {
        /// The input, from 1.
        input: usize,
        /// Which output (`z`, `dq`, ...).
        output: &'static str,
        /// The shape returned.
        got: (usize, usize),
        /// The shape it should have.
        expected: (usize, usize),
    },
    /// Wrong, and no single mistake of the list explains it.
    Unexplained {
        /// The first input (from 1) on which it is wrong.
        input: usize,
        /// The first output that is wrong there.
        output: &'static str,
    },
}

/// The result of a check: prints one line (`right: ...` or `not yet: ...`), and tells an
/// autograder whether the function is right.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let result = check::attention(|q: &Array2<f64>, k: &Array2<f64>, v: &Array2<f64>| {
///     softmax(&(q.dot(&k.t()) / (k.ncols() as f64).sqrt())).dot(v)
/// });
/// assert!(result.is_right());
/// assert_eq!(result.to_string(), "right: your attention matches on 3 random inputs");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    what: &'static str,
    inputs: usize,
    outcome: Outcome,
}

impl Checked {
    /// Whether the function was right on every input.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert!(check::softmax(|s: &Array2<f64>| softmax(s)).is_right());
    /// ```
    pub fn is_right(&self) -> bool {
        self.outcome == Outcome::Right
    }

    /// The mistake named, if one was.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let naive = check::softmax(|s: &Array2<f64>| softmax_naive(s));
    /// assert_eq!(naive.mistake(), Some(check::Mistake::NaiveSoftmax));
    /// ```
    pub fn mistake(&self) -> Option<Mistake> {
        match self.outcome {
            Outcome::Mistake(m) => Some(m),
            _ => None,
        }
    }

    /// What the check found.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let result = check::softmax(|s: &Array2<f64>| softmax(s));
    /// assert_eq!(result.outcome(), &check::Outcome::Right);
    /// ```
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// How evcxr shows a cell's last value: the line as text.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// check::softmax(|s: &Array2<f64>| softmax(s)).evcxr_display();
    /// ```
    pub fn evcxr_display(&self) {
        println!("EVCXR_BEGIN_CONTENT text/plain\n{self}\nEVCXR_END_CONTENT");
    }
}

impl fmt::Display for Checked {
    /// One line: `right: your attention matches on 3 random inputs`, or `not yet: ` and what
    /// is wrong.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, n) = (self.what, self.inputs);
        match &self.outcome {
            Outcome::Right => write!(f, "right: your {what} matches on {n} random inputs"),
            Outcome::Mistake(m) => write!(f, "not yet: {}", m.describe()),
            Outcome::Panicked { input, message } => {
                write!(
                    f,
                    "not yet: your {what} panicked on input {input} of {n}: {message}"
                )
            }
            Outcome::Shape {
                input,
                output,
                got,
                expected,
            } => write!(
                f,
                "not yet: your {what} gave {output} as a {}x{} matrix on input {input} of {n}; \
                 it should be {}x{}",
                got.0, got.1, expected.0, expected.1
            ),
            Outcome::Unexplained { input, output } => write!(
                f,
                "not yet: your {what} gives a wrong {output} on input {input} of {n}, and no \
                 mistake from the list explains it"
            ),
        }
    }
}

/// The checks, with the inputs of one seed.
///
/// ```
/// use attention_lab::prelude::*;
/// let checker = check::Checker::new(7); // a sheet's seed
/// assert_eq!(checker.seed(), 7);
/// assert!(checker.softmax(|s: &Array2<f64>| softmax(s)).is_right());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checker {
    seed: u64,
}

impl Checker {
    /// The checks with the inputs drawn from `seed`.
    ///
    /// ```
    /// let checker = attention_lab::check::Checker::new(1);
    /// assert_eq!(checker.seed(), 1);
    /// ```
    pub fn new(seed: u64) -> Checker {
        Checker { seed }
    }

    /// The checks with this notebook's student's inputs ([`student_seed`]).
    ///
    /// ```
    /// use attention_lab::check::{student_seed, Checker};
    /// assert_eq!(Checker::for_student().seed(), student_seed());
    /// ```
    pub fn for_student() -> Checker {
        Checker::new(student_seed())
    }

    /// The seed of the inputs.
    ///
    /// ```
    /// assert_eq!(attention_lab::check::Checker::new(3).seed(), 3);
    /// ```
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Checks a row-wise softmax `f(scores) -> weights`. Names a softmax over the columns
    /// and the naive softmax that overflows.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let checker = check::Checker::new(5);
    /// assert!(checker.softmax(|s: &Array2<f64>| softmax(s)).is_right());
    /// ```
    pub fn softmax(&self, f: impl Fn(&M) -> M) -> Checked {
        let mut draw = Draw::new(self.seed);
        let mut inputs: Vec<Vec<M>> = [(3, 3), (4, 5)]
            .map(|(n, m)| vec![draw.matrix(n, m) * 3.0])
            .into();
        inputs.push(vec![draw.positive(3, 4, 1000.0)]);
        SOFTMAX.run(&inputs, |i| vec![f(&i[0])])
    }

    /// Checks a scaled dot-product attention `f(q, k, v) -> z`, `z = softmax(q k^T /
    /// sqrt(d_k)) v`. Names: no `sqrt(d_k)`, divided by `d_k`, `Q K`, `K Q^T`, the softmax
    /// over the columns, the naive softmax.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let result = check::Checker::new(5).attention(|q: &Array2<f64>, k: &Array2<f64>, v: &Array2<f64>| {
    ///     softmax(&(k.dot(&q.t()) / (k.ncols() as f64).sqrt())).dot(v)
    /// });
    /// assert_eq!(result.mistake(), Some(check::Mistake::KQTransposed));
    /// ```
    pub fn attention(&self, f: impl Fn(&M, &M, &M) -> M) -> Checked {
        let mut draw = Draw::new(self.seed);
        // As many tokens as d_k, so that a `Q K` without the transpose runs and is named.
        let mut inputs: Vec<Vec<M>> = [(3, 2), (4, 3)]
            .map(|(n, dv)| vec![draw.matrix(n, n), draw.matrix(n, n), draw.matrix(n, dv)])
            .into();
        inputs.push(vec![
            draw.positive(3, 3, 50.0),
            draw.positive(3, 3, 50.0),
            draw.matrix(3, 2),
        ]);
        ATTENTION.run(&inputs, |i| vec![f(&i[0], &i[1], &i[2])])
    }

    /// Checks one head's forward pass `f(x, wq, wk, wv) -> z`: `q = x wq`, `k = x wk`,
    /// `v = x wv`, then attention. Names the mistakes of [`Checker::attention`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let result = check::Checker::new(5).head(|x: &Array2<f64>, wq: &Array2<f64>, wk: &Array2<f64>, wv: &Array2<f64>| {
    ///     Head::new(wq.clone(), wk.clone(), wv.clone()).unwrap().forward(x, &Attend::new()).unwrap().z
    /// });
    /// assert!(result.is_right());
    /// ```
    pub fn head(&self, f: impl Fn(&M, &M, &M, &M) -> M) -> Checked {
        let mut draw = Draw::new(self.seed);
        // (tokens = d_k, d_model, d_v)
        let mut inputs: Vec<Vec<M>> = [(4, 3, 2), (3, 5, 3)]
            .map(|(n, d, dv)| {
                vec![
                    draw.matrix(n, d),
                    draw.matrix(d, n),
                    draw.matrix(d, n),
                    draw.matrix(d, dv),
                ]
            })
            .into();
        inputs.push(vec![
            draw.positive(3, 3, 40.0),
            draw.positive(3, 3, 1.0),
            draw.positive(3, 3, 1.0),
            draw.matrix(3, 2),
        ]);
        HEAD.run(&inputs, |i| vec![f(&i[0], &i[1], &i[2], &i[3])])
    }

    /// Checks multi-head attention `f(x, wq, wk, wv, wo) -> output`: head `i` is
    /// `(wq[i], wk[i], wv[i])`, the heads' outputs are concatenated in order and multiplied
    /// by `wo` on the right. Names the mistakes of [`Checker::attention`] (in every head),
    /// the heads in the wrong order, W_O left out and `W_O Z`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let result = check::Checker::new(5).multi_head(
    ///     |x: &Array2<f64>, wq: &[Array2<f64>], wk: &[Array2<f64>], wv: &[Array2<f64>], _wo: &Array2<f64>| {
    ///         let heads = (0..wq.len())
    ///             .map(|i| Head::new(wq[i].clone(), wk[i].clone(), wv[i].clone()))
    ///             .collect::<Result<Vec<_>, _>>().unwrap();
    ///         MultiHead::new(heads, None).unwrap().forward(x, &Attend::new()).unwrap().concat
    ///     },
    /// );
    /// assert_eq!(result.mistake(), Some(check::Mistake::NoOutputProjection));
    /// ```
    pub fn multi_head(&self, f: impl Fn(&M, &[M], &[M], &[M], &M) -> M) -> Checked {
        let mut draw = Draw::new(self.seed);
        // Tokens = d_model = d_k = heads x d_v: `Q K` and `W_O Z` run, and are named.
        let mut inputs = Vec::new();
        for (heads, dv, big) in [(2, 2, false), (3, 2, false), (2, 2, true)] {
            let d = heads * dv;
            let mut input = if big {
                vec![draw.positive(d, d, 40.0)]
            } else {
                vec![draw.matrix(d, d)]
            };
            input.push(draw.orthogonal(d));
            for _ in 0..heads {
                let [wq, wk] = [(); 2].map(|()| {
                    if big {
                        draw.positive(d, d, 1.0)
                    } else {
                        draw.matrix(d, d)
                    }
                });
                input.extend([wq, wk, draw.matrix(d, dv)]);
            }
            inputs.push(input);
        }
        MULTI_HEAD.run(&inputs, |i| {
            let w = |m: usize| -> Vec<M> { i[2..].iter().skip(m).step_by(3).cloned().collect() };
            vec![f(&i[0], &w(0), &w(1), &w(2), &i[1])]
        })
    }

    /// Checks softmax's backward pass `f(weights, dweights) -> dscores`, `dscores = weights *
    /// (dweights - rowsum(weights * dweights))`. Names the Jacobian's diagonal only.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let result = check::Checker::new(5).softmax_backward(|a: &Array2<f64>, da: &Array2<f64>| a * da);
    /// assert_eq!(result.mistake(), Some(check::Mistake::JacobianDiagonalOnly));
    /// ```
    pub fn softmax_backward(&self, f: impl Fn(&M, &M) -> M) -> Checked {
        let mut draw = Draw::new(self.seed);
        let inputs: Vec<Vec<M>> = [(3, 3), (4, 5), (2, 4)]
            .map(|(n, m)| {
                let weights = crate::layers::softmax::softmax(&(draw.matrix(n, m) * 2.0));
                vec![weights, draw.matrix(n, m)]
            })
            .into();
        SOFTMAX_BACKWARD.run(&inputs, |i| vec![f(&i[0], &i[1])])
    }

    /// Checks attention's backward pass `f(q, k, v, dz) -> (dq, dk, dv)` from `dz =
    /// dL/dz`: `dweights = dz v^T`, `dscores` through the softmax, `dq = dscores k /
    /// sqrt(d_k)`, `dk = dscores^T q / sqrt(d_k)`, `dv = weights^T dz`. Names the mistakes
    /// of [`Checker::attention`] in the forward pass, and in the backward pass the
    /// Jacobian's diagonal only, the `1/sqrt(d_k)` forgotten and each transposed product.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let result = check::Checker::new(5).attention_backward(
    ///     |q: &Array2<f64>, k: &Array2<f64>, v: &Array2<f64>, dz: &Array2<f64>| {
    ///         let scale = (k.ncols() as f64).sqrt();
    ///         let weights = softmax(&(q.dot(&k.t()) / scale));
    ///         let dscores = &weights * &dz.dot(&v.t()); // the Jacobian's diagonal only
    ///         (dscores.dot(k) / scale, dscores.t().dot(q) / scale, weights.t().dot(dz))
    ///     },
    /// );
    /// assert_eq!(result.mistake(), Some(check::Mistake::JacobianDiagonalOnly));
    /// ```
    pub fn attention_backward(&self, f: impl Fn(&M, &M, &M, &M) -> (M, M, M)) -> Checked {
        let mut draw = Draw::new(self.seed);
        // Tokens = d_k, so that every transposed product runs and is named.
        let inputs: Vec<Vec<M>> = [(4, 2), (3, 3), (5, 2)]
            .map(|(n, dv)| {
                let [q, k] = [(); 2].map(|()| draw.matrix(n, n));
                vec![q, k, draw.matrix(n, dv), draw.matrix(n, dv)]
            })
            .into();
        ATTENTION_BACKWARD.run(&inputs, |i| {
            let (dq, dk, dv) = f(&i[0], &i[1], &i[2], &i[3]);
            vec![dq, dk, dv]
        })
    }
}

/// [`Checker::softmax`] with this student's inputs.
///
/// ```
/// use attention_lab::prelude::*;
/// assert!(check::softmax(|s: &Array2<f64>| softmax(s)).is_right());
/// ```
pub fn softmax(f: impl Fn(&M) -> M) -> Checked {
    Checker::for_student().softmax(f)
}

/// [`Checker::attention`] with this student's inputs.
///
/// ```
/// use attention_lab::prelude::*;
/// let result = check::attention(|q: &Array2<f64>, _k: &Array2<f64>, _v: &Array2<f64>| q.clone());
/// assert!(result.to_string().starts_with("not yet: your attention gave z as a "));
/// ```
pub fn attention(f: impl Fn(&M, &M, &M) -> M) -> Checked {
    Checker::for_student().attention(f)
}

/// [`Checker::head`] with this student's inputs.
///
/// ```
/// use attention_lab::prelude::*;
/// let result = check::head(|_x: &Array2<f64>, _wq: &Array2<f64>, _wk: &Array2<f64>, _wv: &Array2<f64>| -> Array2<f64> {
///     todo!()
/// });
/// assert!(result.to_string().starts_with("not yet: your head's forward pass panicked on input 1 of 3"));
/// ```
pub fn head(f: impl Fn(&M, &M, &M, &M) -> M) -> Checked {
    Checker::for_student().head(f)
}

/// [`Checker::multi_head`] with this student's inputs.
///
/// ```
/// use attention_lab::prelude::*;
/// let result = check::multi_head(|x: &Array2<f64>, _wq: &[Array2<f64>], _wk: &[Array2<f64>], _wv: &[Array2<f64>], wo: &Array2<f64>| x.dot(wo));
/// assert!(!result.is_right());
/// ```
pub fn multi_head(f: impl Fn(&M, &[M], &[M], &[M], &M) -> M) -> Checked {
    Checker::for_student().multi_head(f)
}

/// [`Checker::softmax_backward`] with this student's inputs.
///
/// ```
/// use attention_lab::prelude::*;
/// let result = check::softmax_backward(|a: &Array2<f64>, da: &Array2<f64>| {
///     let rowsum = (a * da).sum_axis(Axis(1)).insert_axis(Axis(1));
///     a * &(da - &rowsum)
/// });
/// assert!(result.is_right());
/// ```
pub fn softmax_backward(f: impl Fn(&M, &M) -> M) -> Checked {
    Checker::for_student().softmax_backward(f)
}

/// [`Checker::attention_backward`] with this student's inputs.
///
/// ```
/// use attention_lab::prelude::*;
/// let result = check::attention_backward(|q: &Array2<f64>, k: &Array2<f64>, v: &Array2<f64>, _dz: &Array2<f64>| {
///     (q.clone(), k.clone(), v.clone())
/// });
/// assert!(!result.is_right());
/// ```
pub fn attention_backward(f: impl Fn(&M, &M, &M, &M) -> (M, M, M)) -> Checked {
    Checker::for_student().attention_backward(f)
}

/// A pass of an exercise: its outputs from its inputs with `mistake` made wherever a step
/// knows it (none: the right pass); `answer` is the learner's outputs, which a step may read
/// (the heads' order), empty for the right pass.
type Pass = fn(Option<Mistake>, &[M], &[M]) -> Option<Vec<M>>;

/// One kind of exercise.
struct Exercise {
    /// `attention`, as in "your attention".
    what: &'static str,
    /// The names of the function's outputs.
    outputs: &'static [&'static str],
    /// The steps of its pass, whose mistakes it names.
    steps: &'static [Step],
    pass: Pass,
}

const SOFTMAX: Exercise = Exercise {
    what: "softmax",
    outputs: &["weights"],
    steps: &[WEIGHTS],
    pass: |m, i, answer| Some(vec![WEIGHTS.done(m, &[&i[0]], hint(answer))?]),
};

const ATTENTION: Exercise = Exercise {
    what: "attention",
    outputs: &["z"],
    steps: &[SCORES, WEIGHTS],
    pass: |m, i, answer| Some(vec![attend(m, [&i[0], &i[1], &i[2]], hint(answer))?.1]),
};

const HEAD: Exercise = Exercise {
    what: "head's forward pass",
    outputs: &["z"],
    steps: &[PROJECTION, SCORES, WEIGHTS, Z],
    pass: |m, i, answer| Some(vec![head_z(m, &i[0], &i[1..4], hint(answer))?]),
};

const MULTI_HEAD: Exercise = Exercise {
    what: "multi-head attention",
    outputs: &["output"],
    steps: &[PROJECTION, SCORES, WEIGHTS, Z, CONCAT, OUTPUT],
    pass: |m, i, answer| {
        let (x, wo) = (&i[0], &i[1]);
        let zs = i[2..]
            .chunks(3)
            .map(|w| head_z(m, x, w, hint(answer)))
            .collect::<Option<Vec<M>>>()?;
        // W_O is orthogonal: a learner who applied it right concatenated (output) W_O^T.
        let concat_hint = answer
            .first()
            .filter(|y| y.ncols() == wo.ncols())
            .map_or_else(|| M::zeros((0, 0)), |y| y.dot(&wo.t()));
        let concat = CONCAT.done(m, &zs.iter().collect::<Vec<_>>(), &concat_hint)?;
        Some(vec![OUTPUT.done(m, &[&concat, wo], hint(answer))?])
    },
};

const SOFTMAX_BACKWARD: Exercise = Exercise {
    what: "softmax backward",
    outputs: &["dscores"],
    steps: &[DSCORES],
    pass: |m, i, answer| Some(vec![DSCORES.done(m, &[&i[0], &i[1]], hint(answer))?]),
};

const ATTENTION_BACKWARD: Exercise = Exercise {
    what: "attention backward",
    outputs: &["dq", "dk", "dv"],
    steps: &[SCORES, WEIGHTS, DWEIGHTS, DSCORES, DQ, DK, DV],
    pass: |m, i, answer| {
        let (q, k, v, dz) = (&i[0], &i[1], &i[2], &i[3]);
        let hint = hint(answer);
        let (weights, _) = attend(m, [q, k, v], hint)?;
        let dweights = DWEIGHTS.done(m, &[dz, v], hint)?;
        let dscores = DSCORES.done(m, &[&weights, &dweights], hint)?;
        Some(vec![
            DQ.done(m, &[&dscores, k], hint)?,
            DK.done(m, &[&dscores, q], hint)?,
            DV.done(m, &[&weights, dz], hint)?,
        ])
    },
};

/// The learner's first output, which a step may read; an empty matrix for the right pass.
fn hint(answer: &[M]) -> &M {
    static EMPTY: std::sync::OnceLock<M> = std::sync::OnceLock::new();
    answer
        .first()
        .unwrap_or_else(|| EMPTY.get_or_init(|| M::zeros((0, 0))))
}

/// Scaled dot-product attention's weights and output, with `mistake` where a step knows it.
fn attend(mistake: Option<Mistake>, [q, k, v]: [&M; 3], hint: &M) -> Option<(M, M)> {
    let scores = SCORES.done(mistake, &[q, k], hint)?;
    let weights = WEIGHTS.done(mistake, &[&scores], hint)?;
    let z = Z.done(mistake, &[&weights, v], hint)?;
    Some((weights, z))
}

/// One head's Z from X and its `[W_Q, W_K, W_V]`.
fn head_z(mistake: Option<Mistake>, x: &M, w: &[M], hint: &M) -> Option<M> {
    let [q, k, v] = [0, 1, 2].map(|j| PROJECTION.done(mistake, &[x, &w[j]], hint));
    Some(attend(mistake, [&q?, &k?, &v?], hint)?.1)
}

impl Exercise {
    /// Runs the learner's function `f` on every input and judges its outputs.
    fn run(&self, inputs: &[Vec<M>], f: impl Fn(&[M]) -> Vec<M>) -> Checked {
        let checked = |outcome| Checked {
            what: self.what,
            inputs: inputs.len(),
            outcome,
        };
        let mut answers = Vec::new();
        let mut first_wrong = None;
        for (n, input) in inputs.iter().enumerate() {
            let answer = match quietly(|| f(input)) {
                Ok(answer) => answer,
                Err(message) => {
                    return checked(Outcome::Panicked {
                        input: n + 1,
                        message,
                    })
                }
            };
            let right = (self.pass)(None, input, &[]).expect("a check's inputs fit its pass");
            for ((&output, mine), right) in self.outputs.iter().zip(&answer).zip(&right) {
                if mine.dim() != right.dim() {
                    return checked(Outcome::Shape {
                        input: n + 1,
                        output,
                        got: mine.dim(),
                        expected: right.dim(),
                    });
                }
                if first_wrong.is_none() && !close(mine, right, TOLERANCE) {
                    first_wrong = Some((n + 1, output));
                }
            }
            answers.push(answer);
        }
        let Some((input, output)) = first_wrong else {
            return checked(Outcome::Right);
        };
        let explains = |mistake: Mistake| {
            inputs.iter().zip(&answers).all(|(input, answer)| {
                (self.pass)(Some(mistake), input, answer).is_some_and(|redone| {
                    redone
                        .iter()
                        .zip(answer)
                        .all(|(r, a)| close(a, r, TOLERANCE))
                })
            })
        };
        let mut tried = Vec::new();
        for &(mistake, _) in self.steps.iter().flat_map(|s| s.mistakes) {
            if !tried.contains(&mistake) {
                tried.push(mistake);
                if explains(mistake) {
                    return checked(Outcome::Mistake(mistake));
                }
            }
        }
        checked(Outcome::Unexplained { input, output })
    }
}

thread_local! {
    /// Whether a panic on this thread is the learner's, caught by a check: not printed.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// `f()`, or the message of its panic; the panic is not printed, since the check's line
/// says it.
fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|quiet| quiet.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|quiet| quiet.set(false));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into())
    })
}
