//! One encoder layer, post-norm as BERT's: `A = LN(X + MHA(X))`, `Y = LN(A + FFN(A))`.

use ndarray::{Array2, ArrayView2, ArrayViewMut3, Zip};

use super::width_error;
use crate::error::AttentionError;
use crate::into::fit;
use crate::layers::feed_forward::{FeedForward, FeedForwardOutput};
use crate::layers::heads::{MultiHead, MultiHeadOutput};
use crate::layers::mask::Mask;
use crate::layers::norm::LayerNorm;

/// One encoder layer: multi-head self-attention and the feed-forward block, each followed by
/// a residual sum and a layer norm.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderLayer {
    attention: MultiHead,
    attention_norm: LayerNorm,
    feed_forward: FeedForward,
    output_norm: LayerNorm,
}

/// Every intermediate of one encoder layer on one input X.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EncoderLayerOutput {
    /// The multi-head attention on X: each head's Q, K, V, scores, weights and Z, and
    /// `output`, which W_O (and b_O) made of their concatenation.
    pub attention: MultiHeadOutput,
    /// `LN(X + attention)`: the residual sum after attention, normalised.
    pub attended: Array2<f64>,
    /// The feed-forward block on `attended`.
    pub feed_forward: FeedForwardOutput,
    /// `LN(attended + feed_forward)`: the layer's output, the next layer's X.
    pub output: Array2<f64>,
}

impl EncoderLayer {
    /// A layer from its attention (with W_O), the layer norm after it, the feed-forward
    /// block and the layer norm after that.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let d = 4;
    /// let w = Array2::<f64>::eye(d);
    /// let attention = MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?;
    /// let norm = || LayerNorm::new(Array1::ones(d), Array1::zeros(d), 1e-12);
    /// let ff = FeedForward::new(Array2::zeros((d, 8)), Array1::zeros(8), Array2::zeros((8, d)), Array1::zeros(d))?;
    /// let layer = EncoderLayer::new(attention, norm()?, ff, norm()?)?;
    /// assert_eq!(layer.width(), 4);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the parts are not all d wide (d = the first layer
    /// norm's length): the heads' input, W_O's columns, W_1's rows, W_2's columns and the
    /// second layer norm.
    pub fn new(
        attention: MultiHead,
        attention_norm: LayerNorm,
        feed_forward: FeedForward,
        output_norm: LayerNorm,
    ) -> Result<EncoderLayer, AttentionError> {
        let d = attention_norm.gamma().len();
        let head = &attention.heads()[0];
        if head.wq().nrows() != d {
            return Err(width_error(
                "W_Q of head 1",
                head.wq().shape(),
                d,
                "the heads must take rows as wide as the layer norm",
            ));
        }
        let wo_shape = attention.wo().map_or([0, 0], |wo| [wo.nrows(), wo.ncols()]);
        if attention.wo().is_none() || wo_shape[1] != d {
            return Err(width_error("W_O", &wo_shape, d, "an encoder layer's attention needs a W_O with as many columns as the layer norm's gamma"));
        }
        if feed_forward.w1().nrows() != d {
            return Err(width_error(
                "W_1",
                feed_forward.w1().shape(),
                d,
                "the rows of W_1 must equal the layer's width",
            ));
        }
        if feed_forward.w2().ncols() != d {
            return Err(width_error(
                "W_2",
                feed_forward.w2().shape(),
                d,
                "the columns of W_2 must equal the layer's width",
            ));
        }
        let second = output_norm.gamma().len();
        if second != d {
            return Err(width_error(
                "the second layer norm's gamma",
                &[1, second],
                d,
                "both layer norms must be as wide as the layer",
            ));
        }
        Ok(EncoderLayer {
            attention: attention.into_standard_layout(),
            attention_norm,
            feed_forward,
            output_norm,
        })
    }

