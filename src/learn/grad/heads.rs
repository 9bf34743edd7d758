//! The backward passes of one attention head and of a multi-head layer (self-attention).

use ndarray::{s, Array1, Array2, ArrayView2};

use crate::error::AttentionError;
use crate::layers::heads::{Head, HeadOutput, MultiHead, MultiHeadOutput};
use crate::learn::grad::attention::backward as attention_backward;
use crate::learn::grad::linear::linear_backward;
use crate::learn::grad::{require, require_same};

/// Every gradient of one head on one input, from `dL/dz` back to X.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let head = Head::new(Array2::eye(2), Array2::eye(2), array![[1.0], [1.0]])?;
/// let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
/// let out = head.forward(&x, &Attend::new())?;
/// let grad: HeadGrad = head.backward(&x, &out, &Array2::ones((3, 1)))?;
/// assert_eq!((grad.dwv.dim(), grad.dx.dim()), ((2, 1), (3, 2)));
/// assert!(grad.dbq.is_none()); // the head has no biases
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct HeadGrad {
    /// `dL/dweights = dz V^T`.
    pub dweights: Array2<f64>,
    /// `dL/dscores`, through the softmax; zero where a key is blocked.
    pub dscores: Array2<f64>,
    /// `dL/dQ`.
    pub dq: Array2<f64>,
    /// `dL/dK`.
    pub dk: Array2<f64>,
    /// `dL/dV`.
    pub dv: Array2<f64>,
    /// `dL/dW_Q = X^T dQ`.
    pub dwq: Array2<f64>,
    /// `dL/dW_K = X^T dK`.
    pub dwk: Array2<f64>,
    /// `dL/dW_V = X^T dV`.
    pub dwv: Array2<f64>,
    /// `dL/db_Q`, the column sums of dQ, when the head has biases.
    pub dbq: Option<Array1<f64>>,
    /// `dL/db_K`, when the head has biases.
    pub dbk: Option<Array1<f64>>,
    /// `dL/db_V`, when the head has biases.
    pub dbv: Option<Array1<f64>>,
    /// `dL/dX = dQ W_Q^T + dK W_K^T + dV W_V^T`: X feeds all three projections.
    pub dx: Array2<f64>,
}

/// Every gradient of a multi-head layer on one input, from `dL/d(result)` back to X.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let w = Array2::<f64>::eye(4);
/// let layer = MultiHead::split(&w, &w, &w, 2, None)?;
/// let x = array![[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, 2.0]];
/// let out = layer.forward(&x, &Attend::new())?;
/// let grad: MultiHeadGrad = layer.backward(&x, &out, &Array2::ones((2, 4)))?;
/// assert_eq!(grad.dconcat, Array2::ones((2, 4))); // no W_O: the upstream gradient itself
/// assert!(grad.dwo.is_none());
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct MultiHeadGrad {
    /// `dL/dconcat`: `dL/doutput W_O^T`, or the upstream gradient itself without W_O.
    pub dconcat: Array2<f64>,
    /// Each head's gradients, in order; head i's `dz` is its block of columns of `dconcat`.
    pub heads: Vec<HeadGrad>,
    /// `dL/dW_O = concat^T dL/doutput`, when the layer has W_O.
    pub dwo: Option<Array2<f64>>,
    /// `dL/db_O`, the column sums of `dL/doutput`, when the layer has b_O.
    pub dbo: Option<Array1<f64>>,
    /// `dL/dX`, the sum of every head's.
    pub dx: Array2<f64>,
}

