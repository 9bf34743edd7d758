//! Attention without the N x N matrix: the online softmax, one block of keys at a time.
//!
//! [`Head::forward`](crate::heads::Head::forward) keeps `scores` and `weights`, two N x N
//! matrices per head. The streaming path never forms them. For a block of query rows it walks
//! the keys and values in blocks and keeps, per query row, only
//!
//! - `m`, the largest score seen so far (the running max),
//! - `l`, the sum of `exp(score - m)` over the keys seen so far (the running sum),
//! - `acc`, the sum of `exp(score - m) * v` over the same keys (the accumulator).
//!
//! When a new block raises the max from `m` to `m'`, everything summed so far was scaled by
//! `exp(-m)` instead of `exp(-m')`, so `l` and `acc` are multiplied by `exp(m - m')` first.
//! After the last block, `z = acc / l`: the same numbers as `weights V`, summed in another
//! order. This is the scheme of FlashAttention and of PyTorch's CPU attention kernel. (One
//! IEEE difference: where a weight underflows to 0 and its value is infinite, the full path
//! gives `0 * inf = NaN`, the streamed one, rescaling in two steps, may give `inf`.)
//!
//! Its extra memory is one block of scores and one accumulator per thread, O(N d) in all
//! (the fused Q, K, V and the output), against O(H N^2) for the path that keeps the weights.
//! Query blocks run on all cores (`std::thread::scope`), and Q, K, V of every head come from
//! one matrix product with the heads' projections side by side (one per input in
//! cross-attention, where queries, keys and values come from different sequences).
//!
//! ```
//! use attention_lab::prelude::*;
//!
//! let mut rng = StdRng::seed_from_u64(7);
//! let x = random_embeddings(50, 8, &mut rng)?;
//! let w = random_projection(8, 8, &mut rng)?;
//! let layer = MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?;
//! let z: Array2<f64> = layer.forward_streaming(&x)?;
//! let full: MultiHeadOutput = layer.forward(&x)?;
//! assert!(z.iter().zip(full.result()).all(|(a, b)| (a - b).abs() <= 1e-12 * b.abs().max(1.0)));
//! # Ok::<(), AttentionError>(())
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ndarray::{concatenate, s, Array1, Array2, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};

use crate::error::AttentionError;
use crate::heads::{Head, MultiHead};
use crate::mask::Mask;
use crate::softmax::Softmax;

/// Block sizes and thread count of the streaming path.
///
/// The defaults suit this library's benchmark sizes (see BENCHMARKS.md); any sizes of at least
/// 1 give the same numbers up to rounding.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let tiny = Streaming { query_block: 2, key_block: 3, threads: 1 };
/// let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]];
/// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
/// let z: Array2<f64> = head.forward_streaming_with(&x, tiny)?;
/// assert!((z[[3, 0]] - head.forward(&x)?.z[[3, 0]]).abs() < 1e-15);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streaming {
    /// Query rows handled together (one unit of work for a thread), at most: a block above
    /// 64 rows shrinks, down to 64, until every thread gets two blocks to share the load.
    pub query_block: usize,
    /// Keys and values read per step of the online softmax.
    pub key_block: usize,
    /// Threads to use; 0 means one per core.
    pub threads: usize,
}

impl Default for Streaming {
    fn default() -> Streaming {
        Streaming {
            query_block: 512,
            key_block: 512,
            threads: 0,
        }
    }
}

impl Streaming {
    fn threads_for(self, blocks: usize) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let wanted = if self.threads == 0 {
            cores
        } else {
            self.threads
        };
        wanted.clamp(1, blocks.max(1))
    }
}

/// `softmax(Q K^T / sqrt(d_k)) V`, streamed: equals
/// [`scaled_dot_product_attention`](crate::attention::scaled_dot_product_attention)'s
/// `output` up to rounding, without forming the scores.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let q = array![[1.0, 0.0], [0.0, 1.0], [3.0, -2.0]];
/// let v = array![[1.0], [2.0], [4.0]];
/// let z: Array2<f64> = streaming_attention(&q, &q, &v)?;
/// let full: Attention = scaled_dot_product_attention(&q, &q, &v)?;
/// assert!((&z - &full.output).iter().all(|d| d.abs() < 1e-14));
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// As [`scaled_dot_product_attention`](crate::attention::scaled_dot_product_attention):
/// [`AttentionError::Mismatch`] when Q and K have different numbers of columns, or K and V
/// different numbers of rows.
pub fn streaming_attention<'a>(
    q: impl Into<ArrayView2<'a, f64>>,
    k: impl Into<ArrayView2<'a, f64>>,
    v: impl Into<ArrayView2<'a, f64>>,
) -> Result<Array2<f64>, AttentionError> {
    let (q, k, v) = (q.into(), k.into(), v.into());
    // The full path's shape checks, on no query rows so that nothing is computed; the
    // message then names Q with its real shape.
    crate::attention::scaled_dot_product_attention(q.slice(s![..0, ..]), k, v).map_err(
        |mut e| {
            if let AttentionError::Mismatch { left, .. } = &mut e {
                if left.name == "Q" {
                    left.shape[0] = q.nrows();
                }
            }
            e
        },
    )?;
    let plan = Plan {
        heads: vec![HeadCols {
            q: 0,
            k: 0,
            v: 0,
            d_k: q.ncols(),
            d_v: v.ncols(),
            softmax: Softmax::Stable,
        }],
        width: v.ncols(),
        mask: None,
        bo: None,
    };
    let mut z = Array2::zeros((q.nrows(), v.ncols()));
    run(&plan, q, k, v, None, z.view_mut(), Streaming::default());
    Ok(z)
}

