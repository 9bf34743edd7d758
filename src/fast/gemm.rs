//! `x w` on the vector paths ([`Simd`]): the register tile the streaming kernel computes its
//! scores and `weights V` with, and a packed matrix product built on it for the projections
//! of the streaming path (W_Q, W_K, W_V and W_O).
//!
//! The product runs the tile transposed: a vector's lanes are columns of `w` (a panel of
//! [`rows`] columns), and each of [`COLS`] rows of `x` is broadcast, so that a tile is
//! [`COLS`] rows of the result, each a run of columns stored as whole vectors. Both operands
//! are packed in blocks of [`KC`] of the shared dimension: a panel of `x` (12 KiB) stays in
//! the first-level cache while a group of `w`'s panels (about 512 KiB) stays in the second.

#[cfg(feature = "encoder")]
use ndarray::Array1;
use ndarray::{s, ArrayView1, ArrayView2, ArrayViewMut2, Axis};

use crate::fast::parallel;
use crate::fast::simd::{dispatch, Kernel, Lanes, Simd};

/// Columns of the broadcast operand a register tile holds: keys (in the scores), value
/// columns (in `weights V`), or rows of `x` (in a product).
pub(crate) const COLS: usize = 6;
/// Vectors of the tile's lane operand, side by side.
pub(crate) const VECS: usize = 2;
/// The shared dimension is packed and multiplied in blocks of this many.
const KC: usize = 256;
/// Bytes of `w`'s panels a group holds, to stay in a second-level cache.
const GROUP_BYTES: usize = 512 * 1024;
/// Values of `x` below which one thread packs it (tens of microseconds, a thread's start).
const PACK_ALONE: usize = 1 << 16;

/// Lanes a panel holds on the path `simd` (resolved): [`VECS`] vectors, 16 on AVX-512 and 8
/// otherwise.
pub(crate) fn rows(simd: Simd) -> usize {
    VECS * if simd == Simd::Avx512 { 8 } else { 4 }
}

/// A panel's lanes on lanes `S`, as [`rows`] gives them for its path.
pub(crate) trait Panel: Lanes {
    const ROWS: usize = VECS * Self::WIDTH;
}

impl<S: Lanes> Panel for S {}

/// A right operand in panels of [`COLS`] columns: panel `p` (columns `COLS p..`) is every
/// row's [`COLS`] values, the last panel padded with zero columns. K^T (keys as columns) and V
/// take this form.
pub(crate) struct Panels {
    values: Vec<f64>,
    rows: usize,
    cols: usize,
}

impl Panels {
    /// Packs `b` (rows x cols).
    pub(crate) fn new(b: ArrayView2<'_, f64>) -> Panels {
        let (rows, cols) = b.dim();
        let mut values = vec![0.0; cols.div_ceil(COLS) * rows * COLS];
        for (p, panel) in b.axis_chunks_iter(Axis(1), COLS).enumerate() {
            let packed = &mut values[p * rows * COLS..(p + 1) * rows * COLS];
            for (row, packed) in panel.rows().into_iter().zip(packed.chunks_exact_mut(COLS)) {
                for (to, &x) in packed.iter_mut().zip(&row) {
                    *to = x;
                }
            }
        }
        Panels { values, rows, cols }
    }

    /// The rows of the operand packed.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// The columns of the operand packed (before padding).
    pub(crate) fn cols(&self) -> usize {
        self.cols
    }

    /// Panel `p`'s rows `from..`.
    pub(crate) fn panel(&self, p: usize, from: usize) -> &[f64] {
        &self.values[(p * self.rows + from) * COLS..(p + 1) * self.rows * COLS]
    }
}

/// The register tile: `a` (`k` rows of a panel's lanes) times `b` (`k` rows of [`COLS`]), as
/// [`COLS`] columns of [`VECS`] vectors.
#[inline(always)]
pub(crate) fn tile<S: Lanes>(s: S, k: usize, a: &[f64], b: &[f64]) -> [[S::V; VECS]; COLS] {
    tile_strided(s, k, a, S::ROWS, b)
}

