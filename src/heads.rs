//! Attention heads: one [`Head`] with its own W_Q, W_K, W_V, and a [`MultiHead`] layer that
//! concatenates its heads and applies W_O.

use ndarray::{concatenate, s, Array2, ArrayView2, Axis};

use crate::attention::attend;
use crate::error::{AttentionError, Operand};
use crate::mask::Mask;
use crate::softmax::Softmax;

/// One attention head: the projections W_Q, W_K (both d_model x d_k) and W_V (d_model x d_v).
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    wq: Array2<f64>,
    wk: Array2<f64>,
    wv: Array2<f64>,
    softmax: Softmax,
}

/// Every intermediate of one head on one input, named as the documents name them.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadOutput {
    /// Queries `X W_Q`.
    pub q: Array2<f64>,
    /// Keys `X W_K`.
    pub k: Array2<f64>,
    /// Values `X W_V`.
    pub v: Array2<f64>,
    /// `Q K^T / sqrt(d_k)`.
    pub scores: Array2<f64>,
    /// The softmax of each row of `scores`.
    pub weights: Array2<f64>,
    /// The head's output `weights V`.
    pub z: Array2<f64>,
}

/// Names a matrix in a message: `W_Q`, or `W_Q of head 2` inside a multi-head layer.
fn named(matrix: &str, head: Option<usize>) -> String {
    match head {
        Some(i) => format!("{matrix} of head {i}"),
        None => matrix.to_string(),
    }
}

/// The shape rules every head's projections obey; shared by [`Head::new`] and [`MultiHead::split`].
fn check_projections(
    wq: ArrayView2<'_, f64>,
    wk: ArrayView2<'_, f64>,
    wv: ArrayView2<'_, f64>,
) -> Result<(), AttentionError> {
    let op = |name: &str, m: &ArrayView2<'_, f64>| Operand::new(name, m.shape());
    if wq.nrows() != wk.nrows() {
        return Err(AttentionError::mismatch(
            op("W_Q", &wq),
            op("W_K", &wk),
            "W_Q and W_K must have the same number of rows (the input width)",
        ));
    }
    if wq.nrows() != wv.nrows() {
        return Err(AttentionError::mismatch(
            op("W_Q", &wq),
            op("W_V", &wv),
            "W_Q and W_V must have the same number of rows (the input width)",
        ));
    }
    if wq.ncols() != wk.ncols() {
        return Err(AttentionError::mismatch(
            op("W_Q", &wq),
            op("W_K", &wk),
            "W_Q and W_K must have the same number of columns (d_k)",
        ));
    }
    Ok(())
}

impl Head {
    /// A head from its three projection matrices, with the stable softmax.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // Q_1 = np.dot(X, WQ_1) and so on for K_1, V_1
    /// let x = array![[1.0, 2.0], [3.0, 4.0]];
    /// let head = Head::new(Array2::eye(2), array![[0.0, 1.0], [1.0, 0.0]], Array2::eye(2))?;
    /// let out = head.forward(&x)?;
    /// assert_eq!(out.k, array![[2.0, 1.0], [4.0, 3.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when W_Q, W_K and W_V have different numbers of rows, or
    /// W_Q and W_K different numbers of columns.
    pub fn new(wq: Array2<f64>, wk: Array2<f64>, wv: Array2<f64>) -> Result<Head, AttentionError> {
        check_projections(wq.view(), wk.view(), wv.view())?;
        Ok(Head {
            wq,
            wk,
            wv,
            softmax: Softmax::Stable,
        })
    }

