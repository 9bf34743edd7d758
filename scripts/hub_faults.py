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
   kernel keeps its variables; the students' groups share a parent whose limit leaves an
   eighth of the machine to the system;
5. the network: as one student, every kernel endpoint of the other (TCP ports by owner, Unix
   sockets under their home) gets raw bytes and messages signed with a guessed key or none
   (scripts/kernel_attack.py); the other's kernel is the same process and keeps its variables;
6. the accounts: signing in as the teacher, or as the other student, without the password
   root issued is refused (403), and the right password still works afterwards; changing a
   password without the current one is refused, with it works; a student deleted in the
   Admin page and added again signs in with their password, and a guess is still refused;
7. the exchange: before the first release a student cannot take the course's folders
   (make, chmod, move or remove them, or plant a notebook in outbound/); the teacher's
   release works; a student cannot list inbound/ or read, replace or rename another's
   submission, even by its name; the teacher collects it, and neither a later "submission"
   made in another's name nor one holding a link to the teacher's source;
8. processes: each kernel runs in its student's pids cgroup with the limit set; a bounded
   fork bomb in one student's cell stops at that limit, the other student's next cell runs
   meanwhile, and the first student's kernel runs the next one.

Run as root with the hub's Python, against a hub whose roster holds two students:

    /srv/attention-lab-hub/venv/bin/python scripts/hub_faults.py --url http://127.0.0.1:8000 \
        --users ann,ben --passwords handout.txt --teacher teacher --dir /srv/attention-lab-hub
"""

import argparse
import asyncio
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hub_grading import as_user, run_as  # noqa: E402
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
        # As hub_load.py waits: the server answers the upgrade once the kernel replied to
        # kernel_info, 15-20 s for a kernel started on a busy machine (tornado's 20 s
        # default ended this script there once).
        self.ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {s.token}"},
                                                      connect_timeout=600, request_timeout=600))
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


def cgroup_of(pid, controller="memory"):
    """The `controller`'s cgroup of `pid`, from /proc (v1's line of that controller, or v2's)."""
    if pid is None:
        return ""
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.strip().split(":", 2) for line in f]
    for _, controllers, path in lines:
        if controller in controllers.split(","):
            return path
    return next((path for _, controllers, path in lines if controllers == ""), "")


def memory_max(group):
    """The memory limit of the memory cgroup `group` in bytes (v1's memory.limit_in_bytes or
    v2's memory.max), or None."""
    for root, name in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("/sys/fs/cgroup", "memory.max")):
        try:
            with open(os.path.join(root, group.lstrip("/"), name)) as f:
                text = f.read().strip()
            return None if text == "max" else int(text)
        except OSError:
            continue
    return None


def pids_max(group):
    """pids.max of the pids cgroup `group` (v1's hierarchy or v2's), or None."""
    for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
        try:
            with open(os.path.join(root, group.lstrip("/"), "pids.max")) as f:
                return f.read().strip()
        except OSError:
            continue
    return None


