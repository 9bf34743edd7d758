#!/usr/bin/env python3
"""Write the class of 30 that cli/classroom/tests/grade.rs generates, answers and grades, and the
gradebook `attention-lab grade` must write for it, computed here with NumPy alone.

Run: .venv/bin/python scripts/grade_goldens.py
Deterministic; rerunning rewrites the same bytes.

- grade/roster30.csv: 30 students (ids s01..s30, names, one with a comma).
- grade/keys30.json: for each student, the seed and NumPy's draws (x, wq, wk, wv, wo) and
  output, which each key written by `exercise --roster` must hold.
- grade/gradebook30.csv: the expected gradebook. Each student's seed is the first four bytes
  (big-endian) of HMAC-SHA256(secret, b"attention-lab exercise seed\\0" + id); the matrices are
  drawn from np.random.RandomState(seed) as `exercise` documents; the student's answers follow
  the scenario of their place in the roster (SCENARIOS, the same list as the Rust test); each
  answer matrix is marked by the documented rules: right within 10^-4 of the key (1 point);
  else right for the student's own earlier answers (carried forward, 1/2 point); else the
  mistake that was planted there, or `unknown`.
"""

import csv
import hashlib
import hmac
import io
import json
import os

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli", "classroom", "tests", "data", "grade")
SECRET = b"grade-test-secret"
TOKENS, DIM, HEADS, DK, DECIMALS, PRECISION = 2, 4, 2, 3, 1, 4
TOL = 10.0 ** -PRECISION

# The answer each student hands in, by place in the roster modulo the list's length.
SCENARIOS = [
    "correct-json",
    "correct-npy",
    "no-sqrt-dk",  # head 1
    "divided-by-dk",  # head 2
    "softmax-columns",  # head 1
    "kq-transposed",  # head 2
    "early-rounding",  # S_1 rounded to 1 decimal
    "head-order",  # Z = [Z_2 Z_1]
    "unknown",  # Q_1[0][0] off by 0.5
    "missing-output",  # not graded
    "not-a-number",  # not graded
]

NAMES = [
    "Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov",
    "Donald Knuth", "Frances Allen", "John Backus", "Margaret Hamilton", "Dennis Ritchie",
    "Hopper, Grace B.", "Ken Thompson", "Radia Perlman", "Tony Hoare", "Shafi Goldwasser",
    "Leslie Lamport", "Adele Goldberg", "Niklaus Wirth", "Jean Sammet", "Robin Milner",
    "Kathleen Booth", "Alonzo Church", "Sophie Wilson", "Claude Shannon", "Lynn Conway",
    "Edgar Codd", "Mary Allen Wilkes", "Peter Naur", "Karen Sparck Jones", "",
]


def seed(student_id):
    digest = hmac.new(SECRET, b"attention-lab exercise seed\0" + student_id.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big")


def draw(s):
    rs = np.random.RandomState(s)
    x = rs.randint(0, 3, (TOKENS, DIM)).astype(float)
    w = lambda rows, cols: np.round(rs.uniform(-1, 1, (rows, cols)), DECIMALS) + 0.0
    heads = [(w(DIM, DK), w(DIM, DK), w(DIM, DK)) for _ in range(HEADS)]
    wo = w(HEADS * DK, DIM)
    return x, heads, wo


def softmax_rows(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def forward(x, heads, wo, plant=None):
    """Every answer matrix in grading order, with `plant` applied where it strikes."""
    out = {}
    for i, (wq, wk, wv) in enumerate(heads, start=1):
        q, k, v = x @ wq, x @ wk, x @ wv
        if plant == "unknown" and i == 1:
            q = q.copy()
            q[0, 0] += 0.5
        s = q @ k.T / np.sqrt(DK)
        if plant == "no-sqrt-dk" and i == 1:
            s = q @ k.T
        if plant == "divided-by-dk" and i == 2:
            s = q @ k.T / DK
        if plant == "kq-transposed" and i == 2:
            s = k @ q.T / np.sqrt(DK)
        if plant == "early-rounding" and i == 1:
            s = np.round(s, 1)
        a = softmax_rows(s)
        if plant == "softmax-columns" and i == 1:
            a = softmax_rows(s.T).T
        out.update({f"Q_{i}": q, f"K_{i}": k, f"V_{i}": v, f"S_{i}": s, f"A_{i}": a, f"Z_{i}": a @ v})
    zs = [out[f"Z_{i}"] for i in range(1, HEADS + 1)]
    out["Z"] = np.concatenate(zs[::-1] if plant == "head-order" else zs, axis=1)
    out["ZW_O"] = out["Z"] @ wo
    return out


# Where each scenario's mistake strikes first.
PLANTED = {
    "no-sqrt-dk": "S_1", "divided-by-dk": "S_2", "softmax-columns": "A_1",
    "kq-transposed": "S_2", "early-rounding": "S_1", "head-order": "Z", "unknown": "Q_1",
}


def inputs(name):
    """The answers a step is computed from (none for Q, K, V: the sheet gives theirs)."""
    if name == "Z":
        return [f"Z_{i}" for i in range(1, HEADS + 1)]
    if name == "ZW_O":
        return ["Z"]
    kind, i = name.split("_")
    return {"Q": [], "K": [], "V": [], "S": [f"Q_{i}", f"K_{i}"], "A": [f"S_{i}"], "Z": [f"A_{i}", f"V_{i}"]}[kind]


def redo(name, mine, wo):
    """The step computed from the student's own inputs."""
    if name == "Z":
        return np.concatenate([mine[f"Z_{i}"] for i in range(1, HEADS + 1)], axis=1)
    if name == "ZW_O":
        return mine["Z"] @ wo
    kind, i = name.split("_")
    if kind == "S":
        return mine[f"Q_{i}"] @ mine[f"K_{i}"].T / np.sqrt(DK)
    if kind == "A":
        return softmax_rows(mine[f"S_{i}"])
    return mine[f"A_{i}"] @ mine[f"V_{i}"]


def close(a, b):
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= TOL))


