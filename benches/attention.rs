//! Forward pass of a multi-head layer: the streaming path on each vector path this CPU runs
//! (AVX-512, AVX2, portable) against the path that keeps every intermediate, plus this build's
//! dgemm rate (the GEMM-bound yardstick).
//!
//! `cargo bench --bench attention` (add `--features blas` for OpenBLAS's products); `scripts/bench_attention.py` runs it beside NumPy and PyTorch
//! and writes BENCHMARKS.md. Filter as criterion does: `-- attention/streaming-avx512/1024x512x8`.
#![allow(missing_docs, reason = "criterion_group! writes a pub fn without docs")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::time::Duration;

use attention_lab::prelude::*;
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};

#[path = "../examples/attention_forward/inputs.rs"]
mod inputs;

/// The forward pass's multiply-adds, times two: projections, Q K^T, weights V, W_O.
fn flops(n: usize, d: usize) -> u64 {
    let (n, d) = (n as u64, d as u64);
    4 * 2 * n * d * d + 2 * 2 * n * n * d
}

fn attention(c: &mut Criterion) {
    let mut group = c.benchmark_group("attention");
    group.sampling_mode(SamplingMode::Flat);
    for (n, d, h) in [(128, 64, 4), (1024, 512, 8), (4096, 512, 8)] {
        let (x, layer) = inputs::inputs(n, d, h).expect("benchmark shapes are valid");
        let size = format!("{n}x{d}x{h}");
        group.throughput(Throughput::Elements(flops(n, d)));
        group.sample_size(if n >= 4096 { 10 } else { 20 });
        group.measurement_time(Duration::from_secs(if n >= 1024 { 10 } else { 3 }));
        // Each vector path this CPU runs, side by side (`streaming-avx512`, ...).
        for simd in Simd::ALL
            .into_iter()
            .filter(|simd| simd.missing().is_none())
        {
            let streaming = Streaming {
                simd,
                ..Streaming::default()
            };
            let id = BenchmarkId::new(format!("streaming-{}", simd.name()), &size);
            group.bench_with_input(id, &x, |b, x| {
                b.iter(|| {
                    layer
                        .forward(x, &Attend::new().streaming(streaming))
                        .expect("shapes agree")
                })
            });
        }
        group.bench_with_input(BenchmarkId::new("full", &size), &x, |b, x| {
            b.iter(|| {
                layer
                    .forward(x, &Attend::new())
                    .expect("shapes agree")
                    .output
            })
        });
    }
    group.finish();
}

/// `a b` on one thread, as the streaming path calls its products: square 2048, and the shapes
/// of its blocks (256 queries by 64 columns by 256 keys, then by 64 value columns). ndarray's
/// product (matrixmultiply, or OpenBLAS with the `blas` feature). Ids are `backend/MxKxN`.
fn dgemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("dgemm");
    group.sample_size(10);
    for (m, k, n) in [(2048, 2048, 2048), (256, 64, 256), (256, 256, 64)] {
        let mut rs = np::RandomState::new(1);
        let mut draw = |rows: usize, cols: usize| -> Array2<f64> {
            rs.rand([rows, cols])
                .unwrap()
                .into_dimensionality()
                .unwrap()
        };
        let (a, b) = (draw(m, k), draw(k, n));
        let shape = format!("{m}x{k}x{n}");
        group.throughput(Throughput::Elements(2 * (m * k * n) as u64));
        group.bench_function(BenchmarkId::new("ndarray", &shape), |bench| {
            bench.iter(|| a.dot(&b))
        });
    }
    group.finish();
}

criterion_group!(benches, attention, dgemm);
criterion_main!(benches);
