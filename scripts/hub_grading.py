"""Assignments on the hub, end to end, as a teacher and two students do it:

1. nbgrader: the teacher generates and releases `ps1` from ~/course; each student fetches
   it; one writes a right answer, the other submits the stub; the teacher collects and
   autogrades (the project's kernel runs every cell) and exports the marks: 3 of 3 points
   and 0 of 3. Neither student can read the other's copy, the teacher's source (which holds
   the solution), or list the submissions.
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
        shutil.rmtree(os.path.expanduser(f"~{user}/ps1"), ignore_errors=True)

    as_user(teacher, "cd course && nbgrader generate_assignment ps1 --force && nbgrader release_assignment ps1 --force", venv)
    released = pathlib.Path(course, "release/ps1/softmax.ipynb").read_text()
    check("BEGIN SOLUTION" not in released and "todo!()" in released,
          "the released notebook has Rust's stub instead of the solution")
    for user in (a, b):
        as_user(user, "nbgrader fetch_assignment ps1 --course attention-lab", venv)
        check(os.path.isfile(os.path.expanduser(f"~{user}/ps1/softmax.ipynb")), f"{user} fetched ps1")
    # a answers; b submits the stub as fetched.
    path = os.path.expanduser(f"~{a}/ps1/softmax.ipynb")
    nb = json.loads(pathlib.Path(path).read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            source = "".join(cell["source"])
            cell["source"] = source.replace(
                "// YOUR CODE HERE\n    todo!()",
                "let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);\n"
                "    let e: Vec<f64> = row.iter().map(|s| (s - m).exp()).collect();\n"
                "    let total: f64 = e.iter().sum();\n"
                "    e.iter().map(|x| x / total).collect()")
            check(cell["source"] != source, f"{a}'s answer replaces the stub")
    as_user(a, f"cat > ps1/softmax.ipynb <<'EOF'\n{json.dumps(nb)}\nEOF", venv)
    for user in (a, b):
        as_user(user, "nbgrader submit ps1 --course attention-lab", venv)

    for path in (os.path.expanduser(f"~{a}/ps1/softmax.ipynb"), os.path.join(course, "source/ps1/softmax.ipynb")):
        got = as_user(b, f"cat {path}", venv, check_status=False)
        check(got.returncode != 0, f"{b} cannot read {path}")
    got = as_user(b, f"ls {exchange}/inbound", venv, check_status=False)
    check(got.returncode != 0, f"{b} cannot list the submissions ({got.stderr.strip()[:80]})")

    as_user(teacher, "cd course && nbgrader collect ps1 && nbgrader autograde ps1 --create --force && nbgrader export", venv)
    marks = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(open(os.path.join(course, "grades.csv")))}
    check(marks.get(a) == 3.0, f"{a} scores 3 of 3 ({marks.get(a)})")
    check(marks.get(b) == 0.0, f"{b} scores 0 of 3 ({marks.get(b)})")


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
