//! The steps of attention's forward and backward passes, each with its right computation and
//! the mistakes learners are known to make at it (redone, so that an answer can be matched
//! against each): the classifier that `attention-lab grade` uses on a sheet's matrices and
//! [`check`](super) on a learner's function.
//!
//! A step takes its inputs as a slice of matrices, in the order its doc names them, and gives
//! `None` when their shapes do not fit. The backward steps follow the forward pass's row
//! convention: `Y = X W`, so `dX = dY W^T` and `dW = X^T dY`.

use ndarray::{concatenate, s, Array2, Axis};

use super::mistake::Mistake;
use crate::layers::softmax::Softmax;

type M = Array2<f64>;

/// A step computed right from its inputs; `None` when their shapes do not fit.
///
/// ```
/// use attention_lab::check::step::{StepFn, Z};
/// let right: StepFn = Z.right;
/// assert!(right(&[&ndarray::Array2::eye(2), &ndarray::Array2::eye(3)]).is_none());
/// ```
pub type StepFn = fn(&[&Array2<f64>]) -> Option<Array2<f64>>;

/// A step redone with a mistake; it gets the answer too, since the order of the heads in a
/// wrong concatenation is read from it.
///
/// ```
/// use attention_lab::check::step::{Redo, SCORES};
/// let (_, no_sqrt_dk): (_, Redo) = SCORES.mistakes[0];
/// let q = ndarray::array![[2.0]];
/// assert_eq!(no_sqrt_dk(&[&q, &q], &q), Some(ndarray::array![[4.0]]));
/// ```
pub type Redo = fn(&[&Array2<f64>], &Array2<f64>) -> Option<Array2<f64>>;

/// One step of the pass: how it is done right, and how each known mistake does it.
///
/// ```
/// use attention_lab::check::{step::OUTPUT, Mistake};
/// let names: Vec<Mistake> = OUTPUT.mistakes.iter().map(|(m, _)| *m).collect();
/// assert_eq!(names, [Mistake::NoOutputProjection, Mistake::WoWrongSide]);
/// ```
#[derive(Clone, Copy)]
pub struct Step {
    /// The step done right.
    pub right: StepFn,
    /// The mistakes known at this step, each with the step redone that way, in the order
    /// they are tried.
    pub mistakes: &'static [(Mistake, Redo)],
}

impl Step {
    /// The step done with `mistake` when this step knows it, else right.
    pub(crate) fn done(self, mistake: Option<Mistake>, inputs: &[&M], answer: &M) -> Option<M> {
        match self.mistakes.iter().find(|(m, _)| Some(*m) == mistake) {
            Some((_, redo)) => redo(inputs, answer),
            None => (self.right)(inputs),
        }
    }
}

/// Every number of `a` within `tol` of `b`'s; NaN matches NaN and an infinity itself.
///
/// ```
/// use attention_lab::check::step::close;
/// let a = ndarray::array![[f64::NAN, f64::INFINITY, 0.5]];
/// assert!(close(&a, &ndarray::array![[f64::NAN, f64::INFINITY, 0.50009]], 1e-4));
/// assert!(!close(&a, &ndarray::array![[0.0, f64::INFINITY, 0.5]], 1e-4));
/// ```
pub fn close(a: &Array2<f64>, b: &Array2<f64>, tol: f64) -> bool {
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

/// A projection `X W` (Q, K or V of a head); inputs X, W. No named mistake.
///
/// ```
/// use attention_lab::check::step::PROJECTION;
/// let x = ndarray::array![[1.0, 2.0]];
/// assert_eq!((PROJECTION.right)(&[&x, &ndarray::Array2::eye(2)]), Some(x));
/// ```
pub const PROJECTION: Step = Step {
    right: product,
    mistakes: &[],
};

/// The scores `S = Q K^T / sqrt(d_k)`; inputs Q, K and, on a masked sheet, the additive mask.
/// Mistakes: no `sqrt(d_k)`, divided by `d_k`, `Q K`, `K Q^T`, the mask forgotten.
///
/// ```
/// use attention_lab::check::step::SCORES;
/// let q = ndarray::array![[1.0, 0.0], [0.0, 1.0]];
/// assert_eq!((SCORES.right)(&[&q, &q]), Some(&q / 2f64.sqrt()));
/// ```
pub const SCORES: Step = Step {
    right: scores,
    mistakes: &[
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
            (i[0].ncols() == i[1].ncols())
                .then(|| masked(i[1].dot(&i[0].t()) / sqrt_dk(i[1]), i))?
        }),
        // Only a masked sheet's step has the mask to forget.
        (Mistake::ForgotMask, |i, _| {
            (i.len() > 2 && i[0].ncols() == i[1].ncols())
                .then(|| i[0].dot(&i[1].t()) / sqrt_dk(i[1]))
        }),
    ],
};

