//! Attention heads: one [`Head`] with its own W_Q, W_K, W_V, and a [`MultiHead`] layer that
//! concatenates its heads and applies W_O.

use ndarray::{s, Array1, Array2, ArrayView2, ArrayViewMut2, ArrayViewMut3};

use crate::error::{AttentionError, Operand};
#[cfg(feature = "encoder")]
use crate::fast::gemm;
use crate::into::{each, fit, fit_matrix, project_here_to, project_to};
#[cfg(feature = "encoder")]
use crate::layers::attention::attend_fast_into;
use crate::layers::attention::{attend_into, SCORES};
use crate::layers::mask::Mask;
use crate::layers::softmax::Softmax;

/// One attention head: the projections W_Q, W_K (both d_model x d_k) and W_V (d_model x d_v),
/// and optional biases b_Q, b_K (d_k) and b_V (d_v). In cross-attention ([`Head::cross`])
/// W_K has `kdim` rows and W_V `vdim` rows, the widths of the sequence the keys and values
/// come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    wq: Array2<f64>,
    wk: Array2<f64>,
    wv: Array2<f64>,
    biases: Option<Biases>,
    softmax: Softmax,
}

/// A head's b_Q, b_K and b_V.
#[derive(Debug, Clone, PartialEq)]
struct Biases {
    bq: Array1<f64>,
    bk: Array1<f64>,
    bv: Array1<f64>,
}

/// Every intermediate of one head on one input, named as the documents name them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HeadOutput {
    /// Queries `X W_Q` (`+ b_Q` when the head has biases).
    pub q: Array2<f64>,
    /// Keys `X W_K` (`+ b_K`); in cross-attention the key input times W_K.
    pub k: Array2<f64>,
    /// Values `X W_V` (`+ b_V`); in cross-attention the value input times W_V.
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
    check_key_width(wq, wk)
}

