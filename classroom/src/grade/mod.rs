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
//! first that reproduces the answer is named; when none does, the feedback says so. The steps
//! and their mistakes are the library's (`attention_lab::check::step`), shared with the
//! checks a notebook runs on a learner's function.
//!
//! A `--backward` sheet's key has `G`; its submissions answer the backward parts too (under
//! `"backward"`), judged the same way: (e) `dW_O` and each `dZ_i`, (f) each head's `dA_i` and
//! `dS_i`, (g) each head's `dQ_i`, `dK_i`, `dV_i` and `dW_Q`, `dW_K`, `dW_V`.
//!
//! Modules: `answers` (a key and a submission, as read), `mark` (the judging of each matrix), `backward` (of the backward parts), `sheet` (a whole submission: both),
//! `report` (points, columns and feedback from the marks) and `command` (the command: keys
//! and submissions found, graded, written).

mod answers;
mod backward;
mod command;
mod mark;
mod report;
mod sheet;

pub use answers::{BackwardAnswers, Key, Submission, BACKWARD_FIELDS};
pub use attention_lab::check::Mistake;
pub use command::{run, Options};
pub use mark::{Mark, Verdict};
pub use report::{backward_columns, feedback, part_columns, part_points};
pub use sheet::grade;

/// A matrix of the sheet.
type M = ndarray::Array2<f64>;
