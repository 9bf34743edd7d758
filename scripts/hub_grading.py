"""Assignments on the hub, end to end, as a teacher and two students do it:

1. nbgrader: the teacher generates and releases `ps1` and `ps2` from ~/course; each student
   fetches them. In ps1 one writes a right answer, the other submits the stub: 3 of 3 points
   and 0 of 3. In ps2 (write attention, forward and backward; each graded cell asserts that
   `attention_lab::check` says "right") one answers everything right, the other leaves out
   the scores' 1/sqrt(d_k): full marks, and the marks of the cells that use that attention
   lost, with the check's line naming the mistake in the autograded notebook. The teacher
   collects and autogrades (the project's kernel runs every cell) and exports the marks.
   Neither student can read the other's copy, the teacher's source (which holds the
   solution), or list the submissions.
2. Per-student sheets, which nbgrader cannot hand out: `exercise --roster` makes a sheet and
   a key for each student; `hub --hand-out` puts each sheet in its student's folder; one
   student saves their key's numbers as answers, the other a wrong number and a link to the
   first one's answers; `hub --collect` gathers what each may read; `grade` marks them.

Run as root with the hub's Python, after `attention-lab hub --setup-only` made the class:

    /srv/attention-lab-hub/venv/bin/python scripts/hub_grading.py --bin target/debug/attention-lab \
        --roster class.csv --users ann,bob --teacher teacher --dir /srv/attention-lab-hub
"""

import argparse
import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"

FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def run_as(user, argv, venv=None, **kwargs):
    """`argv` as `user`, with a new login's environment, as in the user's terminal on the hub
    (with the hub's venv first on the PATH when given), not this script's: CI exports root's
    ATTENTION_LAB_CACHE and CARGO_TARGET_DIR, and a kernel that inherits them cannot start
    (nbgrader: "Kernel died before replying to kernel_info").
    """
    home = os.path.expanduser(f"~{user}")
    path = "/usr/local/bin:/usr/bin:/bin"
    env = {"HOME": home, "USER": user, "LOGNAME": user, "LANG": os.environ.get("LANG", "C.UTF-8"),
           "PATH": f"{venv}/bin:{path}" if venv else path}
    return subprocess.run([RUNUSER, "-u", user, "--", *argv], env=env, **kwargs)


def as_user(user, script, venv, check_status=True):
    """`sh -c script` as `user` (run_as), in their home; exits when it fails, unless told not to."""
    out = run_as(user, ["sh", "-c", f"cd ~ && {script}"], venv, capture_output=True, text=True)
    if check_status and out.returncode != 0:
        print(out.stdout[-3000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"as {user}: {script} failed ({out.returncode})")
    return out


# ps2's planted mistake: the scores without their 1/sqrt(d_k), in the attention cell; the
# head and multi-head answers call that attention, so their cells lose their points too.
PS2_PLANT = ("attention", "q.dot(&k.t()) / d_k.sqrt()", "q.dot(&k.t())")
PS2_LOST = ("attention-test", "head-test", "multi-head-test")
PS2_NAMED = "not yet: the scores were not divided by sqrt(d_k)"


def nbgrader_cells(nb, key):
    """The cells of notebook `nb` whose nbgrader metadata has `key` true, by grade id."""
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"]
            if c["metadata"].get("nbgrader", {}).get(key)}


def answered(released, source, plant=None):
    """The released notebook with every solution cell answered as the teacher's source answers
    it (its BEGIN and END SOLUTION lines taken out), as a student who solved it all hands it
    in; `plant` = (grade id, right text, wrong text) makes one mistake in that cell."""
    solutions = nbgrader_cells(source, "solution")
    for gid, cell in nbgrader_cells(released, "solution").items():
        lines = "".join(solutions[gid]["source"]).split("\n")
        text = "\n".join(l for l in lines if l.strip() not in ("// BEGIN SOLUTION", "// END SOLUTION"))
        check(text != "".join(cell["source"]), f"the answer replaces the stub in {gid}")
        if plant and plant[0] == gid:
            wrong = text.replace(plant[1], plant[2])
            check(wrong != text, f"the mistake is planted in {gid}")
            text = wrong
        cell["source"] = text
    return released