/// Q and K meet in `Q K^T`, so W_Q and W_K need the same number of columns, d_k.
fn check_key_width(wq: ArrayView2<'_, f64>, wk: ArrayView2<'_, f64>) -> Result<(), AttentionError> {
    if wq.ncols() != wk.ncols() {
        return Err(AttentionError::mismatch(
            Operand::new("W_Q", wq.shape()),
            Operand::new("W_K", wk.shape()),
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
    /// let out = head.forward(&x, &Attend::new())?;
    /// assert_eq!(out.k, array![[2.0, 1.0], [4.0, 3.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when W_Q, W_K and W_V have different numbers of rows, or
    /// W_Q and W_K different numbers of columns.
    pub fn new(wq: Array2<f64>, wk: Array2<f64>, wv: Array2<f64>) -> Result<Head, AttentionError> {
        check_projections(wq.view(), wk.view(), wv.view())?;
        Head::cross(wq, wk, wv)
    }

    /// A cross-attention head: queries from one sequence (d_model wide), keys from another
    /// of width `kdim` and values from one of width `vdim`, as in PyTorch's
    /// `nn.MultiheadAttention(E, h, kdim=.., vdim=..)`. W_Q is d_model x d_k, W_K is
    /// kdim x d_k and W_V is vdim x d_v. Run it with [`Head::forward_cross`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // queries 2 wide; keys 3 wide; values 1 wide
    /// let head = Head::cross(Array2::eye(2), Array2::ones((3, 2)), array![[2.0]])?;
    /// let x = array![[1.0, 0.0]];
    /// let memory_k = array![[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]];
    /// let memory_v = array![[3.0], [5.0]];
    /// let out = head.forward_cross(&x, &memory_k, &memory_v, &Attend::new())?;
    /// assert_eq!(out.weights.dim(), (1, 2)); // one query, two keys
    /// assert_eq!(out.v, array![[6.0], [10.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when W_Q and W_K have different numbers of columns.
    pub fn cross(
        wq: Array2<f64>,
        wk: Array2<f64>,
        wv: Array2<f64>,
    ) -> Result<Head, AttentionError> {
        check_key_width(wq.view(), wk.view())?;
        Ok(Head {
            wq,
            wk,
            wv,
            biases: None,
            softmax: Softmax::Stable,
        })
    }

    /// The same head with biases: `Q = X W_Q + b_Q`, `K = X W_K + b_K`, `V = X W_V + b_V`
    /// (PyTorch's `in_proj_bias`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?
    ///     .with_biases(array![1.0, 0.0], array![0.0, 0.0], array![0.5, -0.5])?;
    /// let out = head.forward(&array![[1.0, 2.0]], &Attend::new())?;
    /// assert_eq!(out.q, array![[2.0, 2.0]]);
    /// assert_eq!(out.z, array![[1.5, 1.5]]); // one token: z is its value
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when b_Q or b_K is not d_k long, or b_V not d_v long.
    pub fn with_biases(
        mut self,
        bq: Array1<f64>,
        bk: Array1<f64>,
        bv: Array1<f64>,
    ) -> Result<Head, AttentionError> {
        for (name, b, w_name, w) in [
            ("b_Q", &bq, "W_Q", &self.wq),
            ("b_K", &bk, "W_K", &self.wk),
            ("b_V", &bv, "W_V", &self.wv),
        ] {
            if b.len() != w.ncols() {
                return Err(AttentionError::mismatch(
                    Operand::row(name, b.len()),
                    Operand::new(w_name, w.shape()),
                    "a bias must have one entry per column of its projection",
                ));
            }
        }
        self.biases = Some(Biases { bq, bk, bv });
        Ok(self)
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

    /// b_Q, b_K and b_V, if the head has biases (see [`Head::with_biases`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// assert!(head.biases().is_none());
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn biases(&self) -> Option<(&Array1<f64>, &Array1<f64>, &Array1<f64>)> {
        self.biases.as_ref().map(|b| (&b.bq, &b.bk, &b.bv))
    }

    /// The softmax this head applies (see [`Head::with_softmax`]).
    pub fn softmax(&self) -> Softmax {
        self.softmax
    }

    /// The errors of a forward pass whose queries, keys and values come from `inputs`
    /// (three times X in self-attention); the streaming path checks the same.
    pub(crate) fn check_inputs(
        &self,
        inputs: [ArrayView2<'_, f64>; 3],
        head: Option<usize>,
    ) -> Result<(), AttentionError> {
        let [x, key, value] = inputs;
        let self_attention = x.shape() == key.shape() && x.shape() == value.shape();
        let (key_name, value_name) = if self_attention {
            ("X", "X")
        } else {
            ("key", "value")
        };
        for (input, name, w, w_name, rule) in [
            (
                x,
                "X",
                &self.wq,
                "W_Q",
                "the columns of X must equal the rows of W_Q",
            ),
            (
                key,
                key_name,
                &self.wk,
                "W_K",
                "the columns of the key input must equal the rows of W_K",
            ),
            (
                value,
                value_name,
                &self.wv,
                "W_V",
                "the columns of the value input must equal the rows of W_V",
            ),
        ] {
            if input.ncols() != w.nrows() {
                return Err(AttentionError::mismatch(
                    Operand::new(name, input.shape()),
                    Operand::new(named(w_name, head), w.shape()),
                    rule,
                ));
            }
        }
        if key.nrows() != value.nrows() {
            return Err(AttentionError::mismatch(
                Operand::new("key", key.shape()),
                Operand::new("value", value.shape()),
                "key and value must have the same number of rows (one per token)",
            ));
        }
        Ok(())
    }

    /// The full path; `softmax`, when given, replaces the head's own.
    pub(crate) fn forward_in(
        &self,
        inputs: [ArrayView2<'_, f64>; 3],
        head: Option<usize>,
        mask: Option<&Mask>,
        softmax: Option<Softmax>,
    ) -> Result<HeadOutput, AttentionError> {
        let mut out = HeadOutput::default();
        self.forward_into(inputs, head, mask, softmax, &mut out, None)?;
        Ok(out)
    }

    /// The full path written into `out`, whose matrices are reshaped (their memory kept
    /// when it has room); the weights go into `weights` instead of `out.weights` when it is
    /// given (queries x keys).
    pub(crate) fn forward_into(
        &self,
        inputs: [ArrayView2<'_, f64>; 3],
        head: Option<usize>,
        mask: Option<&Mask>,
        softmax: Option<Softmax>,
        out: &mut HeadOutput,
        weights: Option<ArrayViewMut2<'_, f64>>,
    ) -> Result<(), AttentionError> {
        self.check_inputs(inputs, head)?;
        let [x, key, value] = inputs;
        let b = self.biases.as_ref();
        for (y, input, w, b) in [
            (&mut out.q, x, &self.wq, b.map(|b| &b.bq)),
            (&mut out.k, key, &self.wk, b.map(|b| &b.bk)),
            (&mut out.v, value, &self.wv, b.map(|b| &b.bv)),
        ] {
            project_here_to(input, w, b, y);
        }
        self.attend_projected(
            mask,
            softmax.unwrap_or(self.softmax),
            out,
            weights,
            attend_into,
        )
    }

    /// The scores, weights and z of `out` from its Q, K and V, by `attend` (the seed
    /// lessons' [`attend_into`], or the encoder's).
    fn attend_projected(
        &self,
        mask: Option<&Mask>,
        softmax: Softmax,
        out: &mut HeadOutput,
        weights: Option<ArrayViewMut2<'_, f64>>,
        attend: Attend,
    ) -> Result<(), AttentionError> {
        fit(&mut out.z, (out.q.nrows(), self.wv.ncols()));
        let n = (out.q.nrows(), out.k.nrows());
        fit_matrix(&mut out.scores, SCORES, n)?;
        let weights = match weights {
            Some(weights) => weights,
            None => {
                fit_matrix(&mut out.weights, "weights", n)?;
                out.weights.view_mut()
            }
        };
        // Shapes were checked in `new` and above, so only the mask can fail here.
        let qkv = [out.q.view(), out.k.view(), out.v.view()];
        attend(
            qkv,
            softmax,
            mask,
            &mut out.scores,
            weights,
            out.z.view_mut(),
        )
    }
}

/// [`attend_into`]'s signature: Q, K, V, the softmax and the mask, into scores, weights and z.
type Attend = fn(
    [ArrayView2<'_, f64>; 3],
    Softmax,
    Option<&Mask>,
    &mut Array2<f64>,
    ArrayViewMut2<'_, f64>,
    ArrayViewMut2<'_, f64>,
) -> Result<(), AttentionError>;

/// A multi-head attention layer: its heads run side by side, their outputs are concatenated,
/// and W_O (if any) projects the concatenation.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiHead {
    heads: Vec<Head>,
    wo: Option<Array2<f64>>,
    bo: Option<Array1<f64>>,
}

/// Every intermediate of a multi-head layer on one input.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MultiHeadOutput {
    /// Each head's intermediates, in order.
    pub heads: Vec<HeadOutput>,
    /// The heads' outputs side by side (`np.concatenate(..., axis=1)`).
    pub concat: Array2<f64>,
    /// `concat W_O` (`+ b_O` when the layer has an output bias); `None` when the layer has
    /// no W_O, whose result is then `concat` itself (see [`MultiHeadOutput::result`]).
    pub output: Option<Array2<f64>>,
}

impl MultiHeadOutput {
    /// The layer's result: `output` when the layer has W_O, else `concat`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let x = array![[1.0, 2.0], [3.0, 4.0]];
    /// let without: MultiHeadOutput = MultiHead::split(&w, &w, &w, 2, None)?.forward(&x, &Attend::new())?;
    /// assert!(without.output.is_none());
    /// assert_eq!(without.result(), &without.concat);
    /// let with: MultiHeadOutput = MultiHead::split(&w, &w, &w, 2, Some(w.clone() * 2.0))?.forward(&x, &Attend::new())?;
    /// assert_eq!(with.result(), &(&with.concat * 2.0));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn result(&self) -> &Array2<f64> {
        self.output.as_ref().unwrap_or(&self.concat)
    }

    /// The heads' weights averaged over the heads, PyTorch's `average_attn_weights=True`
    /// (its default); each head's own weights, its `average_attn_weights=False`, are
    /// `heads[i].weights`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 2, None)?;
    /// let out = layer.forward(&array![[1.0, 0.0], [0.0, 1.0]], &Attend::new().causal())?;
    /// let averaged: Array2<f64> = out.averaged_weights();
    /// assert_eq!(averaged.row(0), array![1.0, 0.0]);
    /// assert!((averaged.row(1).sum() - 1.0).abs() < 1e-15);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn averaged_weights(&self) -> Array2<f64> {
        let dim = self.heads.first().map_or((0, 0), |h| h.weights.dim());
        let mut sum = Array2::zeros(dim);
        for head in &self.heads {
            sum += &head.weights;
        }
        sum / self.heads.len() as f64
    }
}

impl MultiHead {
    /// A layer from its heads and an optional output projection W_O.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = || Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2));
    /// let layer = MultiHead::new(vec![head()?, head()?], Some(Array2::ones((4, 2))))?;
    /// let out = layer.forward(&array![[1.0, 2.0], [3.0, 4.0]], &Attend::new())?;
    /// assert_eq!(out.concat.dim(), (2, 4));
    /// assert_eq!(out.output.map(|o| o.dim()), Some((2, 2)));
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
        Ok(MultiHead {
            heads,
            wo,
            bo: None,
        })
    }

    /// The same layer with an output bias: `output = concat W_O + b_O` (PyTorch's
    /// `out_proj.bias`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 1, Some(w.clone()))?.with_output_bias(array![10.0, 20.0])?;
    /// let out = layer.forward(&array![[1.0, 2.0]], &Attend::new())?;
    /// assert_eq!(out.output, Some(array![[11.0, 22.0]]));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the layer has no W_O, or b_O does not have one entry
    /// per column of W_O.
    pub fn with_output_bias(mut self, bo: Array1<f64>) -> Result<MultiHead, AttentionError> {
        let wo_shape = self
            .wo
            .as_ref()
            .map_or([0, 0], |wo| [wo.nrows(), wo.ncols()]);
        if self.wo.is_none() || bo.len() != wo_shape[1] {
            return Err(AttentionError::mismatch(
                Operand::row("b_O", bo.len()),
                Operand::new("W_O", &wo_shape),
                "an output bias needs W_O, with one entry per column of W_O",
            ));
        }
        self.bo = Some(bo);
        Ok(self)
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

    /// The output bias b_O, if the layer has one (see [`MultiHead::with_output_bias`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(4);
    /// assert!(MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?.bo().is_none());
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn bo(&self) -> Option<&Array1<f64>> {
        self.bo.as_ref()
    }

    /// The width of the layer's result: the columns of W_O, else the heads' values together.
    pub(crate) fn result_width(&self) -> usize {
        match &self.wo {
            Some(wo) => wo.ncols(),
            None => self.result_width_of_values(),
        }
    }

    /// The full path; `softmax`, when given, replaces the heads' own.
    pub(crate) fn forward_in(
        &self,
        inputs: [ArrayView2<'_, f64>; 3],
        mask: Option<&Mask>,
        softmax: Option<Softmax>,
    ) -> Result<MultiHeadOutput, AttentionError> {
        let mut out = MultiHeadOutput::default();
        self.forward_into(inputs, mask, softmax, &mut out, None)?;
        Ok(out)
    }

    /// The full path written into `out` (its matrices reshaped, their memory kept when it
    /// has room); each head's weights go into `weights` (heads x queries x keys) instead of
    /// `out.heads[i].weights` when it is given.
    pub(crate) fn forward_into(
        &self,
        inputs: [ArrayView2<'_, f64>; 3],
        mask: Option<&Mask>,
        softmax: Option<Softmax>,
        out: &mut MultiHeadOutput,
        weights: Option<ArrayViewMut3<'_, f64>>,
    ) -> Result<(), AttentionError> {
        // The heads are independent: on several cores when the layer is large.
        let [x, key, value] = inputs;
        let widths: usize = self
            .heads
            .iter()
            .map(|h| 2 * h.wq.ncols() + h.wv.ncols())
            .sum();
        let work = (x.nrows().max(key.nrows()) * x.ncols().max(key.ncols()).max(value.ncols()))
            .saturating_mul(widths);
        out.heads.resize_with(self.heads.len(), HeadOutput::default);
        let mut weights: Vec<Option<ArrayViewMut2<'_, f64>>> = match weights {
            Some(w) => w.into_outer_iter_mut().map(Some).collect(),
            None => Vec::new(),
        };
        weights.resize_with(self.heads.len(), || None);
        each(out.heads.iter_mut().zip(weights), work, |i, (head, w)| {
            self.heads[i].forward_into(inputs, Some(i + 1), mask, softmax, head, w)
        })
        .into_iter()
        .collect::<Result<Vec<()>, _>>()?;
        self.concat(x.nrows(), out);
        match &self.wo {
            Some(wo) => {
                let output = out.output.get_or_insert_with(|| Array2::zeros((0, 0)));
                project_to(out.concat.view(), wo, self.bo.as_ref(), output);
            }
            None => out.output = None,
        }
        Ok(())
    }

    /// Every head's z (each with `rows` rows) side by side, in order, into `out.concat`.
    fn concat(&self, rows: usize, out: &mut MultiHeadOutput) {
        fit(&mut out.concat, (rows, self.result_width_of_values()));
        let mut start = 0;
        for head in &out.heads {
            let width = head.z.ncols();
            out.concat
                .slice_mut(s![.., start..start + width])
                .assign(&head.z);
            start += width;
        }
    }

    /// The same layer with every weight matrix in standard (row-major) layout, which the
    /// encoder's product reads where it lies; PyTorch's weights, transposed, come
    /// column-major. The values are the same.
    #[cfg(feature = "encoder")]
    pub(crate) fn into_standard_layout(mut self) -> MultiHead {
        let standard = |w: &mut Array2<f64>| {
            if !w.is_standard_layout() {
                *w = w.as_standard_layout().into_owned();
            }
        };
        for head in &mut self.heads {
            for w in [&mut head.wq, &mut head.wk, &mut head.wv] {
                standard(w);
            }
        }
        if let Some(wo) = &mut self.wo {
            standard(wo);
        }
        self
    }

    /// Self-attention on X for the encoder ([`MultiHead::forward_into`]'s results, `inputs`
    /// being X three times, up to rounding): Q, K and V of every head from one product
    /// `X [W_Q^1 | W_K^1 | W_V^1 | W_Q^2 | ..]` and W_O on the crate's own product
    /// (`gemm::project_wide_into`), and the softmax's `exp` on whole vectors. A layer
    /// whose heads do not all have biases, or all none, takes [`MultiHead::forward_into`].
    #[cfg(feature = "encoder")]
    pub(crate) fn forward_fused_into(
        &self,
        x: ArrayView2<'_, f64>,
        mask: Option<&Mask>,
        out: &mut MultiHeadOutput,
        weights: Option<ArrayViewMut3<'_, f64>>,
    ) -> Result<(), AttentionError> {
        let biases: Option<Vec<&Array1<f64>>> = self
            .heads
            .iter()
            .map(|h| h.biases.as_ref().map(|b| [&b.bq, &b.bk, &b.bv]))
            .collect::<Option<Vec<_>>>()
            .map(|b| b.into_iter().flatten().collect());
        if biases.is_none() && self.heads.iter().any(|h| h.biases.is_some()) {
            return self.forward_into([x, x, x], mask, None, out, weights);
        }
        for (i, head) in self.heads.iter().enumerate() {
            head.check_inputs([x, x, x], Some(i + 1))?;
        }
        let ws: Vec<ArrayView2<'_, f64>> = self
            .heads
            .iter()
            .flat_map(|h| [h.wq.view(), h.wk.view(), h.wv.view()])
            .collect();
        let n = x.nrows();
        let widths: Vec<usize> = ws.iter().map(|w| w.ncols()).collect();
        let mut qkv = Array2::zeros((n, widths.iter().sum()));
        gemm::project_wide_into(x, &ws, biases.as_deref(), qkv.view_mut());
        out.heads.resize_with(self.heads.len(), HeadOutput::default);
        let mut weights: Vec<Option<ArrayViewMut2<'_, f64>>> = match weights {
            Some(w) => w.into_outer_iter_mut().map(Some).collect(),
            None => Vec::new(),
        };
        weights.resize_with(self.heads.len(), || None);
        let work = n * n * widths.iter().sum::<usize>();
        let qkv = &qkv;
        each(out.heads.iter_mut().zip(weights), work, |i, (head, w)| {
            let mut start: usize = widths[..3 * i].iter().sum();
            for (y, width) in [&mut head.q, &mut head.k, &mut head.v]
                .into_iter()
                .zip(&widths[3 * i..3 * i + 3])
            {
                fit(y, (n, *width));
                y.assign(&qkv.slice(s![.., start..start + width]));
                start += width;
            }
            let softmax = self.heads[i].softmax;
            self.heads[i].attend_projected(mask, softmax, head, w, attend_fast_into)
        })
        .into_iter()
        .collect::<Result<Vec<()>, _>>()?;
        self.concat(n, out);
        match &self.wo {
            Some(wo) => {
                let output = out.output.get_or_insert_with(|| Array2::zeros((0, 0)));
                fit(output, (n, wo.ncols()));
                let bo: Option<Vec<&Array1<f64>>> = self.bo.as_ref().map(|b| vec![b]);
                let wo = [wo.view()];
                gemm::project_wide_into(out.concat.view(), &wo, bo.as_deref(), output.view_mut());
            }
            None => out.output = None,
        }
        Ok(())
    }

    /// The width of the heads' values side by side (the rows of W_O).
    fn result_width_of_values(&self) -> usize {
        self.heads.iter().map(|h| h.wv.ncols()).sum()
    }
}
