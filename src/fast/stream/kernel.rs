//! The fused block kernel: one head's `z` for a block of query rows, with the scores of a
//! block of keys kept in the first-level cache between the two products.
//!
//! Query rows go in panels of two vectors' lanes ([`rows`]: 16 on AVX-512, 8 on AVX2), one
//! row a vector lane ([`pack_rows`]), so the online softmax (max, exp, sum, rescale) runs on
//! whole vectors and never reduces across lanes. The kernel is written once over
//! [`Lanes`] and run on the path [`Simd`] names.
//! For each panel and block of keys:
//!
//! 1. `scores = Q K^T / sqrt(d_k)`, tile by tile of a panel's rows x [`COLS`] in registers
//!    (12 accumulators, which AVX2's 16 registers hold), written key by key (each key's
//!    scores side by side), which is the layout the second product reads its left
//!    operand in: the scores are never packed;
//! 2. the mask, then the online softmax over the block, in place;
//! 3. `acc += weights V`, tile by tile.
//!
//! K^T and V are packed once per head and call, in panels of [`COLS`] columns ([`Panels`]),
//! and shared by every thread; a block's queries once per block.
//!
//! Under a mask, what it does to each block is found once per call ([`MaskBlocks`]): a block
//! it leaves open is not touched, and one it blocks whole (most of a causal mask's) is
//! skipped where that is exact, when its scores and values are finite (it would add 0).

use ndarray::{ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};

use crate::fast::gemm::{tile, Panel, Panels, COLS, VECS};
use crate::fast::simd::{dispatch, exp, Kernel, Lanes, Simd};
use crate::layers::mask::{Block, Mask};
use crate::layers::softmax::Softmax;

/// One head's keys and values, packed for [`attend`]: K^T (d_k x keys) and V (keys x d_v),
/// and, under a mask, for each panel of [`COLS`] keys the largest magnitude in its keys and
/// in its values (inf if one is NaN), which tell when a block the mask blocks whole can be
/// skipped.
pub(super) struct PackedHead {
    keys: Panels,
    values: Panels,
    key_bounds: Vec<f64>,
    value_bounds: Vec<f64>,
}

impl PackedHead {
    /// Packs `k` (keys x d_k) and `v` (keys x d_v), with their bounds when `masked`.
    pub(super) fn new(k: ArrayView2<'_, f64>, v: ArrayView2<'_, f64>, masked: bool) -> PackedHead {
        let bounds = |x: ArrayView2<'_, f64>| -> Vec<f64> {
            if !masked {
                return Vec::new();
            }
            x.axis_chunks_iter(Axis(0), COLS)
                .map(|rows| magnitude(rows.iter()))
                .collect()
        };
        PackedHead {
            keys: Panels::new(k.t()),
            values: Panels::new(v),
            key_bounds: bounds(k),
            value_bounds: bounds(v),
        }
    }

    /// Whether every score of a query panel whose values are at most `q_bound` in magnitude
    /// with keys `start..start + count` is finite, and so are the keys' values: then a mask
    /// that blocks them all makes them add exactly nothing, and the block can be skipped.
    fn skippable(&self, q_bound: f64, scale: f64, start: usize, count: usize) -> bool {
        let panels = start / COLS..(start + count).div_ceil(COLS);
        let k_bound = self.key_bounds[panels.clone()]
            .iter()
            .fold(0.0, |a: f64, &b| a.max(b));
        let v_bound = self.value_bounds[panels]
            .iter()
            .fold(0.0, |a: f64, &b| a.max(b));
        // |q k| <= d_k max|q| max|k|: below f64::MAX, no score overflows.
        let scores = q_bound * k_bound * self.keys.rows() as f64 * scale.max(1.0);
        scores < f64::MAX && v_bound < f64::INFINITY
    }
}