/// The weights `A = softmax(S)` row by row; inputs S and, on a masked sheet, the mask (a
/// fully blocked row gets zero weights). Mistakes: the softmax of each column, the naive
/// softmax that overflows.
///
/// ```
/// use attention_lab::check::step::WEIGHTS;
/// let s = ndarray::array![[0.0, 0.0]];
/// assert_eq!((WEIGHTS.right)(&[&s]), Some(ndarray::array![[0.5, 0.5]]));
/// ```
pub const WEIGHTS: Step = Step {
    right: weights,
    mistakes: &[
        (Mistake::SoftmaxColumns, |i, _| {
            let columns: Vec<M> = i.iter().map(|m| m.t().to_owned()).collect();
            let columns: Vec<&M> = columns.iter().collect();
            Some(softmax_rows(&columns, Softmax::Stable).reversed_axes())
        }),
        (Mistake::NaiveSoftmax, |i, _| {
            Some(softmax_rows(i, Softmax::Naive))
        }),
    ],
};

/// A head's output `Z = A V`; inputs A, V. No named mistake.
///
/// ```
/// use attention_lab::check::step::Z;
/// let a = ndarray::array![[0.5, 0.5]];
/// assert_eq!((Z.right)(&[&a, &ndarray::array![[1.0], [3.0]]]), Some(ndarray::array![[2.0]]));
/// ```
pub const Z: Step = Step {
    right: product,
    mistakes: &[],
};

/// The concatenation `[Z_1 Z_2 ...]`; inputs each head's Z. Mistake: the heads in another
/// order (read from the answer's blocks).
///
/// ```
/// use attention_lab::check::step::CONCAT;
/// let (z1, z2) = (ndarray::array![[1.0]], ndarray::array![[2.0]]);
/// assert_eq!((CONCAT.right)(&[&z1, &z2]), Some(ndarray::array![[1.0, 2.0]]));
/// let swapped = ndarray::array![[2.0, 1.0]];
/// assert_eq!((CONCAT.mistakes[0].1)(&[&z1, &z2], &swapped), Some(swapped));
/// ```
pub const CONCAT: Step = Step {
    right: concat,
    mistakes: &[(Mistake::HeadOrder, head_order)],
};

/// The output `Z W_O`; inputs Z (the concatenation), W_O. Mistakes: W_O left out, `W_O Z`.
///
/// ```
/// use attention_lab::check::step::OUTPUT;
/// let z = ndarray::array![[1.0, 2.0]];
/// assert_eq!((OUTPUT.right)(&[&z, &ndarray::Array2::eye(2)]), Some(z));
/// ```
pub const OUTPUT: Step = Step {
    right: product,
    mistakes: &[
        (Mistake::NoOutputProjection, |i, _| Some(i[0].clone())),
        (Mistake::WoWrongSide, |i, _| {
            (i[1].ncols() == i[0].nrows()).then(|| i[1].dot(i[0]))
        }),
    ],
};

/// `a^T b`, or `None` when the shapes do not fit.
fn t_product(a: &M, b: &M) -> Option<M> {
    (a.nrows() == b.nrows()).then(|| a.t().dot(b))
}

/// `a b^T`, or `None` when the shapes do not fit.
fn product_t(a: &M, b: &M) -> Option<M> {
    (a.ncols() == b.ncols()).then(|| a.dot(&b.t()))
}

/// `a^T b` of the inputs a, b.
fn transposed_first(i: &[&M]) -> Option<M> {
    t_product(i[0], i[1])
}

/// `a b^T` of the inputs a, b.
fn times_transposed(i: &[&M]) -> Option<M> {
    product_t(i[0], i[1])
}

/// Backward: `dL/dW_O = Z^T G`; inputs Z, G. Mistake: `G^T Z`.
///
/// ```
/// use attention_lab::check::step::DWO;
/// let z = ndarray::array![[1.0, 2.0]];
/// assert_eq!((DWO.right)(&[&z, &ndarray::array![[3.0]]]), Some(ndarray::array![[3.0], [6.0]]));
/// ```
pub const DWO: Step = Step {
    right: transposed_first,
    mistakes: &[(Mistake::Transposed("G^T Z instead of Z^T G"), |i, _| {
        t_product(i[1], i[0])
    })],
};

/// Backward: a head's `dL/dZ_i = G W_O^T` over its rows of W_O; inputs G, those rows.
/// Mistake: `W_O G^T`.
///
/// ```
/// use attention_lab::check::step::DZ;
/// let g = ndarray::array![[1.0, 2.0]];
/// assert_eq!((DZ.right)(&[&g, &ndarray::array![[1.0, 1.0]]]), Some(ndarray::array![[3.0]]));
/// ```
pub const DZ: Step = Step {
    right: times_transposed,
    mistakes: &[(Mistake::Transposed("W_O G^T instead of G W_O^T"), |i, _| {
        product_t(i[1], i[0])
    })],
};

