//! Layer normalisation: each row of X shifted to mean 0 and scaled to variance 1, then
//! scaled by gamma and shifted by beta (PyTorch's `nn.LayerNorm`, BERT's `LayerNorm`).

use ndarray::{Array1, Array2, ArrayView2, ArrayViewMut2, Axis};

use crate::error::{AttentionError, Operand};

/// A layer norm over rows of width `d`: its gain gamma, its bias beta (both `d` long) and
/// the epsilon added to the variance.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerNorm {
    gamma: Array1<f64>,
    beta: Array1<f64>,
    eps: f64,
}

impl LayerNorm {
    /// A layer norm from gamma, beta and epsilon (BERT's `layer_norm_eps`, 1e-12).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = LayerNorm::new(array![1.0, 1.0], array![0.0, 0.0], 1e-12)?;
    /// assert_eq!(norm.gamma().len(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when gamma and beta differ in length, or epsilon is
    /// negative or not finite.
    pub fn new(
        gamma: Array1<f64>,
        beta: Array1<f64>,
        eps: f64,
    ) -> Result<LayerNorm, AttentionError> {
        if gamma.len() != beta.len() || !(eps >= 0.0 && eps.is_finite()) {
            return Err(AttentionError::mismatch(
                Operand::row("gamma", gamma.len()),
                Operand::row("beta", beta.len()),
                "gamma and beta must have the same length, and epsilon must be finite and at least 0",
            ));
        }
        Ok(LayerNorm { gamma, beta, eps })
    }

    /// The gain gamma.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(array![2.0], array![0.0], 0.0)?;
    /// assert_eq!(norm.gamma(), &array![2.0]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn gamma(&self) -> &Array1<f64> {
        &self.gamma
    }

    /// The bias beta.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(array![1.0], array![0.5], 0.0)?;
    /// assert_eq!(norm.beta(), &array![0.5]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn beta(&self) -> &Array1<f64> {
        &self.beta
    }

    /// The epsilon added to each row's variance.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(LayerNorm::new(array![1.0], array![0.0], 1e-12)?.eps(), 1e-12);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// Each row `x` becomes `(x - mean(x)) / sqrt(var(x) + eps) * gamma + beta`, with the
    /// variance divided by `d` (not `d - 1`), as PyTorch computes it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = LayerNorm::new(array![1.0, 1.0], array![0.0, 10.0], 0.0)?;
    /// let y = norm.forward(&array![[1.0, 3.0], [5.0, 5.0 + 1e-3]])?;
    /// assert_eq!(y.row(0), array![-1.0, 11.0]);
    /// assert!((y[[1, 0]] + 1.0).abs() < 1e-9);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the length of gamma.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<Array2<f64>, AttentionError> {
        self.normalize(x.into().to_owned())
    }

    /// [`LayerNorm::forward`] on a matrix of its own, normalised where it is: for a sum made
    /// only to be normalised (a residual), which then is not copied.
    pub(crate) fn normalize(&self, mut y: Array2<f64>) -> Result<Array2<f64>, AttentionError> {
        self.normalize_in_place(y.view_mut())?;
        Ok(y)
    }

    /// [`LayerNorm::forward`] in place: each row of `y` replaced by its normalised row.
    pub(crate) fn normalize_in_place(
        &self,
        mut y: ArrayViewMut2<'_, f64>,
    ) -> Result<(), AttentionError> {
        if y.ncols() != self.gamma.len() {
            return Err(AttentionError::mismatch(
                Operand::new("X", y.shape()),
                Operand::row("gamma", self.gamma.len()),
                "the columns of X must equal the length of the layer norm's gamma",
            ));
        }
        for mut row in y.axis_iter_mut(Axis(0)) {
            let d = row.len() as f64;
            let mean = row.sum() / d;
            row -= mean;
            let var = row.iter().map(|v| v * v).sum::<f64>() / d;
            row /= (var + self.eps).sqrt();
        }
        y *= &self.gamma;
        y += &self.beta;
        Ok(())
    }
}

/// RMS normalisation: each row divided by the root of its mean square (plus epsilon), then
/// scaled by a weight: Llama's `LlamaRMSNorm`, without layer norm's mean and bias.
#[derive(Debug, Clone, PartialEq)]
pub struct RmsNorm {
    weight: Array1<f64>,
    eps: f64,
}

impl RmsNorm {
    /// An RMS norm from its weight and the epsilon added to the mean square (Llama's
    /// `rms_norm_eps`, 1e-6 or 1e-5).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = RmsNorm::new(array![1.0, 1.0], 1e-6)?;
    /// assert_eq!(norm.weight().len(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] when epsilon is negative or not finite.
    pub fn new(weight: Array1<f64>, eps: f64) -> Result<RmsNorm, AttentionError> {
        if !(eps >= 0.0 && eps.is_finite()) {
            return Err(AttentionError::Setting {
                name: "eps",
                value: eps.to_string(),
                rule: "the epsilon of a norm must be finite and at least 0",
            });
        }
        Ok(RmsNorm { weight, eps })
    }

    /// The weight each normalised row is multiplied by.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(RmsNorm::new(array![2.0], 0.0)?.weight(), &array![2.0]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn weight(&self) -> &Array1<f64> {
        &self.weight
    }

    /// The epsilon added to each row's mean square.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(RmsNorm::new(array![1.0], 1e-6)?.eps(), 1e-6);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// Each row `x` becomes `weight * x / sqrt(mean(x^2) + eps)`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = RmsNorm::new(array![1.0, 10.0], 0.0)?;
    /// let y = norm.forward(&array![[3.0, 4.0]])?; // mean square 12.5
    /// assert!((y[[0, 0]] - 3.0 / 12.5f64.sqrt()).abs() < 1e-15);
    /// assert!((y[[0, 1]] - 40.0 / 12.5f64.sqrt()).abs() < 1e-14);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the length of the weight.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<Array2<f64>, AttentionError> {
        let mut y = x.into().to_owned();
        if y.ncols() != self.weight.len() {
            return Err(AttentionError::mismatch(
                Operand::new("X", y.shape()),
                Operand::row("weight", self.weight.len()),
                "the columns of X must equal the length of the RMS norm's weight",
            ));
        }
        for mut row in y.axis_iter_mut(Axis(0)) {
            let mean_square = row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64;
            row *= 1.0 / (mean_square + self.eps).sqrt();
        }
        Ok(y * &self.weight)
    }
}
