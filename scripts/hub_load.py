"""A class on `attention-lab hub`, simulated: N students sign in through the hub, start their
servers, open a "Rust (attention-lab)" kernel over Jupyter's websocket protocol and run a
lesson's code cells at a classroom pace. Prints (and with --json writes) cell latency p50, p95
and max, failed cells, server and kernel start times and each student's memory.

Each student's memory is sampled every 2 s, by a process of its own at the lowest priority: the resident memory of all their processes
(RSS, as before), their proportional share (PSS: a page shared by several processes counted
once in all), and the RSS of each kind of process (server, kernel, the kernel's child that runs
cells, cargo, rustc); and the memory in use on the whole machine, before and at its peak
(what pages the students share is counted once there). After the run, each student's kernel
trace (`cells.log` in its build folder) says how many cell libraries were loaded from the
compiled-cell cache and how many rustc compiled (or failed to); --expect-loaded fails the run
if rustc made any library.

Run it with the hub's own Python (tornado comes with JupyterHub), as root (it reads each
student's memory from /proc), against a running hub whose roster holds the users:

    /srv/attention-lab-hub/venv/bin/python scripts/hub_load.py --url http://127.0.0.1:8000 \
        --users alice,bob --passwords handout.txt --json load.json

It exits with 1 when a cell failed or a student could not start.

--passwords: the handout `attention-lab hub` printed when it issued the passwords (its lines
`... user NAME ... password PASSWORD`).
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import statistics
import subprocess
import time
import urllib.parse
import uuid

# When the run started (time.monotonic()): each cell's `sent` is counted from it.
T0 = time.monotonic()

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

# The hub's copy: its `:dep` lines point at the shared sources, as every student's copy does.
LESSON = "/srv/attention-lab-hub/notebooks/000_two_heads_worked_example.ipynb"


def lesson_cells(path):
    """The code cells of a notebook: (source, stored text outputs)."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        texts = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                texts.append("".join(out["text"]).strip())
        cells.append((source, texts))
    return cells