def release(teacher, course, venv, users, name, notebook):
    """The teacher generates and releases assignment `name`; each of `users` fetches it."""
    as_user(teacher, f"cd course && nbgrader generate_assignment {name} --force && nbgrader release_assignment {name} --force", venv)
    released = pathlib.Path(course, f"release/{name}/{notebook}").read_text()
    check("BEGIN SOLUTION" not in released and "todo!()" in released,
          f"the released {name} has Rust's stub instead of the solution")
    for user in users:
        as_user(user, f"nbgrader fetch_assignment {name} --course attention-lab", venv)
        check(os.path.isfile(os.path.expanduser(f"~{user}/{name}/{notebook}")), f"{user} fetched {name}")


def hand_in(user, name, notebook, nb, venv):
    """`user` saves `nb` as their copy of assignment `name`'s notebook."""
    as_user(user, f"cat > {name}/{notebook} <<'EOF'\n{json.dumps(nb)}\nEOF", venv)


def nbgrader(args, venv, a, b):
    teacher = args.teacher
    course = os.path.expanduser(f"~{teacher}/course")
    # A clean slate: this run's release, submissions and marks only. The course's folders
    # stay: the set-up made them the teacher's, before any student could.
    exchange = os.path.join(args.dir, "exchange", "attention-lab")
    for sub in ("outbound", "inbound", "feedback"):
        for entry in pathlib.Path(exchange, sub).glob("*"):
            shutil.rmtree(entry, ignore_errors=True)
    for sub in ("release", "submitted", "autograded", "feedback", "gradebook.db", "grades.csv"):
        path = os.path.join(course, sub)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else pathlib.Path(path).unlink(missing_ok=True)
    for user in (a, b):
        for name in ("ps1", "ps2"):
            shutil.rmtree(os.path.expanduser(f"~{user}/{name}"), ignore_errors=True)

    # a answers everything as the teacher's source does; in ps1 b submits the stub as
    # fetched, in ps2 b's answers have the planted mistake.
    sources = {}
    for name, notebook, plant in (("ps1", "softmax.ipynb", None), ("ps2", "attention.ipynb", PS2_PLANT)):
        release(teacher, course, venv, (a, b), name, notebook)
        sources[name] = json.loads(pathlib.Path(course, f"source/{name}/{notebook}").read_text())
        for user in (a, b) if plant else (a,):
            path = os.path.expanduser(f"~{user}/{name}/{notebook}")
            mine = json.loads(pathlib.Path(path).read_text())
            hand_in(user, name, notebook, answered(mine, sources[name], plant if user == b else None), venv)
        for user in (a, b):
            as_user(user, f"nbgrader submit {name} --course attention-lab", venv)
        for path in (os.path.expanduser(f"~{a}/{name}/{notebook}"), os.path.join(course, f"source/{name}/{notebook}")):
            got = as_user(b, f"cat {path}", venv, check_status=False)
            check(got.returncode != 0, f"{b} cannot read {path}")
    got = as_user(b, f"ls {exchange}/inbound", venv, check_status=False)
    check(got.returncode != 0, f"{b} cannot list the submissions ({got.stderr.strip()[:80]})")

    as_user(teacher, "cd course && for ps in ps1 ps2; do nbgrader collect $ps && "
            "nbgrader autograde $ps --create --force || exit 1; done && nbgrader export", venv)
    marks = {(row["assignment"], row["student_id"]): float(row["raw_score"])
             for row in csv.DictReader(open(os.path.join(course, "grades.csv")))}
    check(marks.get(("ps1", a)) == 3.0, f"{a} scores 3 of 3 in ps1 ({marks.get(('ps1', a))})")
    check(marks.get(("ps1", b)) == 0.0, f"{b} scores 0 of 3 in ps1 ({marks.get(('ps1', b))})")
    points = {gid: c["metadata"]["nbgrader"]["points"] for gid, c in nbgrader_cells(sources["ps2"], "grade").items()}
    full, lost = sum(points.values()), sum(points[gid] for gid in PS2_LOST)
    check(marks.get(("ps2", a)) == full, f"{a} scores {full} of {full} in ps2 ({marks.get(('ps2', a))})")
    check(marks.get(("ps2", b)) == full - lost,
          f"{b} scores {full - lost} of {full} in ps2 ({marks.get(('ps2', b))})")
    graded = json.loads(pathlib.Path(course, f"autograded/{b}/ps2/attention.ipynb").read_text())
    for gid, cell in nbgrader_cells(graded, "grade").items():
        said = json.dumps(cell.get("outputs", []))
        if gid in PS2_LOST:
            check(PS2_NAMED in said, f"{b}'s autograded {gid} names the mistake ({said[:200]})")
        else:
            check("right: your" in said, f"{b}'s autograded {gid} says right ({said[:200]})")


