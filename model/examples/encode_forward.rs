//! Times forward passes of the installed model (all-MiniLM-L6-v2) on one sentence of N
//! tokens, for `scripts/bench_model.py` and for peak-memory runs under `/usr/bin/time -v`.
//!
//! `cargo run --release -p attention-lab-model --example encode_forward -- MODE N [RUNS]`,
//! MODE being `full` (`Encoder::forward`: every intermediate, in new arrays each pass),
//! `full-reused` (`Encoder::forward_with`, `Keep::Everything`, into the same
//! `EncoderBuffers` every pass), `weights` (`Keep::Weights`: every head's weights and the
//! last hidden state) or `hidden` (`Keep::LastHiddenState`). Threads: as many as the process
//! may use (`taskset -c 0` for one). Prints one JSON line with the median and every run's time
//! in milliseconds, after three passes untimed.
//!
//! Built with `RUSTFLAGS="--cfg baseline"`, only `full` (for timing an older commit, before
//! `forward_with`).

use std::process::ExitCode;
use std::time::Instant;

#[cfg(not(baseline))]
use attention_lab::prelude::{Encode, EncoderBuffers, Keep};
use attention_lab_model::Model;

#[path = "../benches/common/mod.rs"]
mod common;
use common::sentence_ids;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("encode_forward: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<String, String> {
    let usage = "usage: encode_forward full|full-reused|weights|hidden N [RUNS]";
    let [mode, n, rest @ ..] = args else {
        return Err(usage.to_string());
    };
    let n: usize = n
        .parse()
        .map_err(|_| format!("{n:?} is not a count; {usage}"))?;
    let runs: usize = match rest {
        [] => 10,
        [r] => r
            .parse()
            .map_err(|_| format!("{r:?} is not a count; {usage}"))?,
        _ => return Err(usage.to_string()),
    };
    let model = Model::installed().map_err(|e| e.to_string())?;
    let ids = sentence_ids(&model, n);
    let encoder = model.encoder();
    #[cfg(not(baseline))]
    let mut buffers = EncoderBuffers::default();
    // The peak from here on (VmHWM reset, where Linux allows it): the passes', not the
    // loading's, whose F32 tensors are gone by now.
    let loaded_mib = status_mib("VmRSS:");
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let mut times = Vec::with_capacity(runs);
    let mut check = 0.0;
    for run in 0..runs + 3 {
        let start = Instant::now();
        let last = match mode.as_str() {
            "full" => encoder
                .forward(&ids)
                .map(|out| out.last_hidden_state()[[0, 0]]),
            #[cfg(not(baseline))]
            "full-reused" | "weights" | "hidden" => {
                let keep = match mode.as_str() {
                    "full-reused" => Keep::Everything,
                    "weights" => Keep::Weights,
                    _ => Keep::LastHiddenState,
                };
                encoder
                    .forward_with(&ids, &Encode::new().keep(keep), &mut buffers)
                    .map(|kept| kept.last_hidden_state()[[0, 0]])
            }
            other => return Err(format!("unknown mode {other:?}; {usage}")),
        }
        .map_err(|e| e.to_string())?;
        if run >= 3 {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        check = last;
    }
    let passes_peak_mib = status_mib("VmHWM:");
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let runs_ms: Vec<String> = times.iter().map(|t| format!("{t:.3}")).collect();
    Ok(format!(
        "{{\"mode\": \"{mode}\", \"tokens\": {}, \"median_ms\": {median:.3}, \"check\": {check:e}, \"loaded_mib\": {loaded_mib:.1}, \"passes_peak_mib\": {passes_peak_mib:.1}, \"runs_ms\": [{}]}}",
        ids.len(),
        runs_ms.join(", ")
    ))
}

/// A memory figure of /proc/self/status (`VmRSS:`, `VmHWM:`) in MiB, 0 where it is missing.
fn status_mib(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}
