//! Row-wise softmax, in the stable form (max subtracted first) and the naive form.
//!
//! Both follow NumPy's arithmetic step by step: `np.max` propagates NaN, `np.exp` overflows
//! to `inf` above 709.78, and `np.sum` adds with NumPy's pairwise summation, so the weights
//! agree with NumPy's to the last bit on the documents' inputs.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis};

#[cfg(feature = "encoder")]
use crate::fast::simd::{map_in_place, Step};
use crate::layers::mask::zero_blocked_rows;

/// Which softmax a [`Head`](crate::layers::heads::Head) applies to its scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Softmax {
    /// `exp(s - max(s)) / sum(...)` per row, as scipy.special.softmax: never overflows.
    #[default]
    Stable,
    /// `exp(s) / sum(exp(s))` per row, as written in most tutorials: overflows above 709.78.
    Naive,
}

impl Softmax {
    /// Applies this softmax to each row of `scores`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let scores = array![[1.0, 2.0], [800.0, 800.0]];
    /// assert_eq!(Softmax::Stable.apply(&scores)[[1, 0]], 0.5);
    /// assert!(Softmax::Naive.apply(&scores)[[1, 0]].is_nan());
    /// ```
    pub fn apply<'a>(self, scores: impl Into<ArrayView2<'a, f64>>) -> Array2<f64> {
        match self {
            Softmax::Stable => softmax(scores),
            Softmax::Naive => softmax_naive(scores),
        }
    }

    /// Applies this softmax to scores that were masked (`-inf` where a key is blocked): a row
    /// whose every score is `-inf` gets zero weights instead of NaN, as the masked forward
    /// pass gives (see [`crate::layers::mask`]). `solve`, `exercise` and `grade` share it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let masked = array![[0.0, f64::NEG_INFINITY], [f64::NEG_INFINITY, f64::NEG_INFINITY]];
    /// assert_eq!(Softmax::Stable.apply_masked(&masked), array![[1.0, 0.0], [0.0, 0.0]]);
    /// ```
    pub fn apply_masked<'a>(self, scores: impl Into<ArrayView2<'a, f64>>) -> Array2<f64> {
        let scores = scores.into();
        let mut weights = Array2::zeros(scores.dim());
        self.apply_into(scores, weights.view_mut(), true);
        weights
    }

    /// [`Softmax::apply`] (or, when `masked`, [`Softmax::apply_masked`]) written into
    /// `weights`, of the scores' shape.
    pub(crate) fn apply_into(
        self,
        scores: ArrayView2<'_, f64>,
        mut weights: ArrayViewMut2<'_, f64>,
        masked: bool,
    ) {
        weights.assign(&scores);
        match self {
            Softmax::Stable => stable(weights.view_mut()),
            Softmax::Naive => weights.mapv_inplace(f64::exp),
        }
        normalise(weights.view_mut());
        if masked {
            zero_blocked_rows(scores, weights);
        }
    }
}

/// [`Softmax::apply_into`] for the encoder: the stable softmax's `exp` on whole vectors
/// (within 2 ulp of `f64::exp`, so its last digits can differ from NumPy's); the naive one
/// as [`Softmax::apply_into`]. The seed lessons never come here.
#[cfg(feature = "encoder")]
pub(crate) fn apply_fast_into(
    softmax: Softmax,
    scores: ArrayView2<'_, f64>,
    mut weights: ArrayViewMut2<'_, f64>,
    masked: bool,
) {
    if softmax == Softmax::Naive {
        return softmax.apply_into(scores, weights, masked);
    }
    let simd = crate::fast::simd::encoder_path();
    weights.assign(&scores);
    for mut row in weights.rows_mut() {
        let max = nan_max(row.view());
        match row.as_slice_mut() {
            Some(values) => map_in_place(simd, Step::ExpMinus(max), values),
            None => row.mapv_inplace(|s| (s - max).exp()),
        }
    }
    normalise(weights.view_mut());
    if masked {
        zero_blocked_rows(scores, weights);
    }
}

/// Row-wise softmax with the row maximum subtracted first.
///
/// NumPy: `e = np.exp(s - np.max(s, axis=1, keepdims=True)); e / np.sum(e, axis=1, keepdims=True)`
/// (what `scipy.special.softmax(s, axis=1)` computes). A row holding NaN gives NaN, a row
/// holding `inf` gives NaN (as `inf - inf`), a matrix with no columns gives one of no columns.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // apply_softmax(np.array([[109.7, 252.0], [0.0, 0.0]]))
/// let w = softmax(&array![[109.7, 252.0], [0.0, 0.0]]);
/// assert_eq!(w[[0, 1]], 1.0);
/// assert!(w[[0, 0]] < 1e-61); // exp(109.7 - 252.0)
/// assert_eq!(w.row(1), array![0.5, 0.5]);
/// ```
pub fn softmax<'a>(scores: impl Into<ArrayView2<'a, f64>>) -> Array2<f64> {
    let mut e = scores.into().to_owned();
    stable(e.view_mut());
    normalise(e.view_mut());
    e
}

