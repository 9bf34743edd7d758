"""`attention-lab hub --spawner slurm` on a Slurm cluster of two nodes made on this machine,
live: four students' servers as Slurm jobs spread over both nodes, each running lesson 000's
cells from the shared compiled-cell cache, one job killed and started again, everything
stopped at the end.

Status: the hub side (`--spawner slurm`) is not in `attention-lab hub` yet (issue 46, in
progress; deploy/slurm/README.md); until it lands, step 1 runs and step 2 stops at the flag.

The two nodes are two slurmd, each in a network namespace of its own (slnb1 10.77.0.2 and
slnb2 10.77.0.3, on a bridge slbr0 10.77.0.1 in this machine's namespace, where slurmctld and
the hub run). Why namespaces and not Debian's multiple-slurmd build (which it is, and which
also works here; deploy/slurm/groundwork/NOTES.md): each node then has an address of its own,
the servers listen on it and the hub reaches them, and they reach the hub's API, across a
real hop, as in a cluster. With multiple slurmd everything is 127.0.0.1, which hides a hub
that binds or points at the wrong address. The filesystem is this machine's: the hub's --dir
(lessons, shared cell store, venv) and the homes are read by both nodes as a cluster's NFS
would be. The daemons are started through `nsenter --net` (not `ip netns exec`, which
remounts /sys and leaves slurmd no cgroups for the memory limit).

Steps, each timed:
1. munge (started unless running), the bridge and namespaces, slurmctld and the two slurmd
   (their config, spool and logs in a temporary folder; `SLURM_CONF` points there);
2. the hub's set-up (`--setup-only`: venv, warm build of every lesson; ~20-30 min the first
   time in a --dir, seconds after) with a roster of four students made here;
3. `attention-lab hub --spawner slurm` on 127.0.0.1:--port (its API on --port + 81 for the
   nodes, at 10.77.0.1); scripts/hub_load.py signs the four in, starts their servers and runs
   lesson 000 with --expect-loaded (no cell library compiled: all from the shared cache);
4. squeue: four jobs, each as its student, with the job's memory limit from --mem-limit in
   its cgroup, two on each node;
5. one job scancelled: the hub shows that student's server stopped, the other node's jobs
   and servers are untouched; the student starts it again and runs cells;
6. the hub stopped (SIGTERM): no student's job or process is left; then everything the script
   started is stopped (also on failure), and the script checks nothing is left.

Run as root on a machine with Slurm and munge (`apt-get install slurm-wlm munge`), with the
binary to test:

    python3 scripts/hub_slurm.py --bin target/debug/attention-lab --dir /srv/attention-lab-hub-slurm

Exits 1 when a check fails (the hub's log tail and the Slurm logs' folder are printed).
"""

import argparse
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
import urllib.error
import urllib.request

STUDENTS = ["sl-ann", "sl-ben", "sl-cat", "sl-dan"]
TEACHER = "sl-teacher"
BRIDGE, BRIDGE_IP = "slbr0", "10.77.0.1"
NODES = [("b1", "slnb1", "10.77.0.2", 1), ("b2", "slnb2", "10.77.0.3", 0)]  # name, netns, addr, CpuSpecList
JOB = "spawner-jupyterhub"  # batchspawner's job name
LESSON = "notebooks/000_two_heads_worked_example.ipynb"

SLURM_CONF = """\
ClusterName=hubslurm
SlurmctldHost=vm({bridge_ip})
SlurmctldPort=16827
SlurmdPort=16828
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={tmp}/ctld
SlurmdSpoolDir={tmp}/spool/%n
SlurmctldPidFile={tmp}/slurmctld.pid
SlurmdPidFile={tmp}/slurmd-%n.pid
SlurmctldLogFile={tmp}/log/slurmctld.log
SlurmdLogFile={tmp}/log/slurmd-%n.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
ReturnToService=2
JobRequeue=0
MpiDefault=none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={tmp}/log/jobcomp.txt
{nodes}
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8 LLN=YES
"""
NODE_LINE = ("NodeName={name} NodeHostname={name} NodeAddr={addr} CPUs=2 CpuSpecList={spec} "
             "RealMemory=10000 State=UNKNOWN")
CGROUP_CONF = """\
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
"""

TIMES = {}


class Failed(Exception):
    pass


def check(ok, what):
    if not ok:
        raise Failed(what)
    print(f"ok: {what}", flush=True)


