//! Times one forward pass of a multi-head layer, for `scripts/bench_attention.py` and for
//! peak-memory runs under `/usr/bin/time -v`.
//!
//! `cargo run --release --example attention_forward -- PATH N D H [RUNS]`, PATH being
//! `streaming` (`MultiHead::forward` with `Attend::streaming`), `streaming-causal` (the same
//! under `Mask::causal`, made before the timed passes), `head` (the layer's first head,
//! streamed) or `full` (`MultiHead::forward` with `Attend::new()`, every intermediate kept). The inputs are NumPy's: `np.random.seed(0); x = np.random.rand(N, D)`,
//! then W_Q, W_K, W_V, W_O each `np.random.rand(D, D) / D`. Prints one JSON line with the
//! median and every run's time in milliseconds, after one pass untimed.

use std::process::ExitCode;
use std::time::Instant;

use attention_lab::prelude::*;

mod inputs;
use inputs::inputs;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("attention_forward: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<String, String> {
    let usage = "usage: attention_forward streaming|streaming-causal|head|full N D H [RUNS]";
    let (path, numbers) = args.split_first().ok_or(usage)?;
    let numbers: Vec<usize> = numbers
        .iter()
        .map(|a| {
            a.parse()
                .map_err(|_| format!("{a:?} is not a count; {usage}"))
        })
        .collect::<Result<_, _>>()?;
    let (n, d, h, runs) = match numbers[..] {
        [n, d, h] => (n, d, h, 1),
        [n, d, h, runs] => (n, d, h, runs.max(1)),
        _ => return Err(usage.to_string()),
    };
    let (x, layer) = inputs(n, d, h)?;
    // Built only for the path that uses it (at N = 16384 it is 2 GiB).
    let causal = if path == "streaming-causal" {
        Mask::causal(n)
    } else {
        Mask::causal(0)
    };
    let mut times = Vec::with_capacity(runs);
    let mut check = 0.0;
    // One pass untimed first, as the Python side warms up: the first one alone meets fresh
    // pages and cold caches.
    for run in 0..=runs {
        let start = Instant::now();
        let out = match path.as_str() {
            "streaming" => layer.forward(&x, &Attend::new().streaming(streaming())),
            "streaming-causal" => {
                layer.forward(&x, &Attend::new().mask(&causal).streaming(streaming()))
            }
            "head" => layer.heads()[0].forward(&x, &Attend::new().streaming(streaming())),
            "full" => layer
                .forward(&x, &Attend::new())
                .map(|o| o.result().clone()),
            other => return Err(format!("unknown path {other:?}; {usage}")),
        }
        .map_err(|e| e.to_string())?;
        if run > 0 {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        check = out.sum();
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let all: Vec<String> = times.iter().map(|t| format!("{t:.3}")).collect();
    Ok(format!(
        "{{\"path\": \"{path}\", \"n\": {n}, \"d\": {d}, \"h\": {h}, \"median_ms\": {median:.3}, \"runs_ms\": [{}], \"sum\": {check:e}}}",
        all.join(", ")
    ))
}

/// Block sizes and threads from `QUERY_BLOCK`, `KEY_BLOCK` and `THREADS` when set (for tuning).
fn streaming() -> Streaming {
    let read = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let d = Streaming::default();
    Streaming {
        query_block: read("QUERY_BLOCK", d.query_block),
        key_block: read("KEY_BLOCK", d.key_block),
        threads: read("THREADS", d.threads),
        ..d
    }
}
