"""Write the golden random streams that tests/np_random.rs replays, from real NumPy.

Run from the repository root:

    .venv/bin/python scripts/numpy_random_goldens.py

Writes tests/data/np_random/random_state.json (np.random.RandomState / np.random.seed)
and tests/data/np_random/generator.json (np.random.default_rng). Floats are stored as
the 16 hex digits of their IEEE-754 bits, so the Rust test compares bit for bit; ints
are JSON integers (exact, also beyond 2**53). A call NumPy refuses is stored with the
exception text and no values: the Rust side must return an error there and, like
NumPy, leave the stream untouched for the calls that follow.
"""

import json
import pathlib
import struct

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np

OUT_DIR = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "np_random"
INF = float("inf")


def f64_bits(values):
    return [struct.pack(">d", float(v)).hex() for v in np.asarray(values).ravel()]


def raw_draws(bitgen, kinds):
    """Raw next_uint32/next_uint64 draws straight from the bit generator (what RngCore gives)."""
    c = bitgen.ctypes
    out = []
    for kind in kinds:
        if kind == "u32":
            out.append(int(c.next_uint32(c.state)))
        else:
            out.append(int(c.next_uint64(c.state)))
    return out


def run_call(obj, bitgen, call):
    """Performs one call on `obj` and returns the call with NumPy's result attached."""
    method, args = call["method"], call.get("args", [])
    shape = tuple(call.get("shape", ()))
    rec = dict(call)
    if method in ("uniform", "normal"):
        # JSON has no inf/nan: float arguments travel as bits too, with a readable copy.
        rec["args"] = f64_bits(args)
        rec["args_repr"] = [repr(a) for a in args]
    try:
        if method == "raw":
            rec["values"] = raw_draws(bitgen, args)
        elif method == "bytes":
            rec["hex"] = obj.bytes(args[0]).hex()
        elif method == "randint":
            rec["values"] = [int(v) for v in obj.randint(*args, size=shape, dtype=np.int64).ravel()]
        elif method in ("rand", "randn"):
            rec["f64_bits"] = f64_bits(getattr(obj, method)(*shape))
        else:
            rec["f64_bits"] = f64_bits(getattr(obj, method)(*args, size=shape))
    except (ValueError, OverflowError) as err:
        rec["error"] = f"{type(err).__name__}: {err}"
    return rec


# One script of calls, replayed for every seed: each method, shapes that are odd, empty,
# 0-d and long enough to cross several MT19937 twists, and interleavings that leave the
# legacy gauss cache full between calls of different methods.
RANDOM_STATE_CALLS = [
    {"method": "rand", "shape": [5, 1]},
    {"method": "random_sample", "shape": [3]},
    {"method": "randn", "shape": [3]},
    {"method": "normal", "args": [1.5, 2.0], "shape": [2, 2]},
    {"method": "standard_normal", "shape": [1]},
    {"method": "normal", "args": [-3.0, 0.25], "shape": [3, 1, 1]},
    {"method": "rand", "shape": [2]},
    {"method": "randn", "shape": []},
    {"method": "uniform", "args": [-1.0, 1.0], "shape": [4]},
    {"method": "uniform", "args": [2.0, -7.5], "shape": [3]},
    {"method": "uniform", "args": [5.0, 5.0], "shape": [2]},
    {"method": "randint", "args": [0, 10], "shape": [7]},
    {"method": "randint", "args": [-5, 5], "shape": [3, 2]},
    {"method": "randint", "args": [0, 2], "shape": [9]},
    {"method": "randint", "args": [7, 8], "shape": [3]},
    {"method": "randint", "args": [-(2**31), 2**31], "shape": [4]},
    {"method": "randint", "args": [0, 2**32], "shape": [4]},
    {"method": "randint", "args": [-3, 2**32 - 3], "shape": [4]},
    {"method": "randint", "args": [0, 2**32 + 1], "shape": [4]},
    {"method": "randint", "args": [10, 3 * 2**40 + 7], "shape": [5]},
    {"method": "randint", "args": [-(2**63), 2**63 - 1], "shape": [3]},
    {"method": "randint", "args": [-(2**62), 2**62 + 1], "shape": [3]},
    {"method": "randint", "args": [1, 1000], "shape": [0, 3]},
    # refused by NumPy: no draws, the stream carries on unchanged
    {"method": "randint", "args": [5, 5], "shape": [2]},
    {"method": "randint", "args": [6, -6], "shape": [2]},
    {"method": "uniform", "args": [0.0, INF], "shape": [2]},
    {"method": "uniform", "args": [float("nan"), 1.0], "shape": [2]},
    {"method": "uniform", "args": [-1e308, 1e308], "shape": [2]},
    {"method": "normal", "args": [0.0, -1.0], "shape": [2]},
    {"method": "normal", "args": [0.0, -0.0], "shape": [2]},
    {"method": "normal", "args": [4.0, 0.0], "shape": [2]},
    {"method": "randn", "shape": [1]},
    {"method": "raw", "args": ["u32", "u64", "u32", "u32", "u64"]},
    {"method": "bytes", "args": [13]},
    # not bytes(0): NumPy still draws a word there, RngCore::fill_bytes(&mut []) draws none
    {"method": "standard_normal", "shape": [1]},
    {"method": "rand", "shape": [1000]},
    {"method": "randn", "shape": [1001]},
    {"method": "normal", "args": [0.0, 1.0], "shape": [5]},
    {"method": "randint", "args": [0, 3], "shape": [700]},
    {"method": "random_sample", "shape": [4, 3, 2]},
]