async def kernel_ready(ws, session, username, timeout=600):
    """Waits until the kernel answers a kernel_info_request (asked again every 2 s) on both
    channels, its reply on shell and its busy/idle on iopub, as Jupyter's clients do: a
    request sent before the kernel listens is lost, and so is what a kernel publishes before
    the server's subscription to it is up (then a cell's reply comes, its output and its
    idle never do)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg_id = uuid.uuid4().hex
        ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": username, "session": session,
                       "msg_type": "kernel_info_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "content": {}, "channel": "shell", "buffers": [],
        }))
        replied = published = False
        try:
            while not (replied and published):
                raw = await asyncio.wait_for(ws.read_message(), timeout=2)
                if raw is None:
                    raise RuntimeError(f"{username}: the kernel's websocket closed")
                msg = json.loads(raw)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                replied |= msg["header"]["msg_type"] == "kernel_info_reply"
                published |= msg.get("channel") == "iopub"
            return
        except asyncio.TimeoutError:
            continue
    raise RuntimeError(f"{username}: the kernel did not answer on both channels in {timeout} s")


class Student:
    def __init__(self, url, name, password):
        self.url, self.name, self.password = url.rstrip("/"), name, password
        self.http = AsyncHTTPClient(force_instance=True)
        self.cookies = {}
        self.token = None
        # Where the student's Jupyter server answers below the URL (a hub's proxy path).
        self.prefix = f"/user/{name}"
        # The notebook a kernel is started for, as JupyterLab starts one (a session), or None.
        self.notebook = None

    def _cookie_header(self):
        return "; ".join(f"{k}={v}" for k, v in self.cookies.items())

    def _keep_cookies(self, response):
        for header in response.headers.get_list("Set-Cookie"):
            name, _, rest = header.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]

    async def fetch(self, path, method="GET", body=None, headers=None, token=True, **kw):
        all_headers = dict(headers or {})
        if token and self.token:
            all_headers["Authorization"] = f"token {self.token}"
        elif self.cookies:
            all_headers["Cookie"] = self._cookie_header()
            if "_xsrf" in self.cookies:
                all_headers["X-XSRFToken"] = self.cookies["_xsrf"]
        request = HTTPRequest(self.url + path, method=method, body=body, headers=all_headers,
                              follow_redirects=False, request_timeout=300, **kw)
        response = await self.http.fetch(request, raise_error=False)
        self._keep_cookies(response)
        return response

    async def sign_in(self):
        """Signs in through the hub's API (the authenticator checks the password, as the login
        page does) and keeps the token it gives."""
        body = {"auth": {"username": self.name, "password": self.password},
                "note": "load test", "expires_in": 7200}
        response = await self.fetch(f"/hub/api/users/{self.name}/tokens", method="POST",
                                    body=json.dumps(body), token=False)
        if response.code != 201:
            raise RuntimeError(f"{self.name}: sign-in answered {response.code}: {response.body[:200]}")
        self.token = json.loads(response.body)["token"]

    async def start_server(self):
        started = time.monotonic()
        response = await self.fetch(f"/hub/api/users/{self.name}/server", method="POST", body="")
        if response.code not in (201, 202, 400):  # 400: already running
            raise RuntimeError(f"{self.name}: server start answered {response.code}")
        while True:
            info = json.loads((await self.fetch(f"/hub/api/users/{self.name}")).body)
            server = (info.get("servers") or {}).get("", {})
            if server.get("ready"):
                return time.monotonic() - started
            if time.monotonic() - started > 600:  # the hub's start_timeout
                raise RuntimeError(f"{self.name}: server not ready in 600 s")
            await asyncio.sleep(2)  # as often as a page waiting for its server

    async def run_cells(self, cells, pace):
        asked = time.monotonic()
        if self.notebook:
            body = {"path": self.notebook, "type": "notebook", "name": "",
                    "kernel": {"name": "attention-lab-rust"}}
            response = await self.fetch(f"{self.prefix}/api/sessions", method="POST", body=json.dumps(body))
            kernel = json.loads(response.body)["kernel"]["id"] if response.code == 201 else None
        else:
            response = await self.fetch(f"{self.prefix}/api/kernels", method="POST",
                                        body=json.dumps({"name": "attention-lab-rust"}))
            kernel = json.loads(response.body)["id"] if response.code == 201 else None
        if kernel is None:
            raise RuntimeError(f"{self.name}: kernel start answered {response.code}")
        ws_url = self.url.replace("http", "ws", 1) + f"{self.prefix}/api/kernels/{kernel}/channels"
        # As long as a browser waits: a kernel that starts while a class starts takes a while.
        ws = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {self.token}"},
                                                 connect_timeout=600, request_timeout=600))
        session = uuid.uuid4().hex
        await kernel_ready(ws, session, self.name)
        self.kernel_start = time.monotonic() - asked
        results = []
        try:
            for source, texts in cells:
                msg_id = uuid.uuid4().hex
                ws.write_message(json.dumps({
                    "header": {"msg_id": msg_id, "username": self.name, "session": session,
                               "msg_type": "execute_request", "version": "5.3"},
                    "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                    "content": {"code": source, "silent": False, "store_history": True,
                                "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                }))
                sent = time.monotonic()
                status, idle, out, err = None, False, [], []
                while status is None or not idle:
                    raw = await asyncio.wait_for(ws.read_message(), timeout=600)
                    if raw is None:
                        status, idle = "kernel connection closed", True
                        break
                    msg = json.loads(raw)
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    kind = msg["header"]["msg_type"]
                    if kind == "execute_reply":
                        status = msg["content"]["status"]
                    elif kind == "status" and msg["content"]["execution_state"] == "idle":
                        idle = True
                    elif kind == "stream":
                        (out if msg["content"]["name"] == "stdout" else err).append(msg["content"]["text"])
                    elif kind == "error":
                        err.append(msg["content"]["ename"] + ": " + msg["content"]["evalue"])
                latency = time.monotonic() - sent
                printed = "".join(out)
                ok = status == "ok" and all(t in printed for t in texts)
                result = {"latency": latency, "ok": ok, "status": status, "sent": sent - T0}
                if not ok:
                    result["error"] = "".join(err)[:500]
                results.append(result)
                await asyncio.sleep(random.uniform(*pace))
        finally:
            ws.close()
            await self.fetch(f"{self.prefix}/api/kernels/{kernel}", method="DELETE")
        return results


def kind_of(cmdline):
    """What a student's process is, from its command line."""
    words = cmdline.split(" ")
    names = [os.path.basename(w) for w in words[:2]]
    if "jupyterhub-singleuser" in cmdline or "jupyter-lab" in cmdline:
        return "server"
    if "control_file" in cmdline:
        return "kernel"
    if names[0] == "cargo":
        return "cargo"
    if "rustc" in names:  # rustc, or the kernel's binary as cargo's rustc wrapper
        return "rustc"
    if names[0] == "attention-lab":
        return "runtime"  # evcxr's child, which loads and runs each cell's library
    return "other"


