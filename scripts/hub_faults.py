"""Faults on a running `attention-lab hub`, each a check that fails loudly (exit 1):

1. isolation: a student's kernel cannot read another student's notebook or the hub's state
   (database, passwords, config), and neither can the student's own shell; neither can write
   a file that another student's kernel would load as a compiled cell (the shared store of the
   lessons' cells, root's, or another student's own store);
2. a student's kernel killed in the middle of a cell: that student hears the kernel died,
   restarts it and runs a cell; another student's kernel, mid-cell at the same moment,
   finishes as if nothing happened;
3. the hub process killed (SIGKILL): `attention-lab hub` starts it again, the students'
   servers are the same processes, a kernel keeps its variables and a saved notebook is
   intact;
4. with --memory-limit: a student's cell that takes more memory than the limit is ended
   (that student's kernel group only) and the kernel runs the next cell; the other student's
   kernel keeps its variables;
5. the network: as one student, every kernel endpoint of the other (TCP ports by owner, Unix
   sockets under their home) gets raw bytes and messages signed with a guessed key or none
   (scripts/kernel_attack.py); the other's kernel is the same process and keeps its variables;
6. the accounts: signing in as the teacher, or as the other student, without the password
   root issued is refused (403), and the right password still works afterwards.

Run as root with the hub's Python, against a hub whose roster holds two students:

    /srv/attention-lab-hub/venv/bin/python scripts/hub_faults.py --url http://127.0.0.1:8000 \
        --users ann,ben --passwords handout.txt --teacher teacher --dir /srv/attention-lab-hub
"""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hub_grading import run_as  # noqa: E402
from hub_load import Student, kernel_ready, read_passwords  # noqa: E402

from tornado.httpclient import HTTPRequest  # noqa: E402
from tornado.websocket import websocket_connect  # noqa: E402

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


class Kernel:
    """One kernel of a student's server, over its websocket."""

    def __init__(self, student):
        self.student = student

    async def start(self):
        s = self.student
        r = await s.fetch(f"/user/{s.name}/api/kernels", method="POST",
                          body=json.dumps({"name": "attention-lab-rust"}))
        assert r.code == 201, f"{s.name}: kernel start answered {r.code}"
        self.id = json.loads(r.body)["id"]
        await self.connect()

    async def connect(self):
        s = self.student
        url = s.url.replace("http", "ws", 1) + f"/user/{s.name}/api/kernels/{self.id}/channels"
        self.ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {s.token}"}))
        self.session = uuid.uuid4().hex
        await kernel_ready(self.ws, self.session, s.name)
        # Drain the socket all the time: tornado's client holds one unread message and then
        # stops reading, pongs included, and the server drops a socket unanswered for 90 s
        # (as while the other student's kernel restarts).
        self.inbox = asyncio.Queue()
        self.pump = asyncio.ensure_future(self._drain(self.ws, self.inbox))

    @staticmethod
    async def _drain(ws, inbox):
        while True:
            raw = await ws.read_message()
            await inbox.put(raw)
            if raw is None:
                return

    def send(self, code):
        msg_id = uuid.uuid4().hex
        self.ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": self.student.name, "session": self.session,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        }))
        return msg_id

    async def wait(self, msg_id, timeout=300):
        """(reply status, stdout, errors, states seen) of one cell; status 'dead' when the
        kernel died first. Done when both its reply (shell) and its idle (iopub) have come,
        in either order: the two channels are forwarded independently."""
        status, idle, out, err, states = None, False, [], [], []
        deadline = time.monotonic() + timeout
        while status is None or not idle:
            raw = await asyncio.wait_for(self.inbox.get(), timeout=max(1, deadline - time.monotonic()))
            if raw is None:
                return "closed", "".join(out), "".join(err), states
            msg = json.loads(raw)
            kind = msg["header"]["msg_type"]
            if kind == "status":
                states.append(msg["content"]["execution_state"])
                if msg["content"]["execution_state"] in ("dead", "restarting"):
                    return "dead", "".join(out), "".join(err), states
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if kind == "execute_reply":
                status = msg["content"]["status"]
            elif kind == "stream":
                (out if msg["content"]["name"] == "stdout" else err).append(msg["content"]["text"])
            elif kind == "error":
                err.append(msg["content"]["ename"] + ": " + msg["content"]["evalue"])
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        return status, "".join(out), "".join(err), states

    async def run(self, code, timeout=300):
        return await self.wait(self.send(code), timeout)

    async def restart(self):
        s = self.student
        r = await s.fetch(f"/user/{s.name}/api/kernels/{self.id}/restart", method="POST", body="")
        return r.code