/// Row-wise softmax exactly as the naive formula: `np.exp(s) / np.sum(np.exp(s), axis=1, keepdims=True)`.
///
/// It overflows as NumPy does: `exp` of anything above 709.78 is `inf`, and `inf / inf` is NaN.
/// Notebooks use it to show why the stable [`softmax`] exists.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let w = softmax_naive(&array![[0.0, 2.0f64.ln()], [710.0, 0.0]]);
/// assert!((w[[0, 1]] - 2.0 / 3.0).abs() < 1e-15);
/// assert!(w[[1, 0]].is_nan()); // exp(710) = inf, inf / inf = NaN
/// ```
pub fn softmax_naive<'a>(scores: impl Into<ArrayView2<'a, f64>>) -> Array2<f64> {
    let mut e = scores.into().mapv(f64::exp);
    normalise(e.view_mut());
    e
}

/// Each row `s` of the scores, in place, becomes `exp(s - max(s))`.
fn stable(mut e: ArrayViewMut2<'_, f64>) {
    for mut row in e.rows_mut() {
        let max = nan_max(row.view());
        row.mapv_inplace(|s| (s - max).exp());
    }
}

/// Each row, in place, divided by its (pairwise) sum.
fn normalise(mut e: ArrayViewMut2<'_, f64>) {
    for mut row in e.axis_iter_mut(Axis(0)) {
        let total = pairwise_sum(row.view());
        row.mapv_inplace(|v| v / total);
    }
}

/// `np.max` of one row: NaN wins (Rust's `f64::max` would drop it).
/// The distribution a language model's next token is drawn from: `softmax((logits - max) /
/// temperature)` over the `top_k` largest logits, the others 0 (on a tie at the k-th value,
/// the first in index order are kept, so there are exactly k). `temperature` must be finite
/// and above 0, `top_k` at least 1 (the decoder's sampling checks both); with `top_k` `None`
/// and a temperature of 1 it is the plain softmax.
///
/// ```
/// use attention_lab::prelude::*;
/// let p = sampling_softmax(array![1.0, 3.0, 3.0, 0.0].view(), 1.0, Some(2));
/// assert_eq!(p, array![0.0, 0.5, 0.5, 0.0]);
/// let flat = sampling_softmax(array![0.0, 2.0_f64.ln()].view(), 1e9, None);
/// assert!((flat[0] - 0.5).abs() < 1e-9);
/// ```
pub fn sampling_softmax(
    logits: ArrayView1<'_, f64>,
    temperature: f64,
    top_k: Option<usize>,
) -> Array1<f64> {
    // The largest logit taken out before dividing: a tiny temperature cannot overflow.
    let top = logits.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    let mut scaled = logits.mapv(|l| (l - top) / temperature);
    if let Some(k) = top_k.filter(|&k| k > 0 && k < scaled.len()) {
        let mut sorted: Vec<f64> = scaled.to_vec();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[k - 1];
        // Every value above the k-th largest, then the first of those equal to it, in index
        // order, until there are k (torch.topk keeps k; a tie never costs a larger value).
        let mut ties = k - scaled.iter().filter(|&&v| v > kth).count();
        for v in scaled.iter_mut() {
            if *v > kth {
                continue;
            }
            if *v == kth && ties > 0 {
                ties -= 1;
            } else {
                *v = f64::NEG_INFINITY;
            }
        }
    }
    let max = scaled.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    let weights = scaled.mapv(|v| (v - max).exp());
    let total: f64 = weights.sum();
    weights / total
}

fn nan_max(row: ArrayView1<'_, f64>) -> f64 {
    row.iter().copied().fold(f64::NEG_INFINITY, |m, v| {
        if m.is_nan() || v.is_nan() {
            f64::NAN
        } else {
            m.max(v)
        }
    })
}

/// NumPy's pairwise summation (`pairwise_sum` in its loops), so sums round as NumPy's do.
pub(crate) fn pairwise_sum(row: ArrayView1<'_, f64>) -> f64 {
    match row.as_slice() {
        Some(values) => pairwise(values),
        None => pairwise(&row.to_vec()),
    }
}

fn pairwise(a: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = a.len();
    if n < 8 {
        // NumPy starts from -0.0 so that a sum of negative zeros stays -0.0.
        a.iter().fold(-0.0, |s, &v| s + v)
    } else if n <= BLOCK {
        let mut r = [0.0; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i + 8 <= n {
            for (j, rj) in r.iter_mut().enumerate() {
                *rj += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &v in &a[i..] {
            res += v;
        }
        res
    } else {
        let half = (n / 2) & !7;
        pairwise(&a[..half]) + pairwise(&a[half..])
    }
}
