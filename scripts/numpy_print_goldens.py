#!/usr/bin/env python3
"""Write NumPy's printed output for random arrays into tests/data/np_print/ (golden files).

Run: .venv/bin/python scripts/numpy_print_goldens.py
Deterministic (fixed seed). Inputs are stored bit-exactly: f64 as 16 hex digits of the IEEE
bits, f32 as 8, integers as JSON numbers, bools as 0/1. Arrays are rebuilt by cycling the stored
values to the full shape (np.resize), which keeps large summarised arrays small on disk.
"""

import json
import os
import struct
import sys

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "np_print")
SEED = 20261122
N_ARRAYS = 5200

rng = np.random.default_rng(SEED)


def f64_hex(x):
    return struct.pack(">d", float(x)).hex()


def f32_hex(x):
    return struct.pack(">f", np.float32(x).item()).hex()


def rand_float(style):
    """One float from a mix of magnitudes and 'nice' values."""
    r = rng.random()
    if style == "normal":
        x = rng.normal() * 10.0 ** rng.integers(-2, 3)
    elif style == "nice":
        x = round(rng.normal() * 10.0 ** rng.integers(0, 3), int(rng.integers(0, 4)))
    elif style == "int":
        x = float(rng.integers(-2000, 2000))
    elif style == "tie":
        # exact binary fractions at large magnitude: ties for shortest digits
        x = float(rng.integers(1, 2**53)) * 2.0 ** -int(rng.integers(1, 5))
    elif style == "edge":
        x = float(rng.choice([1e-4, 1e8, 1e6, 1000.0, 1001.0, 1e-5, 0.5, 99999999.99, 1e16, 1e-4 * (1 + 2**-52),
                              np.nextafter(1e-4, 0), np.nextafter(1e8, 0), 96505043.0660361, 5e-324, 2.2250738585072014e-308,
                              1.7976931348623157e308, 0.1, 0.3, 2.0 ** 60, 1962311374373454.25]))
    else:  # wide magnitudes 1e-20..1e20
        x = 10.0 ** rng.uniform(-20, 20)
    if r < 0.5 and style != "edge":
        x = -x
    return x


def special_mix(vals, p):
    out = []
    for x in vals:
        if rng.random() < p:
            x = float(rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0]))
        out.append(x)
    return out


def rand_shape():
    r = rng.random()
    if r < 0.03:
        return ()
    if r < 0.06:
        # empty arrays and zero-length axes
        nd = int(rng.integers(1, 4))
        shape = [int(rng.integers(0, 4)) for _ in range(nd)]
        shape[int(rng.integers(0, nd))] = 0
        return tuple(shape)
    if r < 0.46:
        return (int(rng.integers(1, 17)),)
    if r < 0.84:
        return (int(rng.integers(1, 5)), int(rng.integers(1, 8)))
    if r < 0.96:
        return tuple(int(rng.integers(1, 4)) for _ in range(3))
    return tuple(int(rng.integers(1, 4)) for _ in range(4))


def big_shape():
    r = rng.random()
    if r < 0.4:
        return (int(rng.integers(1001, 3000)),)
    if r < 0.9:
        return (int(rng.integers(20, 60)), int(rng.integers(20, 60)))
    return (int(rng.integers(5, 15)), int(rng.integers(5, 15)), int(rng.integers(10, 20)))


def rand_options(big):
    precision = int(rng.choice([8, 8, 8, 1, 2, 3, 4, 0, 5, 6, 10, 12, 16, int(rng.integers(0, 17))]))
    suppress = bool(rng.random() < 0.3)
    linewidth = int(rng.choice([75, 75, 75, 40, 20, 100, 120, 10, 1, 60]))
    threshold = 1000
    edgeitems = 3
    if big:
        edgeitems = int(rng.choice([3, 3, 1, 2, 4, 5]))
    elif rng.random() < 0.1:
        threshold = int(rng.choice([0, 1, 5, 10, 20]))
        edgeitems = int(rng.choice([0, 1, 2, 3]))
    return [precision, suppress, linewidth, threshold, edgeitems]


def make_case():
    big = rng.random() < 0.07
    shape = big_shape() if big else rand_shape()
    size = int(np.prod(shape)) if shape else 1
    pool_n = min(size, int(rng.integers(16, 40))) if big else size
    dt = rng.choice(["f64"] * 12 + ["f32"] * 3 + ["i64", "i32", "bool"])
    if dt in ("f64", "f32"):
        style = rng.choice(["wide", "wide", "normal", "normal", "nice", "int", "tie", "edge", "mixed"])
        vals = []
        for _ in range(pool_n):
            s = style if style != "mixed" else rng.choice(["wide", "normal", "nice", "int", "tie", "edge"])
            vals.append(rand_float(s))
        vals = special_mix(vals, float(rng.choice([0.0, 0.0, 0.05, 0.3])))
        if dt == "f64":
            pool = np.array(vals, dtype=np.float64)
            enc = [f64_hex(x) for x in pool]
        else:
            with np.errstate(over="ignore"):
                pool = np.array(vals, dtype=np.float64).astype(np.float32)
            enc = [f32_hex(x) for x in pool]
    elif dt in ("i64", "i32"):
        lim = int(rng.choice([10, 1000, 2**31 - 1])) if dt == "i32" else int(rng.choice([10, 1000, 2**62]))
        pool = rng.integers(-lim, lim, size=pool_n, endpoint=True).astype(np.int64 if dt == "i64" else np.int32)
        if pool_n and rng.random() < 0.1:
            pool[0] = np.iinfo(pool.dtype).min
        enc = [int(x) for x in pool]
    else:
        pool = rng.random(pool_n) < rng.random()
        enc = [int(x) for x in pool]
    a = np.resize(pool, shape) if size else pool.reshape(shape)
    opts = rand_options(big)
    return dt, list(shape), enc, opts, a


