//! Times SmolLM2-135M-Instruct (the Q4_1 GGUF file, `Llama::load`) as a student's kernel runs
//! it, for `scripts/bench_llm.py`: the load, the prefill of a fixed 128-token prompt, then 64
//! tokens picked greedily on the KV cache, and the process's memory along the way.
//!
//! ```sh
//! cargo run --release -p attention-lab-model --example llm_bench -- [MODEL.gguf] \
//!     [--runs R] [--new N] [--hold] [--drop-prefill] [--lean]
//! ```
//!
//! The model is the path given, else `$ATTENTION_LAB_SMOLLM`. Threads: as many as the process
//! may use (`taskset -c 0` for one). Each of the R runs (1 unless told) is a prefill of
//! [`PROMPT`] and N new tokens (64 unless told); the tokens per second of a run are over its
//! first to its N-th new token: N - 1 steps, each one token's pass on the cache and its pick.
//!
//! Prints one JSON line: the load's time, every run's prefill (ms), steps (ms), tokens per
//! second and new ids; the bytes of the first run's prefill output (every block's
//! intermediates and the last row's logits) and of its KV cache; and memory in KiB: `VmRSS`
//! before the load, after it and after the first run (its prefill's output and its cache
//! still held, as a notebook's variables would hold them), at each the fields of
//! `/proc/self/smaps_rollup` (`Rss`, `Pss`, `Pss_Anon`, `Pss_File`, `Private_Clean`,
//! `Private_Dirty`, `Anonymous`), and `VmHWM`, the peak, at the end. The weights are the
//! mapped file's pages, shared by every process that maps it: `Pss` and `Anonymous` say what
//! one more process costs.
//!
//! `--lean`: the lean steps (`Decoder::generation_with(.., Keep::LastHiddenState)`: RoPE tables
//! and the mask made once a step, no intermediate kept, the LM head on the last row) instead of
//! the teaching path's (`Decoder::generation`, every intermediate kept); the ids are the same
//! bit for bit (tests/generation_lean.rs). BENCHMARKS.md's lean generation step runs both in
//! turns. The prefill's output bytes are then the last row's logits only.
//!
//! `--drop-prefill`: each prefill's output is dropped once timed (a notebook that keeps only
//! the new ids), so the cache alone is held. `--hold`: once the line is printed, it waits
//! until its standard input closes, the last run's outputs still held (the bench's 30
//! students, whose memory is read from outside).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use attention_lab::prelude::{
    AttentionError, Decoder, DecoderKept, DecoderOutput, Generation, Keep, Sampling, Step,
};
use attention_lab_model::Llama;

/// 128 tokens of English prose, the same ids as `PROMPT` in scripts/bench_llm.py: SmolLM2's
/// tokenizer on "Attention lets every token of a sentence look at the tokens before it. ...
/// starting with the first layer." (`add_special_tokens=False`), cut to 128.
pub const PROMPT: [usize; 128] = [
    41319, 13144, 897, 9624, 282, 253, 6330, 1492, 418, 260, 17837, 1092, 357, 30, 3768, 1680,
    35864, 18795, 28, 8889, 284, 2396, 429, 260, 15893, 5390, 28, 7783, 971, 8520, 1523, 897, 1646,
    28, 10156, 260, 7783, 411, 260, 5222, 3752, 282, 260, 1680, 506, 8068, 28, 284, 6497, 601, 618,
    10379, 351, 253, 2375, 3831, 30, 378, 23436, 2028, 282, 260, 2396, 314, 260, 1680, 506, 3124,
    30, 330, 1789, 1743, 33291, 800, 715, 5466, 28, 971, 3922, 411, 253, 2645, 29, 10403, 3608, 28,
    284, 12927, 260, 1867, 9624, 506, 23377, 429, 260, 1596, 2548, 30, 533, 451, 5040, 392, 523,
    1066, 582, 6330, 738, 260, 1743, 28, 4070, 411, 4070, 28, 284, 1492, 418, 732, 971, 1680,
    48401, 288, 28, 4335, 351, 260, 808, 4070,
];

const USAGE: &str =
    "usage: llm_bench [MODEL.gguf] [--runs R] [--new N] [--hold] [--drop-prefill] [--lean] \
                     (the model: the path given, else $ATTENTION_LAB_SMOLLM)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("llm_bench: {message}");
            ExitCode::from(2)
        }
    }
}

struct Options {
    path: PathBuf,
    runs: usize,
    new: usize,
    hold: bool,
    drop_prefill: bool,
    lean: bool,
}

