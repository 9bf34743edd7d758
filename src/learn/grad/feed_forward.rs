//! The backward passes of the GELU feed-forward block and of SwiGLU.

use ndarray::{Array1, Array2, ArrayView2};

use crate::error::AttentionError;
use crate::layers::feed_forward::{silu, FeedForward, FeedForwardOutput, SwiGlu, SwiGluOutput};
use crate::learn::grad::linear::linear_backward;
use crate::learn::grad::{require, require_same};

/// Every gradient of the feed-forward block `GELU(X W_1 + b_1) W_2 + b_2`.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let ff = FeedForward::new(Array2::ones((2, 3)), Array1::zeros(3), Array2::ones((3, 2)), Array1::zeros(2))?;
/// let x = array![[1.0, -1.0]];
/// let out = ff.forward(&x)?;
/// let grad: FeedForwardGrad = ff.backward(&x, &out, &array![[1.0, 0.0]])?;
/// assert_eq!(grad.dactivated, array![[1.0, 1.0, 1.0]]); // dL/doutput W_2^T
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FeedForwardGrad {
    /// `dL/dactivated = dL/doutput W_2^T`.
    pub dactivated: Array2<f64>,
    /// `dL/dhidden = dL/dactivated * GELU'(hidden)`.
    pub dhidden: Array2<f64>,
    /// `dL/dW_1 = X^T dL/dhidden`.
    pub dw1: Array2<f64>,
    /// `dL/db_1`, the column sums of `dL/dhidden`.
    pub db1: Array1<f64>,
    /// `dL/dW_2 = activated^T dL/doutput`.
    pub dw2: Array2<f64>,
    /// `dL/db_2`, the column sums of `dL/doutput`.
    pub db2: Array1<f64>,
    /// `dL/dX = dL/dhidden W_1^T`.
    pub dx: Array2<f64>,
}

/// Every gradient of SwiGLU, `(SiLU(X W_gate) * X W_up) W_down`.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let ff = SwiGlu::new(array![[1.0]], array![[1.0]], array![[1.0]])?;
/// let x = array![[2.0]];
/// let out = ff.forward(&x)?;
/// let grad: SwiGluGrad = ff.backward(&x, &out, &array![[1.0]])?;
/// assert_eq!(grad.dup, array![[silu(2.0)]]);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SwiGluGrad {
    /// `dL/dactivated = dL/doutput W_down^T`.
    pub dactivated: Array2<f64>,
    /// `dL/dgate = dL/dactivated * up * SiLU'(gate)`.
    pub dgate: Array2<f64>,
    /// `dL/dup = dL/dactivated * SiLU(gate)`.
    pub dup: Array2<f64>,
    /// `dL/dW_gate = X^T dL/dgate`.
    pub dw_gate: Array2<f64>,
    /// `dL/dW_up = X^T dL/dup`.
    pub dw_up: Array2<f64>,
    /// `dL/dW_down = activated^T dL/doutput`.
    pub dw_down: Array2<f64>,
    /// `dL/dX = dL/dgate W_gate^T + dL/dup W_up^T`.
    pub dx: Array2<f64>,
}

/// The derivative of the exact GELU `x Phi(x)`: `Phi(x) + x phi(x)`.
fn gelu_derivative(x: f64) -> f64 {
    let cdf = 0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
    let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    cdf + x * pdf
}

/// The derivative of SiLU `x s(x)` (s the sigmoid): `s(x) (1 + x (1 - s(x)))`.
fn silu_derivative(x: f64) -> f64 {
    let s = 1.0 / (1.0 + (-x).exp());
    s * (1.0 + x * (1.0 - s))
}