def timed(name):
    """A context that records how long its block took under `name`."""
    class Timer:
        def __enter__(self):
            self.t = time.monotonic()

        def __exit__(self, *exc):
            TIMES[name] = round(time.monotonic() - self.t, 1)
            print(f"time: {name} {TIMES[name]} s", flush=True)
    return Timer()


def sh(*cmd, check_rc=True, env=None, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    if check_rc and out.returncode != 0:
        raise Failed(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()[:300]}")
    return out.stdout


def wait_for(what, test, timeout, every=0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if test():
            return
        time.sleep(every)
    raise Failed(f"{what}: not within {timeout} s")


class Run:
    """What the script started, each stopped by `stop_all` in reverse order."""

    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="hub-slurm-")
        os.chmod(self.tmp, 0o755)
        self.conf = os.path.join(self.tmp, "etc/slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.daemons = []  # (name, Popen)
        self.munged = None  # munged's pid, when this script started it
        self.net = False
        self.users = False
        self.hub = None

    # -- the cluster --------------------------------------------------------------------

    def start_munge(self):
        if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
            print("munge: already running (left running at the end)", flush=True)
            return
        key = "/etc/munge/munge.key"
        if not os.path.exists(key):
            sh("mungekey", "--create", f"--keyfile={key}")
            shutil.chown(key, "munge", "munge")
            os.chmod(key, 0o400)
        sh("install", "-d", "-o", "munge", "-g", "munge", "-m", "755", "/run/munge")
        # munged forks into the background itself; its pid file says which process it is.
        sh("su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged")
        wait_for("munge", lambda: subprocess.run(["munge", "-n"], capture_output=True).returncode == 0, 10)
        with open("/run/munge/munged.pid") as f:
            self.munged = int(f.read().strip())

    def start_net(self):
        for _, ns, _, _ in NODES:
            if os.path.exists(f"/run/netns/{ns}"):
                raise Failed(f"network namespace {ns} exists already (a run left it? ip netns del {ns})")
        self.net = True
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for i, (_, ns, addr, _) in enumerate(NODES, 1):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", f"slvb{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", f"slvb{i}", "master", BRIDGE, "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "route", "add", "default", "via", BRIDGE_IP)

    def write_conf(self):
        for sub in ["etc", "ctld", "log", "spool/b1", "spool/b2"]:
            os.makedirs(os.path.join(self.tmp, sub), exist_ok=True)
        for sub in ["ctld", "log"]:
            shutil.chown(os.path.join(self.tmp, sub), "slurm", "slurm")
        nodes = "\n".join(NODE_LINE.format(name=n, addr=a, spec=s) for n, _, a, s in NODES)
        with open(self.conf, "w") as f:
            f.write(SLURM_CONF.format(bridge_ip=BRIDGE_IP, tmp=self.tmp, nodes=nodes))
        # slurmd reads cgroup.conf from beside slurm.conf.
        with open(os.path.join(self.tmp, "etc/cgroup.conf"), "w") as f:
            f.write(CGROUP_CONF)

    def daemon(self, name, cmd):
        log = open(os.path.join(self.tmp, f"log/{name}.out"), "w")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, env=self.env)
        self.daemons.append((name, proc))

    def start_slurm(self):
        self.daemon("slurmctld", ["slurmctld", "-D", "-f", self.conf])
        wait_for("slurmctld answering", lambda: "UP" in sh("scontrol", "ping", check_rc=False, env=self.env), 20)
        for name, ns, _, _ in NODES:
            self.daemon(f"slurmd-{name}", ["nsenter", f"--net=/run/netns/{ns}",
                                           "slurmd", "-D", "-N", name, "-f", self.conf])

        def both_idle():
            states = sh("sinfo", "-h", "-N", "-o", "%N %t", check_rc=False, env=self.env).split()
            return states.count("idle") == 2
        wait_for("both nodes idle", both_idle, 30)

    # -- the class ----------------------------------------------------------------------

    def hub_cmd(self, *extra):
        roster = os.path.join(self.tmp, "roster.csv")
        return [self.args.bin, "hub", "--roster", roster, "--teacher", TEACHER,
                "--dir", self.args.dir, *extra]

    def set_up(self):
        for user in STUDENTS + [TEACHER]:
            try:
                pwd.getpwnam(user)
                raise Failed(f"user {user} exists already (a run left it? userdel -r {user})")
            except KeyError:
                pass
        with open(os.path.join(self.tmp, "roster.csv"), "w") as f:
            f.write("id,name\n" + "".join(f"{s},{s[3:].title()}\n" for s in STUDENTS))
        self.users = True
        out = subprocess.run(self.hub_cmd("--setup-only"), capture_output=True, text=True)
        if out.returncode != 0:
            raise Failed(f"hub --setup-only: exit {out.returncode}: {out.stderr.strip()[-500:]}")
        self.handout = os.path.join(self.tmp, "handout.txt")
        with open(self.handout, "w") as f:
            f.write(out.stdout)

    def start_hub(self):
        port = self.args.port
        self.hub_log = open(os.path.join(self.tmp, "log/hub.log"), "w")
        cmd = self.hub_cmd("--ip", "127.0.0.1", "--port", str(port), "--spawner", "slurm",
                           "--partition", "main", "--hub-ip", BRIDGE_IP,
                           "--mem-limit", self.args.mem_limit)
        self.hub = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.hub_log,
                                    stderr=self.hub_log, env=self.env)
        self.url = f"http://127.0.0.1:{port}"

        def answers():
            if self.hub.poll() is not None:
                raise Failed(f"the hub ended (status {self.hub.returncode}) before serving")
            try:
                urllib.request.urlopen(self.url + "/hub/api", timeout=2)
                return True
            except (urllib.error.URLError, OSError):
                return False
        wait_for("the hub answering", answers, 300, every=0.5)

    def stop_hub(self):
        if self.hub is None or self.hub.poll() is not None:
            return
        self.hub.send_signal(signal.SIGTERM)
        try:
            self.hub.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.hub.kill()
            self.hub.wait()

    # -- the end --------------------------------------------------------------------------

    def stop_all(self):
        """Everything this run started, in reverse; each step runs even when one before
        failed."""
        steps = [
            ("hub", self.stop_hub),
            ("jobs", self.cancel_all),
        ]
        for name, proc in reversed(self.daemons):
            steps.append((name, lambda proc=proc: stop(proc)))
        steps.append(("node cgroups", remove_node_groups))
        steps.append(("munged", self.stop_munge))
        steps.append(("network", self.stop_net))
        steps.append(("users", self.remove_users))
        for name, step in steps:
            try:
                step()
            except Exception as e:  # noqa: BLE001 -- every step must run
                print(f"stopping {name}: {e}", flush=True)

    def cancel_all(self):
        """Every job of this run's cluster cancelled, and gone, before its slurmd stop (a job
        whose slurmd stops first keeps running, outside Slurm)."""
        if not self.daemons:
            return
        sh("scancel", "--partition", "main", check_rc=False, env=self.env)
        wait_for("every job gone", lambda: not sh("squeue", "-h", check_rc=False, env=self.env).strip(), 30)

    def stop_munge(self):
        if self.munged:
            os.kill(self.munged, signal.SIGTERM)
            wait_for("munged ending", lambda: not os.path.exists(f"/proc/{self.munged}"), 10)

    def stop_net(self):
        if not self.net:
            return
        for _, ns, _, _ in NODES:
            sh("ip", "netns", "del", ns, check_rc=False)
        sh("ip", "link", "del", BRIDGE, check_rc=False)

    def remove_users(self):
        if not self.users:
            return
        for user in STUDENTS + [TEACHER]:
            for pid in sh("pgrep", "-u", user, check_rc=False).split():
                os.kill(int(pid), signal.SIGKILL)
            sh("userdel", "-r", user, check_rc=False)

    def leftovers(self):
        """What of this run is still there, one line each."""
        left = []
        for name, proc in self.daemons + ([("hub", self.hub)] if self.hub else []):
            if proc.poll() is None:
                left.append(f"{name} (pid {proc.pid}) still running")
        if self.munged and os.path.exists(f"/proc/{self.munged}"):
            left.append(f"munged (pid {self.munged}) still running")
        for _, ns, _, _ in NODES:
            if os.path.exists(f"/run/netns/{ns}"):
                left.append(f"network namespace {ns}")
        if os.path.exists(f"/sys/class/net/{BRIDGE}"):
            left.append(f"bridge {BRIDGE}")
        for user in STUDENTS + [TEACHER]:
            try:
                pwd.getpwnam(user)
                left.append(f"user {user}")
            except KeyError:
                pass
        for ctl in ["memory", "cpuset", "freezer"]:
            for name, _, _, _ in NODES:
                if os.path.exists(f"/sys/fs/cgroup/{ctl}/slurm_{name}"):
                    jobs = [d for _, dirs, _ in os.walk(f"/sys/fs/cgroup/{ctl}/slurm_{name}")
                            for d in dirs if d.startswith("job_")]
                    left.append(f"cgroup {ctl}/slurm_{name} {', '.join(jobs)}")
        return left