def exchange(args, a_name, b_name):
    """7: the course's exchange, before and after the first release."""
    venv = os.path.join(args.dir, "venv")
    root = os.path.join(args.dir, "exchange")
    course = os.path.join(root, "attention-lab")
    # Before the first release: the set-up's folders, nothing in them.
    for sub in ("outbound", "inbound", "feedback"):
        for entry in glob.glob(os.path.join(course, sub, "*")):
            shutil.rmtree(entry, ignore_errors=True)
    teacher_uid = pwd_uid(args.teacher)
    for sub, mode in (("", 0o755), ("outbound", 0o755), ("inbound", 0o3733), ("feedback", 0o711)):
        st = os.lstat(os.path.join(course, sub))
        check(st.st_uid == teacher_uid and st.st_mode & 0o7777 == mode,
              f"exchange/attention-lab/{sub} is the teacher's, mode {oct(mode)} ({st.st_uid}, {oct(st.st_mode & 0o7777)})")
    squat(a_name, venv, root, course, "before the first release")
    got = as_user(args.teacher, "cd course && nbgrader generate_assignment ps1 --force && nbgrader release_assignment ps1 --force",
                  venv, check_status=False)
    check(got.returncode == 0 and os.path.isfile(os.path.join(course, "outbound/ps1/softmax.ipynb")),
          f"the teacher releases ps1 ({got.stderr.strip()[-160:]})")
    squat(a_name, venv, root, course, "after the release")
    for user in (a_name, b_name):
        shutil.rmtree(os.path.expanduser(f"~{user}/ps1"), ignore_errors=True)
        got = as_user(user, "nbgrader fetch_assignment ps1 --course attention-lab && nbgrader submit ps1 --course attention-lab",
                      venv, check_status=False)
        check(got.returncode == 0, f"{user} fetches and submits ps1 ({got.stderr.strip()[-160:]})")
    got = as_user(b_name, f"ls {course}/inbound", venv, check_status=False)
    check(got.returncode != 0, f"{b_name} cannot list inbound/ ({got.stderr.strip()[:80]})")
    theirs = glob.glob(os.path.join(course, "inbound", f"{a_name}+ps1+*"))
    check(len(theirs) == 1, f"{a_name}'s submission is in inbound/ ({theirs})")
    for path in theirs:
        notebook = os.path.join(path, "softmax.ipynb")
        got = as_user(b_name, f"cat '{notebook}'", venv, check_status=False)
        check(got.returncode != 0, f"{b_name} cannot read {a_name}'s submission, even by its name ({got.stderr.strip()[:80]})")
        got = as_user(b_name, f"echo '{{}}' > '{notebook}' || rm -rf '{path}'", venv, check_status=False)
        check(got.returncode != 0 and os.path.isdir(path), f"{b_name} cannot replace or remove {a_name}'s submission")
        # inbound/ is writable by all (nbgrader's design): only its sticky bit keeps b from
        # renaming a's submission away from the teacher's collect, or to b's own name.
        taken = os.path.join(course, "inbound", f"{b_name}+ps1+taken")
        got = as_user(b_name, f"mv '{path}' '{taken}'", venv, check_status=False)
        check(got.returncode != 0 and os.path.isdir(path) and not os.path.exists(taken),
              f"{b_name} cannot rename {a_name}'s submission ({got.stderr.strip()[:80]})")
    got = as_user(args.teacher, "cd course && nbgrader collect ps1 --update", venv, check_status=False)
    collected = os.path.expanduser(f"~{args.teacher}/course/submitted/{a_name}/ps1/softmax.ipynb")
    check(got.returncode == 0 and os.path.isfile(collected), f"the teacher collects {a_name}'s submission ({got.stderr.strip()[-160:]})")
    # inbound/ is writable by all: a hands in a later "submission" in b's name, and one of
    # a's own holding a link to the teacher's source (the solution).
    later = "2099-01-01 00:00:00.000000 UTC"
    forged = os.path.join(course, "inbound", f"{b_name}+ps1+{later}+forged")
    linked = os.path.join(course, "inbound", f"{a_name}+ps1+{later}+linked")
    source = os.path.expanduser(f"~{args.teacher}/course/source/ps1/softmax.ipynb")
    got = as_user(a_name, f"mkdir '{forged}' '{linked}' && cp ps1/softmax.ipynb '{forged}/' && "
                          f"echo forged > '{forged}/timestamp.txt' && ln -s '{source}' '{linked}/softmax.ipynb'",
                  venv, check_status=False)
    check(got.returncode == 0, f"{a_name} plants a submission in {b_name}'s name and one with a link ({got.stderr.strip()[:80]})")
    got = as_user(args.teacher, "cd course && nbgrader collect ps1 --update", venv, check_status=False)
    theirs = os.path.expanduser(f"~{args.teacher}/course/submitted/{b_name}/ps1/softmax.ipynb")
    with open(os.path.expanduser(f"~{b_name}/ps1/softmax.ipynb"), "rb") as f:
        genuine = f.read()
    with open(theirs, "rb") as f:
        kept = f.read()
    check(got.returncode == 0 and kept == genuine and not os.path.exists(forged),
          f"the teacher's collect keeps {b_name}'s own submission, not the one {a_name} made in their name "
          f"({got.stderr.strip()[-160:]})")
    with open(source, "rb") as f:
        solution = f.read()
    leaked = os.path.islink(collected) or (os.path.isfile(collected) and open(collected, "rb").read() == solution)
    check(not leaked, f"a link in {a_name}'s submission does not collect the teacher's source")