def render(a, opts):
    p, sup, lw, th, ei = opts
    with np.printoptions(precision=p, suppress=sup, linewidth=lw, threshold=th, edgeitems=ei):
        return str(a), repr(a)


def main():
    os.makedirs(OUT, exist_ok=True)
    header = {"numpy": np.__version__, "python": sys.version.split()[0], "seed": SEED}

    with open(os.path.join(OUT, "arrays.jsonl"), "w") as f:
        f.write(json.dumps(header) + "\n")
        for _ in range(N_ARRAYS):
            dt, shape, enc, opts, a = make_case()
            s, r = render(a, opts)
            f.write(json.dumps({"d": dt, "s": shape, "v": enc, "o": opts, "str": s, "repr": r},
                               separators=(",", ":")) + "\n")

    # Named cases used by focused unit tests (the measured traps and the seed outputs).
    traps = {
        "tie_shortest": ("f64", 1962311374373454.25, 8),  # 0-d: str shows the scalar
        "thousand_positional": ("f64", [1.0, 1000.0], 8),
        "thousand_one_scientific": ("f64", [1.0, 1001.0], 8),
        "keeps_all_digits": ("f64", [96505043.0660361, 1e6], 8),
        "seed_rows": ("f64", [[0.1, 0.2, 0.3], [1.0, 1.1, 1.2]], 8),
        "seed_scores": ("f64", [[109.69655115, 251.95565747], [251.95565747, 578.59734577]], 8),
        "seed_pad_fraction": ("f64", [[7.0, 8.0, 9.0], [15.8, 18.4, 21.0]], 8),
        "seed_precision1_sci": ("f64", [[4.9e-07, 4.0e-14, 9.9e-01, 1.7e-05, 6.1e-03]], 1),
        "seed_column": ("f64", [[0.5488135039273248], [0.7151893663724195], [0.6027633760716439],
                                [0.5448831829968969], [0.4236547993389047]], 8),
        "seed_signs": ("f64", [[2.97166793, -3.97166793], [2.9998996, -3.9998996]], 8),
        "specials": ("f64", [np.nan, np.inf, -np.inf, -0.0, 1.5], 8),
        "f32_shortest": ("f32", [0.1, 1.0 / 3.0, 16777217.0], 8),
        "f32_scalar_cutoff": ("f32", 1e6, 8),
        "f32_small_cutoff_in_f32": ("f32", [1e-4, 0.05], 8),
        "f64_small_cutoff": ("f64", [float(np.nextafter(1e-4, 0)), 0.05], 8),
        "empty": ("f64", [], 8),
    }
    with open(os.path.join(OUT, "traps.jsonl"), "w") as f:
        f.write(json.dumps(header) + "\n")
        for name, (dt, vals, p) in traps.items():
            a = np.array(vals, dtype=np.float64 if dt == "f64" else np.float32)
            enc = [f64_hex(x) if dt == "f64" else f32_hex(x) for x in a.ravel()]
            opts = [p, False, 75, 1000, 3]
            s, r = render(a, opts)
            f.write(json.dumps({"name": name, "d": dt, "s": list(a.shape), "v": enc, "o": opts, "str": s, "repr": r},
                               separators=(",", ":")) + "\n")

    # np.round: ties, negatives, large and negative decimals.
    with open(os.path.join(OUT, "round.jsonl"), "w") as f:
        f.write(json.dumps(header) + "\n")
        for i in range(3000):
            d = int(rng.choice([0, 1, 2, 3, 4, 5, 8, 10, 15, 16, 17, 20, 22, 25, 30, 300, 308, 309, 400,
                                -1, -2, -3, -5, -10, -20, -300, -400, int(rng.integers(-25, 25))]))
            k = i % 4
            if k == 0:  # ties at the rounding digit
                x = (float(rng.integers(-10**6, 10**6)) + 0.5) / 10.0 ** min(max(d, 0), 300)
            elif k == 1:
                x = rand_float(str(rng.choice(["wide", "normal", "nice", "tie", "edge"])))
            elif k == 2:
                x = float(rng.integers(-10**6, 10**6)) * 10.0 ** int(rng.integers(-6, 6)) + 0.5 * 10.0 ** -min(max(d, 0), 300)
            else:
                x = float(rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0, 2.5, -2.5, 0.125, -0.5, 1e300, 5e-324]))
            with np.errstate(all="ignore"):
                y = np.round(np.array([x]), d)[0]
            f.write(json.dumps({"x": f64_hex(x), "d": d, "y": f64_hex(y)}, separators=(",", ":")) + "\n")

    # Python's repr(float).
    with open(os.path.join(OUT, "float_str.jsonl"), "w") as f:
        f.write(json.dumps(header) + "\n")
        xs = [rand_float(str(rng.choice(["wide", "normal", "nice", "int", "tie", "edge"]))) for _ in range(1800)]
        xs += [float(rng.integers(1, 2**62)) * 2.0 ** int(rng.integers(-1100, 1000)) for _ in range(300)]
        xs += [2.0 ** e for e in range(-1074, 1024, 7)]
        xs += [struct.unpack(">d", struct.pack(">Q", int(rng.integers(0, 2**63))))[0] for _ in range(500)]
        xs += [np.nan, np.inf, -np.inf, -0.0, 0.0, 79.19999999999999, 1e-05, 1e16, 1e15, 9999999999999998.0,
               0.0001, 1e-4 * (1 - 2**-52), 100.0, 0.1, 1962311374373454.25]
        for x in xs:
            f.write(json.dumps({"x": f64_hex(x), "s": repr(float(x))}, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
