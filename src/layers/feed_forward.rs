//! The position-wise feed-forward block of a transformer layer: `GELU(X W_1 + b_1) W_2 + b_2`,
//! applied to each token (row) on its own.

use ndarray::{Array1, Array2, ArrayView2};

use crate::error::{AttentionError, Operand};
use crate::fast::gemm;
use crate::fast::parallel;
use crate::fast::simd::Step;
use crate::into::fit;
use crate::layers::linear::Linear;

/// GELU with the exact Gaussian CDF, `x/2 (1 + erf(x/sqrt(2)))`: PyTorch's `nn.GELU()` and
/// BERT's `hidden_act = "gelu"` (not the tanh approximation).
///
/// ```
/// use attention_lab::prelude::*;
///
/// assert_eq!(gelu(0.0), 0.0);
/// assert!((gelu(1.0) - 0.8413447460685429).abs() < 1e-15);
/// assert!(gelu(-10.0).abs() < 1e-20);
/// ```
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))
}

/// The feed-forward block: W_1 (d x d_ff), b_1 (d_ff), W_2 (d_ff x d), b_2 (d).
#[derive(Debug, Clone, PartialEq)]
pub struct FeedForward {
    w1: Array2<f64>,
    b1: Array1<f64>,
    w2: Array2<f64>,
    b2: Array1<f64>,
}

/// Every intermediate of the feed-forward block on one input.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FeedForwardOutput {
    /// `X W_1 + b_1`, tokens x d_ff.
    pub hidden: Array2<f64>,
    /// `GELU(hidden)`, element by element.
    pub activated: Array2<f64>,
    /// `activated W_2 + b_2`, tokens x d.
    pub output: Array2<f64>,
}

impl FeedForward {
    /// A feed-forward block from its two projections and their biases.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let ff = FeedForward::new(Array2::eye(2), array![0.0, 0.0], Array2::eye(2), array![1.0, 1.0])?;
    /// let out = ff.forward(&array![[0.0, 0.0]])?;
    /// assert_eq!(out.output, array![[1.0, 1.0]]); // GELU(0) = 0, plus b_2
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] naming the two arrays that do not fit: b_1 must have one
    /// entry per column of W_1, W_2 one row per column of W_1, b_2 one entry per column of W_2.
    pub fn new(
        w1: Array2<f64>,
        b1: Array1<f64>,
        w2: Array2<f64>,
        b2: Array1<f64>,
    ) -> Result<FeedForward, AttentionError> {
        if b1.len() != w1.ncols() {
            return Err(AttentionError::mismatch(
                Operand::row("b_1", b1.len()),
                Operand::new("W_1", w1.shape()),
                "b_1 must have one entry per column of W_1",
            ));
        }
        if w2.nrows() != w1.ncols() {
            return Err(AttentionError::mismatch(
                Operand::new("W_1", w1.shape()),
                Operand::new("W_2", w2.shape()),
                "the rows of W_2 must equal the columns of W_1 (d_ff)",
            ));
        }
        if b2.len() != w2.ncols() {
            return Err(AttentionError::mismatch(
                Operand::row("b_2", b2.len()),
                Operand::new("W_2", w2.shape()),
                "b_2 must have one entry per column of W_2",
            ));
        }
        Ok(FeedForward { w1, b1, w2, b2 })
    }

    /// W_1, d x d_ff.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// assert_eq!(ff.w1().dim(), (2, 3));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn w1(&self) -> &Array2<f64> {
        &self.w1
    }

    /// W_2, d_ff x d.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// assert_eq!(ff.w2().dim(), (3, 2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn w2(&self) -> &Array2<f64> {
        &self.w2
    }

    /// `GELU(X W_1 + b_1) W_2 + b_2`, keeping both intermediates.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let ff = FeedForward::new(array![[1.0, -1.0]], array![0.0, 0.0], array![[1.0], [1.0]], array![0.0])?;
    /// let out = ff.forward(&array![[2.0]])?;
    /// assert_eq!(out.hidden, array![[2.0, -2.0]]);
    /// assert!((out.output[[0, 0]] - (gelu(2.0) + gelu(-2.0))).abs() < 1e-15);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the rows of W_1.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<FeedForwardOutput, AttentionError> {
        let x = x.into();
        let mut out = FeedForwardOutput::default();
        self.forward_into(x, &mut out)?;
        Ok(out)
    }

    /// [`FeedForward::forward`] written into `out`, whose matrices are reshaped (their memory
    /// kept when it has room).
    pub(crate) fn forward_into(
        &self,
        x: ArrayView2<'_, f64>,
        out: &mut FeedForwardOutput,
    ) -> Result<(), AttentionError> {
        if x.ncols() != self.w1.nrows() {
            return Err(AttentionError::mismatch(
                Operand::new("X", x.shape()),
                Operand::new("W_1", self.w1.shape()),
                "the columns of X must equal the rows of W_1",
            ));
        }
        // On several cores for a long input; an erf costs a few dozen multiply-adds.
        fit(&mut out.hidden, (x.nrows(), self.w1.ncols()));
        let (w1, b1) = ([self.w1.view()], [&self.b1]);
        gemm::project_wide_into(x, &w1, Some(&b1), out.hidden.view_mut());
        fit(&mut out.activated, out.hidden.dim());
        parallel::map_step_into(&out.hidden, Step::Gelu, 32, out.activated.view_mut());
        fit(&mut out.output, (x.nrows(), self.w2.ncols()));
        let (w2, b2) = ([self.w2.view()], [&self.b2]);
        gemm::project_wide_into(out.activated.view(), &w2, Some(&b2), out.output.view_mut());
        Ok(())
    }
}