/// The largest magnitude among `values`; inf if one is NaN or infinite (0 for none).
fn magnitude<'a>(values: impl Iterator<Item = &'a f64>) -> f64 {
    values.fold(0.0, |m: f64, &x| {
        if x.is_nan() {
            f64::INFINITY
        } else {
            m.max(x.abs())
        }
    })
}

/// `a`'s rows into `packed` in panels of `rows`: panel `i` is every column's `rows` values
/// of rows `rows i..`, one row a lane; lanes past the last row are zero.
fn pack_rows(a: ArrayView2<'_, f64>, rows: usize, packed: &mut [f64]) {
    let k = a.ncols();
    for (panel_rows, panel) in a
        .axis_chunks_iter(Axis(0), rows)
        .zip(packed.chunks_exact_mut(k * rows))
    {
        for (lane, row) in panel_rows.rows().into_iter().enumerate() {
            for (d, &x) in row.iter().enumerate() {
                panel[d * rows + lane] = x;
            }
        }
    }
}

/// A thread's working memory, reused from call to call. Every buffer starts on a cache
/// line, so that a panel's row of lanes (64 or 128 bytes) is whole lines: a vector load that
/// straddled two lines would cost two.
#[derive(Default)]
pub(super) struct Scratch {
    /// The block's queries: panel-major, each column of `q` in a panel's lanes.
    q: Lines,
    /// One panel's scores, then weights, for one block of keys: key-major, a panel's lanes.
    p: Lines,
    /// The accumulators: panel-major, each `d_v` (padded) rows of a panel's lanes.
    acc: Lines,
    /// Running max and running sum: a panel's lanes each.
    max: Lines,
    sum: Lines,
}

/// A buffer of `f64` on whole cache lines.
#[derive(Default)]
struct Lines(Vec<Line>);

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f64; 8]);

impl Lines {
    /// The first `len` values, all set to `value`; the buffer grows if it is shorter.
    fn fill(&mut self, len: usize, value: f64) -> &mut [f64] {
        let lines = len.div_ceil(8);
        if self.0.len() < lines {
            self.0.resize(lines, Line([0.0; 8]));
        }
        // SAFETY: a Line is 8 f64 and nothing else (repr(C), 64 bytes), so `lines` Lines
        // are `8 lines` f64 in a row.
        let values =
            unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<f64>(), lines * 8) };
        values[..len].fill(value);
        &mut values[..len]
    }
}

/// A mask, and what it does to each block of scores the kernel meets (panels of `rows`
/// queries by blocks of keys), found once per call for every head.
pub(super) struct MaskBlocks<'m> {
    mask: &'m Mask,
    rows: usize,
    key_block: usize,
    key_blocks: usize,
    kinds: Vec<Block>,
}

impl MaskBlocks<'_> {
    /// Sorts the blocks of `mask` (queries x keys) for panels of `rows` queries and blocks
    /// of `key_block` keys (rounded as [`attend`] rounds it), the panels shared among up to
    /// `threads` threads.
    pub(super) fn new(
        mask: &Mask,
        rows: usize,
        key_block: usize,
        threads: usize,
    ) -> MaskBlocks<'_> {
        let (queries, keys) = mask.additive().dim();
        let key_block = key_block.clamp(1, keys.max(1)).next_multiple_of(COLS);
        let key_blocks = keys.div_ceil(key_block);
        let mut kinds = vec![Block::Open; queries.div_ceil(rows) * key_blocks];
        let per = kinds.len().div_ceil(threads.max(1)).max(1);
        std::thread::scope(|scope| {
            for (i, part) in kinds.chunks_mut(per).enumerate() {
                scope.spawn(move || {
                    for (j, kind) in part.iter_mut().enumerate() {
                        let (panel, block) =
                            ((i * per + j) / key_blocks, (i * per + j) % key_blocks);
                        let panel_rows = panel * rows..queries.min((panel + 1) * rows);
                        let cols = block * key_block..keys.min((block + 1) * key_block);
                        *kind = mask.block(panel_rows, cols);
                    }
                });
            }
        });
        MaskBlocks {
            mask,
            rows,
            key_block,
            key_blocks,
            kinds,
        }
    }

    fn kind(&self, row: usize, start: usize) -> Block {
        self.kinds[row / self.rows * self.key_blocks + start / self.key_block]
    }
}

