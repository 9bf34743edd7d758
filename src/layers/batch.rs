//! Batches: a `(batch, tokens, features)` array through a multi-head layer, as PyTorch's
//! `nn.MultiheadAttention(..., batch_first=True)` takes it.
//!
//! Each item is run on its own by the layer's one-matrix forward pass, so every intermediate
//! of every item is kept ([`BatchOutput::items`]); the results and weights are also given
//! stacked, with the batch as their first axis. Each item may have its own key padding
//! (PyTorch's `key_padding_mask`, `true` = padding) and all items may share one [`Mask`]
//! (PyTorch's `attn_mask`, e.g. [`Mask::causal`], or `is_causal`), all given by
//! [`Attend`](crate::attend::Attend).
//!
//! Streamed ([`Attend::streaming`](crate::layers::attend::Attend::streaming)), each item runs by the
//! streaming path ([`crate::fast::stream`]) and the call gives only the stacked result.

use ndarray::{Array2, Array3, Array4, ArrayView2, ArrayView3, Axis};

use crate::error::{AttentionError, Operand};
use crate::fast::stream::{self, Layer, Streaming};
use crate::layers::heads::{MultiHead, MultiHeadOutput};
use crate::layers::mask::Mask;
use crate::layers::mask::Masks;
use crate::layers::softmax::Softmax;

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