def grade(key, mine, wo, scenario):
    """Points per matrix and the gradebook's mistake codes."""
    right, points, codes = {}, {}, []
    for name in key:
        if close(mine[name], key[name]):
            right[name], points[name] = True, 1.0
            continue
        right[name] = False
        own = inputs(name)
        if own and close(mine[name], redo(name, mine, wo)):
            points[name] = 1.0 if all(right[n] for n in own) else 0.5
            right[name] = points[name] == 1.0
            continue
        points[name] = 0.0
        assert PLANTED.get(scenario) == name, (scenario, name)
        codes.append(f"{name}:{scenario}")
    return points, codes


def part_of(name):
    if name in ("Z", "ZW_O"):
        return {"Z": "c", "ZW_O": "d"}[name]
    kind, i = name.split("_")
    return ("a" if kind in "QKV" else "b") + i


def number(x):
    return f"{x:.0f}" if x == int(x) else f"{x:.1f}"


def main():
    os.makedirs(ROOT, exist_ok=True)
    ids = [f"s{n:02d}" for n in range(1, 31)]
    roster = io.StringIO()
    w = csv.writer(roster, lineterminator="\n")
    w.writerow(["id", "name"])
    for student_id, name in zip(ids, NAMES):
        w.writerow([student_id, name])
    with open(os.path.join(ROOT, "roster30.csv"), "w", newline="") as f:
        f.write(roster.getvalue())

    keys = {}
    for student_id in ids:
        s = seed(student_id)
        x, heads, wo = draw(s)
        keys[student_id] = {
            "seed": s,
            "x": x.tolist(),
            "wq": [h[0].tolist() for h in heads],
            "wk": [h[1].tolist() for h in heads],
            "wv": [h[2].tolist() for h in heads],
            "wo": wo.tolist(),
            "output": forward(x, heads, wo)["ZW_O"].tolist(),
        }
    with open(os.path.join(ROOT, "keys30.json"), "w") as f:
        # One student a line: small, and a diff shows whose draws changed.
        f.write("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in keys.items()) + "\n}\n")

    columns = [f"a{i}" for i in range(1, HEADS + 1)] + [f"b{i}" for i in range(1, HEADS + 1)] + ["c", "d"]
    book = io.StringIO()
    w = csv.writer(book, lineterminator="\n")
    w.writerow(["student", "name"] + columns + ["total", "max", "mistakes"])
    for n, (student_id, name) in enumerate(zip(ids, NAMES)):
        scenario = SCENARIOS[n % len(SCENARIOS)]
        if scenario in ("missing-output", "not-a-number"):
            w.writerow([student_id, name] + [""] * (len(columns) + 2) + ["not-graded"])
            continue
        x, heads, wo = draw(seed(student_id))
        key = forward(x, heads, wo)
        mine = forward(x, heads, wo, plant=scenario)
        points, codes = grade(key, mine, wo, scenario)
        per_part = [sum(p for m, p in points.items() if part_of(m) == c) for c in columns]
        w.writerow([student_id, name] + [number(p) for p in per_part]
                   + [number(sum(points.values())), str(len(points)), " ".join(codes)])
    with open(os.path.join(ROOT, "gradebook30.csv"), "w", newline="") as f:
        f.write(book.getvalue())


if __name__ == "__main__":
    main()