    /// The same head with another softmax; seeds 003 and 004 use [`Softmax::Naive`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?.with_softmax(Softmax::Naive);
    /// assert_eq!(head.softmax(), Softmax::Naive);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn with_softmax(mut self, softmax: Softmax) -> Head {
        self.softmax = softmax;
        self
    }

    /// W_Q, d_model x d_k.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let head = Head::new(Array2::zeros((4, 3)), Array2::zeros((4, 3)), Array2::zeros((4, 2)))?;
    /// assert_eq!((head.wq().dim(), head.wk().dim(), head.wv().dim()), ((4, 3), (4, 3), (4, 2)));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn wq(&self) -> &Array2<f64> {
        &self.wq
    }

    /// W_K, d_model x d_k (see [`Head::wq`]).
    pub fn wk(&self) -> &Array2<f64> {
        &self.wk
    }

    /// W_V, d_model x d_v (see [`Head::wq`]).
    pub fn wv(&self) -> &Array2<f64> {
        &self.wv
    }

    /// The softmax this head applies (see [`Head::with_softmax`]).
    pub fn softmax(&self) -> Softmax {
        self.softmax
    }

    /// Runs the head on `x` (one row per token) and keeps every intermediate.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let out = head.forward(&array![[1.0, 0.0], [0.0, 1.0]])?;
    /// assert_eq!(out.weights.dim(), (2, 2));
    /// assert_eq!(out.z.row(0).sum(), 1.0); // each z row mixes the value rows
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of `x` differ from the rows of W_Q.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<HeadOutput, AttentionError> {
        self.forward_in(x.into(), None, None)
    }

    /// [`Head::forward`] with a [`Mask`] added to the scores; `scores` keeps the masked
    /// scores, and a query whose every key is blocked gets zero weights and a zero `z` row.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let out = head.forward_masked(&array![[1.0, 0.0], [0.0, 1.0]], &Mask::causal(2))?;
    /// assert_eq!(out.weights.row(0), array![1.0, 0.0]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward`], and [`AttentionError::Mismatch`] when the mask is not tokens x
    /// tokens.
    pub fn forward_masked<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
    ) -> Result<HeadOutput, AttentionError> {
        self.forward_in(x.into(), None, Some(mask))
    }

    fn forward_in(
        &self,
        x: ArrayView2<'_, f64>,
        head: Option<usize>,
        mask: Option<&Mask>,
    ) -> Result<HeadOutput, AttentionError> {
        if x.ncols() != self.wq.nrows() {
            return Err(AttentionError::mismatch(
                Operand::new("X", x.shape()),
                Operand::new(named("W_Q", head), self.wq.shape()),
                "the columns of X must equal the rows of W_Q",
            ));
        }
        let q = x.dot(&self.wq);
        let k = x.dot(&self.wk);
        let v = x.dot(&self.wv);
        // Shapes were checked in `new` and above, so only the mask can fail here.
        let a = attend(q.view(), k.view(), v.view(), self.softmax, mask)?;
        Ok(HeadOutput {
            q,
            k,
            v,
            scores: a.scores,
            weights: a.weights,
            z: a.output,
        })
    }
}

/// A multi-head attention layer: its heads run side by side, their outputs are concatenated,
/// and W_O (if any) projects the concatenation.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiHead {
    heads: Vec<Head>,
    wo: Option<Array2<f64>>,
}

/// Every intermediate of a multi-head layer on one input.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiHeadOutput {
    /// Each head's intermediates, in order.
    pub heads: Vec<HeadOutput>,
    /// The heads' outputs side by side (`np.concatenate(..., axis=1)`).
    pub concat: Array2<f64>,
    /// `concat W_O`, or `concat` itself when the layer has no W_O.
    pub output: Array2<f64>,
}

