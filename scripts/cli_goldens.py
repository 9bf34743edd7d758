#!/usr/bin/env python3
"""Write the inputs and NumPy's expected outputs for the CLI tests into cli/tests/data/.

Run: .venv/bin/python scripts/cli_goldens.py
Deterministic (fixed seeds); rerunning rewrites the same bytes.

- show/: .npy files (float64, float32, int64, int32, bool; 0-D to 3-D; C and Fortran order;
  big-endian) and broken files; show/cases.json lists each `show` command line with the file
  in show/expected/ that holds what NumPy prints (print(a), repr(a), np.set_printoptions).
- solve/: the matrices of a few problems; solve/cases.json lists each `solve` command line with
  its expected text (NumPy's step-by-step prints) or JSON (every intermediate, NaN and
  infinities as the strings "NaN", "Infinity", "-Infinity").
- exercise/: the matrices `exercise` must draw from np.random.RandomState(seed), in the draw
  order the CLI documents.
"""

import io
import json
import os
import shutil
from contextlib import redirect_stdout

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli", "tests", "data")


def fresh(sub):
    path = os.path.join(ROOT, sub)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def write(path, text):
    with open(path, "w", newline="\n") as f:
        f.write(text)


def printed(fn, **opts):
    """What fn() prints with np.set_printoptions(**opts)."""
    buf = io.StringIO()
    with np.printoptions(**opts), redirect_stdout(buf):
        fn()
    return buf.getvalue()


# ---------------------------------------------------------------- show

def show_goldens():
    out = fresh("show")
    os.makedirs(os.path.join(out, "expected"))
    rs = np.random.RandomState(5)
    arrays = {
        "f64_0d": np.array(3.141592653589793),
        "f64_1d": np.array([0.1, 1e-5, 123.456, -2.0]),
        "f64_2d": rs.uniform(-1, 1, (3, 4)),
        "f64_2d_fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4) / 7),
        "f64_3d_fortran": np.asfortranarray(rs.normal(size=(2, 3, 2)) * 100),
        "f64_nan_inf": np.array([[np.nan, np.inf], [-np.inf, 1.5]]),
        "f64_small": np.array([[1e-10, 0.5], [3.0, -2e-9]]),
        "f64_big_endian": np.array([[1.25, -2.5], [1e300, 0.0]], dtype=">f8"),
        "f32_2d": rs.uniform(-10, 10, (2, 3)).astype(np.float32),
        "f32_0d": np.array(0.1, dtype=np.float32),
        "i64_3d": np.arange(24, dtype=np.int64).reshape(2, 3, 4) - 10,
        "i64_summarised": np.arange(2000, dtype=np.int64),
        "i32_1d": np.array([7, -300, 42], dtype=np.int32),
        "i32_2d_fortran": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        "bool_2d": np.array([[True, False, True], [False, False, True]]),
        "bool_0d": np.array(True),
        "f64_empty": np.zeros((0, 3)),
    }
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
    # Broken inputs for the error tests.
    write(os.path.join(out, "not_npy.txt"), "just text\n")
    np.save(os.path.join(out, "u16.npy"), np.array([1, 2], dtype=np.uint16))
    np.save(os.path.join(out, "complex.npy"), np.array([1 + 2j]))
    with open(os.path.join(out, "f64_2d.npy"), "rb") as f:
        whole = f.read()
    with open(os.path.join(out, "truncated.npy"), "wb") as f:
        f.write(whole[:-5])
    # Files np.load reads although np.save never writes them: bytes after the data, and a
    # bool array holding bytes other than 0 and 1.
    with open(os.path.join(out, "f64_trailing.npy"), "wb") as f:
        f.write(whole + b"trailing bytes")
    with open(os.path.join(out, "bool_2d.npy"), "rb") as f:
        bools = bytearray(f.read())
    n = arrays["bool_2d"].size
    bools[-n:] = bytes(2 if b else 0 for b in bools[-n:])
    with open(os.path.join(out, "bool_byte_2.npy"), "wb") as f:
        f.write(bools)
    loaded = {name: np.load(os.path.join(out, name + ".npy")) for name in ["f64_trailing", "bool_byte_2"]}

    variants = {
        "print": ([], {}, str),
        "p3_suppress": (["--precision", "3", "--suppress"], {"precision": 3, "suppress": True}, str),
        "repr": (["--repr"], {}, repr),
        "p2_repr": (["--precision", "2", "--repr"], {"precision": 2}, repr),
    }
    cases = []
    for name, a in {**arrays, **loaded}.items():
        for variant, (flags, opts, fmt) in variants.items():
            if a.dtype.byteorder == ">" and fmt is repr:
                continue  # NumPy adds dtype='>f8'; show reads values, not byte order
            expected = f"{name}.{variant}.txt"
            write(os.path.join(out, "expected", expected), printed(lambda: print(fmt(a)), **opts))
            cases.append({"args": [name + ".npy"] + flags, "stdout": expected})
    # Several files: each preceded by its name, a blank line between them.
    many = ["f64_2d.npy", "i32_1d.npy", "bool_0d.npy"]

    def print_many():
        for i, f in enumerate(many):
            if i:
                print()
            print(f + ":")
            print(arrays[f[: -len(".npy")]])

    write(os.path.join(out, "expected", "many.print.txt"), printed(print_many, precision=4))
    cases.append({"args": many + ["--precision", "4"], "stdout": "many.print.txt"})
    write(os.path.join(out, "cases.json"), json.dumps(cases, indent=1) + "\n")


