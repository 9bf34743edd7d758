"""Turns replay reports (`attention-lab replay --json FILE`) into the tables of BENCHMARKS.md.

Usage: python3 scripts/bench_report.py cold.json warm.json [more.json ...]
Each report is one column, named after its file (without .json). Standard library only.
"""
import json
import pathlib
import statistics
import sys


def cells(report):
    for nb in report["notebooks"]:
        for c in nb["cell_results"]:
            if c["seconds"] is not None:
                yield pathlib.Path(nb["path"]).stem, c["id"] or str(c["index"]), c["seconds"]


def main(paths):
    runs = {pathlib.Path(p).stem: json.loads(pathlib.Path(p).read_text()) for p in paths}
    names = list(runs)
    per_cell = {name: {(nb, cell): s for nb, cell, s in cells(r)} for name, r in runs.items()}
    keys = list(per_cell[names[0]])

    print("| summary | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    rows = {
        "first `:dep` cell of the first notebook (s)": lambda r: r["notebooks"][0]["cell_results"][0]["seconds"],
        "first `:dep` cell, median over notebooks (s)": lambda r: statistics.median(
            nb["cell_results"][0]["seconds"] for nb in r["notebooks"] if nb["cell_results"]),
        "first code cell after it, median (s)": lambda r: statistics.median(
            next(c["seconds"] for c in nb["cell_results"][2:] if c["seconds"] is not None)
            for nb in r["notebooks"]),
        "median cell, all cells (s)": lambda r: statistics.median(s for _, _, s in cells(r)),
        "median cell after each notebook's first three (s)": lambda r: statistics.median(
            c["seconds"] for nb in r["notebooks"] for c in nb["cell_results"][3:] if c["seconds"] is not None),
        "start-up (evcxr starting, or the batch engine building), median over notebooks (s)": lambda r: statistics.median(
            nb["startup_seconds"] for nb in r["notebooks"]),
        "all notebooks together (s)": lambda r: r["totals"]["seconds"],
        "cells passed / run": lambda r: f'{r["totals"]["passed"]} / {r["totals"]["cells"]}',
    }
    for label, f in rows.items():
        vals = [f(runs[n]) for n in names]
        print(f"| {label} | " + " | ".join(v if isinstance(v, str) else f"{v:.2f}" for v in vals) + " |")

    print()
    print("| notebook | cell | " + " | ".join(f"{n} (s)" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for key in keys:
        vals = [per_cell[n].get(key) for n in names]
        print(f"| {key[0]} | {key[1]} | " + " | ".join("" if v is None else f"{v:.2f}" for v in vals) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
