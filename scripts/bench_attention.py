"""Times the f64 forward pass of a multi-head attention layer side by side in one run:
attention-lab's streaming path (and, with --baseline REV, the same path built at another
commit), its path that keeps every intermediate, NumPy in the seeds' vectorised form, and
PyTorch's nn.MultiheadAttention on the CPU with need_weights=False; on 1 and 2 threads, with
each run's peak memory. Then this machine's dgemm rate on the same threads (the best of NumPy
and PyTorch), which gives each figure's GEMM-bound time: the pass's floating-point work at that
rate. Names the CPU (model and vector flags, from /proc/cpuinfo) and PyTorch's BLAS.

On a CPU with AVX-512, the streaming path also runs with ATTENTION_LAB_SIMD=avx2 (its AVX2
path, as an AVX2-only CPU runs it), side by side in the same rounds.

Writes bench/attention-<cpu kind>.json and the block of BENCHMARKS.md between this CPU kind's
markers (one block per kind: a CPU model name, family and model number, and its widest vector
path), adding the block at the end of the section when the kind is new; other kinds' blocks
stay as they were measured.

Every implementation gets the same inputs: np.random.seed(0); x = rand(N, D), then W_Q, W_K,
W_V, W_O each rand(D, D) / D (the Rust side draws them with attention_lab::np::RandomState).
Each is timed in a process of its own (examples/attention_forward for Rust, this script with
--worker for Python), whose thread count is fixed before it starts; the implementations take
turns within each size, round after round (seven; one at N = 16384), a run or a few each, so that a slow
spell of the machine falls on all of them. Medians over every run of every round.

Run from the repository root (about 25 minutes; --sizes 128,1024,4096 --rounds 3, about 10):
    .venv/bin/python scripts/bench_attention.py [--baseline REV] [--quick] [--sizes N,..] [--rounds R]
"""
import argparse
import json
import math
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
D, H = 512, 8
# (N, D, H), the implementations run there, and runs per round (few, so that the
# implementations take turns often: this machine's speed drifts by 20% over tens of seconds).
SIZES = [
    ((128, 64, 4), ["streaming", "baseline", "full", "numpy", "torch"], 20),
    ((256, D, H), ["streaming", "baseline", "full", "numpy", "torch"], 5),
    ((1024, D, H), ["streaming", "baseline", "full", "numpy", "torch"], 2),
    ((4096, D, H), ["streaming", "baseline", "full", "numpy", "torch"], 1),
    ((16384, D, H), ["streaming", "baseline"], 1),
]
# The same layer under a causal mask, and one head of it.
EXTRA = [
    ((1024, D, H), ["streaming-causal", "torch-causal", "head"], 2),
    ((4096, D, H), ["streaming-causal", "torch-causal", "head"], 1),
]
THREADS = [1, 2]
# One block of BENCHMARKS.md per CPU kind, between these markers (the kind after "begin").
MARK_BEGIN = "<!-- bench_attention.py: begin {kind} -->"
MARK_END = "<!-- bench_attention.py: end {kind} -->"
# Where a new kind's block goes: before this line of BENCHMARKS.md.
NEW_KINDS_BEFORE = "<!-- bench_attention.py: new CPU kinds above -->"


def flops(path, n, d, h):
    """Multiply-adds times two: a layer's projections (4 N D^2) and Q K^T, weights V
    (2 N^2 D); a head's three projections (3 N D d_k) and its two products (2 N^2 d_k)."""
    if path == "head":
        dk = d // h
        return 2 * 3 * n * d * dk + 2 * 2 * n * n * dk
    return 4 * 2 * n * d * d + 2 * 2 * n * n * d


# ---- the Python side, in a process of its own -------------------------------------------


def inputs(n, d):
    import numpy as np

    rs = np.random.RandomState(0)
    x = rs.rand(n, d)
    ws = [rs.rand(d, d) / d for _ in range(4)]
    return x, ws


