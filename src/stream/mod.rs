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
//! The work goes in units of one head over one block of query rows, handed out to a thread
//! per core. Each unit runs a fused kernel: a panel of 8 query rows, one row a vector lane,
//! times a block of keys gives a block of scores that stays in the first-level cache, where
//! the online softmax runs on whole vectors (AVX2 and FMA where the CPU has them, chosen at
//! run time) and the weights, never packed, meet V. K and V are packed once per head.
//! Around it, two matrix products: Q, K, V of every head from one product with the heads'
//! projections side by side (one per input in cross-attention, where queries, keys and
//! values come from different sequences), and the concatenation times W_O.
//!
//! Under a mask, a block of keys that the mask blocks whole for a panel of queries (most of
//! a causal mask's blocks) is skipped, where its scores and values are finite and it would
//! add exactly nothing.
//!
//! Its extra memory is O(N d): the fused Q, K, V, the packed K and V, the concatenation and
//! the output, plus a block of scores and a block's accumulators per thread, against
//! O(H N^2) for the path that keeps the weights.
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

mod kernel;
mod simd;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ndarray::linalg::general_mat_mul;
use ndarray::{concatenate, s, Array1, Array2, ArrayView2, ArrayViewMut2, Axis};

use kernel::{MaskBlocks, PackedHead, Scratch};

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
    /// Query rows one unit of work (one head over a block of rows) takes, at most, rounded
    /// up to whole panels of 8 rows; fewer when that would leave a thread fewer than four
    /// units to share the load.
    pub query_block: usize,
    /// Keys and values read per step of the online softmax, rounded up to a multiple of 6
    /// (the kernel's tile).
    pub key_block: usize,
    /// Threads to use; 0 means one per core.
    pub threads: usize,
}

impl Default for Streaming {
    fn default() -> Streaming {
        Streaming {
            query_block: 192,
            key_block: 288,
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

/// `x [w_1 | w_2 | ..]`.
fn project(
    x: ArrayView2<'_, f64>,
    ws: &[ArrayView2<'_, f64>],
    streaming: Streaming,
) -> Array2<f64> {
    let width = ws.iter().map(|w| w.ncols()).sum();
    let mut out = Array2::zeros((x.nrows(), width));
    product(x, ws, out.view_mut(), streaming);
    out
}

/// `out = x [w_1 | w_2 | ..]`, its columns shared among the threads (each thread packs `x`,
/// which costs little beside the product, and its own share of the weights).
fn product(
    x: ArrayView2<'_, f64>,
    ws: &[ArrayView2<'_, f64>],
    mut out: ArrayViewMut2<'_, f64>,
    streaming: Streaming,
) {
    // The inputs were checked against every projection's rows.
    let w = concatenate(Axis(1), ws).expect("projections share their row count");
    let n = w.ncols();
    // Small products stay on the calling thread: a thread costs more than it saves.
    let work = x.nrows().saturating_mul(w.len());
    let threads = if work < crate::parallel::MIN_WORK {
        1
    } else {
        streaming.threads_for(n.div_ceil(64))
    };
    let cols = n.div_ceil(threads).max(1);
    let (x, w) = (&x, w.view());
    std::thread::scope(|scope| {
        for (i, mut out) in out.axis_chunks_iter_mut(Axis(1), cols).enumerate() {
            let w = w.slice_move(s![.., i * cols..i * cols + out.ncols()]);
            scope.spawn(move || general_mat_mul(1.0, x, &w, 0.0, &mut out));
        }
    });
}

/// `view` cut into blocks of `rows` rows (the last may be shorter), each with the index of
/// its first row.
fn row_blocks(
    mut view: ArrayViewMut2<'_, f64>,
    rows: usize,
) -> Vec<(usize, ArrayViewMut2<'_, f64>)> {
    let mut blocks = Vec::new();
    let mut first = 0;
    while view.nrows() > 0 {
        let take = rows.min(view.nrows());
        let (block, rest) = view.split_at(Axis(0), take);
        blocks.push((first, block));
        first += take;
        view = rest;
    }
    blocks
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
    let (n, heads) = (q.nrows(), plan.heads.len());
    let threads = streaming.threads_for(usize::MAX);
    // Keys and values packed once per head, by the heads shared among the threads.
    let packed: Vec<Mutex<Option<PackedHead>>> = (0..heads).map(|_| Mutex::new(None)).collect();
    queue(
        threads,
        packed.iter().zip(&plan.heads),
        |(slot, cols), _| {
            let head = PackedHead::new(
                k.slice(s![.., cols.k..cols.k + cols.d_k]),
                v.slice(s![.., cols.v..cols.v + cols.d_v]),
            );
            *slot.lock().expect("one thread packs a head") = Some(head);
        },
    );
    let packed: Vec<PackedHead> = packed
        .into_iter()
        .map(|slot| slot.into_inner().ok().flatten().expect("every head packed"))
        .collect();
    // A unit of work is one head over one block of query rows (whole panels of the
    // kernel's rows); four units a thread at least, so that a thread slowed by other work
    // hands its share to the others.
    let per_head = threads.saturating_mul(4).div_ceil(heads.max(1));
    // Blocks of even size (a last block of a few rows would leave a thread idle).
    let blocks = n.div_ceil(streaming.query_block.max(1)).max(per_head);
    let query_block = n.div_ceil(blocks).max(1).next_multiple_of(kernel::ROWS);
    let mask_blocks = plan
        .mask
        .map(|mask| MaskBlocks::new(mask, streaming.key_block, threads));
    let mut concat = Array2::zeros((n, plan.width));
    let mut units = Vec::new();
    let mut rest = concat.view_mut();
    for (cols, head) in plan.heads.iter().zip(&packed) {
        let (z, after) = rest.split_at(Axis(1), cols.d_v);
        rest = after;
        let blocks = row_blocks(z, query_block).into_iter();
        units.extend(blocks.map(|(first, z)| (cols, head, first, z)));
    }
    queue(threads, units, |(cols, head, first, mut z), scratch| {
        let rows = first..first + z.nrows();
        kernel::attend(
            q.slice(s![rows, cols.q..cols.q + cols.d_k]),
            head,
            cols.softmax,
            mask_blocks.as_ref().map(|m| (m, first)),
            streaming.key_block,
            scratch,
            z.view_mut(),
        );
    });
    match wo {
        Some(wo) => product(concat.view(), &[wo.view()], out.view_mut(), streaming),
        None => out.assign(&concat),
    }
    if let Some(bo) = plan.bo {
        out += bo;
    }
}

/// `work` on every unit, the units handed out one at a time to up to `threads` threads,
/// each with its own kernel scratch memory.
fn queue<U: Send>(
    threads: usize,
    units: impl IntoIterator<Item = U>,
    work: impl Fn(U, &mut Scratch) + Sync,
) {
    let units: Vec<Mutex<Option<U>>> = units.into_iter().map(|u| Mutex::new(Some(u))).collect();
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut scratch = Scratch::default();
        while let Some(unit) = units.get(next.fetch_add(1, Ordering::Relaxed)) {
            let unit = unit.lock().expect("one thread takes a unit").take();
            work(unit.expect("each unit is taken once"), &mut scratch);
        }
    };
    match threads.min(units.len()) {
        0 | 1 => worker(),
        workers => std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(worker);
            }
        }),
    }
}
