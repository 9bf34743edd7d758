//! The streaming engine behind every streamed call ([`Attend::streaming`](crate::layers::attend::Attend::streaming)):
//! every head's Q, K and V from one fused projection, a plan of where each head's columns
//! sit, and the units (one head over one block of query rows) handed out to the threads,
//! each running the fused kernel, then the concatenation times W_O.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ndarray::{s, Array1, Array2, ArrayView2, ArrayViewMut2, Axis};

use super::kernel::{self, MaskBlocks, PackedHead, Scratch};
use super::Streaming;
use crate::error::AttentionError;
use crate::layers::heads::{Head, MultiHead};
use crate::layers::mask::Mask;
use crate::layers::softmax::Softmax;

/// Where one head's Q, K and V sit among the columns of the fused projection.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadCols {
    pub(super) q: usize,
    pub(super) k: usize,
    pub(super) v: usize,
    pub(super) d_k: usize,
    pub(super) d_v: usize,
    pub(super) softmax: Softmax,
}

/// The heads' column ranges, the total width of their values (the concatenation), the
/// mask every head applies and the output bias.
pub(super) struct Plan<'m> {
    pub(super) heads: Vec<HeadCols>,
    pub(super) width: usize,
    pub(super) mask: Option<&'m Mask>,
    pub(super) bo: Option<&'m Array1<f64>>,
}

/// The heads of a streamed call, with W_O and b_O for a layer.
#[derive(Clone, Copy)]
pub(crate) struct Layer<'l> {
    heads: &'l [Head],
    wo: Option<&'l Array2<f64>>,
    bo: Option<&'l Array1<f64>>,
    // Errors name head i as `first + i`; a lone head goes unnumbered.
    first: Option<usize>,
    // The call's softmax, in place of each head's own.
    softmax: Option<Softmax>,
}

impl<'l> Layer<'l> {
    /// One head on its own.
    pub(crate) fn head(head: &'l Head, softmax: Option<Softmax>) -> Layer<'l> {
        let heads = std::slice::from_ref(head);
        Layer {
            heads,
            wo: None,
            bo: None,
            first: None,
            softmax,
        }
    }

    /// A multi-head layer.
    pub(crate) fn of(layer: &'l MultiHead, softmax: Option<Softmax>) -> Layer<'l> {
        Layer {
            heads: layer.heads(),
            wo: layer.wo(),
            bo: layer.bo(),
            first: Some(1),
            softmax,
        }
    }
}

/// The streamed result of `layer` with queries from `inputs[0]`, keys from `inputs[1]` and
/// values from `inputs[2]` (X three times in self-attention).
pub(crate) fn forward(
    layer: Layer<'_>,
    inputs: [ArrayView2<'_, f64>; 3],
    mask: Option<&Mask>,
    streaming: Streaming,
) -> Result<Array2<f64>, AttentionError> {
    let Layer {
        heads,
        wo,
        bo,
        first,
        softmax,
    } = layer;
    let [x, key, value] = inputs;
    // In the order the full path meets them: head 1's inputs, the mask, the other heads.
    for (i, head) in heads.iter().enumerate() {
        head.check_inputs(inputs, first.map(|first| first + i))?;
        if let (0, Some(mask)) = (i, mask) {
            mask.check(x.nrows(), key.nrows())?;
        }
    }
    // The projections, Q K^T, weights V and W_O.
    let (d_q, d_kv, d_v) = (
        heads.iter().map(|h| h.wq().ncols()).sum::<usize>(),
        heads.iter().map(|h| h.wk().ncols()).sum::<usize>(),
        heads.iter().map(|h| h.wv().ncols()).sum::<usize>(),
    );
    // In f64, which no shape overflows; `as` saturates.
    let [n, m, d, e] = [x.nrows(), key.nrows(), x.ncols(), key.ncols()].map(|s| s as f64);
    let [d_q, d_kv, d_v, f] = [d_q, d_kv, d_v, value.ncols()].map(|s| s as f64);
    let w_o = wo.map_or(0.0, |wo| wo.len() as f64);
    let work = (n * d * d_q + m * (e * d_kv + f * d_v) + n * m * (d_kv + d_v) + n * w_o) as usize;
    let streaming = streaming.resolved(work)?;
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
            softmax: softmax.unwrap_or(h.softmax()),
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

/// `out = x [w_1 | w_2 | ..]` on the call's vector path, its columns shared among the threads.
fn product(
    x: ArrayView2<'_, f64>,
    ws: &[ArrayView2<'_, f64>],
    out: ArrayViewMut2<'_, f64>,
    streaming: Streaming,
) {
    let n: usize = ws.iter().map(|w| w.ncols()).sum();
    // Small products stay on the calling thread: a thread costs more than it saves.
    let work = x.nrows().saturating_mul(x.ncols()).saturating_mul(n);
    let threads = if work < crate::fast::parallel::MIN_WORK {
        1
    } else {
        streaming.threads_for(n.div_ceil(64))
    };
    crate::fast::gemm::product(streaming.simd, x, ws, out, threads);
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
/// with `wo`). `q`, `k` and `v` hold the heads' columns where `plan` says; `streaming` is
/// [`resolved`](Streaming::resolved).
pub(super) fn run(
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
                plan.mask.is_some(),
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
    let rows = crate::fast::gemm::rows(streaming.simd);
    let query_block = n.div_ceil(blocks).max(1).next_multiple_of(rows);
    let mask_blocks = plan
        .mask
        .map(|mask| MaskBlocks::new(mask, rows, streaming.key_block, threads));
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
            streaming.simd,
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