def numpy_forward(x, wq, wk, wv, wo, h):
    """The seeds' form: Q, K, V for all heads at once, split by columns, softmax per head."""
    import numpy as np

    q, k, v = x @ wq, x @ wk, x @ wv
    outs = []
    for idx in np.split(np.arange(wk.shape[1]), h):
        scores = q[:, idx] @ k[:, idx].T / np.sqrt(len(idx))
        e = np.exp(scores - np.max(scores, axis=1, keepdims=True))
        w = e / np.sum(e, axis=1, keepdims=True)
        outs.append(w @ v[:, idx])
    return np.concatenate(outs, axis=1) @ wo


def torch_layer(d, h, ws):
    import torch

    layer = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=torch.float64)
    wq, wk, wv, wo = (torch.from_numpy(w) for w in ws)
    with torch.no_grad():
        # PyTorch computes x @ W.T: its weights are ours transposed.
        layer.in_proj_weight.copy_(torch.cat([wq.T, wk.T, wv.T], dim=0))
        layer.out_proj.weight.copy_(wo.T)
    return layer


def rss_mib(field):
    """VmRSS (now) or VmHWM (peak) of this process, in MiB."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def worker(args):
    """Times one implementation; prints {"runs_ms", "peak_mib", "base_mib"} as JSON."""
    import numpy as np

    n, d, h, runs = args.n, args.d, args.h, args.runs
    x, ws = inputs(n, d)
    if args.worker == "numpy":
        run = lambda: numpy_forward(x, *ws, h)
    else:
        import torch

        torch.set_num_threads(args.threads)
        layer = torch_layer(d, h, ws)
        tx = torch.from_numpy(x).unsqueeze(0)
        mask = torch.nn.Transformer.generate_square_subsequent_mask(n, dtype=torch.float64) if args.worker == "torch-causal" else None
        with torch.inference_mode():
            got = layer(tx, tx, tx, need_weights=False, attn_mask=mask, is_causal=mask is not None)[0][0].numpy()
        if mask is None and n <= 4096:
            assert np.allclose(got, numpy_forward(x, *ws, h), rtol=1e-10, atol=1e-12), "PyTorch and NumPy disagree"

        def run():
            with torch.inference_mode():
                layer(tx, tx, tx, need_weights=False, attn_mask=mask, is_causal=mask is not None)

    base = rss_mib("VmRSS")
    run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({"runs_ms": times, "peak_mib": rss_mib("VmHWM"), "base_mib": base}))


def dgemm_worker(args):
    """The best dgemm rate of NumPy and of PyTorch at n = 1024 and 2048 (best of 7)."""
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    rates = {}
    for n in (1024, 2048):
        a, b = np.random.rand(n, n), np.random.rand(n, n)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        for name, fn in (("NumPy", lambda: a @ b), ("PyTorch", lambda: ta @ tb)):
            fn()
            best = min(timed(fn) for _ in range(7))
            rates[f"{name} n={n}"] = 2 * n**3 / best / 1e9
    print(json.dumps(rates))


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ---- the driver ---------------------------------------------------------------------------


def thread_env(threads):
    t = str(threads)
    return dict(os.environ, OPENBLAS_NUM_THREADS=t, OMP_NUM_THREADS=t, MKL_NUM_THREADS=t, THREADS=t)


def run_json(cmd, env):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def measure(impl, n, d, h, threads, runs, binaries):
    """One round of one implementation: (times in ms, peak MiB above the process's start)."""
    env = thread_env(threads)
    if impl in ("numpy", "torch", "torch-causal"):
        cmd = [sys.executable, __file__, "--worker", impl, "--n", str(n), "--d", str(d), "--h", str(h), "--threads", str(threads), "--runs", str(runs)]
        got, _ = run_json(cmd, env)
        return got["runs_ms"], got["peak_mib"] - got["base_mib"]
    binary = binaries["baseline" if impl == "baseline" else "current"]
    path = "streaming" if impl in ("baseline", "streaming-avx2") else impl
    if impl == "streaming-avx2":
        env = dict(env, ATTENTION_LAB_SIMD="avx2")
    # The baseline's example may time its first pass too (it did before it warmed up): one
    # more run, the first dropped.
    extra = 1 if impl == "baseline" else 0
    got, stderr = run_json(["/usr/bin/time", "-v", str(binary), path, str(n), str(d), str(h), str(runs + extra)], env)
    kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr).group(1))
    return got["runs_ms"][extra:], kib / 1024