RANDOM_STATE_SEEDS = [
    {"seed": 0},
    {"seed": 1},
    {"seed": 42},
    {"seed": 12345},
    {"seed": 2**32 - 1},
    {"key": [1, 2, 3]},
    {"key": [0]},
    {"key": [2**32 - 1, 0, 7, 2**31]},
    {"key": list(range(624))},
    {"key": [(i * 2654435761) % 2**32 for i in range(625)]},
    {"key": [(i * 40503 + 17) % 2**32 for i in range(1500)]},
]

GENERATOR_CALLS = [
    {"method": "random", "shape": [5]},
    {"method": "random", "shape": [3, 2]},
    {"method": "raw", "args": ["u32", "u64", "u32", "u32", "u32", "u64"]},
    {"method": "raw", "args": ["u32"]},
    {"method": "random", "shape": [1]},
    {"method": "raw", "args": ["u32", "u64"]},
    {"method": "bytes", "args": [13]},
    {"method": "random", "shape": []},
    {"method": "random", "shape": [0, 4]},
    {"method": "random", "shape": [1000]},
]

GENERATOR_SEEDS = [0, 1, 42, 12345, 2**32 - 1, 2**32, 2**63 + 5, 2**64 - 1]


def random_state_cases():
    cases = []
    for seed in RANDOM_STATE_SEEDS:
        rs = np.random.RandomState(seed.get("seed", seed.get("key")))
        calls = [run_call(rs, rs._bit_generator, call) for call in RANDOM_STATE_CALLS]
        cases.append({**seed, "calls": calls})
    return cases


def generator_cases():
    cases = []
    for seed in GENERATOR_SEEDS:
        rng = np.random.default_rng(seed)
        pcg = rng.bit_generator.state["state"]
        seeded = {"state": hex(pcg["state"]), "inc": hex(pcg["inc"])}
        calls = [run_call(rng, rng.bit_generator, call) for call in GENERATOR_CALLS]
        cases.append({"seed": seed, "pcg64_seeded": seeded, "calls": calls})
    return cases


def write(name, about, cases):
    doc = {
        "numpy_version": np.__version__,
        "written_by": "scripts/numpy_random_goldens.py",
        "about": about,
        "cases": cases,
    }
    path = OUT_DIR / name
    path.write_text(dumps_one_call_a_line(doc))
    n = sum(len(c.get("values", c.get("f64_bits", []))) for case in cases for c in case["calls"])
    print(f"{path}: {len(cases)} seeds, {n} values")


def dumps_one_call_a_line(doc):
    """JSON with one call per line: small diffs when NumPy changes, yet no line per value."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    out = [json.dumps(head)[:-1] + ', "cases": [']
    for i, case in enumerate(doc["cases"]):
        seed = {k: v for k, v in case.items() if k != "calls"}
        out.append(" " + json.dumps(seed)[:-1] + ', "calls": [')
        out.append(",\n".join("  " + json.dumps(call, allow_nan=False) for call in case["calls"]))
        out.append(" ]}" + ("," if i + 1 < len(doc["cases"]) else ""))
    out.append("]}")
    return "\n".join(out) + "\n"


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    write(
        "random_state.json",
        "np.random.RandomState(seed or key): one script of calls per seed; f64 as IEEE bits in hex",
        random_state_cases(),
    )
    write(
        "generator.json",
        "np.random.default_rng(seed): one script of calls per seed; f64 as IEEE bits in hex",
        generator_cases(),
    )


if __name__ == "__main__":
    main()
