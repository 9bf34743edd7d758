//! Generation before and after the lean step (issue 44, point 6): 64 tokens of notebook 009's
//! small decoder (vocabulary 32, width 16, 4 query heads of 4 sharing 2 key/value heads, 2
//! blocks, SwiGLU 32 wide), from 009's prompt, greedy and sampled. "teaching" is today's
//! `Decoder::generation` taken 64 times (every intermediate kept, RoPE tables and masks made
//! per layer: what `generate` ran before); "lean" is `Decoder::generate` (63 lean steps: the
//! last token needs none); "lean steps" is `Decoder::generation_with(.., Keep::LastHiddenState)`
//! taken 64 times (as many passes as "teaching"). They take turns, round after round, in one
//! process, so that a busy machine slows all alike; the medians of the rounds (each the mean
//! of 50 calls) are printed, and the ids of all are checked equal first.
//!
//! `cargo bench -p attention-lab --features decoder --bench generation` (`-- 51` for more
//! rounds).

use std::time::{Duration, Instant};

use attention_lab::prelude::*;

/// 009's `weights`: normal draws scaled by 1/sqrt(rows).
fn weights(rs: &mut RandomState, rows: usize, cols: usize) -> Array2<f64> {
    rs.randn((rows, cols)).expect("a small matrix") / (rows as f64).sqrt()
}

/// 009's `small_decoder(2, None)`, draw for draw.
fn small_decoder() -> Result<Decoder, AttentionError> {
    let (vocab, e, heads, kv_heads, d, ffn) = (32, 16, 4, 2, 4, 32);
    let mut rs = RandomState::new(2026);
    let norm = || RmsNorm::new(Array1::ones(e), 1e-6).map(Norm::Rms);
    let mut blocks = Vec::new();
    for _ in 0..2 {
        let (wq, wk) = (
            weights(&mut rs, e, heads * d),
            weights(&mut rs, e, kv_heads * d),
        );
        let (wv, wo) = (
            weights(&mut rs, e, kv_heads * d),
            weights(&mut rs, heads * d, e),
        );
        let rope = Rope::new(d, 10000.0)?;
        let attention = GroupedAttention::new(wq, wk, wv, wo, heads, kv_heads, rope)?;
        let (w_gate, w_up, w_down) = (
            weights(&mut rs, e, ffn),
            weights(&mut rs, e, ffn),
            weights(&mut rs, ffn, e),
        );
        let mlp = Mlp::SwiGlu(SwiGlu::new(w_gate, w_up, w_down)?);
        blocks.push(DecoderBlock::new(norm()?, attention, norm()?, mlp)?);
    }
    let embed: Array2<f64> = rs.randn((vocab, e)).expect("a small matrix");
    Decoder::new(embed, blocks, norm()?, LmHead::Tied)
}

/// Today's path: the teaching iterator, every step's intermediates built and dropped.
fn teaching(decoder: &Decoder, prompt: &[usize], n: usize, sampling: Sampling) -> Vec<usize> {
    let (_, steps) = decoder.generation(prompt, sampling).expect("009's prompt");
    steps
        .take(n)
        .map(|s| s.expect("ids from the vocabulary").id)
        .collect()
}

/// `Decoder::generate`: lean steps, and no step for the last token (nothing reads its logits).
fn lean(decoder: &Decoder, prompt: &[usize], n: usize, sampling: Sampling) -> Vec<usize> {
    decoder.generate(prompt, n, sampling).expect("009's prompt")
}

/// The lean iterator, step for step as many passes as the teaching one.
fn lean_steps(decoder: &Decoder, prompt: &[usize], n: usize, sampling: Sampling) -> Vec<usize> {
    let (_, steps) = decoder
        .generation_with(prompt, sampling, Keep::LastHiddenState)
        .expect("009's prompt");
    steps
        .take(n)
        .map(|s| s.expect("ids from the vocabulary").id)
        .collect()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    // cargo bench passes `--bench`; a bare number is the rounds.
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(31);
    let decoder = small_decoder().expect("009's decoder");
    let prompt = [3, 17, 8, 25, 11];
    let n = 64;
    let samplings = [
        ("greedy", Sampling::Greedy),
        (
            "sampled",
            Sampling::Sample {
                temperature: 0.8,
                top_k: Some(5),
                seed: 7,
            },
        ),
    ];
    type Path = fn(&Decoder, &[usize], usize, Sampling) -> Vec<usize>;
    let paths: [(&str, Path); 3] = [
        ("teaching", teaching),
        ("lean", lean),
        ("lean steps", lean_steps),
    ];
    println!("64 tokens of notebook 009's decoder, {rounds} rounds, the paths alternating");
    for (name, sampling) in samplings {
        let ids = teaching(&decoder, &prompt, n, sampling);
        for (path, run) in &paths[1..] {
            assert_eq!(ids, run(&decoder, &prompt, n, sampling), "{name}, {path}");
        }
        // Each batch of calls runs at least ~50 ms, so the clock's grain does not matter.
        let calls = 50;
        let mut times = [Vec::new(), Vec::new(), Vec::new()];
        for round in 0..rounds {
            // Each round in another order: every path goes first as often as the others.
            for k in 0..paths.len() {
                let i = (round + k) % paths.len();
                let start = Instant::now();
                for _ in 0..calls {
                    std::hint::black_box(paths[i].1(&decoder, &prompt, n, sampling));
                }
                times[i].push(start.elapsed() / calls);
            }
        }
        let [before, after, steps] = times.map(median);
        let us = |t: Duration| t.as_secs_f64() * 1e6;
        println!(
            "{name:>8}: teaching {:>7.1} us, lean {:>7.1} us ({:.2}x), lean steps {:>7.1} us ({:.2}x)",
            us(before),
            us(after),
            us(before) / us(after),
            us(steps),
            us(before) / us(steps),
        );
    }
}