def build_example(root, target):
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    subprocess.run(["cargo", "build", "--release", "--example", "attention_forward"], cwd=root, check=True, env=env)
    return pathlib.Path(target) / "release" / "examples" / "attention_forward"


def cpu():
    """Model, family and model number, vector flags and logical CPUs, from /proc/cpuinfo, and
    the kind of CPU they make (the key of its block in BENCHMARKS.md)."""
    text = pathlib.Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.*)$", text, re.M).group(1).strip()
    family = re.search(r"^cpu family\s*:\s*(\d+)", text, re.M)
    number = re.search(r"^model\s*:\s*(\d+)", text, re.M)
    flags = set(re.search(r"^flags\s*:\s*(.*)$", text, re.M).group(1).split())
    vector = sorted(f for f in flags if re.match(r"(sse4_2|avx|avx2|fma|avx512.*|amx.*)$", f))
    widest = "AVX-512" if "avx512f" in flags else "AVX2" if {"avx2", "fma"} <= flags else "no AVX2"
    family = int(family.group(1)) if family else None
    number = int(number.group(1)) if number else None
    return {
        "model": model,
        "family": family,
        "model_number": number,
        "logical_cpus": text.count("processor\t:"),
        "vector_flags": vector,
        "widest": widest,
        "kind": f"{model}, family {family} model {number}, {widest}",
    }


def slug(kind):
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")


def torch_config():
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__); print(torch.__config__.show())"], capture_output=True, text=True, check=True)
    version, _, config = out.stdout.partition("\n")
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    capability = re.search(r"CPU capability usage: (\w+)", config)
    return {"version": version.strip(), "blas": blas.group(1) if blas else "unknown", "cpu_capability": capability.group(1) if capability else "unknown", "config": config}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="also time the streaming path built at this commit")
    parser.add_argument("--rounds", type=int, default=7, help="rounds below N = 16384 (one there)")
    parser.add_argument("--quick", action="store_true", help="N = 256 and 1024 only, one round")
    parser.add_argument("--sizes", help="only these N, comma-separated (128 is the (128, 64, 4) layer)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--d", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--h", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "dgemm":
        return dgemm_worker(args)
    if args.worker:
        return worker(args)

    conditions = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git("rev-parse", "--short", "HEAD"),
        "cpu": cpu(),
        "torch": torch_config(),
        "numpy": subprocess.run([sys.executable, "-c", "import numpy; print(numpy.__version__)"], capture_output=True, text=True).stdout.strip(),
        "load_before": os.getloadavg()[0],
    }
    binaries = {"current": build_example(ROOT, os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))}
    with tempfile.TemporaryDirectory() as scratch:
        if args.baseline:
            # A fixed place, so that cargo reuses the last run's build of the same commit.
            tree = ROOT / "target" / "baseline-tree"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), args.baseline], cwd=ROOT, check=True)
            try:
                binaries["baseline"] = build_example(tree, ROOT / "target" / "baseline")
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)
            conditions["baseline"] = git("rev-parse", "--short", args.baseline)
        plan = SIZES + EXTRA
        if args.quick:
            plan = [p for p in plan if p[0][0] in (256, 1024)]
        if args.sizes:
            wanted = {int(n) for n in args.sizes.split(",")}
            plan = [p for p in plan if p[0][0] in wanted]
        if conditions["cpu"]["widest"] == "AVX-512":
            plan = [(size, [i for imp in impls for i in ([imp, "streaming-avx2"] if imp == "streaming" else [imp])], runs) for size, impls, runs in plan]
        rounds = 1 if args.quick else args.rounds
        rows = []
        for (n, d, h), impls, runs in plan:
            impls = [i for i in impls if i != "baseline" or args.baseline]
            for threads in THREADS:
                row = {"n": n, "d": d, "h": h, "threads": threads, "ms": {}, "runs_ms": {}, "mib": {}}
                for _ in range(1 if n >= 16384 else rounds):
                    for impl in impls:
                        if impl == "full" and 2 * h * n * n * 8 / 2**20 > 4096:
                            continue
                        print(f"== ({n}, {d}, {h}) {impl} on {threads} thread(s)", file=sys.stderr)
                        times, mib = measure(impl, n, d, h, threads, runs, binaries)
                        row["runs_ms"].setdefault(impl, []).extend(times)
                        row["mib"][impl] = max(row["mib"].get(impl, 0.0), mib)
                row["ms"] = {impl: statistics.median(times) for impl, times in row["runs_ms"].items()}
                print(json.dumps({k: row[k] for k in ("n", "threads", "ms", "mib")}), file=sys.stderr)
                rows.append(row)
    rates = {}
    for threads in THREADS:
        got, _ = run_json([sys.executable, __file__, "--worker", "dgemm", "--threads", str(threads)], thread_env(threads))
        rates[str(threads)] = got
    conditions["load_after"] = os.getloadavg()[0]
    result = {"conditions": conditions, "rows": rows, "dgemm_gflops": rates}
    out = ROOT / "bench" / f"attention-{slug(conditions['cpu']['kind'])}.json"
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False) as f:
        json.dump(result, f, indent=1)
    os.replace(f.name, out)
    write_report(result)


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def limit_gflops(result, threads):
    return max(result["dgemm_gflops"][str(threads)].values())