/// [`tile`] with `a`'s rows `stride` apart (a panel of `w` read where it lies, unpacked).
#[inline(always)]
fn tile_strided<S: Lanes>(
    s: S,
    k: usize,
    a: &[f64],
    stride: usize,
    b: &[f64],
) -> [[S::V; VECS]; COLS] {
    assert!(
        k == 0 || (a.len() >= (k - 1) * stride + S::ROWS && b.len() >= k * COLS),
        "tile operands"
    );
    let mut c = [[s.splat(0.0); VECS]; COLS];
    let (a, b) = (a.as_ptr(), b.as_ptr());
    for i in 0..k {
        let mut row = [s.splat(0.0); VECS];
        for (r, row) in row.iter_mut().enumerate() {
            // SAFETY: checked above: row i of a is in bounds.
            *row = unsafe { s.load(a.add(i * stride + S::WIDTH * r)) };
        }
        for (j, column) in c.iter_mut().enumerate() {
            // SAFETY: checked above: row i of b is in bounds.
            let b = s.splat(unsafe { *b.add(i * COLS + j) });
            for (c, &a) in column.iter_mut().zip(&row) {
                *c = s.fma(a, b, *c);
            }
        }
    }
    c
}

/// `out = x [w_1 | w_2 | ..]` on the path `simd` (resolved), its columns shared among up to
/// `threads` threads. `out` must have as many columns as the `w`s together, and each `w` as
/// many rows as `x` has columns.
pub(crate) fn product(
    simd: Simd,
    x: ArrayView2<'_, f64>,
    ws: &[ArrayView2<'_, f64>],
    mut out: ArrayViewMut2<'_, f64>,
    threads: usize,
) {
    let (m, k) = x.dim();
    let n = out.ncols();
    assert!(
        out.nrows() == m
            && ws.iter().map(|w| w.ncols()).sum::<usize>() == n
            && ws.iter().all(|w| w.nrows() == k),
        "product operands"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0.0);
        return;
    }
    if out.strides()[1] != 1 {
        // Tiles store whole runs of columns: write a contiguous copy, then `out`.
        let mut contiguous = ndarray::Array2::zeros((m, n));
        product(simd, x, ws, contiguous.view_mut(), threads);
        out.assign(&contiguous);
        return;
    }
    let lanes = rows(simd);
    let kc = k.min(KC);
    let (blocks, x_panels) = (k.div_ceil(kc), m.div_ceil(COLS));
    let threads = threads.clamp(1, n.div_ceil(lanes));
    // x in panels of COLS rows, block by block of the shared dimension (kc rows a panel,
    // the last block's padded with zeros), packed by every thread; a small x by the calling
    // thread alone, which costs less than starting one.
    let mut xp = vec![0.0; blocks * x_panels * kc * COLS];
    let packers = if m * k < PACK_ALONE { 1 } else { threads };
    let per = (blocks * x_panels).div_ceil(packers);
    let pack = |(part, chunk): (usize, &mut [f64])| {
        for (i, panel) in chunk.chunks_exact_mut(kc * COLS).enumerate() {
            let (block, p) = ((part * per + i) / x_panels, (part * per + i) % x_panels);
            let depth = block * kc..k.min((block + 1) * kc);
            let rows = x.slice(s![p * COLS..m.min((p + 1) * COLS), depth]);
            for (j, row) in rows.rows().into_iter().enumerate() {
                for (to, &value) in panel[j..].iter_mut().step_by(COLS).zip(&row) {
                    *to = value;
                }
            }
        }
    };
    let parts = xp.chunks_mut(per * kc * COLS).enumerate();
    if packers == 1 {
        parts.for_each(pack);
    } else {
        parallel::each_part(parts, pack);
    }
    // Whole panels of columns a thread; each packs its own share of the w's.
    let cols = n.div_ceil(lanes).div_ceil(threads) * lanes;
    let xp = &xp;
    // Where every panel of lanes columns lies whole in one w, with its rows' values side by
    // side, the tile reads it there: no copy of w (for 128 rows of x, packing w cost as much
    // as a fifth of the product).
    let direct = ws
        .iter()
        .all(|w| w.ncols() % lanes == 0 && w.is_standard_layout());
    parallel::each_part(
        out.axis_chunks_iter_mut(Axis(1), cols).enumerate(),
        |(part, out)| {
            let shape = Shape { m, k, kc, x_panels };
            let packed;
            let w = if direct {
                Operand::Direct(panels_of(ws, part * cols, out.ncols(), lanes))
            } else {
                packed = pack_columns(ws, part * cols, out.ncols(), kc, lanes);
                Operand::Packed(&packed)
            };
            dispatch(simd, Multiply { shape, xp, w, out });
        },
    );
}