def squat(user, venv, root, course, when):
    """`user` tries to take the course's folders in the exchange; each try must fail."""
    for what, script in (("make outbound/ps1/", f"mkdir -p {course}/outbound/ps1/x"),
                         ("plant a notebook in outbound/", f"echo '{{}}' > {course}/outbound/softmax.ipynb"),
                         ("open the course's folder to all", f"chmod 777 {course}"),
                         ("move the course's folder", f"mv {course} {root}/taken"),
                         ("remove outbound/", f"rm -rf {course}/outbound"),
                         ("make the folder anew", f"mkdir {course}")):
        got = as_user(user, script, venv, check_status=False)
        check(got.returncode != 0, f"{user} cannot {what} {when} ({got.stderr.strip()[:80]})")


def pwd_uid(user):
    import pwd
    return pwd.getpwnam(user).pw_uid


async def form(browser, path, fields):
    """Posts `fields` to the page at `path` as its form does (with the page's _xsrf value);
    returns the answer's status."""
    page = await browser.fetch(path, token=False)
    xsrf = re.search(r'name="_xsrf" value="([^"]*)"', page.body.decode("utf8", "replace"))
    body = urllib.parse.urlencode({**fields, "_xsrf": xsrf.group(1) if xsrf else ""})
    r = await browser.fetch(path, method="POST", body=body, token=False,
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
    return r.code


async def passwords_need_the_current_one(student, other_password):
    """6: /hub/auth/change-password, in a browser signed in by the login form, refuses
    without the current password and works with it; the password is changed back."""
    browser = Student(student.url, student.name, student.password)
    code = await form(browser, "/hub/login", {"username": student.name, "password": student.password})
    check(code == 302, f"{student.name} signs in by the login form (answer {code})")
    page = "/hub/auth/change-password"
    new = "changed-" + uuid.uuid4().hex[:12]
    for current in ("", other_password, "a-guess-long-enough"):
        code = await form(browser, page, {"current_password": current, "password": new})
        check(code == 403, f"{student.name}'s password is not changed without the current one (answer {code})")
    check(await can_sign_in(student.url, student.name, student.password),
          f"{student.name}'s password still works after the refused changes")
    code = await form(browser, page, {"current_password": student.password, "password": new})
    check(code == 200, f"{student.name} changes the password with the current one (answer {code})")
    check(await can_sign_in(student.url, student.name, new) and not await can_sign_in(student.url, student.name, student.password),
          f"{student.name}'s new password works, the old one no longer")
    code = await form(browser, page, {"current_password": new, "password": student.password})
    check(code == 200 and await can_sign_in(student.url, student.name, student.password),
          f"{student.name} changes it back (answer {code})")


async def can_sign_in(url, name, password):
    try:
        await Student(url, name, password).sign_in()
        return True
    except RuntimeError:
        return False


async def deleted_and_added_again(args, name, password, teacher_password):
    """6: the teacher deletes `name` in the Admin page (the API it calls) and adds them
    again: nobody can claim the account by signing in first, its password still works."""
    teacher = Student(args.url, args.teacher, teacher_password)
    await teacher.sign_in()
    r = await teacher.fetch(f"/hub/api/users/{name}/server", method="DELETE")
    for _ in range(60):
        info = json.loads((await teacher.fetch(f"/hub/api/users/{name}")).body)
        if not info.get("servers"):
            break
        await asyncio.sleep(1)
    r = await teacher.fetch(f"/hub/api/users/{name}", method="DELETE")
    check(r.code == 204, f"the teacher deletes {name} (answer {r.code})")
    check(not await can_sign_in(args.url, name, "a-guess-long-enough"), f"deleted {name} cannot be claimed with a guess")
    r = await teacher.fetch(f"/hub/api/users/{name}", method="POST", body="{}")
    check(r.code == 201, f"the teacher adds {name} again (answer {r.code})")
    check(not await can_sign_in(args.url, name, "another-guess-long"), f"{name}, added again, cannot be claimed with a guess")
    check(await can_sign_in(args.url, name, password), f"{name}, added again, signs in with their own password")


async def fork_bomb(args, ka, kb, a_name, b_name):
    """8: a bounded fork bomb in a's cell, inside a's pids cgroup, whose limit is checked
    first; b's cell runs meanwhile."""
    pid = kernel_pid(a_name)
    group = cgroup_of(pid, "pids")
    limit = pids_max(group)
    check(group.endswith(f"/attention-lab-hub/{a_name}") and limit == str(args.pids_limit),
          f"{a_name}'s kernel runs in its pids group ({group}, pids.max {limit})")
    if limit != str(args.pids_limit):
        check(False, "the fork bomb is not run outside a pids limit")
        return
    # At most 4 x the limit, each child ends on its own within 60 s; the cell holds what it
    # got for 10 s (while b's cell runs), then ends them.
    # One block: evcxr keeps no variable of it (a kept `Vec::new()` needs its type inferred).
    bomb = ka.send(f"""{{
let mut kids: Vec<std::process::Child> = Vec::new();
let mut refused = String::new();
for _ in 0..{4 * args.pids_limit} {{
    match std::process::Command::new("sleep").arg("60").spawn() {{
        Ok(child) => kids.push(child),
        Err(e) => {{ refused = e.to_string(); break; }}
    }}
}}
let spawned = kids.len();
std::thread::sleep(std::time::Duration::from_secs(10));
for child in kids.iter_mut() {{ let _ = child.kill(); let _ = child.wait(); }}
println!("SPAWNED {{}} REFUSED {{}}", spawned, refused);
}}""")
    await asyncio.sleep(8)
    status, out, _, _ = await kb.run('println!("{}", 40 + 2);', timeout=120)
    check(status == "ok" and "42" in out, f"{b_name}'s cell runs while {a_name}'s fork bomb holds its group ({status}, {out.strip()!r})")
    status, out, err, _ = await ka.wait(bomb, timeout=300)
    spawned = int(out.split()[1]) if out.startswith("SPAWNED") else None
    check(spawned is not None and spawned < args.pids_limit and "REFUSED " in out and out.strip().split("REFUSED ")[1],
          f"{a_name}'s fork bomb stops at the limit ({status}, {out.strip()[:120]!r} {err.strip()[:80]})")
    status, out, _, _ = await ka.run('println!("{}", 6 * 7);', timeout=300)
    check(status == "ok" and "42" in out, f"{a_name}'s kernel runs the next cell ({status}, {out.strip()!r})")


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--users", required=True, help="two logins, comma-separated")
    parser.add_argument("--passwords", required=True, help="the hub's handout with the passwords")
    parser.add_argument("--teacher", required=True, help="the teacher's login")
    parser.add_argument("--dir", default="/srv/attention-lab-hub")
    parser.add_argument("--memory-limit", type=int, default=0,
                        help="the hub's --mem-limit in bytes: check that a cell past it is ended")
    parser.add_argument("--pids-limit", type=int, default=512, help="the hub's --pids-limit (0: not checked)")
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
    await passwords_need_the_current_one(a, passwords.get(b_name, ""))
    # 7. The exchange, as the students' and teacher's shells (nbgrader's commands).
    exchange(args, a_name, b_name)
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
        group = cgroup_of(kernel_pid(a_name))
        check(group.endswith(f"/attention-lab-hub/{a_name}"), f"{a_name}'s kernel runs in its memory group ({group})")
        # The students' limits may add up past the machine; their parent's may not: it keeps
        # an eighth of the machine (at least 1 GiB) for the system and the hub.
        with open("/proc/meminfo") as f:
            total = int(next(line for line in f if line.startswith("MemTotal:")).split()[1]) * 1024
        parent = memory_max(os.path.dirname(group))
        check(parent is not None and (1 << 30) <= parent <= total - total // 8,
              f"the students' memory is capped together below the machine's ({parent} of {total} bytes)")
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

    # 8. A fork bomb in a's kernel, inside a's pids limit.
    if args.pids_limit:
        await fork_bomb(args, ka, kb, a_name, b_name)

    for k in (ka, kb):
        k.ws.close()
        await k.student.fetch(f"/user/{k.student.name}/api/kernels/{k.id}", method="DELETE")
    # 6, last: b deleted in the Admin page and added again.
    await deleted_and_added_again(args, b_name, passwords.get(b_name, ""), passwords.get(args.teacher, ""))
    if FAILURES:
        print(f"{len(FAILURES)} failed", flush=True)
        sys.exit(1)
    print("all fault checks passed", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