impl Head {
    /// This head's `z`, streamed: [`Head::forward`]'s `z` up to rounding, with no N x N
    /// matrix and on every core.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]];
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let z: Array2<f64> = head.forward_streaming(&x)?;
    /// assert!((&z - &head.forward(&x)?.z).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward`].
    pub fn forward_streaming<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<Array2<f64>, AttentionError> {
        self.forward_streaming_with(x, Streaming::default())
    }

    /// [`Head::forward_streaming`] with chosen block sizes and threads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]];
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let one_key_at_a_time = Streaming { query_block: 1, key_block: 1, threads: 1 };
    /// let z: Array2<f64> = head.forward_streaming_with(&x, one_key_at_a_time)?;
    /// assert!((&z - &head.forward(&x)?.z).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward`].
    pub fn forward_streaming_with<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        let x = x.into();
        self.stream([x, x, x], None, streaming)
    }

    /// [`Head::forward_masked`]'s `z`, streamed: the mask is added one block of scores at a
    /// time, and a query whose every key is blocked gets a zero row, as in the full path.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]];
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let mask = Mask::causal(3).and(&Mask::key_padding(3, &[true, false, false]))?;
    /// let z: Array2<f64> = head.forward_streaming_masked(&x, &mask)?;
    /// assert_eq!(z.row(0), array![0.0, 0.0]); // query 0 may see only key 0, which is padding
    /// assert!((&z - &head.forward_masked(&x, &mask)?.z).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward_masked`].
    pub fn forward_streaming_masked<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
    ) -> Result<Array2<f64>, AttentionError> {
        self.forward_streaming_masked_with(x, mask, Streaming::default())
    }

    /// [`Head::forward_streaming_masked`] with chosen block sizes and threads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let x = array![[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]];
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let tiny = Streaming { query_block: 2, key_block: 1, threads: 1 };
    /// let z: Array2<f64> = head.forward_streaming_masked_with(&x, &Mask::causal(3), tiny)?;
    /// assert_eq!(z.row(0), x.row(0)); // token 0 sees only itself
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward_masked`].
    pub fn forward_streaming_masked_with<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        let x = x.into();
        self.stream([x, x, x], Some(mask), streaming)
    }

    /// [`Head::forward_cross`]'s `z` without a mask, streamed: queries from `x`, keys from
    /// `key` (kdim wide) and values from `value` (vdim wide), with no x-tokens x key-tokens
    /// matrix.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // queries 2 wide, keys 3 wide, values 1 wide
    /// let head = Head::cross(Array2::eye(2), Array2::ones((3, 2)), array![[2.0]])?;
    /// let x = array![[1.0, 0.0], [0.0, -1.0]];
    /// let key = array![[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.5]];
    /// let value = array![[3.0], [5.0], [-1.0]];
    /// let z: Array2<f64> = head.forward_cross_streaming(&x, &key, &value)?;
    /// let full = head.forward_cross(&x, &key, &value, None)?.z;
    /// assert!((&z - &full).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward_cross`].
    pub fn forward_cross_streaming<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        key: impl Into<ArrayView2<'a, f64>>,
        value: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<Array2<f64>, AttentionError> {
        self.forward_cross_streaming_with(x, key, value, Streaming::default())
    }

    /// [`Head::forward_cross_streaming`] with chosen block sizes and threads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::cross(Array2::eye(2), Array2::ones((3, 2)), array![[2.0]])?;
    /// let x = array![[1.0, 0.0]];
    /// let key = Array2::<f64>::zeros((4, 3));
    /// let value = array![[1.0], [2.0], [3.0], [4.0]];
    /// let one_key_at_a_time = Streaming { query_block: 1, key_block: 1, threads: 1 };
    /// let z: Array2<f64> = head.forward_cross_streaming_with(&x, &key, &value, one_key_at_a_time)?;
    /// assert!((z[[0, 0]] - 5.0).abs() < 1e-15); // equal scores: the mean of V = value W_V
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward_cross`].
    pub fn forward_cross_streaming_with<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        key: impl Into<ArrayView2<'a, f64>>,
        value: impl Into<ArrayView2<'a, f64>>,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        self.stream([x.into(), key.into(), value.into()], None, streaming)
    }

    /// [`Head::forward_cross`]'s `z` with a [`Mask`] of x's tokens x key's tokens, streamed;
    /// a query whose every key is blocked gets a zero row, as in the full path.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // one new token over three: the KV cache holds tokens 0 and 1
    /// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
    /// let tokens = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    /// let x = tokens.slice(s![2.., ..]);
    /// let mask = Mask::causal_over(1, 3)?.and(&Mask::key_padding(1, &[true, false, false]))?;
    /// let z: Array2<f64> = head.forward_cross_streaming_masked(x, &tokens, &tokens, &mask)?;
    /// let full = head.forward_cross(x, &tokens, &tokens, Some(&mask))?.z;
    /// assert!((&z - &full).iter().all(|d| d.abs() < 1e-14));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward_cross`].
    pub fn forward_cross_streaming_masked<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        key: impl Into<ArrayView2<'a, f64>>,
        value: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
    ) -> Result<Array2<f64>, AttentionError> {
        self.forward_cross_streaming_masked_with(x, key, value, mask, Streaming::default())
    }

    /// [`Head::forward_cross_streaming_masked`] with chosen block sizes and threads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let head = Head::cross(Array2::eye(1), Array2::eye(1), Array2::eye(1))?;
    /// let (x, memory) = (array![[1.0], [2.0]], array![[3.0], [4.0], [5.0]]);
    /// let blocked = array![[true, true, true], [false, true, true]];
    /// let tiny = Streaming { query_block: 1, key_block: 2, threads: 1 };
    /// let z: Array2<f64> =
    ///     head.forward_cross_streaming_masked_with(&x, &memory, &memory, &Mask::from_blocked(&blocked), tiny)?;
    /// assert_eq!(z, array![[0.0], [3.0]]); // zeros, not NaN; then the one key left
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Head::forward_cross`].
    pub fn forward_cross_streaming_masked_with<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        key: impl Into<ArrayView2<'a, f64>>,
        value: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        self.stream([x.into(), key.into(), value.into()], Some(mask), streaming)
    }

    fn stream(
        &self,
        inputs: [ArrayView2<'_, f64>; 3],
        mask: Option<&Mask>,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        let heads = std::slice::from_ref(self);
        forward(heads, None, None, inputs, None, mask, streaming)
    }
}

impl MultiHead {
    /// The layer's `output`, streamed: [`MultiHead::forward`]'s `output` up to rounding,
    /// keeping no intermediate, with no N x N matrix and on every core.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, Some(Array2::ones((4, 3))))?;
    /// let x = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [0.0, 1.0, 0.0, -1.0]];
    /// let out: Array2<f64> = layer.forward_streaming(&x)?;
    /// assert!((&out - layer.forward(&x)?.result()).iter().all(|d| d.abs() < 1e-12));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward`].
    pub fn forward_streaming<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<Array2<f64>, AttentionError> {
        self.forward_streaming_with(x, Streaming::default())
    }

    /// [`MultiHead::forward_streaming`] with chosen block sizes and threads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 4, None)?;
    /// let x = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]];
    /// let serial = Streaming { threads: 1, ..Streaming::default() };
    /// let out: Array2<f64> = layer.forward_streaming_with(&x, serial)?;
    /// assert!((&out - layer.forward(&x)?.result()).iter().all(|d| d.abs() < 1e-12));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward`].
    pub fn forward_streaming_with<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        let x = x.into();
        self.stream([x, x, x], None, streaming)
    }

    /// [`MultiHead::forward_masked`]'s `output`, streamed, with the same [`Mask`] in every
    /// head; a query whose every key is blocked gets zeros before W_O, as in the full path.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, Some(Array2::ones((4, 3))))?;
    /// let x = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [0.0, 1.0, 0.0, -1.0]];
    /// let mask = Mask::causal(3);
    /// let out: Array2<f64> = layer.forward_streaming_masked(&x, &mask)?;
    /// assert!((&out - layer.forward_masked(&x, &mask)?.result()).iter().all(|d| d.abs() < 1e-12));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward_masked`].
    pub fn forward_streaming_masked<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
    ) -> Result<Array2<f64>, AttentionError> {
        self.forward_streaming_masked_with(x, mask, Streaming::default())
    }

    /// [`MultiHead::forward_streaming_masked`] with chosen block sizes and threads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 1, None)?;
    /// let x = array![[1.0, 2.0], [3.0, 4.0]];
    /// let everything_blocked = Mask::from_blocked(&Array2::from_elem((2, 2), true));
    /// let tiny = Streaming { query_block: 1, key_block: 1, threads: 1 };
    /// let out: Array2<f64> = layer.forward_streaming_masked_with(&x, &everything_blocked, tiny)?;
    /// assert_eq!(out, Array2::<f64>::zeros((2, 2))); // zeros, not NaN
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward_masked`].
    pub fn forward_streaming_masked_with<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        let x = x.into();
        self.stream([x, x, x], Some(mask), streaming)
    }

    /// [`MultiHead::forward_cross`]'s result without a mask, streamed: queries from `x`,
    /// keys from `key` and values from `value` in every head (PyTorch's
    /// `mha(query, key, value)`), keeping no intermediate.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // E = 2 with two heads of width 1; keys 3 wide (kdim), values 1 wide (vdim)
    /// let heads = vec![
    ///     Head::cross(array![[1.0], [0.0]], Array2::ones((3, 1)), array![[1.0]])?,
    ///     Head::cross(array![[0.0], [1.0]], Array2::ones((3, 1)), array![[-1.0]])?,
    /// ];
    /// let layer = MultiHead::new(heads, Some(Array2::eye(2)))?;
    /// let decoder = array![[1.0, 2.0], [0.0, 1.0]];
    /// let (encoder_k, encoder_v) = (Array2::<f64>::zeros((4, 3)), array![[1.0], [2.0], [3.0], [4.0]]);
    /// let out: Array2<f64> = layer.forward_cross_streaming(&decoder, &encoder_k, &encoder_v)?;
    /// assert!((&out.row(0) - &array![2.5, -2.5]).iter().all(|d| d.abs() < 1e-14)); // the mean of the values
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward_cross`].
    pub fn forward_cross_streaming<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        key: impl Into<ArrayView2<'a, f64>>,
        value: impl Into<ArrayView2<'a, f64>>,
    ) -> Result<Array2<f64>, AttentionError> {
        self.forward_cross_streaming_with(x, key, value, Streaming::default())
    }

    /// [`MultiHead::forward_cross_streaming`] with chosen block sizes and threads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, Some(w.clone()))?;
    /// let x = array![[1.0, 0.0, 0.0, 1.0]];
    /// let memory = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [0.0, 1.0, 0.0, -1.0]];
    /// let serial = Streaming { threads: 1, ..Streaming::default() };
    /// let out: Array2<f64> = layer.forward_cross_streaming_with(&x, &memory, &memory, serial)?;
    /// let full = layer.forward_cross(&x, &memory, &memory, None)?;
    /// assert!((&out - full.result()).iter().all(|d| d.abs() < 1e-12));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward_cross`].
    pub fn forward_cross_streaming_with<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        key: impl Into<ArrayView2<'a, f64>>,
        value: impl Into<ArrayView2<'a, f64>>,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        self.stream([x.into(), key.into(), value.into()], None, streaming)
    }

    /// [`MultiHead::forward_cross`]'s result with a [`Mask`] of x's tokens x key's tokens in
    /// every head, streamed: new tokens over a KV cache with [`Mask::causal_over`], or over an
    /// encoder's output with [`Mask::key_padding`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // the last two tokens as queries, every token as keys and values
    /// let w = Array2::<f64>::eye(4);
    /// let layer = MultiHead::split(&w, &w, &w, 2, Some(Array2::ones((4, 3))))?;
    /// let tokens = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [0.0, 1.0, 0.0, -1.0]];
    /// let new = tokens.slice(s![1.., ..]);
    /// let out: Array2<f64> = layer.forward_cross_streaming_masked(new, &tokens, &tokens, &Mask::causal_over(2, 3)?)?;
    /// // the same rows as the whole sequence under the square causal mask
    /// let all = layer.forward_masked(&tokens, &Mask::causal(3))?;
    /// assert!((&out - &all.result().slice(s![1.., ..])).iter().all(|d| d.abs() < 1e-12));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward_cross`].
    pub fn forward_cross_streaming_masked<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        key: impl Into<ArrayView2<'a, f64>>,
        value: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
    ) -> Result<Array2<f64>, AttentionError> {
        self.forward_cross_streaming_masked_with(x, key, value, mask, Streaming::default())
    }

    /// [`MultiHead::forward_cross_streaming_masked`] with chosen block sizes and threads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&w, &w, &w, 1, None)?;
    /// let (x, memory) = (array![[1.0, 2.0]], array![[3.0, 4.0], [5.0, 6.0]]);
    /// let padding = Mask::key_padding(1, &[true, true]);
    /// let tiny = Streaming { query_block: 1, key_block: 1, threads: 1 };
    /// let out: Array2<f64> = layer.forward_cross_streaming_masked_with(&x, &memory, &memory, &padding, tiny)?;
    /// assert_eq!(out, array![[0.0, 0.0]]); // every key is padding: zeros, not NaN
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHead::forward_cross`].
    pub fn forward_cross_streaming_masked_with<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        key: impl Into<ArrayView2<'a, f64>>,
        value: impl Into<ArrayView2<'a, f64>>,
        mask: &Mask,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        self.stream([x.into(), key.into(), value.into()], Some(mask), streaming)
    }

    /// The streamed result of queries from `inputs[0]`, keys from `inputs[1]` and values
    /// from `inputs[2]` (X three times in self-attention).
    pub(crate) fn stream(
        &self,
        inputs: [ArrayView2<'_, f64>; 3],
        mask: Option<&Mask>,
        streaming: Streaming,
    ) -> Result<Array2<f64>, AttentionError> {
        let (heads, wo, bo) = (self.heads(), self.wo(), self.bo());
        forward(heads, wo, bo, inputs, Some(1), mask, streaming)
    }
}

/// Where one head's Q, K and V sit among the columns of the fused projection.
#[derive(Debug, Clone, Copy)]
struct HeadCols {
    q: usize,
    k: usize,
    v: usize,
    d_k: usize,
    d_v: usize,
    softmax: Softmax,
}

/// The heads' column ranges, the total width of their values (the concatenation), the
/// mask every head applies and the output bias.
struct Plan<'m> {
    heads: Vec<HeadCols>,
    width: usize,
    mask: Option<&'m Mask>,
    bo: Option<&'m Array1<f64>>,
}

fn forward(
    heads: &[Head],
    wo: Option<&Array2<f64>>,
    bo: Option<&Array1<f64>>,
    inputs: [ArrayView2<'_, f64>; 3],
    head_number: Option<usize>,
    mask: Option<&Mask>,
    streaming: Streaming,
) -> Result<Array2<f64>, AttentionError> {
    let [x, key, value] = inputs;
    // In the order the full path meets them: head 1's inputs, the mask, the other heads.
    for (i, head) in heads.iter().enumerate() {
        head.check_inputs(inputs, head_number.map(|first| first + i))?;
        if let (0, Some(mask)) = (i, mask) {
            mask.check(x.nrows(), key.nrows())?;
        }
    }
    let picks: [fn(&Head) -> &Array2<f64>; 3] = [Head::wq, Head::wk, Head::wv];
    let ws = picks.map(|w| heads.iter().map(|h| w(h).view()).collect::<Vec<_>>());
    let widths = ws
        .each_ref()
        .map(|w| w.iter().map(|w| w.ncols()).sum::<usize>());
    // Self-attention: one product for every head's Q, K and V,
    // X [W_Q1 .. W_QH | W_K1 .. W_KH | W_V1 .. W_VH]. Cross-attention: one per input.
    let same = |a: ArrayView2<'_, f64>| {
        (a.as_ptr(), a.dim(), a.strides()) == (x.as_ptr(), x.dim(), x.strides())
    };
    let (mut qkv, first_col) = if same(key) && same(value) {
        let all = ws.concat();
        (
            vec![project(x, &all, streaming)],
            [0, widths[0], widths[0] + widths[1]],
        )
    } else {
        let each = inputs.iter().zip(&ws);
        (
            each.map(|(input, w)| project(*input, w, streaming))
                .collect(),
            [0; 3],
        )
    };
    // Which of `qkv` holds Q (0), K (1) or V (2).
    let last = qkv.len() - 1;
    let holder = |i: usize| i.min(last);
    let mut plan = Plan {
        heads: Vec::with_capacity(heads.len()),
        width: widths[2],
        mask,
        bo,
    };
    let (mut q, mut v) = (0, 0);
    for h in heads {
        let (d_k, d_v) = (h.wq().ncols(), h.wv().ncols());
        plan.heads.push(HeadCols {
            q: first_col[0] + q,
            k: first_col[1] + q,
            v: first_col[2] + v,
            d_k,
            d_v,
            softmax: h.softmax(),
        });
        q += d_k;
        v += d_v;
    }
    for (h, cols) in heads.iter().zip(&plan.heads) {
        if let Some((bq, bk, bv)) = h.biases() {
            for (i, start, b) in [(0, cols.q, bq), (1, cols.k, bk), (2, cols.v, bv)] {
                let mut part = qkv[holder(i)].slice_mut(s![.., start..start + b.len()]);
                part += b;
            }
        }
    }
    let out_width = wo.map_or(plan.width, |w| w.ncols());
    let mut out = Array2::zeros((x.nrows(), out_width));
    let [q, k, v] = [0, 1, 2].map(|i| qkv[holder(i)].view());
    run(&plan, q, k, v, wo, out.view_mut(), streaming);
    Ok(out)
}

/// `x [w_1 | w_2 | ..]`, its rows shared among the threads.
fn project(
    x: ArrayView2<'_, f64>,
    ws: &[ArrayView2<'_, f64>],
    streaming: Streaming,
) -> Array2<f64> {
    // The inputs were checked against every projection's rows.
    let w = concatenate(Axis(1), ws).expect("projections share their row count");
    let mut out = Array2::zeros((x.nrows(), w.ncols()));
    // Below 128 rows a thread costs more than it saves.
    let threads = streaming.threads_for(x.nrows().div_ceil(128));
    let rows = x.nrows().div_ceil(threads).max(1);
    let w = w.view();
    std::thread::scope(|scope| {
        for (x_part, mut out_part) in x
            .axis_chunks_iter(Axis(0), rows)
            .zip(out.axis_chunks_iter_mut(Axis(0), rows))
        {
            scope.spawn(move || matmul(1.0, &x_part, &w, 0.0, &mut out_part));
        }
    });
    out
}

/// Streams every head over every query block into `out` (the concatenation, or its product
/// with `wo`). `q`, `k` and `v` hold the heads' columns where `plan` says.
fn run(
    plan: &Plan,
    q: ArrayView2<'_, f64>,
    k: ArrayView2<'_, f64>,
    v: ArrayView2<'_, f64>,
    wo: Option<&Array2<f64>>,
    mut out: ArrayViewMut2<'_, f64>,
    streaming: Streaming,
) {
    // Two blocks per thread at least, so that a thread slowed by other work hands its share
    // to the others; larger blocks pack K and V fewer times.
    let per_two = q
        .nrows()
        .div_ceil(streaming.threads_for(usize::MAX).saturating_mul(2))
        .max(64);
    // Blocks larger than the input would only allocate scratch that is never used.
    let query_block = streaming
        .query_block
        .min(per_two)
        .clamp(1, q.nrows().max(1));
    let key_block = streaming.key_block.clamp(1, k.nrows().max(1));
    let blocks: Vec<Mutex<ArrayViewMut2<'_, f64>>> = out
        .axis_chunks_iter_mut(Axis(0), query_block)
        .map(Mutex::new)
        .collect();
    let next = AtomicUsize::new(0);
    let threads = streaming.threads_for(blocks.len());
    let work = || {
        let mut concat = Array2::zeros((query_block, plan.width));
        let mut online = Online::new(query_block, key_block, plan.width);
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            let Some(block) = blocks.get(b) else { break };
            let mut block = block.lock().expect("each block is taken by one thread");
            let rows = b * query_block..b * query_block + block.nrows();
            let mut concat = concat.slice_mut(s![..rows.len(), ..]);
            let mut offset = 0;
            for cols in &plan.heads {
                let q_h = q.slice(s![rows.clone(), cols.q..cols.q + cols.d_k]);
                let k_h = k.slice(s![.., cols.k..cols.k + cols.d_k]);
                let v_h = v.slice(s![.., cols.v..cols.v + cols.d_v]);
                let z_h = concat.slice_mut(s![.., offset..offset + cols.d_v]);
                let mask = plan.mask.map(|m| (m, rows.start));
                stream_head(
                    q_h,
                    k_h,
                    v_h,
                    cols.softmax,
                    mask,
                    key_block,
                    &mut online,
                    z_h,
                );
                offset += cols.d_v;
            }
            match wo {
                Some(wo) => matmul(1.0, &concat.view(), &wo.view(), 0.0, &mut block),
                None => block.assign(&concat),
            }
            if let Some(bo) = plan.bo {
                *block += bo;
            }
        }
    };
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(work);
            }
        });
    }
}

/// `c = alpha a b + beta c` on one thread, by the backend the build chose: ndarray's own
/// (matrixmultiply, or the system's BLAS with the `blas` feature), or with the `gemm`
/// feature the gemm crate, whose AVX-512 kernels measured faster (BENCHMARKS.md).
#[cfg(not(feature = "gemm"))]
fn matmul(
    alpha: f64,
    a: &ArrayView2<'_, f64>,
    b: &ArrayView2<'_, f64>,
    beta: f64,
    c: &mut ArrayViewMut2<'_, f64>,
) {
    ndarray::linalg::general_mat_mul(alpha, a, b, beta, c);
}

#[cfg(feature = "gemm")]
fn matmul(
    alpha: f64,
    a: &ArrayView2<'_, f64>,
    b: &ArrayView2<'_, f64>,
    beta: f64,
    c: &mut ArrayViewMut2<'_, f64>,
) {
    let ((m, k), n) = (a.dim(), b.ncols());
    assert_eq!((b.nrows(), c.dim()), (k, (m, n)), "matmul shapes");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // An empty sum: ndarray's product gives beta c (zeros when beta is 0).
        c.mapv_inplace(|x| if beta == 0.0 { 0.0 } else { beta * x });
        return;
    }
    let (ars, acs) = (a.strides()[0], a.strides()[1]);
    let (brs, bcs) = (b.strides()[0], b.strides()[1]);
    let (crs, ccs) = (c.strides()[0], c.strides()[1]);
    // SAFETY: the three views are valid for their shapes and strides, and c, borrowed
    // mutably, overlaps neither a nor b. gemm computes dst = alpha dst + beta lhs rhs.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            ccs,
            crs,
            beta != 0.0,
            a.as_ptr(),
            acs,
            ars,
            b.as_ptr(),
            bcs,
            brs,
            beta,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// One thread's working memory: a block of scores and the online softmax's state.
struct Online {
    scores: Array2<f64>,
    acc: Array2<f64>,
    max: Array1<f64>,
    sum: Array1<f64>,
}

impl Online {
    fn new(query_block: usize, key_block: usize, width: usize) -> Online {
        Online {
            scores: Array2::zeros((query_block, key_block)),
            acc: Array2::zeros((query_block, width)),
            max: Array1::zeros(query_block),
            sum: Array1::zeros(query_block),
        }
    }
}

/// One head's `z` for one block of query rows, by the online softmax over blocks of keys.
/// `mask` comes with the index of the block's first query row in the whole mask.
#[allow(clippy::too_many_arguments)]
fn stream_head(
    q: ArrayView2<'_, f64>,
    k: ArrayView2<'_, f64>,
    v: ArrayView2<'_, f64>,
    softmax: Softmax,
    mask: Option<(&Mask, usize)>,
    key_block: usize,
    online: &mut Online,
    mut z: ArrayViewMut2<'_, f64>,
) {
    let rows = q.nrows();
    if k.nrows() == 0 {
        // No keys: the weights have no columns and `weights V` is all zeros.
        z.fill(0.0);
        return;
    }
    let scale = 1.0 / (q.ncols() as f64).sqrt();
    let mut acc = online.acc.slice_mut(s![..rows, ..v.ncols()]);
    acc.fill(0.0);
    let mut max = online.max.slice_mut(s![..rows]);
    max.fill(f64::NEG_INFINITY);
    let mut sum = online.sum.slice_mut(s![..rows]);
    sum.fill(0.0);
    for start in (0..k.nrows()).step_by(key_block) {
        let end = (start + key_block).min(k.nrows());
        let k_b = k.slice(s![start..end, ..]);
        let v_b = v.slice(s![start..end, ..]);
        let mut scores = online.scores.slice_mut(s![..rows, ..end - start]);
        matmul(scale, &q, &k_b.t(), 0.0, &mut scores);
        if let Some((mask, row)) = mask {
            mask.apply_block(scores.view_mut(), row, start);
        }
        for (((mut p, m), l), mut a) in scores
            .rows_mut()
            .into_iter()
            .zip(max.iter_mut())
            .zip(sum.iter_mut())
            .zip(acc.rows_mut())
        {
            let p = p.as_slice_mut().expect("scores rows are contiguous");
            let new_max = nan_max(*m, p);
            // A row whose scores are all -inf so far adds nothing yet (as masked keys will).
            let shift = if new_max == f64::NEG_INFINITY {
                0.0
            } else {
                new_max
            };
            let block_sum = exp_shifted(p, shift);
            let rescale = (*m - shift).exp();
            if rescale != 1.0 {
                a.mapv_inplace(|x| x * rescale);
                *l *= rescale;
            }
            *l += block_sum;
            *m = new_max;
        }
        matmul(1.0, &scores.view(), &v_b, 1.0, &mut acc);
    }
    for (((mut z_row, a), &l), &m) in z
        .rows_mut()
        .into_iter()
        .zip(acc.rows())
        .zip(sum.iter())
        .zip(max.iter())
    {
        z_row.zip_mut_with(&a, |z, &a| *z = a / l);
        if softmax == Softmax::Naive {
            naive_edges(m, l, z_row.view_mut());
        }
        // Every key blocked: zero weights where the softmax gives 0 / 0, as the full path
        // does; `acc` is then those weights times V (zeros, or NaN where V holds NaN or inf).
        if mask.is_some() && m == f64::NEG_INFINITY {
            z_row.assign(&a);
        }
    }
}

/// Where `exp(s) / sum(exp(s))` breaks down, gives the row what that formula gives: NaN when
/// some `exp(s)` overflows (inf / inf) or every one underflows (0 / 0), zeros when only their
/// sum `l exp(m)` overflows. Elsewhere the naive and the stable softmax agree.
fn naive_edges(m: f64, l: f64, mut z: ArrayViewMut1<'_, f64>) {
    let largest = m.exp();
    if largest == f64::INFINITY || largest == 0.0 {
        z.fill(f64::NAN);
    } else if l * largest == f64::INFINITY {
        z.fill(0.0);
    }
}

/// The larger of `m` and every value of `p`, NaN if any is NaN (as `np.max`).
fn nan_max(m: f64, p: &[f64]) -> f64 {
    let mut lanes = [m; 8];
    let mut nan = m.is_nan();
    let mut chunks = p.chunks_exact(8);
    for c in &mut chunks {
        for (lane, &v) in lanes.iter_mut().zip(c) {
            *lane = if v > *lane { v } else { *lane };
            nan |= v.is_nan();
        }
    }
    for &v in chunks.remainder() {
        lanes[0] = if v > lanes[0] { v } else { lanes[0] };
        nan |= v.is_nan();
    }
    if nan {
        f64::NAN
    } else {
        lanes.into_iter().fold(f64::NEG_INFINITY, f64::max)
    }
}

/// `p[i] = exp(p[i] - shift)` for every `i`; returns their sum.
fn exp_shifted(p: &mut [f64], shift: f64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { exp_shifted_avx512(p, shift) };
        }
        if has!("avx2") && has!("fma") {
            // SAFETY: as above.
            return unsafe { exp_shifted_avx2(p, shift) };
        }
    }
    exp_shifted_with(p, shift, |a, b, c| a * b + c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn exp_shifted_avx512(p: &mut [f64], shift: f64) -> f64 {
    exp_shifted_with(p, shift, f64::mul_add)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted_avx2(p: &mut [f64], shift: f64) -> f64 {
    exp_shifted_with(p, shift, f64::mul_add)
}

/// The loop every variant compiles: branch-free, so the compiler vectorises it. `fma` is
/// `a * b + c`, fused where the CPU can (a software fused multiply-add would be slow).
#[inline(always)]
fn exp_shifted_with(p: &mut [f64], shift: f64, fma: impl Fn(f64, f64, f64) -> f64 + Copy) -> f64 {
    let mut lanes = [0.0; 8];
    let mut chunks = p.chunks_exact_mut(8);
    for c in &mut chunks {
        for (lane, x) in lanes.iter_mut().zip(c.iter_mut()) {
            *x = exp_with(*x - shift, fma);
            *lane += *x;
        }
    }
    for x in chunks.into_remainder() {
        *x = exp_with(*x - shift, fma);
        lanes[0] += *x;
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

/// `exp(x)` to within 2 ulp of `f64::exp`, without branches (so that it vectorises):
/// `x = n ln 2 + r` with `|r| <= ln 2 / 2`, `exp(r)` by its Taylor polynomial, times `2^n`.
#[inline(always)]
fn exp_with(x: f64, fma: impl Fn(f64, f64, f64) -> f64) -> f64 {
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    // ln 2 in two parts: n * LN2_HI is exact for |n| < 2^11.
    const LN2_HI: f64 = 0.693_147_180_369_123_8;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    // Adding 1.5 * 2^52 rounds to an integer, which then sits in the low mantissa bits.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    // Outside [-746, 710] exp is 0 or inf; clamping keeps 2^n representable.
    let c = x.clamp(-746.0, 710.0);
    let n = (c * LOG2_E + ROUND) - ROUND;
    let r = (c - n * LN2_HI) - n * LN2_LO;
    let mut poly = 1.0 / 479_001_600.0; // 1/12!
    for k in (1..12).rev() {
        poly = fma(poly, r, INV_FACTORIAL[k]);
    }
    let e = fma(poly, r, 1.0);
    // 2^n as two factors, so that results below the smallest normal come out subnormal.
    let n1 = (n * 0.5).floor();
    let n2 = n - n1;
    let two_to = |k: f64| f64::from_bits((k + 1023.0 + ROUND).to_bits() << 52);
    let result = e * two_to(n1) * two_to(n2);
    if x.is_nan() {
        x
    } else {
        result
    }
}

/// `1 / k!` for k = 0..12.
const INV_FACTORIAL: [f64; 12] = [
    1.0,
    1.0,
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5_040.0,
    1.0 / 40_320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(x: f64) -> f64 {
        let mut one = [x];
        exp_shifted(&mut one, 0.0);
        let portable = exp_with(x, |a, b, c| a * b + c);
        assert!(
            one[0].to_bits() == portable.to_bits() || ulps(one[0], portable) <= 1 || x.is_nan()
        );
        one[0]
    }

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn exp_is_within_two_ulp_of_std() {
        let mut worst = 0;
        let mut x = -745.5;
        while x < 709.9 {
            worst = worst.max(ulps(exp(x), x.exp()));
            x += 0.000_731_9;
        }
        assert!(worst <= 2, "worst error {worst} ulp");
    }

    #[test]
    fn exp_edges_as_std() {
        for x in [
            0.0,
            -0.0,
            -1e-300,
            709.78,
            709.79,
            710.0,
            1e300,
            f64::INFINITY,
            -708.4,
            -740.0,
            -745.1,
            -745.2,
            -800.0,
            f64::NEG_INFINITY,
        ] {
            let (ours, std) = (exp(x), x.exp());
            assert!(
                ours == std || ulps(ours, std) <= 2,
                "exp({x}) = {ours}, std {std}"
            );
        }
        assert!(exp(f64::NAN).is_nan());
    }

    #[test]
    fn exp_shifted_sums_what_it_writes() {
        let mut p: Vec<f64> = (0..21).map(|i| i as f64 * 0.37 - 3.0).collect();
        let want: Vec<f64> = p.iter().map(|v| (v - 1.5).exp()).collect();
        let total = exp_shifted(&mut p, 1.5);
        for (a, b) in p.iter().zip(&want) {
            assert!(ulps(*a, *b) <= 2);
        }
        assert!((total - want.iter().sum::<f64>()).abs() < 1e-13);
    }

    #[test]
    fn nan_max_propagates_nan_and_finds_the_max() {
        let mut p: Vec<f64> = (0..19).map(|i| (i as f64 - 9.0).powi(2)).collect();
        assert_eq!(nan_max(f64::NEG_INFINITY, &p), 81.0);
        assert_eq!(nan_max(100.0, &p), 100.0);
        p[17] = f64::NAN;
        assert!(nan_max(0.0, &p).is_nan());
    }
}
