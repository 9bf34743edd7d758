//! A whole submission marked: the forward parts (`mark`), then on a backward sheet the
//! backward parts (`backward`), which build on the forward marks.

use attention_lab::prelude::MultiHeadOutput;
use attention_lab_io::error::Result;

use super::answers::{Key, Submission};
use super::backward::grade_backward;
use super::mark::{grade_forward, Mark};

/// Judges every matrix of `sub` against `key`, in the order a student works.
///
/// # Errors
/// The key's shape message, or the submission's first wrong shape.
pub fn grade(key: &Key, sub: &Submission) -> Result<Vec<Mark>> {
    grade_solved(key, &key.solution()?, sub)
}

/// [`grade`] with the key's solution already computed (`key.solution()`): a class's keys are
/// solved once, not once for each submission they are tried against.
///
/// # Errors
/// The submission's first wrong shape.
pub fn grade_solved(key: &Key, solution: &MultiHeadOutput, sub: &Submission) -> Result<Vec<Mark>> {
    let mut marks = grade_forward(key, solution, sub)?;
    let backward = grade_backward(key, solution, sub, &marks)?;
    marks.extend(backward);
    Ok(marks)
}