/// Backward: `dL/dA = dZ V^T`; inputs dZ, V. Mistake: `V dZ^T`.
///
/// ```
/// use attention_lab::check::step::DWEIGHTS;
/// let dz = ndarray::array![[1.0], [0.0]];
/// let v = ndarray::array![[2.0], [3.0]];
/// assert_eq!((DWEIGHTS.right)(&[&dz, &v]), Some(ndarray::array![[2.0, 3.0], [0.0, 0.0]]));
/// ```
pub const DWEIGHTS: Step = Step {
    right: times_transposed,
    mistakes: &[(Mistake::Transposed("V dZ^T instead of dZ V^T"), |i, _| {
        product_t(i[1], i[0])
    })],
};

/// Backward: softmax's `dL/dS = A * (dA - rowsum(A * dA))`; inputs A, dA. Mistake: the
/// Jacobian's diagonal only, `A * dA`. Computed here rather than by `grad::softmax_backward`
/// (feature `learn`), so that the checks work in a kernel that loaded the library without it.
///
/// ```
/// use attention_lab::check::step::DSCORES;
/// let a = ndarray::array![[0.5, 0.5]];
/// let da = ndarray::array![[1.0, 0.0]];
/// assert_eq!((DSCORES.right)(&[&a, &da]), Some(ndarray::array![[0.25, -0.25]]));
/// ```
pub const DSCORES: Step = Step {
    right: |i| {
        (i[0].dim() == i[1].dim()).then(|| {
            let rowsum = (i[0] * i[1]).sum_axis(Axis(1)).insert_axis(Axis(1));
            i[0] * &(i[1] - &rowsum)
        })
    },
    mistakes: &[(Mistake::JacobianDiagonalOnly, |i, _| {
        (i[0].dim() == i[1].dim()).then(|| i[0] * i[1])
    })],
};

/// Backward: `dL/dQ = dS K / sqrt(d_k)`; inputs dS, K. Mistakes: no `sqrt(d_k)`, `dS^T K`.
///
/// ```
/// use attention_lab::check::step::DQ;
/// let ds = ndarray::array![[1.0]];
/// assert_eq!((DQ.right)(&[&ds, &ndarray::array![[4.0, 0.0, 0.0, 0.0]]]), Some(ndarray::array![[2.0, 0.0, 0.0, 0.0]]));
/// ```
pub const DQ: Step = Step {
    right: |i| product(i).map(|m| m / sqrt_dk(i[1])),
    mistakes: &[
        (Mistake::BackwardNoSqrtDk, |i, _| product(i)),
        (Mistake::Transposed("dS^T K instead of dS K"), |i, _| {
            t_product(i[0], i[1]).map(|m| m / sqrt_dk(i[1]))
        }),
    ],
};

/// Backward: `dL/dK = dS^T Q / sqrt(d_k)`; inputs dS, Q. Mistakes: no `sqrt(d_k)`, `dS Q`.
///
/// ```
/// use attention_lab::check::step::DK;
/// let ds = ndarray::array![[0.0, 1.0], [0.0, 0.0]];
/// let q = ndarray::array![[1.0], [2.0]];
/// assert_eq!((DK.right)(&[&ds, &q]), Some(ndarray::array![[0.0], [1.0]]));
/// ```
pub const DK: Step = Step {
    right: |i| t_product(i[0], i[1]).map(|m| m / sqrt_dk(i[1])),
    mistakes: &[
        (Mistake::BackwardNoSqrtDk, |i, _| t_product(i[0], i[1])),
        (Mistake::Transposed("dS Q instead of dS^T Q"), |i, _| {
            product(i).map(|m| m / sqrt_dk(i[1]))
        }),
    ],
};

/// Backward: `dL/dV = A^T dZ`; inputs A, dZ. Mistake: `A dZ`.
///
/// ```
/// use attention_lab::check::step::DV;
/// let a = ndarray::array![[0.0, 1.0], [0.0, 1.0]];
/// let dz = ndarray::array![[1.0], [1.0]];
/// assert_eq!((DV.right)(&[&a, &dz]), Some(ndarray::array![[0.0], [2.0]]));
/// ```
pub const DV: Step = Step {
    right: transposed_first,
    mistakes: &[(Mistake::Transposed("A dZ instead of A^T dZ"), |i, _| {
        product(i)
    })],
};

/// Backward: a projection's `dL/dW = X^T dQ` (or dK, dV); inputs X, dQ. Mistake: `dQ^T X`.
///
/// ```
/// use attention_lab::check::step::DW;
/// let x = ndarray::array![[1.0, 2.0]];
/// assert_eq!((DW.right)(&[&x, &ndarray::array![[1.0]]]), Some(ndarray::array![[1.0], [2.0]]));
/// ```
pub const DW: Step = Step {
    right: transposed_first,
    mistakes: &[(
        Mistake::Transposed("dQ^T X instead of X^T dQ (or dK, dV)"),
        |i, _| t_product(i[1], i[0]),
    )],
};

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