fn options(args: &[String]) -> Result<Options, String> {
    let (mut path, mut runs, mut new, mut hold, mut drop_prefill) = (None, 1, 64, false, false);
    let mut lean = false;
    let mut args = args.iter();
    let count = |flag: &str, value: Option<&String>| -> Result<usize, String> {
        value
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .ok_or_else(|| format!("{flag} wants a count above 0; {USAGE}"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => runs = count("--runs", args.next())?,
            "--new" => new = count("--new", args.next())?,
            "--hold" => hold = true,
            "--drop-prefill" => drop_prefill = true,
            "--lean" => lean = true,
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}; {USAGE}")),
            file if path.is_none() => path = Some(PathBuf::from(file)),
            _ => return Err(USAGE.to_string()),
        }
    }
    let path = path
        .or_else(|| std::env::var_os("ATTENTION_LAB_SMOLLM").map(PathBuf::from))
        .ok_or_else(|| format!("no model; {USAGE}"))?;
    Ok(Options {
        path,
        runs,
        new,
        hold,
        drop_prefill,
        lean,
    })
}

fn run(args: &[String]) -> Result<(), String> {
    let o = options(args)?;
    let before = Memory::now();
    let start = Instant::now();
    let model = Llama::load(&o.path).map_err(|e| e.to_string())?;
    let load_ms = ms(start);
    let loaded = Memory::now();
    let decoder = model.decoder();

    let mut runs = Vec::with_capacity(o.runs);
    let (mut generated, mut live) = (None, (0, 0));
    let mut held = None;
    for r in 0..o.runs {
        drop(held.take()); // the previous run's prefill output and cache
        let start = Instant::now();
        let Run {
            ids,
            at,
            prefill_ms,
            prefill_bytes,
            held: run_held,
        } = one_run(decoder, &o, start)?;
        let steps_ms: Vec<f64> = at
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64() * 1e3)
            .collect();
        let window = (at[at.len() - 1] - at[0]).as_secs_f64();
        let tokens_per_s = if window > 0.0 {
            (o.new - 1) as f64 / window
        } else {
            0.0
        };
        runs.push(format!(
            "{{\"prefill_ms\": {prefill_ms:.3}, \"tokens_per_s\": {tokens_per_s:.4}, \
             \"first_step_ms\": {:.3}, \"steps_ms\": [{}], \"ids\": [{}]}}",
            (at[0] - start).as_secs_f64() * 1e3 - prefill_ms,
            join(steps_ms.iter().map(|t| format!("{t:.3}"))),
            join(ids.iter().map(usize::to_string)),
        ));
        if r == 0 {
            generated = Some(Memory::now());
            live = (prefill_bytes, run_held.cache_bytes());
        }
        held = Some(run_held);
    }
    let peak_kib = status_kib("VmHWM:");
    let line = format!(
        "{{\"model\": {:?}, \"weight_bytes\": {}, \"parameters\": {}, \"threads\": {}, \
         \"prompt_tokens\": {}, \"new_tokens\": {}, \"load_ms\": {load_ms:.3}, \
         \"runs\": [{}], \"prefill_output_bytes\": {}, \"kv_cache_bytes\": {}, \
         \"memory_kib\": {{\"before_load\": {}, \"loaded\": {}, \"generated\": {}, \
         \"peak_rss\": {peak_kib}}}}}",
        o.path.display().to_string(),
        model.weight_bytes(),
        model.parameters(),
        std::thread::available_parallelism().map_or(1, usize::from),
        PROMPT.len(),
        o.new,
        runs.join(", "),
        live.0,
        live.1,
        before.json(),
        loaded.json(),
        generated.expect("one run at least").json(),
    );
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())?;
    drop(out);
    if o.hold {
        // Until the bench closes our standard input (or dies): the last run's prefill
        // output and KV cache stay alive meanwhile.
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    }
    drop(held);
    Ok(())
}

/// One run's prefill and new tokens, started at `start`: what `run` reports of it.
struct Run<'d> {
    ids: Vec<usize>,
    at: Vec<Instant>,
    prefill_ms: f64,
    prefill_bytes: usize,
    held: Held<'d>,
}