/// SiLU (swish), `x sigmoid(x) = x / (1 + e^-x)`: PyTorch's `F.silu`, Llama's `hidden_act`.
///
/// ```
/// use attention_lab::prelude::*;
///
/// assert_eq!(silu(0.0), 0.0);
/// assert!((silu(1.0) - 0.7310585786300049).abs() < 1e-15);
/// ```
pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// Llama's feed-forward block, SwiGLU: `(SiLU(X W_gate) * X W_up) W_down`, no biases.
/// W_gate and W_up are d x d_ff, W_down d_ff x d.
#[derive(Debug, Clone, PartialEq)]
pub struct SwiGlu {
    w_gate: Linear,
    w_up: Linear,
    w_down: Linear,
}

/// Every intermediate of the SwiGLU block on one input.
#[derive(Debug, Clone, PartialEq)]
pub struct SwiGluOutput {
    /// `X W_gate`, tokens x d_ff.
    pub gate: Array2<f64>,
    /// `X W_up`, tokens x d_ff.
    pub up: Array2<f64>,
    /// `SiLU(gate) * up`, element by element.
    pub activated: Array2<f64>,
    /// `activated W_down`, tokens x d.
    pub output: Array2<f64>,
}

impl SwiGlu {
    /// A SwiGLU block from its three projections (PyTorch's `gate_proj`, `up_proj` and
    /// `down_proj` weights, transposed: this crate multiplies `X W`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let ff = SwiGlu::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let out = ff.forward(&array![[1.0, 0.0]])?;
    /// assert_eq!(out.output, array![[silu(1.0), 0.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] naming the two matrices that do not fit: W_up as W_gate,
    /// and W_down one row per column of W_gate and one column per row.
    pub fn new(
        w_gate: impl Into<Linear>,
        w_up: impl Into<Linear>,
        w_down: impl Into<Linear>,
    ) -> Result<SwiGlu, AttentionError> {
        let (w_gate, w_up, w_down) = (w_gate.into(), w_up.into(), w_down.into());
        if w_up.dim() != w_gate.dim() {
            return Err(AttentionError::mismatch(
                Operand::new("W_gate", &w_gate.shape()),
                Operand::new("W_up", &w_up.shape()),
                "W_gate and W_up must have the same shape (d x d_ff)",
            ));
        }
        if w_down.dim() != (w_gate.ncols(), w_gate.nrows()) {
            return Err(AttentionError::mismatch(
                Operand::new("W_gate", &w_gate.shape()),
                Operand::new("W_down", &w_down.shape()),
                "W_down must be d_ff x d when W_gate is d x d_ff",
            ));
        }
        Ok(SwiGlu {
            w_gate,
            w_up,
            w_down,
        })
    }

    /// W_gate, d x d_ff.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let ff = SwiGlu::new(array![[1.0, 2.0]], array![[3.0, 4.0]], array![[5.0], [6.0]])?;
    /// assert_eq!(ff.w_gate(), &array![[1.0, 2.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn w_gate(&self) -> &Linear {
        &self.w_gate
    }

    /// W_up, d x d_ff.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let ff = SwiGlu::new(array![[1.0, 2.0]], array![[3.0, 4.0]], array![[5.0], [6.0]])?;
    /// assert_eq!(ff.w_up(), &array![[3.0, 4.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn w_up(&self) -> &Linear {
        &self.w_up
    }

    /// W_down, d_ff x d.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let ff = SwiGlu::new(array![[1.0, 2.0]], array![[3.0, 4.0]], array![[5.0], [6.0]])?;
    /// assert_eq!(ff.w_down(), &array![[5.0], [6.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn w_down(&self) -> &Linear {
        &self.w_down
    }

    /// `(SiLU(X W_gate) * X W_up) W_down`, keeping every intermediate.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let ff = SwiGlu::new(array![[1.0]], array![[2.0]], array![[3.0]])?;
    /// let out = ff.forward(&array![[1.0]])?;
    /// assert_eq!(out.up, array![[2.0]]);
    /// assert_eq!(out.output, array![[silu(1.0) * 2.0 * 3.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the rows of W_gate.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<SwiGluOutput, AttentionError> {
        let x = x.into();
        if x.ncols() != self.w_gate.nrows() {
            return Err(AttentionError::mismatch(
                Operand::new("X", x.shape()),
                Operand::new("W_gate", &self.w_gate.shape()),
                "the columns of X must equal the rows of W_gate",
            ));
        }
        let gate = self.w_gate.project(x);
        let up = self.w_up.project(x);
        let activated = parallel::map_elements(&gate, 32, silu) * &up;
        let output = self.w_down.project(activated.view());
        Ok(SwiGluOutput {
            gate,
            up,
            activated,
            output,
        })
    }
}