impl Head {
    /// The gradients of [`Head::forward`] (self-attention) on `x`, from what it kept (`out`,
    /// masked or not) and `dz = dL/dz`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?
    ///     .with_biases(array![0.0, 1.0], array![0.0, 0.0], array![0.0, 0.0])?;
    /// let x = array![[1.0, 2.0], [3.0, 4.0]];
    /// let out = head.forward(&x, &Attend::new())?;
    /// let grad = head.backward(&x, &out, &Array2::ones((2, 2)))?;
    /// assert_eq!(grad.dbv, Some(array![2.0, 2.0])); // each z row's weights sum to 1
    /// assert_eq!(grad.dx.dim(), x.dim());
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of `x` differ from the rows of W_Q,
    /// `out` is not the forward pass of `x` by this head's shapes, or `dz` is not the shape
    /// of `out.z`.
    pub fn backward<'x>(
        &self,
        x: impl Into<ArrayView2<'x, f64>>,
        out: &HeadOutput,
        dz: &Array2<f64>,
    ) -> Result<HeadGrad, AttentionError> {
        let x = x.into();
        self.check_inputs([x, x, x], None)?;
        require(
            out.q.dim() == (x.nrows(), self.wq().ncols())
                && out.k.dim() == (x.nrows(), self.wk().ncols())
                && out.v.dim() == (x.nrows(), self.wv().ncols()),
            ("Q of the forward pass", out.q.shape()),
            ("X W_Q", &[x.nrows(), self.wq().ncols()]),
            "the forward pass must be this head's on X",
        )?;
        require_same(("dL/dz", dz.shape()), ("z", out.z.shape()))?;
        let a = attention_backward(out.q.view(), out.k.view(), out.v.view(), &out.weights, dz)?;
        let q = linear_backward(x, self.wq(), &a.dq);
        let k = linear_backward(x, self.wk(), &a.dk);
        let v = linear_backward(x, self.wv(), &a.dv);
        let has_biases = self.biases().is_some();
        let bias = |db: Array1<f64>| has_biases.then_some(db);
        Ok(HeadGrad {
            dx: q.dinput + &k.dinput + &v.dinput,
            dweights: a.dweights,
            dscores: a.dscores,
            dq: a.dq,
            dk: a.dk,
            dv: a.dv,
            dwq: q.dw,
            dwk: k.dw,
            dwv: v.dw,
            dbq: bias(q.db),
            dbk: bias(k.db),
            dbv: bias(v.db),
        })
    }
}

impl MultiHead {
    /// The gradients of [`MultiHead::forward`] (self-attention) on `x`, from what it kept
    /// (`out`) and `dresult = dL/d(out.result())`: the output's gradient with W_O, the
    /// concatenation's without.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, Some(w.clone() * 2.0))?
    ///     .with_output_bias(array![0.0, 0.0, 0.0, 1.0])?;
    /// let x = array![[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0]];
    /// let out = layer.forward(&x, &Attend::new().causal())?;
    /// let grad = layer.backward(&x, &out, &Array2::ones((2, 4)))?;
    /// assert_eq!(grad.dconcat, Array2::from_elem((2, 4), 2.0)); // dL/doutput W_O^T
    /// assert_eq!(grad.dbo, Some(array![2.0, 2.0, 2.0, 2.0]));
    /// assert_eq!(grad.heads.len(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when `dresult` is not the shape of `out.result()`, `out`
    /// is not this layer's forward pass on `x`, or as [`Head::backward`].
    pub fn backward<'x>(
        &self,
        x: impl Into<ArrayView2<'x, f64>>,
        out: &MultiHeadOutput,
        dresult: &Array2<f64>,
    ) -> Result<MultiHeadGrad, AttentionError> {
        let x = x.into();
        require_same(
            ("dL/dresult", dresult.shape()),
            ("result", out.result().shape()),
        )?;
        let widths: Vec<usize> = self.heads().iter().map(|h| h.wv().ncols()).collect();
        require(
            out.heads.len() == widths.len()
                && out.concat.ncols() == widths.iter().sum()
                && out.concat.nrows() == x.nrows()
                && out.result().ncols() == self.result_width()
                && out.output.is_some() == self.wo().is_some(),
            ("concat of the forward pass", out.concat.shape()),
            ("the heads' values", &widths),
            "the forward pass must be this layer's on X: one z per head, as wide as its W_V, \
             and an output as wide as W_O exactly when the layer has W_O",
        )?;
        let (dconcat, dwo, dbo) = match self.wo() {
            Some(wo) => {
                let o = linear_backward(out.concat.view(), wo, dresult);
                let dbo = self.bo().map(|_| o.db);
                (o.dinput, Some(o.dw), dbo)
            }
            None => (dresult.clone(), None, None),
        };
        let mut dx = Array2::zeros(x.dim());
        let mut heads = Vec::with_capacity(widths.len());
        let mut start = 0;
        for ((head, head_out), width) in self.heads().iter().zip(&out.heads).zip(&widths) {
            let dz = dconcat.slice(s![.., start..start + width]).to_owned();
            let grad = head.backward(x, head_out, &dz)?;
            dx += &grad.dx;
            heads.push(grad);
            start += width;
        }
        Ok(MultiHeadGrad {
            dconcat,
            heads,
            dwo,
            dbo,
            dx,
        })
    }
}