def kernel_pid(user):
    """The pid of `user`'s kernel (`attention-lab --control_file ...`)."""
    out = subprocess.run(["pgrep", "-u", user, "-f", "control_file"], capture_output=True, text=True).stdout
    pids = [int(p) for p in out.split()]
    return pids[0] if pids else None


def pids(user, pattern):
    """Sorted pids of `user`'s processes whose command line holds `pattern`."""
    out = subprocess.run(["pgrep", "-u", user, "-f", pattern], capture_output=True, text=True).stdout
    return sorted(int(p) for p in out.split())


async def hub_back(student, old_pid, timeout=120):
    """Seconds until a new JupyterHub answers its API, or None."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        await asyncio.sleep(1)
        try:
            r = await student.fetch(f"/hub/api/users/{student.name}")
        except Exception:
            continue
        if r.code == 200:
            return time.monotonic() - started
    return None


def memory_group(pid):
    """The memory cgroup of `pid`, from /proc (v1's memory line, or v2's)."""
    if pid is None:
        return ""
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.strip().split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "memory" in controllers.split(","):
            return path
    return next((path for _, controllers, path in lines if controllers == ""), "")


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--users", required=True, help="two logins, comma-separated")
    parser.add_argument("--passwords", required=True, help="the hub's handout with the passwords")
    parser.add_argument("--teacher", required=True, help="the teacher's login")
    parser.add_argument("--dir", default="/srv/attention-lab-hub")
    parser.add_argument("--memory-limit", type=int, default=0,
                        help="the hub's --mem-limit in bytes: check that a cell past it is ended")
    args = parser.parse_args()
    a_name, b_name = args.users.split(",")[:2]
    passwords = read_passwords(args.passwords)
    # 6 first: a claim of an account must fail before anyone has signed in to it.
    for name, password in ((args.teacher, "a-guess-long-enough"), (args.teacher, passwords.get(b_name, "")),
                           (b_name, passwords.get(a_name, "")), (b_name, "")):
        claimer = Student(args.url, name, password)
        try:
            await claimer.sign_in()
            check(False, f"signing in as {name} with a password that is not theirs is refused (it was accepted)")
        except RuntimeError as e:
            check("403" in str(e), f"signing in as {name} with a password that is not theirs is refused ({str(e)[:80]})")
    a, b = Student(args.url, a_name, passwords.get(a_name, "")), Student(args.url, b_name, passwords.get(b_name, ""))
    for s in (a, b):
        await s.sign_in()
        await s.start_server()
    ka, kb = Kernel(a), Kernel(b)
    await ka.start()
    await kb.start()

    # 1. Isolation, from the kernel (what a cell can do) and from a shell.
    other = f"/home/{a_name}/attention-lab/000_two_heads_worked_example.ipynb"
    state = os.path.join(args.dir, "state")
    for path in (other, os.path.join(state, "jupyterhub.sqlite"), os.path.join(state, "passwords.dbm"),
                 os.path.join(state, "jupyterhub_config.py")):
        code = f'match std::fs::read(r"{path}") {{ Ok(b) => println!("READ {{}}", b.len()), Err(e) => println!("REFUSED {{}}", e) }}'
        status, out, err, _ = await kb.run(code)
        check(status == "ok" and "REFUSED" in out and "READ" not in out,
              f"{b_name}'s kernel cannot read {path} ({out.strip() or err.strip()[:120]})")
        shell = run_as(b_name, ["cat", path], capture_output=True)
        check(shell.returncode != 0, f"{b_name}'s shell cannot read {path}")
    listing = run_as(b_name, ["ls", f"/home/{a_name}"], capture_output=True)
    check(listing.returncode != 0, f"{b_name} cannot list /home/{a_name}")

    # A poisoned compiled cell: b plants or changes a library that a's kernel would load.
    shared = os.path.join(args.dir, "cells", "entries")
    entries = sorted(os.listdir(shared)) if os.path.isdir(shared) else []
    check(len(entries) > 0, f"the lessons' compiled cells are in {shared} ({len(entries)} entries)")
    targets = [os.path.join(shared, "planted"), f"/home/{a_name}/.cache/attention-lab/cells/entries/planted"]
    if entries:
        targets += [os.path.join(shared, entries[0], "0"), os.path.join(shared, entries[0], "manifest.json")]
    for path in targets:
        code = f'match std::fs::write(r"{path}", b"planted") {{ Ok(()) => println!("WROTE"), Err(e) => println!("REFUSED {{}}", e) }}'
        status, out, err, _ = await kb.run(code)
        check(status == "ok" and "REFUSED" in out, f"{b_name}'s kernel cannot write {path} ({out.strip() or err.strip()[:120]})")
        shell = run_as(b_name, ["sh", "-c", 'mkdir -p "$1" 2>/dev/null; echo planted > "$1/x" || echo planted > "$1"', "sh", path],
                       capture_output=True)
        check(shell.returncode != 0, f"{b_name}'s shell cannot write {path}")
    if entries:
        moved = run_as(b_name, ["mv", os.path.join(shared, entries[0]), os.path.join(shared, "moved")], capture_output=True)
        check(moved.returncode != 0, f"{b_name} cannot move an entry of the shared store")

    # 2. a's kernel killed mid-cell while b's kernel is mid-cell too.
    await ka.run('let warm: u8 = 1;')
    await kb.run('let warm: u8 = 1;')
    a_msg = ka.send("std::thread::sleep(std::time::Duration::from_secs(30)); println!(\"a finished\");")
    b_msg = kb.send("std::thread::sleep(std::time::Duration::from_secs(8)); println!(\"b finished\");")
    await asyncio.sleep(4)
    pid = kernel_pid(a_name)
    check(pid is not None, f"{a_name}'s kernel process found")
    if pid:
        os.kill(pid, signal.SIGKILL)
    a_status, _, _, a_states = await ka.wait(a_msg, timeout=120)
    check(a_status in ("dead", "closed"), f"{a_name} hears the kernel died (status {a_status}, states {a_states})")
    b_status, b_out, _, _ = await kb.wait(b_msg, timeout=120)
    check(b_status == "ok" and "b finished" in b_out, f"{b_name}'s cell finished ({b_status}, {b_out.strip()!r})")
    code = await ka.restart()
    check(code == 200, f"{a_name} restarts the kernel (answer {code})")
    await ka.connect()
    status, out, _, _ = await ka.run('println!("{}", 6 * 7);', timeout=300)
    check(status == "ok" and "42" in out, f"{a_name}'s restarted kernel runs a cell ({status}, {out.strip()!r})")
    status, out, _, _ = await kb.run('println!("{}", warm + 1);')
    check(status == "ok" and "2" in out, f"{b_name}'s kernel kept its variables ({status}, {out.strip()!r})")

    # 3. The hub process killed while servers run.
    saved = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {},
                        "outputs": [], "source": "let kept = 42;"}],
             "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    r = await b.fetch(f"/user/{b_name}/api/contents/fault-saved.ipynb", method="PUT",
                      body=json.dumps({"type": "notebook", "format": "json", "content": saved}))
    check(r.code in (200, 201), f"{b_name} saves a notebook (answer {r.code})")
    servers = {n: pids(n, "jupyterhub-singleuser") for n in (a_name, b_name)}
    hub = pids("root", os.path.join(args.dir, "venv/bin/jupyterhub") + " -f")
    check(len(hub) == 1, f"one JupyterHub process ({hub})")
    if hub:
        os.kill(hub[0], signal.SIGKILL)
        back = await hub_back(a, hub[0])
        check(back is not None, f"the hub is back after SIGKILL ({back and round(back, 1)} s)")
    for n in (a_name, b_name):
        now = pids(n, "jupyterhub-singleuser")
        check(now and now == servers[n], f"{n}'s server is the same process ({servers[n]} -> {now})")
    r = await b.fetch(f"/user/{b_name}/api/contents/fault-saved.ipynb")
    content = json.loads(r.body).get("content") if r.code == 200 else None
    check(content is not None and content["cells"][0]["source"] == "let kept = 42;",
          f"{b_name}'s saved notebook is intact (answer {r.code})")
    await kb.connect()
    status, out, _, _ = await kb.run('println!("{}", warm + 2);')
    check(status == "ok" and "3" in out, f"{b_name}'s kernel kept its variables across the restart ({status}, {out.strip()!r})")
    await ka.connect()

    # 4. A cell past the memory limit.
    if args.memory_limit:
        group = memory_group(kernel_pid(a_name))
        check(group.endswith(f"/attention-lab-hub/{a_name}"), f"{a_name}'s kernel runs in its memory group ({group})")
        gib = args.memory_limit // (1 << 30) + 1
        status, out, err, _ = await ka.run(
            f'let big: Vec<u8> = vec![1u8; {gib} << 30]; println!("{{}}", big.iter().map(|&b| b as u64).sum::<u64>());',
            timeout=300)
        check(status != "ok", f"{a_name}'s cell of {gib} GiB is ended ({status}, {err.strip()[:160]!r})")
        status, out, _, _ = await ka.run('println!("{}", 6 * 7);', timeout=300)
        check(status == "ok" and "42" in out, f"{a_name}'s kernel runs the next cell ({status}, {out.strip()!r})")
        status, out, _, _ = await kb.run('println!("{}", warm + 3);')
        check(status == "ok" and "4" in out, f"{b_name}'s kernel is untouched ({status}, {out.strip()!r})")

    # 5. b tries every endpoint of a's kernel (and server) with what needs no key.
    await ka.run('let survivor: u8 = 7;')
    before = kernel_pid(a_name)
    venv = os.path.join(args.dir, "venv")
    # The script on stdin: a student may not be able to read this checkout.
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_attack.py")) as f:
        attack = run_as(b_name, [os.path.join(venv, "bin/python"), "-", a_name], input=f.read(),
                        capture_output=True, text=True)
    check(attack.returncode == 0, f"{b_name} ran the attack ({attack.stderr.strip()[-200:]})")
    tried = json.loads(attack.stdout or "{}")
    check(len(tried.get("found", [])) >= 1, f"{b_name} found {a_name}'s endpoints ({tried.get('found')})")
    print(f"     reached {tried.get('reached')}, refused {tried.get('refused')}", flush=True)
    status, out, _, _ = await ka.run('println!("{}", survivor + 1);')
    check(status == "ok" and "8" in out, f"{a_name}'s kernel kept its variables after {b_name}'s messages ({status}, {out.strip()!r})")
    check(kernel_pid(a_name) == before, f"{a_name}'s kernel is the same process ({before} -> {kernel_pid(a_name)})")

    for k in (ka, kb):
        k.ws.close()
        await k.student.fetch(f"/user/{k.student.name}/api/kernels/{k.id}", method="DELETE")
    if FAILURES:
        print(f"{len(FAILURES)} failed", flush=True)
        sys.exit(1)
    print("all fault checks passed", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