def sheets(args, a, b):
    work = tempfile.mkdtemp(prefix="hub-sheets-")
    try:
        cls = os.path.join(work, "class")
        subprocess.run([args.bin, "exercise", "--roster", args.roster, "--out", cls, "--secret", "ci"], check=True, capture_output=True)
        out = subprocess.run([args.bin, "hub", "--roster", args.roster, "--teacher", args.teacher, "--dir", args.dir,
                              "--hand-out", cls], capture_output=True, text=True)
        check(out.returncode == 0, f"hub --hand-out ({out.returncode}: {out.stderr.strip()[-200:]})")
        for user in (a, b):
            sheet = os.path.expanduser(f"~{user}/attention-lab/sheet/{user}.md")
            st = os.stat(sheet) if os.path.exists(sheet) else None
            check(st is not None and st.st_mode & 0o777 == 0o600 and st.st_uid == pwd_uid(user),
                  f"{user}'s sheet is theirs alone ({sheet})")
        got = run_as(b, ["cat", os.path.expanduser(f"~{a}/attention-lab/sheet/{a}.md")], capture_output=True)
        check(got.returncode != 0, f"{b} cannot read {a}'s sheet")
        # a saves the key's numbers as answers; b a wrong number, then swaps in a link to a's.
        def answers(user):
            """The numbers of `user`'s key, as a student's answers file holds them."""
            key = json.loads(pathlib.Path(cls, "keys", f"{user}.json").read_text())
            return {"student": user, **key["solution"]}
        write_as(a, f"~{a}/attention-lab/sheet/{a}.json", json.dumps(answers(a)))
        wrong = answers(b)
        wrong["heads"][0]["z"][0][0] += 1.0
        write_as(b, f"~{b}/attention-lab/sheet/{b}.json", json.dumps(wrong))
        collected = os.path.join(work, "collected")
        out = subprocess.run([args.bin, "hub", "--roster", args.roster, "--teacher", args.teacher, "--dir", args.dir,
                              "--collect", collected], capture_output=True, text=True)
        check(out.returncode == 0, f"hub --collect ({out.returncode}: {out.stderr.strip()[-200:]})")
        marks = os.path.join(work, "marks")
        subprocess.run([args.bin, "grade", "--key", os.path.join(cls, "keys"), "--answers", collected, "--out", marks], capture_output=True)
        book = {row["student"]: row for row in csv.DictReader(open(os.path.join(marks, "gradebook.csv")))}
        check(a in book and book[a]["total"] == book[a]["max"] and not book[a]["mistakes"],
              f"{a}'s collected answers get every point ({book.get(a)})")
        check(b in book and int(book[b]["total"]) == int(book[b]["max"]) - 1 and "Z_1" in book[b]["mistakes"],
              f"{b} loses the point of Z_1 ({book.get(b)})")
        # b's answers become a link to a's: collected as b, it is refused.
        link = os.path.expanduser(f"~{b}/attention-lab/sheet/{b}.json")
        run_as(b, ["ln", "-sf", os.path.expanduser(f"~{a}/attention-lab/sheet/{a}.json"), link], check=True)
        again = os.path.join(work, "again")
        out = subprocess.run([args.bin, "hub", "--roster", args.roster, "--teacher", args.teacher, "--dir", args.dir,
                              "--collect", again], capture_output=True, text=True)
        check(out.returncode == 1 and not os.path.exists(os.path.join(again, f"{b}.json")),
              f"a link to {a}'s answers collects nothing for {b} ({out.returncode}: {out.stderr.strip()[-120:]})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def pwd_uid(user):
    import pwd
    return pwd.getpwnam(user).pw_uid


def write_as(user, path, text):
    run_as(user, ["sh", "-c", 'cat > "$1"', "sh", os.path.expanduser(path)], input=text, text=True, check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="the attention-lab binary")
    parser.add_argument("--roster", required=True)
    parser.add_argument("--users", required=True, help="two students, comma-separated")
    parser.add_argument("--teacher", required=True)
    parser.add_argument("--dir", default="/srv/attention-lab-hub")
    args = parser.parse_args()
    a, b = args.users.split(",")[:2]
    venv = os.path.join(args.dir, "venv")
    nbgrader(args, venv, a, b)
    sheets(args, a, b)
    if FAILED:
        raise SystemExit(f"{len(FAILED)} grading checks failed")
    print("all grading checks passed")


if __name__ == "__main__":
    main()
