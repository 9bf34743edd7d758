"""Times notebooks through a real Jupyter kernel, cell by cell, as a student's JupyterLab runs them.

The replay report (`attention-lab replay --json`) times evcxr inside the replay; this times the
kernel that Jupyter starts from its kernelspec (by default `attention-lab-rust`, from
`attention-lab kernel install`), over Jupyter's own messages: the kernel's start is the time
until it first answers `kernel_info`, a cell's time is from its `execute_request` to its
`execute_reply`. Each notebook gets a fresh kernel started in the notebook's folder, as
JupyterLab does. The JSON it writes has the replay report's shape (notebooks, cell_results,
seconds, startup_seconds, totals), so `scripts/bench_report.py` reads both.

A cell passes when the kernel answers `ok` and its stdout is the stored one (the measurement
must not time a kernel that prints something else), or, tagged `nbval-ignore-output`, when
the kernel answers `ok`.

Usage (needs jupyter_client, as in the nbval venv that `.ci/run` makes):

    attention-lab kernel install --jupyter-path DIR
    JUPYTER_PATH=DIR python scripts/bench_kernel.py notebooks/*.ipynb --json bench/kernel.json \
        [--kernel attention-lab-rust] [--runs 2]

With --runs N each notebook is run N times in a row and the last run is kept ("warm").
"""
import argparse
import json
import pathlib
import queue
import sys
import time

from jupyter_client.manager import KernelManager

TIMEOUT = 600  # seconds for one cell, or for the kernel to start


def stored_text(cell):
    """The stored stream text of a cell, stdout then stderr, as one string each."""
    text = {"stdout": "", "stderr": ""}
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            text[output["name"]] += "".join(output["text"])
    return text


def run_cell(client, code):
    """Executes one cell; returns (seconds, status, stream text by name)."""
    started = time.monotonic()
    msg_id = client.execute(code, store_history=True, allow_stdin=False)
    reply = client.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = client.get_shell_msg(timeout=TIMEOUT)
    seconds = time.monotonic() - started
    text = {"stdout": "", "stderr": ""}
    # iopub until this request's kernel goes idle (evcxr_jupyter may send its last line late).
    idle = False
    while True:
        try:
            msg = client.get_iopub_msg(timeout=0.5 if idle else TIMEOUT)
        except queue.Empty:
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            text[content["name"]] += content["text"]
        elif kind == "status" and content["execution_state"] == "idle":
            idle = True
    return seconds, reply["content"]["status"], text


def run_notebook(path, kernel_name):
    notebook = json.loads(path.read_text())
    manager = KernelManager(kernel_name=kernel_name)
    started = time.monotonic()
    manager.start_kernel(cwd=str(path.parent))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=TIMEOUT)
        startup = time.monotonic() - started
        results = []
        for index, cell in enumerate(notebook["cells"]):
            if cell["cell_type"] != "code":
                continue
            code = "".join(cell["source"])
            seconds, status, text = run_cell(client, code)
            want = stored_text(cell)
            # As nbval: a cell tagged nbval-ignore-output (timings, say) is not compared.
            ignored = "nbval-ignore-output" in cell.get("metadata", {}).get("tags", [])
            same = ignored or text["stdout"] == want["stdout"]
            passed = status == "ok" and same
            results.append({
                "id": cell.get("id"),
                "index": index,
                "seconds": seconds,
                "status": "passed" if passed else "failed",
                "reason": None if passed else f"status {status}, stdout {'same' if same else 'differs'}",
            })
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    total = time.monotonic() - started
    passed = sum(r["status"] == "passed" for r in results)
    return {
        "path": str(path),
        "engine": f"kernel {kernel_name}",
        "startup_seconds": startup,
        "seconds": total,
        "cells": len(results),
        "passed": passed,
        "failed": len(results) - passed,
        "cell_results": results,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--json", type=pathlib.Path, required=True, help="report to write")
    parser.add_argument("--kernel", default="attention-lab-rust", help="kernelspec name")
    parser.add_argument("--runs", type=int, default=1, help="runs of each notebook; the last is kept")
    args = parser.parse_args()
    notebooks = []
    for path in args.notebooks:
        if not path.is_file():
            sys.exit(f"error: {path}: no such notebook")
        for _ in range(args.runs):
            report = run_notebook(path, args.kernel)
        notebooks.append(report)
        print(f"{path.name}: start {report['startup_seconds']:.2f} s, "
              f"{report['passed']}/{report['cells']} cells passed, {report['seconds']:.1f} s",
              file=sys.stderr)
    totals = {
        "cells": sum(n["cells"] for n in notebooks),
        "passed": sum(n["passed"] for n in notebooks),
        "seconds": sum(n["seconds"] for n in notebooks),
    }
    report = {"engine": f"kernel {args.kernel}", "notebooks": notebooks, "totals": totals,
              "ok": totals["passed"] == totals["cells"]}
    tmp = args.json.with_name(args.json.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(args.json)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