def write_report(result):
    c, rows = result["conditions"], result["rows"]
    cpu, torch = c["cpu"], c["torch"]
    base = f"`{c['baseline']}`" if c.get("baseline") else None
    kind = cpu.get("kind", "")
    avx2 = any("streaming-avx2" in row["ms"] for row in rows)
    lines = [
        MARK_BEGIN.format(kind=kind),
        "",
        f"### {kind}",
        "",
        f"Measured {c['date']} on `{c['commit']}`"
        + (f" (baseline: the streaming path at {base})" if base else "")
        + f", on **{cpu['model']}** (family {cpu['family']}, {cpu['logical_cpus']} logical CPUs; "
        f"vector flags: {', '.join(cpu['vector_flags'])}). PyTorch {torch['version']} (BLAS: "
        f"{torch['blas']}, CPU capability {torch['cpu_capability']}), NumPy {c['numpy']}; load average "
        f"{c['load_before']:.2f} before, {c['load_after']:.2f} after. Medians in ms over every run of every "
        "round; each implementation in a process of its own with its thread count fixed.",
        "",
        "The dgemm limit is the best of NumPy's and PyTorch's dgemm at n = 1024 and 2048 on the same "
        "threads; the bound is the pass's GFLOP at that rate.",
        "",
        "| threads | " + " | ".join(result["dgemm_gflops"]["1"].keys()) + " | limit (GFLOP/s) |",
        "|---|" + "---|" * (len(result["dgemm_gflops"]["1"]) + 1),
    ]
    for threads in THREADS:
        r = result["dgemm_gflops"][str(threads)]
        lines.append(f"| {threads} | " + " | ".join(f"{v:.1f}" for v in r.values()) + f" | {limit_gflops(result, threads):.1f} |")
    lines += [
        "",
        "| (N, D, H) | threads | GFLOP | streaming | "
        + ("its AVX2 path | " if avx2 else "")
        + (f"streaming at {base} | " if base else "")
        + "full, keeps weights | NumPy | PyTorch | streaming / PyTorch | bound | streaming / bound | PyTorch / bound |",
        "|---|---|---|---|" + ("---|" if avx2 else "") + ("---|" if base else "") + "---|---|---|---|---|---|---|",
    ]
    fmt = lambda row, impl: f"{row['ms'][impl]:.2f}" if impl in row["ms"] else "-"
    for row in rows:
        if "streaming" not in row["ms"]:
            continue
        n, d, h, t = row["n"], row["d"], row["h"], row["threads"]
        gflop = flops("streaming", n, d, h) / 1e9
        bound = gflop / limit_gflops(result, t) * 1e3
        s = row["ms"]["streaming"]
        torch_ms = row["ms"].get("torch")
        lines.append(
            f"| ({n}, {d}, {h}) | {t} | {gflop:.2f} | **{s:.2f}** | "
            + (f"{fmt(row, 'streaming-avx2')} | " if avx2 else "")
            + (f"{fmt(row, 'baseline')} | " if base else "")
            + f"{fmt(row, 'full')} | {fmt(row, 'numpy')} | {fmt(row, 'torch')} | "
            + (f"**{s / torch_ms:.2f}**" if torch_ms else "-")
            + f" | {bound:.2f} | {s / bound:.2f} | "
            + (f"{torch_ms / bound:.2f}" if torch_ms else "-")
            + " |"
        )
    extra = [r for r in rows if "streaming-causal" in r["ms"]]
    if extra:
        lines += [
            "",
            "Under a causal mask (`forward` streamed with `Attend::mask(&Mask::causal(n))`; PyTorch with the "
            "same additive mask as `attn_mask`), and one head of the layer alone (`Head::forward`, streamed, "
            "d_k = 64; its bound counts its own GFLOP):",
            "",
            "| (N, D, H) | threads | causal, streaming | causal, PyTorch | streaming / PyTorch | one head | head's bound | head / bound |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in extra:
            n, d, h, t = row["n"], row["d"], row["h"], row["threads"]
            s, p = row["ms"]["streaming-causal"], row["ms"]["torch-causal"]
            head = row["ms"]["head"]
            bound = flops("head", n, d, h) / 1e9 / limit_gflops(result, t) * 1e3
            lines.append(f"| ({n}, {d}, {h}) | {t} | {s:.2f} | {p:.2f} | {s / p:.2f} | {head:.2f} | {bound:.2f} | {head / bound:.2f} |")
    lines += ["", "How the streaming time grows with N (D = 512, H = 8): the exponent k in time ~ N^k between neighbouring sizes.", ""]
    lines += ["| threads | " + " | ".join(f"{a} -> {b}" for a, b in zip([256, 1024, 4096], [1024, 4096, 16384])) + " |", "|---|---|---|---|"]
    for t in THREADS:
        by_n = {r["n"]: r["ms"]["streaming"] for r in rows if r["threads"] == t and r["d"] == D and "streaming" in r["ms"]}
        steps = [f"{math.log(by_n[b] / by_n[a]) / math.log(b / a):.2f}" if a in by_n and b in by_n else "-" for a, b in zip([256, 1024, 4096], [1024, 4096, 16384])]
        lines.append(f"| {t} | " + " | ".join(steps) + " |")
    lines += [
        "",
        "Peak memory of each run, MiB: the Rust processes' peak RSS (`/usr/bin/time -v`), the Python "
        "ones' peak RSS above what the process held before its first pass (the interpreter, NumPy and "
        "PyTorch themselves not counted):",
        "",
        "| (N, D, H) | threads | streaming | full, keeps weights | NumPy | PyTorch |",
        "|---|---|---|---|---|---|",
    ]
    mem = lambda row, impl: f"{row['mib'][impl]:.0f}" if impl in row["mib"] else "-"
    for row in rows:
        if "streaming" in row["mib"]:
            lines.append(f"| ({row['n']}, {row['d']}, {row['h']}) | {row['threads']} | {mem(row, 'streaming')} | {mem(row, 'full')} | {mem(row, 'numpy')} | {mem(row, 'torch')} |")
    lines += ["", MARK_END.format(kind=kind)]
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    block = "\n".join(lines)
    begin, end = MARK_BEGIN.format(kind=kind), MARK_END.format(kind=kind)
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.replace(NEW_KINDS_BEFORE, block + "\n\n" + NEW_KINDS_BEFORE)
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
