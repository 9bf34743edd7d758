"""Times the f64 forward pass of a multi-head attention layer four ways in one run, side by
side: attention-lab's streaming path and its path that keeps every intermediate (the criterion
bench benches/attention.rs), NumPy in the seeds' vectorised form, and PyTorch's
nn.MultiheadAttention on the CPU with need_weights=False. Then peak memory (RSS) of the two
Rust paths under /usr/bin/time -v, and the dgemm rate of this machine. Writes the results
between the markers of BENCHMARKS.md and draws bench/attention.svg.

Every implementation gets the same inputs: np.random.seed(0); x = rand(N, D), then W_Q, W_K,
W_V, W_O each rand(D, D) / D (the Rust side draws them with attention_lab::np::RandomState).

Run from the repository root (the numbers are medians; see BENCHMARKS.md for conditions):
    .venv/bin/python scripts/bench_attention.py [--builds default,gemm,blas] [--quick]

Each build is the library with that cargo feature (default: none, matrixmultiply); the blas
build needs the system's OpenBLAS (Debian: libopenblas-dev).
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = [(128, 64, 4), (1024, 512, 8), (4096, 512, 8)]
MEMORY_SIZES = [1024, 2048, 4096, 8192, 16384]
MARK_BEGIN = "<!-- bench_attention.py: begin -->"
MARK_END = "<!-- bench_attention.py: end -->"


def flops(n, d):
    """Multiply-adds times two: the projections (4 N D^2) and Q K^T, weights V (2 N^2 D)."""
    return 4 * 2 * n * d * d + 2 * 2 * n * n * d


def inputs(n, d):
    rs = np.random.RandomState(0)
    x = rs.rand(n, d)
    ws = [rs.rand(d, d) / d for _ in range(4)]
    return x, ws


def numpy_forward(x, wq, wk, wv, wo, h):
    """The seeds' form: Q, K, V for all heads at once, split by columns, softmax per head."""
    q, k, v = x @ wq, x @ wk, x @ wv
    outs = []
    for idx in np.split(np.arange(wk.shape[1]), h):
        scores = q[:, idx] @ k[:, idx].T / np.sqrt(len(idx))
        e = np.exp(scores - np.max(scores, axis=1, keepdims=True))
        w = e / np.sum(e, axis=1, keepdims=True)
        outs.append(w @ v[:, idx])
    return np.concatenate(outs, axis=1) @ wo


def median_ms(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def runs_for(n):
    return 20 if n <= 1024 else 5


def torch_layer(d, h, ws):
    import torch

    layer = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=torch.float64)
    wq, wk, wv, wo = (torch.from_numpy(w) for w in ws)
    with torch.no_grad():
        # PyTorch computes x @ W.T: its weights are ours transposed.
        layer.in_proj_weight.copy_(torch.cat([wq.T, wk.T, wv.T], dim=0))
        layer.out_proj.weight.copy_(wo.T)
    return layer


def cargo(*args, build):
    cmd = ["cargo", *args]
    if build != "default":
        cmd += ["--features", build]
    return cmd


def criterion_median_ms(target_dir, *id_parts):
    """Criterion's median for a benchmark id (its folders under target/criterion), in ms."""
    path = pathlib.Path(target_dir, "criterion", *id_parts, "new", "estimates.json")
    return json.loads(path.read_text())["median"]["point_estimate"] / 1e6


def peak_rss_mib(binary, path, n, d, h):
    """Maximum resident set size of one forward pass, from /usr/bin/time -v."""
    out = subprocess.run(
        ["/usr/bin/time", "-v", str(binary), path, str(n), str(d), str(h), "1"],
        capture_output=True,
        text=True,
        check=True,
    )
    kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
    return kib / 1024, json.loads(out.stdout)["median_ms"]


def available_mib():
    for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


def best_ms(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times)


def dgemm_gflops(n=2048):
    """The machine's dgemm rate on both cores: the best of 7 products, since a peak rate is
    what the machine can do and other processes only ever slow a run down."""
    import torch

    a, b = np.random.rand(n, n), np.random.rand(n, n)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    rate = lambda ms: 2 * n**3 / (ms / 1e3) / 1e9
    return {
        "NumPy (OpenBLAS), 2 threads": rate(best_ms(lambda: a @ b, 7)),
        "PyTorch mm, 2 threads": rate(best_ms(lambda: ta @ tb, 7)),
    }