/// The right operand of one thread's share: packed, or each panel where it lies in its w.
enum Operand<'a> {
    /// [`pack_columns`]'s layout.
    Packed(&'a [f64]),
    /// Panel `p`: its w's values from the panel's first column of row 0 on, and that w's
    /// row stride.
    Direct(Vec<(&'a [f64], usize)>),
}

/// Columns `first..first + count` of `[w_1 | w_2 | ..]` as panels of `lanes` columns, each
/// where it lies (every w in standard layout, its columns a multiple of `lanes`).
fn panels_of<'a>(
    ws: &'a [ArrayView2<'_, f64>],
    first: usize,
    count: usize,
    lanes: usize,
) -> Vec<(&'a [f64], usize)> {
    let mut panels = Vec::with_capacity(count.div_ceil(lanes));
    let mut start = 0;
    for w in ws {
        let values = w
            .as_slice()
            .expect("direct operands are in standard layout");
        for c in (0..w.ncols()).step_by(lanes) {
            if (first..first + count).contains(&(start + c)) {
                panels.push((&values[c..], w.ncols()));
            }
        }
        start += w.ncols();
    }
    panels
}

/// Columns `first..first + count` of `[w_1 | w_2 | ..]` in panels of `lanes` columns, block by
/// block of `kc` rows: block `b`'s panel `p` is `kc` rows of `lanes` values (zeros past the
/// last column or row).
fn pack_columns(
    ws: &[ArrayView2<'_, f64>],
    first: usize,
    count: usize,
    kc: usize,
    lanes: usize,
) -> Vec<f64> {
    let k = ws[0].nrows();
    let panels = count.div_ceil(lanes);
    let mut packed = vec![0.0; k.div_ceil(kc) * panels * kc * lanes];
    // Each w's columns in range, row by row, with their place among the count.
    let mut start = 0;
    for w in ws {
        let (lo, hi) = (first.max(start), (first + count).min(start + w.ncols()));
        if lo < hi {
            let part = w.slice(s![.., lo - start..hi - start]);
            for (d, row) in part.rows().into_iter().enumerate() {
                let (block, i) = (d / kc, d % kc);
                // The row in runs that each fill one panel's lanes (whole runs of a
                // contiguous row copied at once).
                let mut c = lo - first;
                for run in runs(row, lanes - c % lanes, lanes) {
                    let (p, lane) = (c / lanes, c % lanes);
                    let at = ((block * panels + p) * kc + i) * lanes + lane;
                    match run.as_slice() {
                        Some(values) => packed[at..at + values.len()].copy_from_slice(values),
                        None => packed[at..at + run.len()]
                            .iter_mut()
                            .zip(&run)
                            .for_each(|(to, &value)| *to = value),
                    }
                    c += run.len();
                }
            }
        }
        start += w.ncols();
    }
    packed
}

/// `row` cut into a first run of `first` values, then runs of `len` (the last may be shorter).
fn runs(
    row: ArrayView1<'_, f64>,
    first: usize,
    len: usize,
) -> impl Iterator<Item = ArrayView1<'_, f64>> {
    let mut rest = Some(row);
    let mut take = first;
    std::iter::from_fn(move || {
        let row = rest.take()?;
        if row.is_empty() {
            return None;
        }
        let (run, after) = row.split_at(Axis(0), take.min(row.len()));
        rest = Some(after);
        take = len;
        Some(run)
    })
}

/// The sizes a thread's share of a product is cut by.
#[derive(Clone, Copy)]
struct Shape {
    m: usize,
    k: usize,
    kc: usize,
    x_panels: usize,
}

/// One thread's share of [`product`]: `out` (its columns) from the packed `x` and its packed
/// columns of the `w`s.
struct Multiply<'a> {
    shape: Shape,
    xp: &'a [f64],
    w: Operand<'a>,
    out: ArrayViewMut2<'a, f64>,
}

