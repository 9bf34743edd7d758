//! The backward passes of layer normalisation and RMS normalisation.

use ndarray::{Array1, Array2, ArrayView2, Axis, Zip};

use crate::error::AttentionError;
use crate::layers::norm::{LayerNorm, RmsNorm};
use crate::learn::grad::{require, require_same};

/// Every gradient of a layer norm, `y = xhat * gamma + beta` with
/// `xhat = (x - mean) / sqrt(var + eps)` per row.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let norm = LayerNorm::new(array![1.0, 1.0, 1.0], array![0.0, 0.0, 0.0], 1e-5)?;
/// let grad: LayerNormGrad = norm.backward(&array![[1.0, 2.0, 4.0]], &array![[1.0, 0.0, 0.0]])?;
/// assert_eq!(grad.dxhat, array![[1.0, 0.0, 0.0]]); // gamma is all ones
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LayerNormGrad {
    /// `dL/dxhat = dL/dy * gamma`.
    pub dxhat: Array2<f64>,
    /// `dL/dX`, through each row's mean and variance.
    pub dx: Array2<f64>,
    /// `dL/dgamma`, the column sums of `dL/dy * xhat`.
    pub dgamma: Array1<f64>,
    /// `dL/dbeta`, the column sums of `dL/dy`.
    pub dbeta: Array1<f64>,
}

/// Every gradient of an RMS norm, `y = weight * xhat` with `xhat = x / sqrt(mean(x^2) + eps)`.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let norm = RmsNorm::new(array![2.0, 2.0], 1e-6)?;
/// let grad: RmsNormGrad = norm.backward(&array![[1.0, -1.0]], &array![[1.0, 1.0]])?;
/// assert_eq!(grad.dxhat, array![[2.0, 2.0]]); // dL/dy * weight
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RmsNormGrad {
    /// `dL/dxhat = dL/dy * weight`.
    pub dxhat: Array2<f64>,
    /// `dL/dX`, through each row's mean square.
    pub dx: Array2<f64>,
    /// `dL/dweight`, the column sums of `dL/dy * xhat`.
    pub dweight: Array1<f64>,
}

/// What both norms' backward passes share: `xhat`, `dxhat` and `dx`.
struct Normalized {
    xhat: Array2<f64>,
    dxhat: Array2<f64>,
    dx: Array2<f64>,
}

/// Per row, with `r = 1 / sqrt(var + eps)` (`var` the mean square after centring, or of x
/// itself when `center` is false): `dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat))`,
/// the middle term only when centred (RMS norm subtracts no mean).
fn normalized_backward(
    x: ArrayView2<'_, f64>,
    scale: &Array1<f64>,
    eps: f64,
    center: bool,
    dy: &Array2<f64>,
) -> Normalized {
    let d = x.ncols() as f64;
    let mut xhat = x.to_owned();
    let dxhat = dy * scale;
    let mut dx = Array2::zeros(x.dim());
    Zip::from(xhat.rows_mut())
        .and(dxhat.rows())
        .and(dx.rows_mut())
        .for_each(|mut xhat, dxhat, mut dx| {
            if center {
                let mean = xhat.sum() / d;
                xhat -= mean;
            }
            let r = 1.0 / (xhat.iter().map(|v| v * v).sum::<f64>() / d + eps).sqrt();
            xhat *= r;
            let mean_dxhat = if center { dxhat.sum() / d } else { 0.0 };
            let mean_dot = xhat.iter().zip(&dxhat).map(|(a, b)| a * b).sum::<f64>() / d;
            Zip::from(&mut dx)
                .and(&xhat)
                .and(&dxhat)
                .for_each(|dx, &xh, &g| *dx = r * (g - mean_dxhat - xh * mean_dot));
        });
    Normalized { xhat, dxhat, dx }
}

/// The shape checks of both norms: X as wide as the scale, dL/dy the shape of X.
fn check(
    x: ArrayView2<'_, f64>,
    scale: (&str, &Array1<f64>),
    dy: &Array2<f64>,
) -> Result<(), AttentionError> {
    require(
        x.ncols() == scale.1.len(),
        ("X", x.shape()),
        (scale.0, &[1, scale.1.len()]),
        "the columns of X must equal the length of the norm's scale",
    )?;
    require_same(("dL/dy", dy.shape()), ("y", x.shape()))
}

impl LayerNorm {
    /// The gradients of [`LayerNorm::forward`] on `x`, from `dy = dL/dy`; the row means and
    /// variances are recomputed from `x`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = LayerNorm::new(array![1.0, 2.0], array![0.0, 0.0], 0.0)?;
    /// let grad = norm.backward(&array![[1.0, 3.0]], &array![[1.0, 1.0]])?;
    /// assert_eq!(grad.dbeta, array![1.0, 1.0]);
    /// assert_eq!(grad.dgamma, array![-1.0, 1.0]); // xhat = [-1, 1]
    /// assert_eq!(grad.dx.row(0).sum(), 0.0); // shifting x does not change y
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the length of gamma,
    /// or `dy` is not the shape of X.
    pub fn backward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        dy: &Array2<f64>,
    ) -> Result<LayerNormGrad, AttentionError> {
        let x = x.into();
        check(x, ("gamma", self.gamma()), dy)?;
        let n = normalized_backward(x, self.gamma(), self.eps(), true, dy);
        Ok(LayerNormGrad {
            dgamma: (dy * &n.xhat).sum_axis(Axis(0)),
            dbeta: dy.sum_axis(Axis(0)),
            dxhat: n.dxhat,
            dx: n.dx,
        })
    }
}

impl RmsNorm {
    /// The gradients of [`RmsNorm::forward`] on `x`, from `dy = dL/dy`; the row mean squares
    /// are recomputed from `x`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = RmsNorm::new(array![1.0, 1.0], 0.0)?;
    /// let x = array![[3.0, 4.0]];
    /// let grad = norm.backward(&x, &array![[3.0, 4.0]])?;
    /// // y is x scaled to a fixed length: moving x along itself changes nothing
    /// assert!(grad.dx.iter().all(|d| d.abs() < 1e-15));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of X differ from the length of the
    /// weight, or `dy` is not the shape of X.
    pub fn backward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        dy: &Array2<f64>,
    ) -> Result<RmsNormGrad, AttentionError> {
        let x = x.into();
        check(x, ("weight", self.weight()), dy)?;
        let n = normalized_backward(x, self.weight(), self.eps(), false, dy);
        Ok(RmsNormGrad {
            dweight: (dy * &n.xhat).sum_axis(Axis(0)),
            dxhat: n.dxhat,
            dx: n.dx,
        })
    }
}