def svg_plot(rows, path):
    """A small log-log chart of time against N for the four implementations."""
    series = {
        "streaming, fastest build": "best_ms",
        "full, keeps weights": "full_ms",
        "NumPy": "numpy_ms",
        "PyTorch": "torch_ms",
    }
    colours = ["#d62728", "#7f7f7f", "#1f77b4", "#ff7f0e"]
    width, height, left, bottom, top, right = 700, 400, 70, 50, 30, 210
    import math

    rows = [dict(r, best_ms=min(r["streaming_ms"].values())) for r in rows]
    ns = [r["n"] for r in rows]
    values = [r[k] for r in rows for k in series.values()]
    x0, x1 = math.log10(min(ns)), math.log10(max(ns))
    y0, y1 = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    px = lambda n: left + (math.log10(n) - x0) / (x1 - x0) * (width - left - right)
    py = lambda v: height - bottom - (math.log10(v) - y0) / (y1 - y0) * (height - bottom - top)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="DejaVu Sans, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="18">f64 forward pass, (N, D, H) = (N, 512, 8) and (128, 64, 4); median ms</text>',
    ]
    for e in range(y0, y1 + 1):
        y = py(10**e)
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{10**e:g}</text>')
    for n in ns:
        x = px(n)
        parts.append(f'<text x="{x:.1f}" y="{height - bottom + 18}" text-anchor="middle">{n}</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 10}" text-anchor="middle">N (tokens)</text>')
    for i, (name, key) in enumerate(series.items()):
        points = " ".join(f"{px(r['n']):.1f},{py(r[key]):.1f}" for r in rows)
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colours[i]}" stroke-width="2"/>')
        for r in rows:
            parts.append(f'<circle cx="{px(r["n"]):.1f}" cy="{py(r[key]):.1f}" r="3" fill="{colours[i]}"/>')
        ly = top + 20 + 20 * i
        lx = width - right + 15
        parts.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{ly}" y2="{ly}" stroke="{colours[i]}" stroke-width="2"/>')
        parts.append(f'<text x="{lx + 26}" y="{ly + 4}">{name}</text>')
    parts.append("</svg>")
    tmp = path.with_suffix(".svg.tmp")
    tmp.write_text("\n".join(parts) + "\n")
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", default="default,gemm", help="comma-separated: default, gemm, blas")
    parser.add_argument("--quick", action="store_true", help="skip N=4096 and the memory runs")
    parser.add_argument("--memory-from", help="take the peak-RSS table from an earlier run's bench/attention.json (RSS does not depend on the load)")
    args = parser.parse_args()
    builds = args.builds.split(",")
    import torch

    torch.set_num_threads(2)
    target_dir = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    # The streaming path runs its own threads; OpenBLAS must not add more under it.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for build in builds:
        subprocess.run(cargo("bench", "--bench", "attention", "--no-run", build=build), cwd=ROOT, check=True, env=env)
    conditions = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        "builds": builds,
        "load_before": os.getloadavg()[0],
        "torch": torch.__version__,
        "numpy": np.__version__,
    }

    def criterion(build, pattern):
        subprocess.run(cargo("bench", "--bench", "attention", build=build) + ["--", pattern], cwd=ROOT, check=True, env=env)

    # Measured before and after the sizes, keeping the better: the GEMM bound must not be
    # flattered by a busy moment.
    rates_before = dgemm_gflops()
    rows = []
    sizes = SIZES[:2] if args.quick else SIZES
    for n, d, h in sizes:
        size = f"{n}x{d}x{h}"
        print(f"== {size}", file=sys.stderr)
        row = {"n": n, "d": d, "h": h, "gflop": flops(n, d) / 1e9, "streaming_ms": {}}
        for i, build in enumerate(builds):
            # The full path's products are ndarray's whatever the build: time it once.
            criterion(build, f"attention/{'.*' if i == 0 else 'streaming'}/{size}$")
            row["streaming_ms"][build] = criterion_median_ms(target_dir, "attention", "streaming", size)
            if i == 0:
                row["full_ms"] = criterion_median_ms(target_dir, "attention", "full", size)
        x, ws = inputs(n, d)
        runs = runs_for(n)
        row["numpy_ms"] = median_ms(lambda: numpy_forward(x, *ws, h), runs)
        layer = torch_layer(d, h, ws)
        tx = torch.from_numpy(x).unsqueeze(0)
        with torch.inference_mode():
            got = layer(tx, tx, tx, need_weights=False)[0][0].numpy()
            row["torch_ms"] = median_ms(lambda: layer(tx, tx, tx, need_weights=False), runs)
        assert np.allclose(got, numpy_forward(x, *ws, h), rtol=1e-10, atol=1e-12), "PyTorch and NumPy disagree"
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    rates = {name: max(rate, rates_before[name]) for name, rate in dgemm_gflops().items()}
    per_thread = {}
    for build in builds:
        criterion(build, "dgemm")
        backends = ["ndarray"] + (["gemm"] if build == "gemm" else [])
        for backend in backends:
            for shape in ["2048x2048x2048", "256x64x256", "256x256x64"]:
                m, k, n = (int(v) for v in shape.split("x"))
                ms = criterion_median_ms(target_dir, "dgemm", backend, shape)
                name = f"{build} build, {'OpenBLAS' if build == 'blas' else 'matrixmultiply' if backend == 'ndarray' else 'gemm crate'}"
                per_thread.setdefault(name, {})[shape] = 2 * m * k * n / (ms / 1e3) / 1e9
    memory = []
    if args.memory_from:
        earlier = json.loads(pathlib.Path(args.memory_from).read_text())
        memory = earlier["memory"]
        conditions["memory_from"] = earlier["conditions"]["date"]
    elif not args.quick:
        # Built here, after every build's benches, so that the binary is the first build's.
        subprocess.run(cargo("build", "--release", "--example", "attention_forward", build=builds[0]), cwd=ROOT, check=True, env=env)
        binary = pathlib.Path(target_dir) / "release" / "examples" / "attention_forward"
        for n in MEMORY_SIZES:
            entry = {"n": n}
            entry["streaming_mib"], entry["streaming_ms"] = peak_rss_mib(binary, "streaming", n, 512, 8)
            # Scores and weights: 2 H N^2 doubles; run the full path only where it fits twice over.
            need = 2 * 8 * n * n * 8 / 2**20
            if need * 2 < available_mib():
                entry["full_mib"], entry["full_ms"] = peak_rss_mib(binary, "full", n, 512, 8)
            else:
                entry["full_needs_mib"] = need
            memory.append(entry)
            print(json.dumps(entry), file=sys.stderr)
    conditions["load_after"] = os.getloadavg()[0]
    result = {"conditions": conditions, "rows": rows, "dgemm_gflops": rates, "per_thread_gflops": per_thread, "memory": memory}
    out = ROOT / "bench" / "attention.json"
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False) as f:
        json.dump(result, f, indent=1)
    os.replace(f.name, out)
    svg_plot(rows, ROOT / "bench" / "attention.svg")
    write_report(result)


