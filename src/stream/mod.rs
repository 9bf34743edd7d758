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

mod engine;
mod kernel;
mod simd;

use ndarray::{s, Array2, ArrayView2};

use engine::{forward, run, HeadCols, Plan};

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
