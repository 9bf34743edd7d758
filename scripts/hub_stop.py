"""`attention-lab hub` stopped each way it can be (SIGINT, as Ctrl-C sends; the teacher's
"Shut down hub"; SIGTERM), each time with a student's server running: the hub leaves none
of the cgroups it made (each student's memory and pids group, and its own) and no process
of the student.

Run as root with the hub's Python, after `attention-lab hub --setup-only` made the class
(and with no hub serving on the port):

    /srv/attention-lab-hub/venv/bin/python scripts/hub_stop.py --bin target/debug/attention-lab \
        --roster class.csv --teacher teacher --user ann --passwords handout.txt \
        --dir /srv/attention-lab-hub --port 8019
"""

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hub_faults import FAILURES, cgroup_of, check  # noqa: E402
from hub_load import Student, read_passwords  # noqa: E402

def hub_groups():
    """The folders the hub's groups would be, below this process's own cgroups (the hub,
    started by us, makes them there): v1's memory and pids hierarchies, or v2's."""
    found = set()
    for controller in ("memory", "pids"):
        path = cgroup_of("self", controller).lstrip("/")
        for root in (os.path.join("/sys/fs/cgroup", controller), "/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            found.add(os.path.join(root, path, "attention-lab-hub"))
    return sorted(found)


def serving(port):
    """Whether JupyterHub answers through its proxy: the proxy takes connections before the
    hub has put its routes in, and a sign-in then gets the proxy's 404."""
    with socket.socket() as s:
        s.settimeout(0.5)
        if s.connect_ex(("127.0.0.1", port)) != 0:
            return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/hub/api", timeout=5) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


async def once(args, way, passwords):
    log = open(os.path.join(args.logs, f"hub-stop-{way}.log"), "w")
    # The port must be free: a hub left serving there would answer for this one.
    check(not serving(args.port), f"{way}: nothing serves on port {args.port} before the hub starts")
    started = time.monotonic()
    hub = subprocess.Popen([args.bin, "hub", "--roster", args.roster, "--teacher", args.teacher, "--dir", args.dir,
                            "--ip", "127.0.0.1", "--port", str(args.port), "--mem-limit", "1536M"],
                           stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        await stop_one_way(args, way, passwords, hub, started)
    finally:
        # A check that raised leaves no hub behind it (nor on the port for the next way): the
        # hub is asked first, then its whole session (JupyterHub, the proxy) is ended.
        if hub.poll() is None:
            hub.terminate()
            try:
                hub.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(hub.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        hub.wait()


async def stop_one_way(args, way, passwords, hub, started):
    """Waits for `hub` to serve, starts the student's server and stops the hub `way`."""
    url = f"http://127.0.0.1:{args.port}"
    while not serving(args.port) and hub.poll() is None and time.monotonic() - started < 600:
        time.sleep(1)
    check(hub.poll() is None, f"{way}: the hub serves ({time.monotonic() - started:.0f} s)")
    if hub.poll() is not None:
        return
    student = Student(url, args.user, passwords.get(args.user, ""))
    await student.sign_in()
    await student.start_server()
    made = [g for g in hub_groups() if os.path.isdir(os.path.join(g, args.user))]
    check(len(made) >= 1, f"{way}: {args.user}'s server runs in the hub's groups ({made})")
    if way == "SIGINT":
        hub.send_signal(signal.SIGINT)
    elif way == "SIGTERM":
        hub.send_signal(signal.SIGTERM)
    else:
        teacher = Student(url, args.teacher, passwords.get(args.teacher, ""))
        await teacher.sign_in()
        r = await teacher.fetch("/hub/api/shutdown", method="POST", body="{}")
        check(r.code == 202, f"{way}: the teacher shuts the hub down (answer {r.code})")
    try:
        code = hub.wait(timeout=60)
    except subprocess.TimeoutExpired:
        hub.kill()
        code = hub.wait()
    check(code in (0, -signal.SIGINT, -signal.SIGTERM), f"{way}: the hub ended ({code})")
    left = [g for g in hub_groups() if os.path.exists(g)]
    check(not left, f"{way}: no cgroup of the hub's is left ({left})")
    procs = subprocess.run(["pgrep", "-u", args.user], capture_output=True, text=True).stdout.split()
    check(not procs, f"{way}: no process of {args.user} is left ({procs})")


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="the attention-lab binary")
    parser.add_argument("--roster", required=True)
    parser.add_argument("--teacher", required=True)
    parser.add_argument("--user", required=True, help="a student of the roster")
    parser.add_argument("--passwords", required=True, help="the hub's handout with the passwords")
    parser.add_argument("--dir", default="/srv/attention-lab-hub")
    parser.add_argument("--port", type=int, default=8019)
    parser.add_argument("--logs", default="/tmp", help="where each run's log goes")
    parser.add_argument("--ways", default="SIGINT,shutdown,SIGTERM")
    args = parser.parse_args()
    passwords = read_passwords(args.passwords)
    for way in args.ways.split(","):
        await once(args, way, passwords)
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} stop checks failed")
    print("all stop checks passed")


if __name__ == "__main__":
    asyncio.run(main())