def write_report(result):
    c, rows, rates, memory = result["conditions"], result["rows"], result["dgemm_gflops"], result["memory"]
    builds = c["builds"]
    best = max(rates.values())
    lines = [
        MARK_BEGIN,
        "",
        f"Measured {c['date']} on `{c['commit']}`; PyTorch {c['torch']} and NumPy {c['numpy']} at 2 threads; "
        f"load average {c['load_before']:.2f} before, {c['load_after']:.2f} after. Medians: criterion's for "
        f"Rust, of {runs_for(1024)} runs ({runs_for(4096)} at N = 4096) for Python. Streaming columns by "
        "build: `default` is the library as notebooks get it (matrixmultiply), the others add that "
        "cargo feature.",
        "",
        "| (N, D, H) | GFLOP | "
        + " | ".join(f"streaming, {b} (ms)" for b in builds)
        + " | full, keeps weights (ms) | NumPy (ms) | PyTorch (ms) | best streaming / PyTorch "
        "| GEMM-bound (ms) | best streaming / GEMM-bound |",
        "|---|---|" + "---|" * (len(builds) + 6),
    ]
    for r in rows:
        bound = r["gflop"] / best * 1e3
        fastest = min(r["streaming_ms"].values())
        lines.append(
            f"| ({r['n']}, {r['d']}, {r['h']}) | {r['gflop']:.2f} | "
            + " | ".join(f"{r['streaming_ms'][b]:.2f}" for b in builds)
            + f" | {r['full_ms']:.2f} | {r['numpy_ms']:.2f} | {r['torch_ms']:.2f} | {fastest / r['torch_ms']:.2f} "
            f"| {bound:.2f} | {fastest / bound:.2f} |"
        )
    lines += ["", "![time against N](bench/attention.svg)", "", "dgemm on both cores, 2048 x 2048 x 2048 (the machine's rate: the best of 7 products, before and after the sizes):", ""]
    lines += ["| product | GFLOP/s |", "|---|---|"]
    lines += [f"| {name} | {rate:.1f} |" for name, rate in rates.items()]
    lines += ["", f"The GEMM-bound time is the forward pass's GFLOP at the best of these, {best:.1f} GFLOP/s."]
    shapes = ["2048x2048x2048", "256x64x256", "256x256x64"]
    lines += ["", "dgemm on one thread, as the streaming path calls it (GFLOP/s; M x K x N):", ""]
    lines += ["| build, product | " + " | ".join(shapes) + " |", "|---|" + "---|" * len(shapes)]
    for name, by_shape in result["per_thread_gflops"].items():
        lines.append(f"| {name} | " + " | ".join(f"{by_shape[s]:.1f}" for s in shapes) + " |")
    if memory:
        lines += [
            "",
            "Peak RSS of one forward pass, (N, 512, 8), `/usr/bin/time -v` on `examples/attention_forward`"
            + (f" (from the run of {c['memory_from']}):" if c.get("memory_from") else ":"),
            "",
            "| N | streaming (MiB) | full, keeps weights (MiB) | streaming / full |",
            "|---|---|---|---|",
        ]
        for m in memory:
            if "full_mib" in m:
                full, ratio = f"{m['full_mib']:.0f}", f"{m['streaming_mib'] / m['full_mib']:.1%}"
            else:
                full = f"not run: its scores and weights alone need {m['full_needs_mib']:.0f} MiB"
                ratio = f"< {m['streaming_mib'] / m['full_needs_mib']:.1%}"
            lines.append(f"| {m['n']} | {m['streaming_mib']:.0f} | {full} | {ratio} |")
    lines += ["", MARK_END]
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    block = "\n".join(lines)
    if MARK_BEGIN in text:
        text = re.sub(re.escape(MARK_BEGIN) + ".*?" + re.escape(MARK_END), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n# Benchmarks: the attention forward pass\n\n" + block + "\n"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