impl Kernel for Multiply<'_> {
    type Out = ();

    #[inline(always)]
    fn run<S: Lanes>(self, s: S) {
        let Multiply {
            shape: Shape { m, k, kc, x_panels },
            xp,
            w,
            mut out,
        } = self;
        let n = out.ncols();
        let panels = n.div_ceil(S::ROWS);
        let group = (GROUP_BYTES / (kc * S::ROWS * 8)).max(1);
        let row_stride = out.strides()[0];
        let base = out.as_mut_ptr();
        for block in 0..k.div_ceil(kc) {
            let depth = kc.min(k - block * kc);
            let add = block > 0;
            for first in (0..panels).step_by(group) {
                for q in 0..x_panels {
                    let x_panel = &xp[(block * x_panels + q) * kc * COLS..][..depth * COLS];
                    let live_rows = COLS.min(m - q * COLS);
                    for p in first..panels.min(first + group) {
                        let c = match &w {
                            Operand::Packed(wp) => {
                                let at = (block * panels + p) * kc * S::ROWS;
                                tile(s, depth, &wp[at..at + depth * S::ROWS], x_panel)
                            }
                            Operand::Direct(ws) => {
                                let (values, stride) = ws[p];
                                let rows = &values[block * kc * stride..];
                                tile_strided(s, depth, rows, stride, x_panel)
                            }
                        };
                        for (j, row) in c.iter().enumerate().take(live_rows) {
                            let at = (q * COLS + j) as isize * row_stride;
                            for (r, &v) in row.iter().enumerate() {
                                let col = p * S::ROWS + r * S::WIDTH;
                                if col >= n {
                                    break;
                                }
                                // SAFETY: row q COLS + j < m and columns col.. are in `out`
                                // (whose columns are contiguous): the whole vector when
                                // col + WIDTH <= n, else only the lanes copied one by one.
                                unsafe {
                                    let to = base.offset(at).add(col);
                                    store(s, to, v, n - col, add);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Writes (or adds, when `add`) the first `live` lanes of `v` at `to`.
///
/// # Safety
/// `to..to + live.min(WIDTH)` must be writable.
#[inline(always)]
unsafe fn store<S: Lanes>(s: S, to: *mut f64, v: S::V, live: usize, add: bool) {
    if live >= S::WIDTH {
        // SAFETY: the caller's promise, for a whole vector.
        unsafe {
            let v = if add { s.add(s.load(to), v) } else { v };
            s.store(to, v);
        }
        return;
    }
    let mut lanes = [0.0; 16];
    // SAFETY: 16 lanes hold any vector.
    unsafe { s.store(lanes.as_mut_ptr(), v) };
    for (i, &lane) in lanes.iter().enumerate().take(live) {
        // SAFETY: i < live, within the caller's promise.
        unsafe {
            let to = to.add(i);
            *to = if add { *to + lane } else { lane };
        }
    }
}

/// `x [w_1 | w_2 | ..]`, plus `[b_1 | b_2 | ..]` on every row where biases are given, into
/// `out` (`x.nrows()` x the `w`s' columns together), whatever it held: the encoder's
/// projections, on the crate's own product (`gemm`) on the widest path this CPU has, its
/// columns shared among the cores. On an Intel CPU with two 512-bit FMA units (Sapphire
/// Rapids) its eight-lane tile is wider than matrixmultiply's four-lane kernel.
#[cfg(feature = "encoder")]
pub(crate) fn project_wide_into(
    x: ArrayView2<'_, f64>,
    ws: &[ArrayView2<'_, f64>],
    bs: Option<&[&Array1<f64>]>,
    mut out: ArrayViewMut2<'_, f64>,
) {
    let n: usize = ws.iter().map(|w| w.ncols()).sum();
    let work = x.nrows().saturating_mul(x.ncols()).saturating_mul(n);
    let simd = crate::fast::simd::encoder_path();
    product(simd, x, ws, out.view_mut(), parallel::threads(n, work));
    let Some(bs) = bs else { return };
    let mut start = 0;
    for b in bs {
        let mut part = out.slice_mut(s![.., start..start + b.len()]);
        part += *b;
        start += b.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::simd::tests::paths;
    use ndarray::Array2;
    use ndarray_rand::rand::{rngs::StdRng, SeedableRng};
    use ndarray_rand::{rand_distr::StandardNormal, RandomExt};

    /// Each entry within 1e-13 of ndarray's product, relative to the sum of the magnitudes
    /// of its terms (what any order of summation keeps within a few ulp).
    fn assert_product(simd: Simd, x: &Array2<f64>, ws: &[Array2<f64>], threads: usize) {
        let views: Vec<_> = ws.iter().map(|w| w.view()).collect();
        let w = ndarray::concatenate(Axis(1), &views).unwrap();
        let mut out = Array2::from_elem((x.nrows(), w.ncols()), f64::NAN);
        product(simd, x.view(), &views, out.view_mut(), threads);
        let want = x.dot(&w);
        let bound = x.mapv(f64::abs).dot(&w.mapv(f64::abs));
        for ((at, &got), (&want, &bound)) in out.indexed_iter().zip(want.iter().zip(&bound)) {
            assert!(
                (got - want).abs() <= 1e-13 * bound,
                "{simd:?}, {threads} threads, x {:?}, entry {at:?}: {got} against {want}",
                x.dim()
            );
        }
    }

    #[test]
    fn every_path_multiplies_as_ndarray_for_awkward_shapes() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut random = |r, c| Array2::<f64>::random_using((r, c), StandardNormal, &mut rng);
        for simd in paths() {
            for (m, k, widths) in [
                (1, 1, vec![1]),
                (5, 3, vec![7]),
                (7, 9, vec![16, 1]),
                (13, 257, vec![17, 5, 9]),
                (37, 600, vec![64, 64, 64]),
                (130, 64, vec![300]),
                // Past PACK_ALONE: x packed by every thread.
                (300, 257, vec![40, 3]),
            ] {
                let x = random(m, k);
                let ws: Vec<_> = widths.iter().map(|&c| random(k, c)).collect();
                for threads in [1, 2, 3] {
                    assert_product(simd, &x, &ws, threads);
                }
            }
        }
    }

    #[test]
    fn strided_inputs_and_outputs_and_empty_shapes() {
        let mut rng = StdRng::seed_from_u64(4);
        let big = Array2::<f64>::random_using((40, 30), StandardNormal, &mut rng);
        let w = Array2::<f64>::random_using((15, 11), StandardNormal, &mut rng);
        // Every other row and column of x; the result written into a transposed view.
        let x = big.slice(s![..;2, ..;2]);
        for simd in paths() {
            let mut out = Array2::<f64>::zeros((11, 20));
            product(simd, x, &[w.view()], out.view_mut().reversed_axes(), 2);
            let want = x.dot(&w);
            for (got, want) in out.t().iter().zip(&want) {
                assert!(
                    (got - want).abs() <= 1e-12,
                    "{simd:?}: {got} against {want}"
                );
            }
            // No shared dimension: zeros, whatever `out` held.
            let mut out = Array2::from_elem((3, 2), 7.0);
            product(
                simd,
                Array2::zeros((3, 0)).view(),
                &[Array2::zeros((0, 2)).view()],
                out.view_mut(),
                1,
            );
            assert!(out.iter().all(|&v| v == 0.0));
        }
    }

    #[test]
    fn nan_and_infinity_reach_their_rows_and_columns_only() {
        let mut x = Array2::<f64>::ones((8, 20));
        let mut w = Array2::<f64>::ones((20, 18));
        x[[2, 5]] = f64::NAN;
        w[[7, 17]] = f64::INFINITY;
        for simd in paths() {
            let mut out = Array2::zeros((8, 18));
            product(simd, x.view(), &[w.view()], out.view_mut(), 2);
            for ((i, j), &v) in out.indexed_iter() {
                if i == 2 {
                    assert!(v.is_nan(), "{simd:?} ({i}, {j}) = {v}");
                } else if j == 17 {
                    assert_eq!(v, f64::INFINITY, "{simd:?} ({i}, {j})");
                } else {
                    assert_eq!(v, 20.0, "{simd:?} ({i}, {j})");
                }
            }
        }
    }
}
