//! Attention without the N x N matrix: the online softmax, one block of keys at a time.
//!
//! The full path ([`Head::forward`](crate::layers::heads::Head::forward) with `&Attend::new()`)
//! keeps `scores` and `weights`, two N x N matrices per head. The streaming path
//! ([`Attend::streaming`](crate::layers::attend::Attend::streaming)) never forms them. For a block of query rows it walks
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
//! let z: Array2<f64> = layer.forward(&x, &Attend::new().streaming(Streaming::default()))?;
//! let full: MultiHeadOutput = layer.forward(&x, &Attend::new())?;
//! assert!(z.iter().zip(full.result()).all(|(a, b)| (a - b).abs() <= 1e-12 * b.abs().max(1.0)));
//! # Ok::<(), AttentionError>(())
//! ```

mod engine;
mod kernel;

use ndarray::{s, Array2, ArrayView2};

pub(crate) use engine::{forward, Layer};
use engine::{run, HeadCols, Plan};

use crate::error::AttentionError;
use crate::fast::simd::Simd;
use crate::layers::mask::Mask;
use crate::layers::softmax::Softmax;

/// Block sizes and thread count of the streaming path, given to [`Attend::streaming`](crate::layers::attend::Attend::streaming).
///
/// The defaults suit this library's benchmark sizes (see BENCHMARKS.md); any sizes of at least
/// 1 give the same numbers up to rounding.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let tiny = Streaming { query_block: 2, key_block: 3, threads: 1, ..Streaming::default() };
/// let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]];
/// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
/// let z: Array2<f64> = head.forward(&x, &Attend::new().streaming(tiny))?;
/// assert!((z[[3, 0]] - head.forward(&x, &Attend::new())?.z[[3, 0]]).abs() < 1e-15);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streaming {
    /// Query rows one unit of work (one head over a block of rows) takes, at most, rounded
    /// up to whole panels of the kernel's rows (16 on AVX-512, 8 otherwise); fewer when that
    /// would leave a thread fewer than four units to share the load.
    pub query_block: usize,
    /// Keys and values read per step of the online softmax, rounded up to a multiple of 6
    /// (the kernel's tile).
    pub key_block: usize,
    /// Threads to use, at most; 0 means one per core. A call of fewer than
    /// [`SERIAL_WORK`] multiply-adds runs on the calling thread, as starting threads would
    /// cost more than they save.
    pub threads: usize,
    /// The vector instructions to run on: [`Simd::Auto`] picks the widest this CPU has (or
    /// the one `ATTENTION_LAB_SIMD` names); a path the CPU lacks is an error.
    pub simd: Simd,
}

/// Multiply-adds of a call below which it runs on one thread: about 0.2 ms of work, where
/// the few thread starts of a call (tens of microseconds each) would cost more than they save.
pub const SERIAL_WORK: usize = 1 << 23;

impl Default for Streaming {
    fn default() -> Streaming {
        Streaming {
            query_block: 192,
            key_block: 288,
            threads: 0,
            simd: Simd::Auto,
        }
    }
}

impl Streaming {
    /// These settings for a call of `work` multiply-adds: [`Simd::Auto`] replaced by the path
    /// it picks, and one thread for a call under [`SERIAL_WORK`].
    fn resolved(self, work: usize) -> Result<Streaming, AttentionError> {
        Ok(Streaming {
            simd: self.simd.resolve()?,
            threads: if work < SERIAL_WORK { 1 } else { self.threads },
            ..self
        })
    }

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

/// `softmax(Q K^T / sqrt(d_k)) V`, streamed: the full path's `output` up to rounding,
/// without forming the scores.
pub(crate) fn attention(
    q: ArrayView2<'_, f64>,
    k: ArrayView2<'_, f64>,
    v: ArrayView2<'_, f64>,
    mask: Option<&Mask>,
    softmax: Softmax,
    streaming: Streaming,
) -> Result<Array2<f64>, AttentionError> {
    // The full path's shape checks, on no query rows so that nothing is computed; the
    // message then names Q with its real shape.
    crate::layers::attention::attend(q.slice(s![..0, ..]), k, v, softmax, None).map_err(
        |mut e| {
            if let AttentionError::Mismatch { left, .. } = &mut e {
                if left.name == "Q" {
                    left.shape[0] = q.nrows();
                }
            }
            e
        },
    )?;
    if let Some(mask) = mask {
        mask.check(q.nrows(), k.nrows())?;
    }
    // Q K^T and weights V.
    let work = (q.nrows() as f64 * k.nrows() as f64 * (q.ncols() + v.ncols()) as f64) as usize;
    let streaming = streaming.resolved(work)?;
    let plan = Plan {
        heads: vec![HeadCols {
            q: 0,
            k: 0,
            v: 0,
            d_k: q.ncols(),
            d_v: v.ncols(),
            softmax,
        }],
        width: v.ncols(),
        mask,
        bo: None,
    };
    let mut z = Array2::zeros((q.nrows(), v.ncols()));
    run(&plan, q, k, v, None, z.view_mut(), streaming);
    Ok(z)
}