impl MultiHead {
    /// A layer from its heads and an optional output projection W_O.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = || Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2));
    /// let layer = MultiHead::new(vec![head()?, head()?], Some(Array2::ones((4, 2))))?;
    /// let out = layer.forward(&array![[1.0, 2.0], [3.0, 4.0]])?;
    /// assert_eq!(out.concat.dim(), (2, 4));
    /// assert_eq!(out.output.dim(), (2, 2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::NoHeads`] for an empty `heads`; [`AttentionError::Mismatch`] when the
    /// heads take inputs of different widths; [`AttentionError::OutputProjection`] when the rows
    /// of W_O differ from the total width of the heads' values.
    pub fn new(heads: Vec<Head>, wo: Option<Array2<f64>>) -> Result<MultiHead, AttentionError> {
        let first = heads.first().ok_or(AttentionError::NoHeads)?;
        for (i, head) in heads.iter().enumerate().skip(1) {
            if head.wq.nrows() != first.wq.nrows() {
                return Err(AttentionError::mismatch(
                    Operand::new(named("W_Q", Some(i + 1)), head.wq.shape()),
                    Operand::new(named("W_Q", Some(1)), first.wq.shape()),
                    "all heads must take inputs of the same width (rows of W_Q)",
                ));
            }
        }
        if let Some(wo) = &wo {
            let widths: Vec<usize> = heads.iter().map(|h| h.wv.ncols()).collect();
            if widths.iter().sum::<usize>() != wo.nrows() {
                return Err(AttentionError::OutputProjection {
                    widths,
                    wo: Operand::new("W_O", wo.shape()),
                });
            }
        }
        Ok(MultiHead { heads, wo })
    }

    /// Splits the columns of one W_Q, W_K and W_V into `h` equal consecutive blocks, one
    /// head per block (`np.split(np.arange(D), H)` in seed 003).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::from_shape_fn((6, 6), |(i, j)| (i * 6 + j) as f64 / 36.0);
    /// let layer = MultiHead::split(&w, &w, &w, 3, None)?;
    /// assert_eq!(layer.heads().len(), 3);
    /// assert_eq!(layer.heads()[1].wq(), &w.slice(s![.., 2..4]));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Split`] when `h` is 0 or does not divide the columns of W_Q, W_K or
    /// W_V; otherwise as [`Head::new`] and [`MultiHead::new`].
    pub fn split(
        wq: &Array2<f64>,
        wk: &Array2<f64>,
        wv: &Array2<f64>,
        h: usize,
        wo: Option<Array2<f64>>,
    ) -> Result<MultiHead, AttentionError> {
        check_projections(wq.view(), wk.view(), wv.view())?;
        for (name, w) in [("W_Q", wq), ("W_K", wk), ("W_V", wv)] {
            if h == 0 || w.ncols() % h != 0 {
                return Err(AttentionError::Split {
                    matrix: Operand::new(name, w.shape()),
                    h,
                });
            }
        }
        let block = |w: &Array2<f64>, i: usize| {
            let width = w.ncols() / h;
            w.slice(s![.., i * width..(i + 1) * width]).to_owned()
        };
        let heads = (0..h)
            .map(|i| Head::new(block(wq, i), block(wk, i), block(wv, i)))
            .collect::<Result<Vec<_>, _>>()?;
        MultiHead::new(heads, wo)
    }

    /// A layer from the weights of PyTorch's `nn.MultiheadAttention(E, h, bias=False)`
    /// (`kdim` = `vdim` = E). PyTorch keeps each projection as `out x in` and computes
    /// `x @ W.T`; this library computes `X W`, so every matrix is transposed:
    ///
    /// | PyTorch (state_dict key) | shape | here |
    /// |---|---|---|
    /// | `in_proj_weight[0:E]` | E x E | W_Q = its transpose, split into `h` column blocks |
    /// | `in_proj_weight[E:2E]` | E x E | W_K = its transpose, split likewise |
    /// | `in_proj_weight[2E:3E]` | E x E | W_V = its transpose, split likewise |
    /// | `out_proj.weight` | E x E | W_O = its transpose |
    ///
    /// Head `i` of PyTorch uses columns `i*E/h .. (i+1)*E/h` of each, as [`MultiHead::split`]
    /// does, and both scale the scores by `1/sqrt(E/h)`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let in_proj = Array2::from_shape_fn((6, 2), |(i, j)| (i * 2 + j) as f64);
    /// let layer = MultiHead::from_torch(&in_proj, &Array2::eye(2), 2)?;
    /// assert_eq!(layer.heads()[0].wk(), &array![[4.0], [5.0]]); // row 2 of in_proj, transposed
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when `in_proj_weight` is not 3E x E for the E of
    /// `out_proj.weight` (E x E); otherwise as [`MultiHead::split`].
    pub fn from_torch(
        in_proj_weight: &Array2<f64>,
        out_proj_weight: &Array2<f64>,
        h: usize,
    ) -> Result<MultiHead, AttentionError> {
        let e = out_proj_weight.nrows();
        if out_proj_weight.ncols() != e || in_proj_weight.dim() != (3 * e, e) {
            return Err(AttentionError::mismatch(
                Operand::new("in_proj_weight", in_proj_weight.shape()),
                Operand::new("out_proj.weight", out_proj_weight.shape()),
                "in_proj_weight must be 3E x E and out_proj.weight E x E",
            ));
        }
        let block = |i: usize| {
            in_proj_weight
                .slice(s![i * e..(i + 1) * e, ..])
                .t()
                .to_owned()
        };
        MultiHead::split(
            &block(0),
            &block(1),
            &block(2),
            h,
            Some(out_proj_weight.t().to_owned()),
        )
    }

