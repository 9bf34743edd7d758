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

Memory: after the kernel answers `kernel_info` and after each cell (its reply and its last
output), the script reads /proc/PID/smaps_rollup of every process in the kernel's tree (the
process Jupyter started and all its descendants: evcxr's child that holds the variables, any
helper the kernel starts; attention-lab links rust-analyzer in, so its memory is the kernel
process's; a cell's compilers have exited by the reply). Each notebook's record gets

    "memory": {"start": SNAPSHOT, "cells": [{"id", "index", **SNAPSHOT}, ...],
               "after": SNAPSHOT (after the last cell), "peak_pss_kib": N, "peak_rss_kib": N,
               "peak_at": cell id or "start"}

where SNAPSHOT is {"rss_kib", "pss_kib", "pss_anon_kib", "pss_file_kib", "anonymous_kib"
(summed over the tree), "loadavg" (the 1-minute load average), "processes": [{"pid", "ppid",
"name", "rss_kib", "pss_kib"}, ...]}. Pss splits each shared page among the processes that map
it, so the tree's summed Pss counts a page shared inside the tree once; Rss summed counts it in
every process. Linux only (the fields need kernel 4.14+; Pss_Anon and Pss_File 5.9+, else 0).
"""
import argparse
import json
import os
import pathlib
import queue
import sys
import time

from jupyter_client.manager import KernelManager

TIMEOUT = 600  # seconds for one cell, or for the kernel to start


ROLLUP_FIELDS = {"Rss": "rss_kib", "Pss": "pss_kib", "Pss_Anon": "pss_anon_kib",
                 "Pss_File": "pss_file_kib", "Anonymous": "anonymous_kib"}


def parents():
    """{pid: (ppid, name)} of every process now, from /proc/PID/stat."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ")".
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        table[int(entry)] = (ppid, name)
    return table


def tree(root):
    """The pid root and all its descendants, with their parents and names."""
    table = parents()
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            found.append(pid)
        todo.extend(children.get(pid, []))
    return [(pid, table[pid][0], table[pid][1]) for pid in sorted(found)]


def rollup(pid):
    """The smaps_rollup fields of one process in KiB, or None when it has gone."""
    try:
        text = pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines()[1:]:
        key, _, rest = line.partition(":")
        if key in ROLLUP_FIELDS:
            fields[ROLLUP_FIELDS[key]] = int(rest.split()[0])
    return fields


def memory(root):
    """The memory of the process tree under root, summed and by process."""
    total = {name: 0 for name in ROLLUP_FIELDS.values()}
    processes = []
    for pid, ppid, name in tree(root):
        fields = rollup(pid)
        if fields is None:
            continue
        for key in total:
            total[key] += fields.get(key, 0)
        processes.append({"pid": pid, "ppid": ppid, "name": name,
                          "rss_kib": fields.get("rss_kib", 0), "pss_kib": fields.get("pss_kib", 0)})
    total["loadavg"] = os.getloadavg()[0]
    total["processes"] = processes
    return total


def kernel_pid(manager):
    """The pid of the process Jupyter started for the kernel (jupyter_client 7+, or older)."""
    provisioner = getattr(manager, "provisioner", None)
    process = getattr(provisioner, "process", None) if provisioner else None
    if process is None:
        process = getattr(manager, "kernel", None)
    if process is None or getattr(process, "pid", None) is None:
        sys.exit("error: cannot find the kernel's pid in the KernelManager")
    return process.pid


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
        pid = kernel_pid(manager)
        start_memory = memory(pid)
        cell_memory = []
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
            cell_memory.append({"id": cell.get("id"), "index": index, **memory(pid)})
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    total = time.monotonic() - started
    passed = sum(r["status"] == "passed" for r in results)
    snapshots = [("start", start_memory)] + [(m["id"] or str(m["index"]), m) for m in cell_memory]
    peak_at, peak = max(snapshots, key=lambda s: s[1]["pss_kib"])
    memory_report = {
        "start": start_memory,
        "cells": cell_memory,
        "after": cell_memory[-1] if cell_memory else start_memory,
        "peak_pss_kib": peak["pss_kib"],
        "peak_rss_kib": max(m["rss_kib"] for _, m in snapshots),
        "peak_at": peak_at,
    }
    return {
        "path": str(path),
        "engine": f"kernel {kernel_name}",
        "startup_seconds": startup,
        "seconds": total,
        "cells": len(results),
        "passed": passed,
        "failed": len(results) - passed,
        "cell_results": results,
        "memory": memory_report,
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
              f"{report['passed']}/{report['cells']} cells passed, {report['seconds']:.1f} s, "
              f"Pss {report['memory']['start']['pss_kib'] / 1024:.0f} MiB at start, "
              f"{report['memory']['after']['pss_kib'] / 1024:.0f} MiB after, "
              f"peak {report['memory']['peak_pss_kib'] / 1024:.0f} MiB",
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