/// Where the query rows' mask comes from: the mask's blocks, and the index of the block's
/// first row (a multiple of the panel's rows).
pub(super) type BlockMask<'m> = Option<(&'m MaskBlocks<'m>, usize)>;

/// One head's `z` for the query rows `q` (row `i` of `z` for row `i` of `q`), by the online
/// softmax over blocks of `key_block` keys (rounded up to a multiple of [`COLS`]), on the
/// vector path `simd` (resolved; the mask's blocks were sorted for its panels).
#[allow(clippy::too_many_arguments)]
pub(super) fn attend(
    simd: Simd,
    q: ArrayView2<'_, f64>,
    head: &PackedHead,
    softmax: Softmax,
    mask: BlockMask<'_>,
    key_block: usize,
    scratch: &mut Scratch,
    z: ArrayViewMut2<'_, f64>,
) {
    let call = Attend {
        q,
        head,
        softmax,
        mask,
        key_block,
        scratch,
        z,
    };
    dispatch(simd, call);
}

/// [`attend`]'s arguments, as the work [`dispatch`] runs.
struct Attend<'a, 'm> {
    q: ArrayView2<'a, f64>,
    head: &'a PackedHead,
    softmax: Softmax,
    mask: BlockMask<'m>,
    key_block: usize,
    scratch: &'a mut Scratch,
    z: ArrayViewMut2<'a, f64>,
}

impl Kernel for Attend<'_, '_> {
    type Out = ();