# ---------------------------------------------------------------- solve

def softmax(s, naive):
    with np.errstate(over="ignore", invalid="ignore"):
        if naive:
            e = np.exp(s)
        else:
            e = np.exp(s - np.max(s, axis=1, keepdims=True))
        return e / np.sum(e, axis=1, keepdims=True)


def solve(x, heads, wo, naive=False):
    """Every intermediate, as a NumPy worked example computes it."""
    steps = []
    for wq, wk, wv in heads:
        q, k, v = x @ wq, x @ wk, x @ wv
        scores = q @ k.T / np.sqrt(k.shape[1])
        weights = softmax(scores, naive)
        z = weights @ v
        steps.append({"q": q, "k": k, "v": v, "scores": scores, "weights": weights, "z": z})
    concat = np.concatenate([h["z"] for h in steps], axis=1)
    output = concat @ wo if wo is not None else None
    return steps, concat, output


def print_solution(steps, concat, output):
    for i, h in enumerate(steps, 1):
        dk = h["k"].shape[1]
        print(f"Head {i} - Q_{i}:\n", h["q"])
        print(f"Head {i} - K_{i}:\n", h["k"])
        print(f"Head {i} - V_{i}:\n", h["v"])
        print(f"Head {i} - scores = Q_{i} K_{i}^T / sqrt({dk}):\n", h["scores"])
        print(f"Head {i} - weights = softmax(scores):\n", h["weights"])
        print(f"Head {i} - Z_{i} = weights V_{i}:\n", h["z"])
        print()
    names = " ".join(f"Z_{i}" for i in range(1, len(steps) + 1))
    print(f"Concatenated Z = [{names}]:\n", concat)
    if output is not None:
        print("Output = Z W_O:\n", output)


def json_value(m):
    def number(x):
        x = float(x)
        if np.isnan(x):
            return "NaN"
        if np.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    return [[number(x) for x in row] for row in m]


def solution_json(steps, concat, output):
    return json.dumps({
        "heads": [{key: json_value(m) for key, m in h.items()} for h in steps],
        "concat": json_value(concat),
        "output": None if output is None else json_value(output),
    }) + "\n"


def inline(m):
    """A matrix as the CLI's inline JSON (shortest round-trip digits)."""
    return json.dumps(m.tolist()).replace(" ", "")