def memory(user):
    """{total RSS, total PSS, RSS by kind} of every process of `user`, in MiB."""
    out = subprocess.run(["pgrep", "-u", user], capture_output=True, text=True).stdout
    sample = {"rss": 0.0, "pss": 0.0}
    for pid in out.split():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            fields = {}
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    name, _, rest = line.partition(":")
                    if name in ("Rss", "Pss"):
                        fields[name] = int(rest.split()[0]) / 1024
        except OSError:
            continue  # ended meanwhile
        sample["rss"] += fields.get("Rss", 0.0)
        sample["pss"] += fields.get("Pss", 0.0)
        kind = kind_of(cmdline)
        sample[kind] = sample.get(kind, 0.0) + fields.get("Rss", 0.0)
    return sample


def libraries(user):
    """How each library of the student's kernels came to be: loaded from the compiled-cell
    cache, compiled by rustc, or a compile that failed (evcxr compiles some cells twice,
    fixing them after the errors of the first: those failures are kept by their exact source,
    whose order changes with each kernel); from the traces in the student's build folders."""
    counts = {"loaded": 0, "compiled": 0, "failed": 0}
    root = f"/home/{user}/.cache/attention-lab/evcxr-build"
    for slot in (os.listdir(root) if os.path.isdir(root) else []):
        trace = os.path.join(root, slot, "cells.log")
        if not os.path.isfile(trace):
            continue
        with open(trace) as f:
            for line in f:
                kind = line.split(" ", 1)[0]
                if kind in counts:
                    counts[kind] += 1
    return counts


async def one(url, name, password, cells, pace, delay):
    await asyncio.sleep(delay)
    student = Student(url, name, password)
    await student.sign_in()
    start = await student.start_server()
    results = await student.run_cells(cells, pace)
    return {"user": name, "server_start": start, "cells": results,
            "kernel_start": student.kernel_start, "libraries": libraries(name)}


def sample_memory(users, stop, peaks, every=2.0):
    """In a process of its own at the lowest priority (reading /proc is slow enough to stall
    the students' clients if they waited for it, and takes CPU the class should have): each
    student's peaks of memory(), and the machine's, until `stop` is set; the result goes into
    the shared dict `peaks`."""
    os.nice(19)
    found = {user: {} for user in users}
    machine = 0.0
    while not stop.is_set():
        machine = max(machine, machine_used_mib())
        for user in users:
            for key, value in memory(user).items():
                found[user][key] = max(found[user].get(key, 0.0), value)
        stop.wait(every)
    peaks.update({"machine": machine, "students": found})


