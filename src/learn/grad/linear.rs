//! The backward pass of `Y = X W + b`, shared by every projection (W_Q, W_K, W_V, W_O, the
//! feed-forward's W_1 and W_2).

use ndarray::{Array1, Array2, ArrayView2, Axis};

/// The gradients of `Y = X W + b`.
pub(crate) struct LinearGrad {
    /// `dY W^T`.
    pub dinput: Array2<f64>,
    /// `X^T dY`.
    pub dw: Array2<f64>,
    /// The column sums of `dY`: b is added to every row, so each row's gradient adds up.
    pub db: Array1<f64>,
}

/// Shapes are the caller's to check: `input` is rows x in, `w` in x out, `dy` rows x out.
pub(crate) fn linear_backward(
    input: ArrayView2<'_, f64>,
    w: &Array2<f64>,
    dy: &Array2<f64>,
) -> LinearGrad {
    LinearGrad {
        dinput: dy.dot(&w.t()),
        dw: input.t().dot(dy),
        db: dy.sum_axis(Axis(0)),
    }
}