def remove_node_groups():
    """slurmd's own groups of the nodes (slurm_b1, empty once their jobs ended) removed;
    a group that still holds a job's processes stays, for `leftovers` to name."""
    for ctl in ["memory", "cpuset", "freezer"]:
        for name, _, _, _ in NODES:
            top = f"/sys/fs/cgroup/{ctl}/slurm_{name}"
            for root, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(root)
                except OSError:
                    pass


def stop(proc, timeout=15):
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- the checks ---------------------------------------------------------------------------

def jobs(env):
    """{student: (job id, node, state)} of the students' server jobs."""
    out = sh("squeue", "-h", "--name", JOB, "-o", "%u %i %N %T", env=env)
    found = {}
    for line in out.splitlines():
        user, job, node, state = line.split()
        found[user] = (job, node, state)
    return found


class Student:
    """A student's side of the hub's REST API (a token from their password)."""

    def __init__(self, url, name, password):
        self.url, self.name = url, name
        body = json.dumps({"auth": {"username": name, "password": password}, "expires_in": 3600})
        self.token = json.loads(self.call(f"/hub/api/users/{name}/tokens", "POST", body, token=False))["token"]

    def call(self, path, method="GET", body=None, token=True):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=body.encode() if body is not None else None)
        if token:
            req.add_header("Authorization", f"token {self.token}")
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.read().decode() or "{}"

    def server(self):
        """The hub's record of the student's server ({} when stopped)."""
        return (json.loads(self.call(f"/hub/api/users/{self.name}")).get("servers") or {}).get("", {})