    /// The same layer with every head using `softmax`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, None)?.with_softmax(Softmax::Naive);
    /// assert!(layer.heads().iter().all(|h| h.softmax() == Softmax::Naive));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn with_softmax(mut self, softmax: Softmax) -> MultiHead {
        for head in &mut self.heads {
            head.softmax = softmax;
        }
        self
    }

    /// The heads, in order.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(4);
    /// assert_eq!(MultiHead::split(&w, &w, &w, 4, None)?.heads().len(), 4);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn heads(&self) -> &[Head] {
        &self.heads
    }

    /// The output projection W_O, if the layer has one.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(4);
    /// assert!(MultiHead::split(&w, &w, &w, 2, None)?.wo().is_none());
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn wo(&self) -> Option<&Array2<f64>> {
        self.wo.as_ref()
    }

    /// Runs every head on `x`, concatenates their outputs and applies W_O.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // Z = np.concatenate((Z_1, Z_2), axis=1); result = np.dot(Z, W_0)
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, Some(Array2::eye(4)))?;
    /// let out = layer.forward(&array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])?;
    /// assert_eq!(out.heads.len(), 2);
    /// assert_eq!(out.output, out.concat);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] naming the head when the columns of `x` differ from the
    /// rows of W_Q.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<MultiHeadOutput, AttentionError> {
        self.forward_in(x.into(), None)
    }

    /// [`MultiHead::forward`] with the same [`Mask`] applied in every head.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, None)?;
    /// let x = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]];
    /// let out = layer.forward_masked(&x, &Mask::causal(2))?;
    /// assert_eq!(out.output.row(0), x.row(0)); // token 0 sees only itself
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward`], and [`AttentionError::Mismatch`] when the mask is not
    /// tokens x tokens.
    pub fn forward_masked<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
    ) -> Result<MultiHeadOutput, AttentionError> {
        self.forward_in(x.into(), Some(mask))
    }

    fn forward_in(
        &self,
        x: ArrayView2<'_, f64>,
        mask: Option<&Mask>,
    ) -> Result<MultiHeadOutput, AttentionError> {
        let heads = self
            .heads
            .iter()
            .enumerate()
            .map(|(i, head)| head.forward_in(x, Some(i + 1), mask))
            .collect::<Result<Vec<_>, _>>()?;
        let zs: Vec<ArrayView2<'_, f64>> = heads.iter().map(|h| h.z.view()).collect();
        // Every z has x's rows, so the concatenation cannot fail.
        let concat = concatenate(Axis(1), &zs).expect("heads' outputs share their row count");
        let output = match &self.wo {
            Some(wo) => concat.dot(wo),
            None => concat.clone(),
        };
        Ok(MultiHeadOutput {
            heads,
            concat,
            output,
        })
    }
}