def machine_used_mib():
    """Memory in use on the machine (MemTotal - MemAvailable), in MiB."""
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            fields[name] = int(rest.split()[0])
    return (fields["MemTotal"] - fields["MemAvailable"]) / 1024


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def read_passwords(path):
    """{login: password} from a handout of `attention-lab hub` (lines `... user NAME ...
    password PASSWORD`; the teacher's line `sign in as "NAME", password PASSWORD`)."""
    found = {}
    with open(path) as f:
        for line in f:
            m = re.search(r'(?:user |sign in as ")([^ "]+)"?.*\bpassword ([a-z0-9-]+)$', line.rstrip())
            if m:
                found[m.group(1)] = m.group(2)
    return found


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--users", required=True, help="comma-separated logins")
    parser.add_argument("--passwords", required=True, help="the hub's handout with the passwords")
    parser.add_argument("--lesson", default=LESSON)
    parser.add_argument("--pace", default="5,10", help="seconds between cells, min,max")
    parser.add_argument("--spread", type=float, default=60, help="students start within this many seconds")
    parser.add_argument("--json")
    parser.add_argument("--expect-loaded", action="store_true",
                        help="fail unless every cell library that compiled came from the cache")
    args = parser.parse_args()
    users = [u for u in args.users.split(",") if u]
    cells = lesson_cells(args.lesson)
    pace = tuple(float(x) for x in args.pace.split(","))
    random.seed(0)
    delays = sorted(random.uniform(0, args.spread) for _ in users)
    before = machine_used_mib()
    manager = multiprocessing.Manager()
    peaks, stop = manager.dict(), manager.Event()
    sampler = multiprocessing.Process(target=sample_memory, args=(users, stop, peaks))
    sampler.start()
    passwords = read_passwords(args.passwords)
    results = await asyncio.gather(*(one(args.url, u, passwords.get(u, ""), cells, pace, d)
                                     for u, d in zip(users, delays)), return_exceptions=True)
    stop.set()
    sampler.join()
    peaks = dict(peaks)
    errors = [str(r) for r in results if isinstance(r, Exception)]
    done = [r for r in results if not isinstance(r, Exception)]
    for r in done:
        r["memory_peaks_mib"] = peaks["students"].get(r["user"], {})
        r["memory_mib"] = r["memory_peaks_mib"].get("rss", 0.0)
    latencies = [c["latency"] for r in done for c in r["cells"]]
    summary = {
        "students": len(users),
        "cells": len(latencies),
        "failed_cells": sum(not c["ok"] for r in done for c in r["cells"]),
        "failed_students": errors,
        "p50": percentile(latencies, 0.5) if latencies else None,
        "p95": percentile(latencies, 0.95) if latencies else None,
        "max": max(latencies) if latencies else None,
        "first_cell_max": max((r["cells"][0]["latency"] for r in done if r["cells"]), default=None),
        "server_start_p50": statistics.median(r["server_start"] for r in done) if done else None,
        "server_start_max": max((r["server_start"] for r in done), default=None),
        "kernel_start_p50": statistics.median(r["kernel_start"] for r in done) if done else None,
        "kernel_start_max": max((r["kernel_start"] for r in done), default=None),
        "memory_mib_per_student_max": max((r["memory_mib"] for r in done), default=None),
        "pss_mib_per_student_max": max((r["memory_peaks_mib"].get("pss", 0) for r in done), default=None),
        "memory_peaks_mib_by_kind_max": {
            kind: max(r["memory_peaks_mib"].get(kind, 0) for r in done)
            for kind in ("server", "kernel", "runtime", "cargo", "rustc", "other")
        } if done else None,
        "machine_mib_before": before,
        "machine_mib_peak": peaks["machine"],
        "libraries": {key: sum(r["libraries"][key] for r in done)
                      for key in ("loaded", "compiled", "failed")},
        "per_student": done,
    }
    short = {k: v for k, v in summary.items() if k != "per_student"}
    print(json.dumps(short, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    if errors or summary["failed_cells"]:
        raise SystemExit(1)
    if args.expect_loaded and (summary["libraries"]["compiled"] or not summary["libraries"]["loaded"]):
        print("cells were compiled that the compiled-cell cache should have held", flush=True)
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
