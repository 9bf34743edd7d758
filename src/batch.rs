//! Batches: a `(batch, tokens, features)` array through a multi-head layer, as PyTorch's
//! `nn.MultiheadAttention(..., batch_first=True)` takes it.
//!
//! Each item is run on its own by the layer's one-matrix forward pass, so every intermediate
//! of every item is kept ([`BatchOutput::items`]); the results and weights are also given
//! stacked, with the batch as their first axis. Each item may have its own key padding
//! (PyTorch's `key_padding_mask`, `true` = padding) and all items may share one [`Mask`]
//! (PyTorch's `attn_mask`, e.g. [`Mask::causal`], or `is_causal`), all given by [`Attend`].
//!
//! Streamed ([`Attend::streaming`](crate::attend::Attend::streaming)), each item runs by the
//! streaming path ([`crate::stream`]) and the call gives only the stacked result.

use ndarray::{Array2, Array3, Array4, ArrayView2, ArrayView3, Axis};

use crate::attend::{Attend, Masks, Path};
use crate::error::{AttentionError, Operand};
use crate::heads::{MultiHead, MultiHeadOutput};
use crate::mask::Mask;
use crate::softmax::Softmax;
use crate::stream::{self, Layer, Streaming};

/// Every intermediate of a multi-head layer on each item of a batch, and the batch's
/// results and weights stacked along a first, batch axis.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchOutput {
    items: Vec<MultiHeadOutput>,
    // The stacked arrays' shapes without the items (an empty batch has no item to tell).
    heads: usize,
    queries: usize,
    keys: usize,
    width: usize,
}

impl BatchOutput {
    /// Each item's [`MultiHeadOutput`], in batch order.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 2, None)?;
    /// let x: Array3<f64> = array![[[1.0, 0.0], [0.0, 1.0]], [[2.0, 1.0], [1.0, 2.0]]];
    /// let out = layer.forward_batch(&x, &Attend::new())?;
    /// assert_eq!(out.items().len(), 2);
    /// assert_eq!(out.items()[1].heads[0].q, array![[2.0], [1.0]]); // item 1, head 1
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn items(&self) -> &[MultiHeadOutput] {
        &self.items
    }

    /// The layer's results stacked: `(batch, queries, width)`, item `b` being
    /// `items()[b].result()` (PyTorch's `attn_output` with `batch_first=True`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 1, Some(w.clone() * 2.0))?;
    /// let x: Array3<f64> = array![[[1.0, 2.0]], [[3.0, 4.0]], [[5.0, 6.0]]];
    /// let out = layer.forward_batch(&x, &Attend::new())?;
    /// assert_eq!(out.result(), &x * 2.0); // one token each: its value, times W_O
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn result(&self) -> Array3<f64> {
        let results = self.items.iter().map(|item| item.result().view());
        stack(results, (self.items.len(), self.queries, self.width))
    }

    /// Each head's weights: `(batch, heads, queries, keys)`, PyTorch's
    /// `average_attn_weights=False`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, None)?;
    /// let x = Array3::<f64>::ones((3, 5, 4));
    /// let weights: Array4<f64> = layer.forward_batch(&x, &Attend::new())?.weights();
    /// assert_eq!(weights.dim(), (3, 2, 5, 5));
    /// assert_eq!(weights[[2, 1, 0, 4]], 0.2); // equal tokens: uniform weights
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn weights(&self) -> Array4<f64> {
        let heads = self.heads;
        let mut all = Array4::zeros((self.items.len(), heads, self.queries, self.keys));
        for (mut slot, item) in all.outer_iter_mut().zip(&self.items) {
            let weights = item.heads.iter().map(|head| head.weights.view());
            slot.assign(&stack(weights, (heads, self.queries, self.keys)));
        }
        all
    }

    /// The weights averaged over the heads: `(batch, queries, keys)`, PyTorch's
    /// `average_attn_weights=True` (item `b` is `items()[b].averaged_weights()`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 2, None)?;
    /// let x: Array3<f64> = array![[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]];
    /// let averaged = layer.forward_batch(&x, &Attend::new().causal())?.averaged_weights();
    /// assert_eq!(averaged.dim(), (2, 2, 2));
    /// assert_eq!(averaged.slice(s![.., 0, ..]), array![[1.0, 0.0], [1.0, 0.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn averaged_weights(&self) -> Array3<f64> {
        let averaged: Vec<Array2<f64>> = self
            .items
            .iter()
            .map(MultiHeadOutput::averaged_weights)
            .collect();
        let shape = (self.items.len(), self.queries, self.keys);
        stack(averaged.iter().map(|a| a.view()), shape)
    }
}

