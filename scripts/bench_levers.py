"""Measures evcxr's latency levers with the replay report (issue 10's "Levers" table).

Each lever runs in its own clone of the repository's HEAD (under target/levers/, so the
working tree is never touched): its settings go into that clone's `notebooks/evcxr.toml`,
which evcxr reads at start-up in the replay, in `attention-lab kernel` and in a plain
evcxr_jupyter started in notebooks/. Each lever replays the chosen notebooks RUNS times;
the first run of a clone pays for compiling the path dependencies, the last is "warm".
Besides the report's wall-clock seconds, the CPU seconds of the whole process tree (replay,
cargo, rustc) are recorded: they move much less than wall time when the machine is shared.

Usage (standard library only):

    cargo test --workspace --no-run    # the binary as CI builds it (`build -p` compiles evcxr again)
    python3 scripts/bench_levers.py --bin target/debug/attention-lab --runs 2 \
        --notebooks 000,002 --out bench/levers.json [--levers default,static-off,...] [--cold]

`--cold` gives every run an empty evcxr compilation cache (its own XDG_CACHE_HOME).
Prints a Markdown table and writes every report to --out.
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

# name -> (notebooks/evcxr.toml's text, None for the repository's own; extra environment).
# "{std}" is the toolchain's rust-src library folder. The replay keeps one build folder a
# context, gives rust-analyzer no standard library sources and compiles a cell at opt-level 0
# and its dependencies at 2 (jupyter/src/kernel.rs): "default".
LEVERS = {
    "default": (None, {}),
    # Before issue 10's second round: rust-analyzer reads rustup's rust-src (std, core, alloc),
    # and every crate is compiled at evcxr's opt-level 2.
    "before": (None, {"RUST_SRC_PATH": "{std}", "CARGO_PROFILE_DEV_OPT_LEVEL": "2"}),
    "std-sources": (None, {"RUST_SRC_PATH": "{std}"}),
    "static-off": ("[evcxr]\nallow_static_linking = false\n", {}),
    "catch-off": ("[evcxr]\npreserve_vars_on_panic = false\n", {}),
    "offline": ("[evcxr]\noffline_mode = true\n", {}),
    "opt-0": ('[evcxr]\nopt_level = "0"\n', {}),
    "opt-1": ('[evcxr]\nopt_level = "1"\n', {}),
    # The cell's crate at another opt-level than the replay's 0 (dependencies stay at 2):
    # the environment overrides the build folders' .cargo/config.toml.
    "cell-opt-1": (None, {"CARGO_PROFILE_DEV_OPT_LEVEL": "1"}),
    "cell-opt-2": (None, {"CARGO_PROFILE_DEV_OPT_LEVEL": "2"}),
    # The cell's crate in one codegen unit (evcxr's Cargo.toml says 16; cargo's config wins).
    "cgu-1": (None, {"CARGO_PROFILE_DEV_CODEGEN_UNITS": "1"}),
    # The dependencies declared once, for every notebook of the folder: the kernel starts with
    # them (evcxr_jupyter runs :load_config), and each notebook's own :dep cell then finds them.
    "deps-toml": ('[dependencies]\nattention-lab = { path = ".." }\n'
                  'attention-lab-plot = { path = "../plot" }\n', {}),
}


def clone(lever):
    """A fresh clone of HEAD for the lever, with its evcxr.toml."""
    dest = ROOT / "target" / "levers" / lever
    if dest.exists():
        subprocess.run(["rm", "-rf", str(dest)], check=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(dest)], check=True)
    (dest / "target").mkdir()
    text, _ = LEVERS[lever]
    toml = dest / "notebooks" / "evcxr.toml"
    if text is not None:  # None: the repository's own notebooks/evcxr.toml
        toml.write_text(text)
    return dest


def replay(binary, repo, notebooks, report, env):
    """Runs one replay; returns (report, wall seconds, CPU seconds of the process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    paths = [str(p) for n in notebooks for p in sorted((repo / "notebooks").glob(f"{n}*.ipynb"))]
    done = subprocess.run([binary, "replay", "--engine", "evcxr", *paths, "--json", str(report)],
                          cwd=repo, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):  # 1: some cell printed something else; the table says so
        sys.exit(f"error: replay failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(report.read_text()), wall, cpu


def summary(report):
    cells = [c for nb in report["notebooks"] for c in nb["cell_results"] if c["seconds"] is not None]
    return {
        "dep_cell": statistics.median(nb["cell_results"][0]["seconds"] or 0 for nb in report["notebooks"]),
        "first_code_cell": statistics.median(
            next((c["seconds"] for c in nb["cell_results"][2:] if c["seconds"] is not None), 0)
            for nb in report["notebooks"]),
        "median_cell": statistics.median(c["seconds"] for c in cells),
        "startup": statistics.median(nb["startup_seconds"] or 0 for nb in report["notebooks"]),
        "total": report["totals"]["seconds"],
        "passed": f'{report["totals"]["passed"]}/{report["totals"]["cells"]}',
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--notebooks", default="000,002")
    ap.add_argument("--levers", default=",".join(LEVERS))
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    binary = str(pathlib.Path(args.bin).resolve())
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True,
                             check=True).stdout.strip()
    std = pathlib.Path(sysroot) / "lib/rustlib/src/rust/library"
    notebooks = args.notebooks.split(",")
    results = {}
    for lever in args.levers.split(","):
        repo = clone(lever)
        _, extra = LEVERS[lever]
        runs = []
        for run in range(args.runs):
            env = dict(os.environ)
            env.pop("RUST_SRC_PATH", None)
            env.update({k: v.format(std=std) for k, v in extra.items()})
            with tempfile.TemporaryDirectory() as cache:
                if args.cold:
                    env["XDG_CACHE_HOME"] = cache
                report, wall, cpu = replay(binary, repo, notebooks, repo / "target" / f"report-{run}.json", env)
            runs.append({"summary": summary(report), "wall": wall, "cpu": cpu,
                         "load": os.getloadavg()[0], "report": report})
            print(f"{lever} run {run + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU", file=sys.stderr)
        results[lever] = runs
    pathlib.Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"| lever | passed | `:dep` cell (s) | first code cell (s) | median cell (s) | evcxr start (s) "
          f"| notebooks, wall (s) | CPU, whole tree (s) | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for lever, runs in results.items():
        last = runs[-1]
        s = last["summary"]
        print(f"| {lever} | {s['passed']} | {s['dep_cell']:.2f} | {s['first_code_cell']:.2f} | "
              f"{s['median_cell']:.2f} | {s['startup']:.2f} | {s['total']:.1f} | {last['cpu']:.1f} | "
              f"{last['load']:.1f} |")


if __name__ == "__main__":
    main()