    #[inline(always)]
    fn run<S: Lanes>(self, s: S) {
        let Attend {
            q,
            head,
            softmax,
            mask,
            key_block,
            scratch,
            z,
        } = self;
        attend_with(s, q, head, softmax, mask, key_block, scratch, z);
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_with<S: Lanes>(
    s: S,
    q: ArrayView2<'_, f64>,
    head: &PackedHead,
    softmax: Softmax,
    mask: BlockMask<'_>,
    key_block: usize,
    scratch: &mut Scratch,
    mut z: ArrayViewMut2<'_, f64>,
) {
    let (rows, d_k, n_keys, d_v) = (q.nrows(), q.ncols(), head.values.rows(), head.values.cols());
    if n_keys == 0 {
        // No keys: the weights have no columns and `weights V` is all zeros.
        z.fill(0.0);
        return;
    }
    let panels = rows.div_ceil(S::ROWS);
    let width = d_v.div_ceil(COLS) * COLS;
    let key_block = match mask {
        Some((blocks, _)) => blocks.key_block,
        None => key_block.clamp(1, n_keys).next_multiple_of(COLS),
    };
    let packed_q = scratch.q.fill(panels * d_k * S::ROWS, 0.0);
    pack_rows(q, S::ROWS, packed_q);
    let q_bounds: Vec<f64> = match mask {
        Some(_) => packed_q
            .chunks_exact(d_k * S::ROWS)
            .map(|panel| magnitude(panel.iter()))
            .collect(),
        None => Vec::new(),
    };
    let p = scratch.p.fill(key_block * S::ROWS, 0.0);
    let acc = scratch.acc.fill(panels * width * S::ROWS, 0.0);
    let max = scratch.max.fill(panels * S::ROWS, f64::NEG_INFINITY);
    let sum = scratch.sum.fill(panels * S::ROWS, 0.0);
    // d_k = 0: every score is an empty sum, 0 (the scale would be inf).
    let scale = if d_k == 0 {
        0.0
    } else {
        1.0 / (d_k as f64).sqrt()
    };
    for start in (0..n_keys).step_by(key_block) {
        let count = key_block.min(n_keys - start);
        for panel in 0..panels {
            let q_panel = &packed_q[panel * d_k * S::ROWS..(panel + 1) * d_k * S::ROWS];
            let live = S::ROWS.min(rows - panel * S::ROWS);
            let kind = mask.map(|(blocks, first)| {
                let at = first + panel * S::ROWS;
                (blocks.mask, at, blocks.kind(at, start))
            });
            if let Some((_, _, Block::Blocked)) = kind {
                if head.skippable(q_bounds[panel], scale, start, count) {
                    continue;
                }
            }
            let block_max = scores(s, q_panel, &head.keys, start, count, scale, p);
            let block_max = match kind {
                None | Some((_, _, Block::Open)) => Some(block_max),
                Some((mask, at, _)) => {
                    mask.apply_lanes(
                        &mut p[..count * S::ROWS],
                        S::ROWS,
                        (at, live),
                        (start, count),
                    );
                    None
                }
            };
            let lanes = panel * S::ROWS..(panel + 1) * S::ROWS;
            let acc = &mut acc[panel * width * S::ROWS..(panel + 1) * width * S::ROWS];
            let p = &mut p[..count * S::ROWS];
            online_softmax(
                s,
                p,
                block_max,
                &mut max[lanes.clone()],
                &mut sum[lanes],
                acc,
            );
            weights_times_values(s, p, &head.values, start, acc);
        }
    }
    for (i, mut z_row) in z.rows_mut().into_iter().enumerate() {
        let (panel, lane) = (i / S::ROWS, i % S::ROWS);
        let (m, l) = (max[i], sum[i]);
        let acc = &acc[panel * width * S::ROWS + lane..];
        // Every key blocked: zero weights where the softmax gives 0 / 0, as the full path
        // does; `acc` is then those weights times V (zeros, or NaN where V holds NaN or inf).
        let blocked = mask.is_some() && m == f64::NEG_INFINITY;
        for (c, z) in z_row.iter_mut().enumerate() {
            let a = acc[c * S::ROWS];
            *z = if blocked { a } else { a / l };
        }
        if softmax == Softmax::Naive && !blocked {
            naive_edges(m, l, z_row.view_mut());
        }
    }
}

/// `p` = one panel's scores over `count` keys, key-major: `q_panel` (`d_k` rows of
/// a panel's lanes) times the key panels from `keys`, times `scale`. Returns the largest score of
/// each lane (NaN if one is NaN), so that an unmasked block needs no pass to find it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn scores<S: Lanes>(
    s: S,
    q_panel: &[f64],
    keys: &Panels,
    start: usize,
    count: usize,
    scale: f64,
    p: &mut [f64],
) -> [S::V; VECS] {
    let d_k = keys.rows();
    let scale = s.splat(scale);
    let mut max = [s.splat(f64::NEG_INFINITY); VECS];
    for first in (0..count).step_by(COLS) {
        let tile = tile(s, d_k, q_panel, keys.panel((start + first) / COLS, 0));
        for (j, column) in tile.iter().enumerate().take(count - first) {
            for r in 0..VECS {
                let scores = s.mul(column[r], scale);
                max[r] = s.max(max[r], scores);
                // SAFETY: p holds key_block >= count keys of S::ROWS lanes.
                unsafe {
                    s.store(
                        p[(first + j) * S::ROWS + S::WIDTH * r..].as_mut_ptr(),
                        scores,
                    )
                };
            }
        }
    }
    max
}

/// `acc += weights V` for one panel: `p` holds the weights of keys `start..`, key-major.
#[inline(always)]
fn weights_times_values<S: Lanes>(s: S, p: &[f64], values: &Panels, start: usize, acc: &mut [f64]) {
    let count = p.len() / S::ROWS;
    for (t, acc) in acc.chunks_exact_mut(COLS * S::ROWS).enumerate() {
        let tile = tile(s, count, p, values.panel(t, start));
        for (j, column) in tile.iter().enumerate() {
            for (r, &sum) in column.iter().enumerate() {
                let at = acc[j * S::ROWS + S::WIDTH * r..].as_mut_ptr();
                // SAFETY: acc holds COLS columns of S::ROWS lanes.
                unsafe { s.store(at, s.add(s.load(at), sum)) };
            }
        }
    }
}

/// One block of the online softmax for one panel, on whole vectors: raises the running max
/// over the block's scores (`block_max`, when the scores were not changed since it was
/// found), turns them into `exp(score - max)`, and rescales the running sum and the
/// accumulators by `exp(old max - new max)`. Both lane groups go side by side, so that two
/// independent exponentials are always in flight.
#[inline(always)]
fn online_softmax<S: Lanes>(
    s: S,
    p: &mut [f64],
    block_max: Option<[S::V; VECS]>,
    max: &mut [f64],
    sum: &mut [f64],
    acc: &mut [f64],
) {
    let (mut old, mut new, mut shift) = (
        [s.splat(0.0); VECS],
        [s.splat(0.0); VECS],
        [s.splat(0.0); VECS],
    );
    // max and sum hold S::ROWS lanes, and p and acc whole rows of S::ROWS lanes: each load
    // and store below reads or writes one vector (lanes WIDTH r.. of S::ROWS) inside them.
    for r in 0..VECS {
        // SAFETY: lanes WIDTH r.. of max, inside its S::ROWS.
        old[r] = unsafe { s.load(max[S::WIDTH * r..].as_ptr()) };
        new[r] = old[r];
    }
    match block_max {
        Some(block) => {
            for r in 0..VECS {
                new[r] = s.max(new[r], block[r]);
            }
        }
        None => {
            for scores in p.chunks_exact(S::ROWS) {
                for r in 0..VECS {
                    // SAFETY: lanes WIDTH r.. of one row of p, inside its S::ROWS.
                    new[r] = s.max(new[r], unsafe { s.load(scores[S::WIDTH * r..].as_ptr()) });
                }
            }
        }
    }
    for r in 0..VECS {
        // A row whose scores are all -inf so far adds nothing yet (as masked keys will).
        shift[r] = s.mul(s.zero_neg_infinity(new[r]), s.splat(-1.0));
    }
    let mut block_sum = [s.splat(0.0); VECS];
    for scores in p.chunks_exact_mut(S::ROWS) {
        for r in 0..VECS {
            let at = scores[S::WIDTH * r..].as_mut_ptr();
            // SAFETY: `at` is lanes WIDTH r.. of one row of p, inside its S::ROWS.
            let e = exp(s, s.add(unsafe { s.load(at) }, shift[r]));
            // SAFETY: as for the load above.
            unsafe { s.store(at, e) };
            block_sum[r] = s.add(block_sum[r], e);
        }
    }
    let mut rescale = [s.splat(0.0); VECS];
    for r in 0..VECS {
        rescale[r] = exp(s, s.add(old[r], shift[r]));
        // SAFETY: lanes WIDTH r.. of sum, inside its S::ROWS.
        let l = unsafe { s.load(sum[S::WIDTH * r..].as_ptr()) };
        // SAFETY: the same lanes of sum.
        unsafe {
            s.store(
                sum[S::WIDTH * r..].as_mut_ptr(),
                s.fma(l, rescale[r], block_sum[r]),
            )
        };
        // SAFETY: lanes WIDTH r.. of max, inside its S::ROWS.
        unsafe { s.store(max[S::WIDTH * r..].as_mut_ptr(), new[r]) };
    }
    for column in acc.chunks_exact_mut(S::ROWS) {
        for r in 0..VECS {
            let at = column[S::WIDTH * r..].as_mut_ptr();
            // SAFETY: `at` is lanes WIDTH r.. of one column of acc, inside its S::ROWS.
            unsafe { s.store(at, s.mul(s.load(at), rescale[r])) };
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
