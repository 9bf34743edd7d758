//! A problem of multi-head self-attention: X, each head's projections, W_O and the mask, and
//! its worked solution. Drawn by `exercise` (and by `roster` for each student), marked by
//! `grade`: it lives below all three.

use crate::backward::Gradients;
use crate::solve::layer;
use attention_lab::prelude::{Attend, Mask, MultiHead, MultiHeadOutput};
use attention_lab_io::error::{Error, Result};
use ndarray::Array2;

/// The problem's matrices, in the order they are drawn.
///
/// ```
/// use attention_lab_classroom::problem::Problem;
/// use ndarray::{array, Array2};
/// let problem = Problem {
///     x: array![[1.0, 0.0], [0.0, 1.0]],
///     wq: vec![Array2::eye(2)],
///     wk: vec![Array2::eye(2)],
///     wv: vec![Array2::eye(2)],
///     wo: Array2::eye(2),
///     mask: None,
///     g: Some(Array2::ones((2, 2))),
/// };
/// let out = problem.solution().unwrap();
/// assert_eq!(out.result().dim(), (2, 2));
/// let grads = problem.gradients(&out).unwrap().unwrap();
/// assert_eq!(grads.grad.dwo.unwrap().dim(), (2, 2));
/// ```
#[derive(Debug, Clone)]
pub struct Problem {
    /// The input, small integers.
    pub x: Array2<f64>,
    /// One per head, as `solve` takes them.
    pub wq: Vec<Array2<f64>>,
    /// One per head.
    pub wk: Vec<Array2<f64>>,
    /// One per head.
    pub wv: Vec<Array2<f64>>,
    /// The output projection.
    pub wo: Array2<f64>,
    /// The mask of a masked (decoder) sheet, from `--causal` and `--padding`; not drawn, so
    /// the same seed gives the same matrices with or without it.
    pub mask: Option<Mask>,
    /// A backward sheet's `G = dL/d(Z W_O)`, drawn after every other matrix.
    pub g: Option<Array2<f64>>,
}

impl Problem {
    /// The worked answers, as `solve` computes them: self-attention of X through each head
    /// and W_O, with the mask added to the scores when there is one. The sheet's key, the
    /// roster's keys and `grade` all compute their answers here.
    ///
    /// # Errors
    /// The library's shape message when the matrices or the mask do not fit together.
    pub fn solution(&self) -> Result<MultiHeadOutput> {
        let (x, mask) = (&self.x, self.mask.as_ref());
        self.layer()?
            .forward_cross(x, x, x, &Attend::new().mask(mask))
            .map_err(|e| Error::Input(e.to_string()))
    }

    /// The backward pass from `G` of the forward pass `out` (this problem's
    /// [`solution`](Problem::solution)); `None` when the problem has no `G`.
    ///
    /// # Errors
    /// An [`Error`] when `G` or `out` does not fit the problem's shapes.
    pub fn gradients(&self, out: &MultiHeadOutput) -> Result<Option<Gradients>> {
        self.g
            .as_ref()
            .map(|g| Gradients::new(&self.layer()?, &self.x, out, g.clone()))
            .transpose()
    }

    fn layer(&self) -> Result<MultiHead> {
        layer(
            &self.wq,
            &self.wk,
            &self.wv,
            Some(self.wo.clone()),
            None,
            false,
        )
    }
}