def solve_goldens():
    out = fresh("solve")
    rs = np.random.RandomState(2026)
    save = lambda name, a: np.save(os.path.join(out, name), a)
    x = np.array([[1, 0, 1, 0], [0, 2, 0, 2]], dtype=np.int64)
    heads = [tuple(np.round(rs.uniform(-1, 1, (4, 3)), 2) for _ in range(3)) for _ in range(2)]
    wo = np.round(rs.uniform(-1, 1, (6, 4)), 2)
    save("x.npy", x)
    for i, (wq, wk, wv) in enumerate(heads, 1):
        save(f"wq{i}.npy", wq)
        save(f"wk{i}.npy", wk)
        save(f"wv{i}.npy", wv)
    save("wo.npy", wo)
    # A wider problem for --split, with float32 input and Fortran-order weights.
    x32 = rs.uniform(-2, 2, (3, 6)).astype(np.float32)
    w6 = {m: np.asfortranarray(rs.normal(size=(6, 6))) for m in ("q", "k", "v")}
    save("x32.npy", x32)
    for m, w in w6.items():
        save(f"w{m}6.npy", w)
    # Overflow: scores far above 709.78 make the naive softmax give NaN.
    big = np.array([[30.0, 0.0], [0.0, 40.0]])
    save("big.npy", big)
    save("eye2.npy", np.eye(2))
    save("x3d.npy", np.zeros((2, 2, 2)))

    two = ["--x", "x.npy", "--wq", "wq1.npy,wq2.npy", "--wk", "wk1.npy,wk2.npy",
           "--wv", "wv1.npy,wv2.npy", "--wo", "wo.npy"]
    split_heads = [(w6["q"][:, s], w6["k"][:, s], w6["v"][:, s])
                   for s in (slice(0, 3), slice(3, 6))]
    cases = [
        ("two_heads", two + ["--precision", "4"], (x, heads, wo, False), "txt", {"precision": 4}),
        ("two_heads_default", two, (x, heads, wo, False), "txt", {}),
        ("two_heads", two + ["--json"], (x, heads, wo, False), "json", None),
        ("split", ["--x", "x32.npy", "--wq", "wq6.npy", "--wk", "wk6.npy", "--wv", "wv6.npy",
                   "--split", "2", "--softmax", "naive", "--precision", "5"],
         (x32, split_heads, None, True), "txt", {"precision": 5}),
        ("split", ["--x", "x32.npy", "--wq", "wq6.npy", "--wk", "wk6.npy", "--wv", "wv6.npy",
                   "--split", "2", "--softmax", "naive", "--json"],
         (x32, split_heads, None, True), "json", None),
        ("inline", ["--x", inline(x), "--wq", inline(heads[0][0]) + "," + inline(heads[1][0]),
                    "--wk", "wk1.npy", "--wk", inline(heads[1][1]),
                    "--wv", "wv1.npy," + inline(heads[1][2]),
                    "--wo", inline(wo), "--precision", "3", "--suppress"],
         (x, heads, wo, False), "txt", {"precision": 3, "suppress": True}),
        ("overflow_naive", ["--x", "big.npy", "--wq", "eye2.npy", "--wk", "eye2.npy",
                            "--wv", "eye2.npy", "--softmax", "naive"],
         (big, [(np.eye(2),) * 3], None, True), "txt", {}),
        ("overflow_naive", ["--x", "big.npy", "--wq", "eye2.npy", "--wk", "eye2.npy",
                            "--wv", "eye2.npy", "--softmax", "naive", "--json"],
         (big, [(np.eye(2),) * 3], None, True), "json", None),
        ("overflow_stable", ["--x", "big.npy", "--wq", "eye2.npy", "--wk", "eye2.npy",
                             "--wv", "eye2.npy"],
         (big, [(np.eye(2),) * 3], None, False), "txt", {}),
    ]
    listed = []
    for name, args, (cx, cheads, cwo, naive), kind, opts in cases:
        steps, concat, output = solve(cx.astype(np.float64), cheads, cwo, naive)
        expected = f"{name}.{kind}"
        if kind == "txt":
            text = printed(lambda: print_solution(steps, concat, output), **opts)
        else:
            text = solution_json(steps, concat, output)
        write(os.path.join(out, expected), text)
        listed.append({"args": args, kind: expected})
    write(os.path.join(out, "cases.json"), json.dumps(listed, indent=1) + "\n")


# ---------------------------------------------------------------- exercise

def draw(seed, tokens=2, dim=4, heads=2, dk=3, decimals=1):
    """The exercise's matrices, in the CLI's documented draw order."""
    rs = np.random.RandomState(seed)
    x = rs.randint(0, 3, (tokens, dim)).astype(np.float64)
    w = lambda rows, cols: np.round(rs.uniform(-1, 1, (rows, cols)), decimals) + 0.0
    hs = [[w(dim, dk), w(dim, dk), w(dim, dk)] for _ in range(heads)]
    wo = w(heads * dk, dim)
    return {"x": x.tolist(), "heads": [[m.tolist() for m in h] for h in hs], "wo": wo.tolist()}


def exercise_goldens():
    # Not fresh(): the sheets beside these files are made by the CLI itself.
    out = os.path.join(ROOT, "exercise")
    os.makedirs(out, exist_ok=True)
    configs = {
        "seed7": {"seed": 7},
        "seed2026_wide": {"seed": 2026, "tokens": 3, "dim": 5, "heads": 3, "dk": 2, "decimals": 2},
    }
    for name, cfg in configs.items():
        write(os.path.join(out, f"{name}.draws.json"), json.dumps(draw(**cfg), indent=1) + "\n")


if __name__ == "__main__":
    show_goldens()
    solve_goldens()
    exercise_goldens()
