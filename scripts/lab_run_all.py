"""Run All of a notebook through a running `attention-lab lab`, as JupyterLab runs it: a
session for the notebook (its kernel takes the notebook's build folder), then each code cell
sent as soon as the one before is done, its reply and printed text checked against the stored
ones. Then the same again in a new kernel (a restarted kernel's Run All).

    .venv/bin/python scripts/lab_run_all.py --url 'http://127.0.0.1:8888/?token=TOKEN' \
        --notebook 000_two_heads_worked_example.ipynb --lesson notebooks/000_two_heads_worked_example.ipynb

Prints, for each round, the kernel's start and the Run All's seconds (from the first cell sent
to the last cell's idle); exits with 1 when a cell failed. Any Python with tornado will do
(the lab's venv has it).
"""

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hub_load import Student, lesson_cells  # noqa: E402


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="lab's URL with its token, as lab prints it")
    parser.add_argument("--notebook", required=True, help="the notebook's path as the server names it")
    parser.add_argument("--lesson", required=True, help="the notebook's file, for its cells and stored text")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    parsed = urllib.parse.urlparse(args.url)
    token = urllib.parse.parse_qs(parsed.query)["token"][0]
    cells = lesson_cells(args.lesson)
    rounds, failed = [], 0
    for _ in range(args.rounds):
        user = Student(f"{parsed.scheme}://{parsed.netloc}", "lab", "")
        user.token, user.prefix, user.notebook = token, "", args.notebook
        started = time.monotonic()
        results = await user.run_cells(cells, (0.0, 0.0))
        run_all = time.monotonic() - started - user.kernel_start
        failed += sum(not r["ok"] for r in results)
        rounds.append({"kernel_start": user.kernel_start, "run_all": run_all,
                       "cells": results})
        print(f"kernel start {user.kernel_start:.2f} s, Run All of {len(cells)} cells "
              f"{run_all:.2f} s, failed {sum(not r['ok'] for r in results)}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rounds, f, indent=1)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