def passwords(handout):
    """{login: password} from the handout, read by scripts/hub_load.py's own reader (its
    websocket client, tornado from the hub's venv, is stubbed: this script needs only the
    standard library)."""
    stub = types.ModuleType("tornado")
    stub.httpclient = types.SimpleNamespace(AsyncHTTPClient=None, HTTPRequest=None)
    stub.websocket = types.SimpleNamespace(websocket_connect=None)
    for name, module in [("tornado", stub), ("tornado.httpclient", stub.httpclient),
                         ("tornado.websocket", stub.websocket)]:
        sys.modules.setdefault(name, module)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hub_load
    return hub_load.read_passwords(handout)


def load(run, users, json_name):
    """scripts/hub_load.py over `users` (lesson 000, every cell library from the cache)."""
    py = os.path.join(run.args.dir, "venv/bin/python")
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([py, os.path.join(here, "hub_load.py"), "--url", run.url,
                          "--users", ",".join(users), "--passwords", run.handout,
                          "--spread", "2", "--pace", "0.2,0.5", "--expect-loaded",
                          "--lesson", os.path.join(run.args.dir, LESSON),
                          "--json", os.path.join(run.tmp, json_name)],
                         capture_output=True, text=True)
    print(out.stdout[-3000:], flush=True)
    check(out.returncode == 0, f"hub_load.py over {','.join(users)}: every cell right, every library loaded "
          f"from the cache{'' if out.returncode == 0 else ': ' + out.stderr[-500:]}")
    return json.loads(open(os.path.join(run.tmp, json_name)).read())


def spread_and_limits(run):
    found = jobs(run.env)
    check(sorted(found) == STUDENTS and all(s == "RUNNING" for _, _, s in found.values()),
          f"four server jobs running, one per student: {found}")
    nodes = [node for _, node, _ in found.values()]
    check(sorted(nodes) == ["b1", "b1", "b2", "b2"], f"two servers on each node: {nodes}")
    limit = int(re.fullmatch(r"(\d+)M", run.args.mem_limit).group(1)) << 20
    for user, (job, node, _) in found.items():
        uid = pwd.getpwnam(user).pw_uid
        shown = sh("scontrol", "show", "job", job, env=run.env)
        check(f"UserId={user}(" in shown, f"{user}'s job {job} runs as {user}")
        group = f"/sys/fs/cgroup/memory/slurm_{node}/uid_{uid}/job_{job}/memory.limit_in_bytes"
        with open(group) as f:
            check(int(f.read()) == limit, f"{user}'s job {job}: memory limit {limit} bytes in its cgroup")
    return found