/// A prefill of [`PROMPT`] and `o.new` tokens, on the teaching path or (`--lean`) the lean steps.
fn one_run<'d>(decoder: &'d Decoder, o: &Options, start: Instant) -> Result<Run<'d>, String> {
    Ok(if o.lean {
        let (prefill, mut steps) = decoder
            .generation_with(&PROMPT, Sampling::Greedy, Keep::LastHiddenState)
            .map_err(|e| e.to_string())?;
        let prefill_ms = ms(start);
        let bytes = prefill.logits().map_or(0, |l| l.len()) * std::mem::size_of::<f64>();
        let (ids, at) = take(&mut steps, o.new)?;
        let prefill = (!o.drop_prefill).then_some(prefill);
        Run {
            ids,
            at,
            prefill_ms,
            prefill_bytes: bytes,
            held: Held::Lean {
                _prefill: prefill,
                steps,
            },
        }
    } else {
        let (prefill, mut steps) = decoder
            .generation(&PROMPT, Sampling::Greedy)
            .map_err(|e| e.to_string())?;
        let prefill_ms = ms(start);
        let bytes = output_bytes(&prefill);
        let (ids, at) = take(&mut steps, o.new)?;
        let prefill = (!o.drop_prefill).then_some(prefill);
        Run {
            ids,
            at,
            prefill_ms,
            prefill_bytes: bytes,
            held: Held::Teaching {
                _prefill: prefill,
                steps,
            },
        }
    })
}

/// A run's prefill output (unless dropped) and its generation, KV cache included: what a
/// notebook's variables would hold.
enum Held<'d> {
    Teaching {
        _prefill: Option<DecoderOutput>,
        steps: Generation<'d>,
    },
    Lean {
        _prefill: Option<DecoderKept>,
        steps: Generation<'d, DecoderKept>,
    },
}

impl Held<'_> {
    fn cache_bytes(&self) -> usize {
        match self {
            Held::Teaching { steps, .. } => steps.cache().bytes(),
            Held::Lean { steps, .. } => steps.cache().bytes(),
        }
    }
}

/// `new` tokens from `steps`: their ids, and when each one's pass was done.
fn take<K>(
    steps: &mut impl Iterator<Item = Result<Step<K>, AttentionError>>,
    new: usize,
) -> Result<(Vec<usize>, Vec<Instant>), String> {
    let mut ids = Vec::with_capacity(new);
    let mut at = Vec::with_capacity(new);
    for _ in 0..new {
        let step = steps
            .next()
            .ok_or("generation ended early")?
            .map_err(|e| e.to_string())?;
        at.push(Instant::now());
        ids.push(step.id);
    }
    Ok((ids, at))
}

/// The bytes of a pass's kept arrays: embeddings, every block's intermediates, the final
/// norm's output and the logits.
fn output_bytes(out: &DecoderOutput) -> usize {
    let blocks: usize = out
        .blocks
        .iter()
        .map(|b| {
            let a = &b.attention;
            a.q.len()
                + a.weights.iter().map(|w| w.len()).sum::<usize>()
                + a.z.len()
                + a.output.len()
                + b.hidden.len()
                + b.output.len()
        })
        .sum();
    (out.embedded.len() + blocks + out.hidden.len() + out.logits.len()) * std::mem::size_of::<f64>()
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn join(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

/// The process's memory at one moment, in KiB.
struct Memory {
    vm_rss: u64,
    /// `(field, KiB)` of /proc/self/smaps_rollup (empty where the kernel has none).
    rollup: Vec<(&'static str, u64)>,
}

const ROLLUP: [&str; 7] = [
    "Rss:",
    "Pss:",
    "Pss_Anon:",
    "Pss_File:",
    "Private_Clean:",
    "Private_Dirty:",
    "Anonymous:",
];

impl Memory {
    fn now() -> Memory {
        let text = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
        let rollup = ROLLUP
            .iter()
            .filter_map(|&key| field_kib(&text, key).map(|v| (key, v)))
            .collect();
        Memory {
            vm_rss: status_kib("VmRSS:"),
            rollup,
        }
    }

    fn json(&self) -> String {
        let mut fields = vec![format!("\"VmRSS\": {}", self.vm_rss)];
        for (key, v) in &self.rollup {
            fields.push(format!("\"{}\": {v}", key.trim_end_matches(':')));
        }
        format!("{{{}}}", fields.join(", "))
    }
}

/// A `key: N kB` line's N.
fn field_kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A figure of /proc/self/status (`VmRSS:`, `VmHWM:`) in KiB, 0 where it is missing.
fn status_kib(key: &str) -> u64 {
    field_kib(
        &std::fs::read_to_string("/proc/self/status").unwrap_or_default(),
        key,
    )
    .unwrap_or(0)
}