/// Matrices stacked along a new first axis into an array of `shape` (which an empty batch
/// needs: there is no first matrix to take it from).
fn stack<'a>(
    matrices: impl Iterator<Item = ArrayView2<'a, f64>>,
    shape: (usize, usize, usize),
) -> Array3<f64> {
    let mut all = Array3::zeros(shape);
    for (mut slot, matrix) in all.outer_iter_mut().zip(matrices) {
        slot.assign(&matrix);
    }
    all
}

impl MultiHead {
    /// Self-attention on each item of a `(batch, tokens, features)` array `x`, with the
    /// options of `attend`: the key padding ([`Attend::key_padding`], batch x tokens, PyTorch's
    /// `key_padding_mask`) and the mask every item shares ([`Attend::mask`], [`Attend::causal`],
    /// PyTorch's `attn_mask`); a score is blocked where any of them blocks it. The full path
    /// gives a [`BatchOutput`]; streamed ([`Attend::streaming`], each item in turn) the stacked
    /// results alone, `(batch, tokens, width)`, as streaming keeps no weights.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 1, None)?;
    /// let x: Array3<f64> = array![[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 2.0], [9.0, 9.0]]];
    /// // item 1's last token is padding
    /// let padding = array![[false, false, false], [false, false, true]];
    /// let attend = Attend::new().key_padding(&padding).causal();
    /// let out = layer.forward_batch(&x, &attend)?;
    /// let weights = out.averaged_weights();
    /// assert_eq!(weights[[1, 2, 2]], 0.0); // padding gets no weight
    /// assert_eq!(weights[[0, 0, 1]], 0.0); // nor does the future
    /// let streamed: Array3<f64> = layer.forward_batch(&x, &attend.streaming(Streaming::default()))?;
    /// assert!((&streamed - &out.result()).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the key padding mask is not batch x tokens, the
    /// shared mask not tokens x tokens, or the features of `x` differ from the rows of W_Q
    /// (naming `x` with its batch shape).
    pub fn forward_batch<'x, P: Path>(
        &self,
        x: impl Into<ArrayView3<'x, f64>>,
        attend: &Attend<'_, P>,
    ) -> Result<P::BatchOutput, AttentionError> {
        let x = x.into();
        P::batch(self, [x, x, x], attend)
    }

    /// Cross-attention on each item of a batch: queries from `x` (batch, tokens, E), keys
    /// from `key` (batch, key tokens, kdim) and values from `value` (batch, key tokens,
    /// vdim), PyTorch's `mha(query, key, value)` with `batch_first=True`, with the options of
    /// `attend`. The key padding mask is batch x key tokens; the shared mask is tokens x key
    /// tokens (with [`Attend::causal`], [`Mask::causal_over`]: new tokens over a KV cache).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // E = 2, one head; keys 3 wide, values 1 wide
    /// let head = Head::cross(Array2::eye(2), Array2::zeros((3, 2)), array![[1.0, -1.0]])?;
    /// let layer = MultiHead::new(vec![head], None)?;
    /// let x = Array3::<f64>::ones((2, 1, 2));
    /// let key = Array3::<f64>::zeros((2, 2, 3));
    /// let value: Array3<f64> = array![[[1.0], [3.0]], [[4.0], [5.0]]];
    /// let padding = array![[false, false], [false, true]];
    /// let out = layer.forward_cross_batch(&x, &key, &value, &Attend::new().key_padding(&padding))?;
    /// // equal scores: item 0 averages its two values, item 1 sees only its first
    /// assert_eq!(out.result(), array![[[2.0, -2.0]], [[4.0, -4.0]]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when `x`, `key` and `value` have different numbers of
    /// items, `key` and `value` different numbers of tokens, their features differ from the
    /// rows of W_Q, W_K or W_V, the key padding mask is not batch x key tokens or the shared
    /// mask not tokens x key tokens.
    pub fn forward_cross_batch<'x, P: Path>(
        &self,
        x: impl Into<ArrayView3<'x, f64>>,
        key: impl Into<ArrayView3<'x, f64>>,
        value: impl Into<ArrayView3<'x, f64>>,
        attend: &Attend<'_, P>,
    ) -> Result<P::BatchOutput, AttentionError> {
        P::batch(self, [x.into(), key.into(), value.into()], attend)
    }

    /// The full path on each item.
    pub(crate) fn forward_batch_in(
        &self,
        inputs: [ArrayView3<'_, f64>; 3],
        masks: &Masks<'_>,
        softmax: Option<Softmax>,
    ) -> Result<BatchOutput, AttentionError> {
        let items = each_item(inputs, masks, |item, mask| {
            self.forward_in(item, mask, softmax)
        })?;
        Ok(BatchOutput {
            items,
            heads: self.heads().len(),
            queries: inputs[0].dim().1,
            keys: inputs[1].dim().1,
            width: self.result_width(),
        })
    }

    /// The streaming path on each item, the results stacked.
    pub(crate) fn stream_batch(
        &self,
        inputs: [ArrayView3<'_, f64>; 3],
        masks: &Masks<'_>,
        softmax: Option<Softmax>,
        streaming: Streaming,
    ) -> Result<Array3<f64>, AttentionError> {
        let items = each_item(inputs, masks, |item, mask| {
            stream::forward(Layer::of(self, softmax), item, mask, streaming)
        })?;
        let shape = (items.len(), inputs[0].dim().1, self.result_width());
        Ok(stack(items.iter().map(|item| item.view()), shape))
    }
}

/// Checks a batch's shapes, then runs `run` on each item (queries, keys and values) with its
/// mask: the shared mask and the item's key padding together. An item's shape error names
/// the whole batch.
fn each_item<T>(
    inputs: [ArrayView3<'_, f64>; 3],
    masks: &Masks<'_>,
    run: impl Fn([ArrayView2<'_, f64>; 3], Option<&Mask>) -> Result<T, AttentionError>,
) -> Result<Vec<T>, AttentionError> {
    let [x, key, value] = inputs;
    let self_attention = x.shape() == key.shape() && x.shape() == value.shape();
    let names = if self_attention {
        ["X", "X", "X"]
    } else {
        ["X", "key", "value"]
    };
    let (batch, queries, _) = x.dim();
    let keys = key.dim().1;
    for (input, name) in [(key, names[1]), (value, names[2])] {
        if input.dim().0 != batch {
            return Err(AttentionError::mismatch(
                Operand::new(name, input.shape()),
                Operand::new("X", x.shape()),
                "X, key and value must have the same number of batch items",
            ));
        }
    }
    let key_padding = masks.key_padding();
    if let Some(padding) = key_padding {
        if padding.dim() != (batch, keys) {
            return Err(AttentionError::mismatch(
                Operand::new("the key padding mask", padding.shape()),
                Operand::new(names[1], key.shape()),
                "the key padding mask must have one row per batch item and one column \
                 per key token",
            ));
        }
    }
    let shared = masks.shared(queries, keys)?;
    if let Some(mask) = &shared {
        mask.check(queries, keys)?;
    }
    (0..batch)
        .map(|b| {
            let item = inputs.map(|a| a.index_axis_move(Axis(0), b));
            let padded = key_padding.map(|p| Mask::key_padding(queries, p.row(b)));
            // Both blocked where either blocks; else whichever there is.
            let both = match (&shared, padded) {
                (Some(shared), Some(padded)) => Some(shared.and(&padded)?),
                (Some(_), None) => None,
                (None, padded) => padded,
            };
            run(item, both.as_ref().or(shared.as_deref()))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| batch_shapes(e, &inputs, names))
}

/// An item's shape error names the whole batch: `X is 3x4x5`, not `X is 4x5`.
fn batch_shapes(
    mut e: AttentionError,
    inputs: &[ArrayView3<'_, f64>; 3],
    names: [&str; 3],
) -> AttentionError {
    if let AttentionError::Mismatch { left, right, .. } = &mut e {
        for operand in [left, right] {
            if let Some(i) = names.iter().position(|n| *n == operand.name) {
                *operand = Operand::new(operand.name.clone(), inputs[i].shape());
            }
        }
    }
    e
}