def kill_one(run, before):
    """scancel one job on b1: that student sees the server stopped and starts it again; b2's
    students are untouched."""
    word = passwords(run.handout)
    victim = sorted(u for u, (_, node, _) in before.items() if node == "b1")[0]
    others = {u: v for u, v in before.items() if v[1] == "b2"}
    students = {u: Student(run.url, u, word[u]) for u in before}
    check(all(s.server().get("ready") for s in students.values()), "every server ready before the kill")
    killed = time.monotonic()
    sh("scancel", before[victim][0], env=run.env)
    wait_for(f"the hub showing {victim}'s server stopped", lambda: not students[victim].server(), 60, every=0.2)
    TIMES["kill_seen_stopped"] = round(time.monotonic() - killed, 1)
    print(f"time: kill_seen_stopped {TIMES['kill_seen_stopped']} s", flush=True)
    check(True, f"{victim}'s server shows stopped after scancel of job {before[victim][0]} on b1")
    now = jobs(run.env)
    for user, (job, node, _) in others.items():
        check(now.get(user, (None,))[0] == job and students[user].server().get("ready"),
              f"{user} on {node} untouched: job {job} still running, server ready")
    with timed("restart_after_kill"):
        students[victim].call(f"/hub/api/users/{victim}/server", "POST", "")
        wait_for(f"{victim}'s server ready again", lambda: students[victim].server().get("ready"), 300, every=0.5)
    again = jobs(run.env)
    check(victim in again and again[victim][0] != before[victim][0],
          f"{victim} started again as a new job: {again.get(victim)}")
    return victim


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="the attention-lab binary")
    parser.add_argument("--dir", default="/srv/attention-lab-hub-slurm", help="the hub's --dir (set up if need be)")
    parser.add_argument("--port", type=int, default=8029)
    parser.add_argument("--mem-limit", default="1536M", help="the hub's --mem-limit, in M")
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    if os.geteuid() != 0:
        sys.exit("hub_slurm.py runs as root (it makes users, namespaces and Slurm's daemons)")
    for tool in ["sbatch", "slurmctld", "slurmd", "munged", "ip", "nsenter"]:
        if shutil.which(tool) is None:
            sys.exit(f"hub_slurm.py: {tool} not found (apt-get install slurm-wlm munge iproute2)")
    run = Run(args)
    ok = False
    total = time.monotonic()
    try:
        with timed("cluster_up"):
            run.start_munge()
            run.start_net()
            run.write_conf()
            run.start_slurm()
        print(sh("sinfo", "-N", env=run.env), flush=True)
        with timed("setup_only"):
            run.set_up()
        with timed("hub_start"):
            run.start_hub()
        with timed("load_4_students"):
            summary = load(run, STUDENTS, "load.json")
        TIMES["server_start_max"] = round(summary["server_start_max"], 1)
        TIMES["cell_p95"] = round(summary["p95"], 2)
        found = spread_and_limits(run)
        victim = kill_one(run, found)
        with timed("cells_after_restart"):
            load(run, [victim], "again.json")
        with timed("hub_stop"):
            run.stop_hub()
        check(run.hub.returncode is not None, f"the hub stopped (status {run.hub.returncode})")
        # scancel returns before the job has ended: give its node a moment.
        wait_for("the students' jobs ending", lambda: not jobs(run.env), 30)
        check(True, "no student's job left once the hub stopped")
        wait_for("the students' processes ending",
                 lambda: not any(sh("pgrep", "-u", u, check_rc=False).strip() for u in STUDENTS), 30)
        check(True, "no student's process left once the hub stopped")
        ok = True
    except Failed as e:
        print(f"FAILED: {e}", flush=True)
        log = os.path.join(run.tmp, "log/hub.log")
        if os.path.exists(log):
            print("".join(open(log).readlines()[-40:]), flush=True)
    finally:
        with timed("stop_all"):
            run.stop_all()
        left = run.leftovers()
        for line in left:
            print(f"left behind: {line}", flush=True)
        if left:
            ok = False
            print(f"logs: {run.tmp}/log", flush=True)
        else:
            print("nothing left behind", flush=True)
            shutil.rmtree(run.tmp, ignore_errors=True)
    TIMES["total"] = round(time.monotonic() - total, 1)
    print(json.dumps(TIMES, indent=1), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