    /// The width d of the layer's input and output rows.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let w = Array2::<f64>::eye(2);
    /// # let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0);
    /// # let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 1, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// assert_eq!(layer.width(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn width(&self) -> usize {
        self.attention_norm.gamma().len()
    }

    /// The layer's multi-head attention.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let w = Array2::<f64>::eye(2);
    /// # let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0);
    /// # let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// assert_eq!(layer.attention().heads().len(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn attention(&self) -> &MultiHead {
        &self.attention
    }

    /// The layer's feed-forward block.
    ///
    /// ```
    /// # use attention_lab::prelude::*;
    /// # let w = Array2::<f64>::eye(2);
    /// # let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0);
    /// # let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// assert_eq!(layer.feed_forward().w1().ncols(), 3);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn feed_forward(&self) -> &FeedForward {
        &self.feed_forward
    }

    /// Runs the layer on X (tokens x d), with an optional [`Mask`] in every head (BERT's
    /// padding mask).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let norm = || LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0);
    /// let ff = FeedForward::new(Array2::zeros((2, 3)), Array1::zeros(3), Array2::zeros((3, 2)), Array1::zeros(2))?;
    /// let layer = EncoderLayer::new(MultiHead::split(&w, &w, &w, 1, Some(w.clone()))?, norm()?, ff, norm()?)?;
    /// let out = layer.forward(&array![[1.0, 0.0], [0.0, 1.0]], None)?;
    /// assert_eq!(out.output.dim(), (2, 2));
    /// assert_eq!(out.output, out.attended); // a zero feed-forward block adds nothing
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when X is not d wide or the mask is not tokens x tokens.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        mask: Option<&Mask>,
    ) -> Result<EncoderLayerOutput, AttentionError> {
        let mut out = EncoderLayerOutput::default();
        self.forward_into(x.into(), mask, &mut out, None, |_| false)?;
        Ok(out)
    }

    /// [`EncoderLayer::forward`] written into `out`, whose matrices are reshaped (their
    /// memory kept when it has room); each head's weights go into `weights` (heads x tokens x
    /// tokens) instead of `out` when it is given. `edit` is given the heads' outputs side by
    /// side (`concat`, before W_O) and says whether it changed them: then each head's `z` is
    /// made its columns again and W_O projects the edited `concat`.
    pub(super) fn forward_into(
        &self,
        x: ArrayView2<'_, f64>,
        mask: Option<&Mask>,
        out: &mut EncoderLayerOutput,
        weights: Option<ArrayViewMut3<'_, f64>>,
        edit: impl FnOnce(&mut Array2<f64>) -> bool,
    ) -> Result<(), AttentionError> {
        if let Some(mask) = mask {
            mask.check(x.nrows(), x.nrows())?;
        }
        self.attention
            .forward_fused_into(x, mask, &mut out.attention, weights)?;
        if edit(&mut out.attention.concat) {
            self.project_edited(&mut out.attention);
        }
        residual(out.attention.result(), x, &mut out.attended);
        self.attention_norm
            .normalize_in_place(out.attended.view_mut())?;
        self.feed_forward
            .forward_into(out.attended.view(), &mut out.feed_forward)?;
        residual(
            &out.feed_forward.output,
            out.attended.view(),
            &mut out.output,
        );
        self.output_norm.normalize_in_place(out.output.view_mut())
    }

    /// After an edit of `concat`: each head's `z` its columns of `concat`, and the output
    /// `concat W_O + b_O` again.
    fn project_edited(&self, attention: &mut MultiHeadOutput) {
        crate::models::intervention::project_edited(&self.attention, attention);
    }
}

/// `sum = a + x`, element by element, `sum` reshaped to their shape.
fn residual(a: &Array2<f64>, x: ArrayView2<'_, f64>, sum: &mut Array2<f64>) {
    fit(sum, a.dim());
    Zip::from(sum)
        .and(a)
        .and(x)
        .for_each(|s, &a, &x| *s = a + x);
}