/// X must be as wide as the first projection, every intermediate tokens x d_ff (the first
/// projection's columns), and `doutput` tokens x the last projection's columns: the
/// forward pass must be this block's on X.
fn check(
    x: ArrayView2<'_, f64>,
    first: (&str, &Array2<f64>),
    last: &Array2<f64>,
    intermediates: &[(&str, &Array2<f64>)],
    doutput: &Array2<f64>,
) -> Result<(), AttentionError> {
    require(
        x.ncols() == first.1.nrows(),
        ("X", x.shape()),
        (first.0, first.1.shape()),
        "the columns of X must equal the rows of the first projection",
    )?;
    for &(name, value) in intermediates {
        require(
            value.dim() == (x.nrows(), first.1.ncols()),
            (name, value.shape()),
            ("X", x.shape()),
            "the forward pass must be this block's on X",
        )?;
    }
    require_same(
        ("dL/doutput", doutput.shape()),
        ("output", &[x.nrows(), last.ncols()]),
    )
}

impl FeedForward {
    /// The gradients of [`FeedForward::forward`] on `x`, from what it kept (`out`) and
    /// `doutput = dL/doutput`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let ff = FeedForward::new(Array2::eye(2), array![0.0, 0.0], Array2::eye(2), array![0.0, 0.0])?;
    /// let x = array![[0.0, 0.0]];
    /// let out = ff.forward(&x)?;
    /// let grad = ff.backward(&x, &out, &array![[1.0, 1.0]])?;
    /// assert_eq!(grad.dhidden, array![[0.5, 0.5]]); // GELU'(0) = 1/2
    /// assert_eq!(grad.db2, array![1.0, 1.0]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the rows of W_1, `out`
    /// is not this block's forward pass on X, or `doutput` is not the shape of the output.
    pub fn backward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        out: &FeedForwardOutput,
        doutput: &Array2<f64>,
    ) -> Result<FeedForwardGrad, AttentionError> {
        let x = x.into();
        let intermediates = [("hidden", &out.hidden), ("activated", &out.activated)];
        check(x, ("W_1", self.w1()), self.w2(), &intermediates, doutput)?;
        let second = linear_backward(out.activated.view(), self.w2(), doutput);
        let dhidden = &second.dinput * &out.hidden.mapv(gelu_derivative);
        let first = linear_backward(x, self.w1(), &dhidden);
        Ok(FeedForwardGrad {
            dactivated: second.dinput,
            dhidden,
            dw1: first.dw,
            db1: first.db,
            dw2: second.dw,
            db2: second.db,
            dx: first.dinput,
        })
    }
}

impl SwiGlu {
    /// The gradients of [`SwiGlu::forward`] on `x`, from what it kept (`out`) and
    /// `doutput = dL/doutput`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let ff = SwiGlu::new(array![[1.0]], array![[2.0]], array![[3.0]])?;
    /// let x = array![[0.0]];
    /// let out = ff.forward(&x)?;
    /// let grad = ff.backward(&x, &out, &array![[1.0]])?;
    /// assert_eq!(grad.dup, array![[0.0]]); // SiLU(0) = 0
    /// assert_eq!(grad.dgate, array![[0.0]]); // up = 0
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the rows of W_gate,
    /// `out` is not this block's forward pass on X, or `doutput` is not the shape of the
    /// output.
    pub fn backward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        out: &SwiGluOutput,
        doutput: &Array2<f64>,
    ) -> Result<SwiGluGrad, AttentionError> {
        let x = x.into();
        let intermediates = [
            ("gate", &out.gate),
            ("up", &out.up),
            ("activated", &out.activated),
        ];
        // Gradients are taken in f64 whatever the weights' storage: packed ones are expanded.
        let (w_gate, w_up, w_down) = (
            self.w_gate().dense(),
            self.w_up().dense(),
            self.w_down().dense(),
        );
        check(x, ("W_gate", &w_gate), &w_down, &intermediates, doutput)?;
        let down = linear_backward(out.activated.view(), &w_down, doutput);
        let dup = &down.dinput * &out.gate.mapv(silu);
        let dgate = &down.dinput * &out.up * out.gate.mapv(silu_derivative);
        let gate = linear_backward(x, &w_gate, &dgate);
        let up = linear_backward(x, &w_up, &dup);
        Ok(SwiGluGrad {
            dactivated: down.dinput,
            dgate,
            dup,
            dw_gate: gate.dw,
            dw_up: up.dw,
            dw_down: down.dw,
            dx: gate.dinput + &up.dinput,
        })
    }
}
