//! Work shared among the cores with `std::thread::scope` (no thread pool, no dependency): the
//! heads of a layer, the column blocks of a product, the rows of an activation. Below
//! [`MIN_WORK`] multiply-adds everything runs on the calling thread, so the lessons' small
//! matrices take the same path as before, and each row or head is computed by the same code
//! either way: only which thread computes it changes, never its arithmetic.

use ndarray::linalg::general_mat_mul;
use ndarray::{s, Array1, Array2, ArrayView2, ArrayViewMut2, Axis};

/// Multiply-adds below which a thread costs more than it saves (a thread starts in tens of
/// microseconds; 2^20 multiply-adds take about a millisecond).
pub(crate) const MIN_WORK: usize = 1 << 20;

/// Threads for `units` independent pieces of `work` multiply-adds in all: one per core, at
/// most one per piece, and one when the work is small.
pub(crate) fn threads(units: usize, work: usize) -> usize {
    if work < MIN_WORK {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.clamp(1, units.max(1))
}

/// `work` on every part: the first on the calling thread (one thread fewer to start), each
/// other on a thread of its own; a panic in any of them goes on in the caller.
pub(crate) fn each_part<P: Send>(mut parts: impl Iterator<Item = P>, work: impl Fn(P) + Sync) {
    let work = &work;
    std::thread::scope(|scope| {
        let first = parts.next();
        let others: Vec<_> = parts.map(|part| scope.spawn(move || work(part))).collect();
        if let Some(part) = first {
            work(part);
        }
        for other in others {
            if let Err(panic) = other.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// `f(0), f(1), .., f(n - 1)` in order, shared among the threads in consecutive runs.
pub(crate) fn map<T: Send>(n: usize, work: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = threads(n, work);
    if threads <= 1 {
        return (0..n).map(f).collect();
    }
    let run = n.div_ceil(threads);
    let mut runs: Vec<Vec<T>> = (0..n).step_by(run).map(|_| Vec::new()).collect();
    each_part(
        runs.iter_mut().zip((0..n).step_by(run)),
        |(results, start)| {
            *results = (start..(start + run).min(n)).map(&f).collect();
        },
    );
    runs.into_iter().flatten().collect()
}

/// `x w`, plus `b` on every row when there is a bias, into `out` (`x.nrows()` x `w.ncols()`),
/// whatever it held, on the calling thread: ndarray's product, as `x.dot(w)` computes it.
pub(crate) fn project_here_into(
    x: ArrayView2<'_, f64>,
    w: &Array2<f64>,
    b: Option<&Array1<f64>>,
    mut out: ArrayViewMut2<'_, f64>,
) {
    // beta = 0: `out` is not read, so what it held (NaN too) does not matter.
    general_mat_mul(1.0, &x, w, 0.0, &mut out);
    if let Some(b) = b {
        out += b;
    }
}

/// `x w + b` with the columns of `w` (and `b`) shared among the threads: each thread packs
/// only its share of `w`, which for a wide weight matrix and few rows is most of the work,
/// and writes its own columns of the result. ndarray's product (matrixmultiply), not the
/// streaming path's (`gemm`): on the encoder's shapes (128 rows) it was 5% faster on 2 threads
/// of an AMD Zen 4 and as fast on one (BENCHMARKS.md, issue 32).
#[cfg(feature = "encoder")]
pub(crate) fn project(
    x: ArrayView2<'_, f64>,
    w: &Array2<f64>,
    b: Option<&Array1<f64>>,
) -> Array2<f64> {
    let mut out = Array2::zeros((x.nrows(), w.ncols()));
    project_into(x, w, b, out.view_mut());
    out
}

/// [`project`] into `out` (`x.nrows()` x `w.ncols()`), whatever it held.
pub(crate) fn project_into(
    x: ArrayView2<'_, f64>,
    w: &Array2<f64>,
    b: Option<&Array1<f64>>,
    mut out: ArrayViewMut2<'_, f64>,
) {
    let (n, work) = (w.ncols(), x.nrows().saturating_mul(w.len()));
    if work < MIN_WORK {
        return project_here_into(x, w, b, out);
    }
    let blocks = threads(n, work);
    let cols = n.div_ceil(blocks);
    each_part(
        out.axis_chunks_iter_mut(Axis(1), cols).enumerate(),
        |(i, mut part)| {
            let range = i * cols..i * cols + part.ncols();
            general_mat_mul(1.0, &x, &w.slice(s![.., range]), 0.0, &mut part);
        },
    );
    if let Some(b) = b {
        out += b;
    }
}

/// `step` on each element of `x`, into `out` (of `x`'s shape, in standard layout: the caller
/// fits it, as `into` does), on whole vectors of the encoder's path, on several cores for a
/// large `x`; `cost` is what one element costs in multiply-adds, roughly.
#[cfg(feature = "encoder")]
pub(crate) fn map_step_into(
    x: &Array2<f64>,
    step: crate::fast::simd::Step,
    cost: usize,
    mut out: ArrayViewMut2<'_, f64>,
) {
    out.assign(x);
    let simd = crate::fast::simd::encoder_path();
    let values = out
        .as_slice_mut()
        .expect("a fitted matrix has a standard layout");
    let blocks = threads(x.nrows(), x.len().saturating_mul(cost));
    let per = values.len().div_ceil(blocks.max(1)).max(1);
    each_part(values.chunks_mut(per), |part| {
        crate::fast::simd::map_in_place(simd, step, part)
    });
}

/// `f` on each element of `x`, on several cores for a large `x`; `cost` is what one call
/// costs in multiply-adds, roughly.
#[cfg(feature = "encoder")]
pub(crate) fn map_elements(
    x: &Array2<f64>,
    cost: usize,
    f: impl Fn(f64) -> f64 + Sync,
) -> Array2<f64> {
    let n = x.nrows();
    let blocks = threads(n, x.len().saturating_mul(cost));
    if blocks <= 1 {
        return x.mapv(f);
    }
    let rows = n.div_ceil(blocks);
    let mut out = Array2::zeros(x.dim());
    let parts = out
        .axis_chunks_iter_mut(Axis(0), rows)
        .zip(x.axis_chunks_iter(Axis(0), rows));
    each_part(parts, |(part, from)| {
        ndarray::Zip::from(part)
            .and(from)
            .for_each(|o, &v| *o = f(v))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray_rand::rand::{rngs::StdRng, SeedableRng};
    use ndarray_rand::{rand_distr::StandardNormal, RandomExt};

    /// Shared among threads or not, every entry is the same dot product: equal to the bit.
    #[test]
    fn shared_work_equals_one_thread_exactly() {
        let mut rng = StdRng::seed_from_u64(7);
        let x = Array2::<f64>::random_using((130, 300), StandardNormal, &mut rng);
        let w = Array2::<f64>::random_using((300, 517), StandardNormal, &mut rng);
        let b = Array1::<f64>::random_using(517, StandardNormal, &mut rng);
        assert!(
            threads(517, 130 * w.len()) > 1
                || std::thread::available_parallelism().map_or(1, usize::from) == 1
        );
        let mut shared = Array2::from_elem((130, 517), f64::NAN);
        project_into(x.view(), &w, Some(&b), shared.view_mut());
        let mut here = Array2::zeros((130, 517));
        project_here_into(x.view(), &w, Some(&b), here.view_mut());
        assert_eq!(shared, here);
        #[cfg(feature = "encoder")]
        assert_eq!(map_elements(&x, MIN_WORK, f64::exp), x.mapv(f64::exp));
        assert_eq!(
            map(13, MIN_WORK, |i| i * i),
            (0..13).map(|i| i * i).collect::<Vec<_>>()
        );
    }
}
