"""Writes tests/data/transcripts/*.txt: what each seed document's code prints, as NumPy prints
it (seed 001 with np.random.seed(0); for the problem sheet 002, which has no code, what its
notebook's answers print). The Rust tests and notebooks must reproduce these bytes.

The inputs come from tests/data/seeds/*.json (scripts/seed_goldens.py). When the project's
shared reference folder sits beside the repository, each transcript is also checked against it.

Run from the repository root: .venv/bin/python scripts/seed_transcripts.py
"""
import io
import json
import pathlib
import sys
from contextlib import redirect_stdout

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np
from scipy.special import softmax as scipy_softmax

from seed_goldens import naive, stable

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "transcripts"
SHARED = ROOT.parent / "shared" / "reference"


def load(seed):
    return json.loads((ROOT / "tests" / "data" / "seeds" / f"{seed}.json").read_text())


def scores(q, k):
    return q @ k.T / np.sqrt(k.shape[1])


def t000():
    g = load("000")
    x = np.array(g["x"])
    heads = [{m: np.array(h[m]) for m in ("wq", "wk", "wv")} for h in g["heads"]]
    for i, h in enumerate(heads, 1):
        for m in ("wq", "wk", "wv"):
            print(f"W{m[1].upper()}_{i}:\n", h[m])
    for i, h in enumerate(heads, 1):
        h.update(q=x @ h["wq"], k=x @ h["wk"], v=x @ h["wv"])
        for m in ("q", "k", "v"):
            print(f"Head {i} - {m.upper()}_{i}:\n", h[m])
    for i, h in enumerate(heads, 1):
        h["scores"] = scores(h["q"], h["k"])
        print(f"Head {i} - Attention Scores:\n", h["scores"])
    for i, h in enumerate(heads, 1):
        h["weights"] = stable(h["scores"])
        print(f"Head {i} - Softmax Attention Weights:\n", np.round(h["weights"], 3))
    for i, h in enumerate(heads, 1):
        h["z"] = h["weights"] @ h["v"]
        print(f"Head {i} - Weighted Sum (Z_{i}):\n", h["z"])
    z = np.concatenate([h["z"] for h in heads], axis=1)
    print("Multi-Headed Attention Output (Z):\n", z)
    print(repr(z.shape))
    print("Result after multiplication with W_0:\n", z @ np.array(g["wo"]))


def t001():
    np.random.seed(0)
    w = [np.random.rand(5, 1) for _ in range(3)]
    for i, wi in enumerate(w, 1):
        print(f"w{i}={wi}\n")
    wq, wk, wv = (np.random.rand(5, 3) for _ in range(3))
    for name, m in (("WQ", wq), ("WK", wk), ("WV", wv)):
        print(f"\n{name}={m}\n")
    for name, m in (("q", wq), ("k", wk), ("v", wv)):
        for i, wi in enumerate(w, 1):
            print(f"{name}{i}={wi.T @ m}\n")
    big_w = np.concatenate(w, axis=1).T
    print(f"\nW={big_w}\n")
    q, k, v = big_w @ wq, big_w @ wk, big_w @ wv
    for name, m in (("Q", q), ("K", k), ("V", v)):
        print(f"\n{name}={m}\n")
    print(f"\nattention={scipy_softmax(scores(q, k), axis=1) @ v}\n")
    # Four heads: W_Q, W_K, W_V drawn head by head.
    projections = [[np.random.rand(5, 3) for _ in range(3)] for _ in range(4)]
    z = np.concatenate([scipy_softmax(scores(big_w @ a, big_w @ b), axis=1) @ (big_w @ c)
                        for a, b, c in projections], axis=1)
    print(repr(z.shape))
    wo = np.random.rand(z.shape[1], 3)
    print(f"\nmultihead={z @ wo}\n")


def t002():
    # The problem sheet has no code; this is what its notebook's answers print.
    g = load("000")
    x = np.array(g["x"])
    heads = []
    for i, h in enumerate(g["heads"]):
        q, k, v = (x @ np.array(h[m]) for m in ("wq", "wk", "wv"))
        print(f"Q_{i}:\n", q)
        print(f"K_{i}:\n", k)
        print(f"V_{i}:\n", v)
        heads.append((q, k, v))
    zs = []
    for i, (q, k, v) in enumerate(heads):
        s = scores(q, k)
        w = stable(s)
        zs.append(w @ v)
        print(f"scores_{i}:\n", s)
        print(f"weights_{i}:\n", w)
        print(f"Z_{i}:\n", zs[-1])
    z = np.concatenate(zs, axis=1)
    print("Z:\n", z)
    print("Z W_O:\n", z @ np.array(g["wo"]))


def t003():
    g = load("003")
    x, wq, wk, wv = (np.array(g[m]) for m in ("x", "wq", "wk", "wv"))

    def heads(x, h):
        out = []
        for idx in np.split(np.arange(wk.shape[1]), h):
            q, k, v = x @ wq[:, idx], x @ wk[:, idx], x @ wv[:, idx]
            w = naive(scores(q, k))
            out.append((w @ v, w))
        return np.concatenate([o for o, _ in out], axis=1), [w for _, w in out]

    def show(x, h):
        output, weights = heads(x, h)
        print("Self-Attention Output:\n", output)
        print("Self-Attention Weights:")
        for i, w in enumerate(weights, 1):
            print(f"Head {i}\n {w}\n")

    np.set_printoptions(precision=1)
    try:
        output, (weights,) = heads(x, 1)
        print("Self-Attention Output:\n", output)
        print("Self-Attention Matrix:\n", weights)
        show(x, 3)
        print("X\n", x)
        x = x[g["perm"], :]
        print("X after permutation\n", x)
        show(x, 1)
        show(x, 3)
    finally:
        np.set_printoptions(precision=8)


def t004():
    g = load("004")
    x = np.array(g["x"])
    outs = []
    for h in g["heads"]:
        q, k, v = (x @ np.array(h[m]) for m in ("wq", "wk", "wv"))
        outs.append(naive(q @ k.T / np.sqrt(q.shape[1])) @ v)
    concat = np.hstack(outs)
    print("Head 1 Output:")
    print(outs[0])
    print("\nHead 2 Output:")
    print(outs[1])
    print("\nConcatenated Heads:")
    print(concat)
    print("\nFinal Multi-Head Self-Attention Output (M):")
    print(concat @ np.array(g["wo"]))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    differ = 0
    for name, make in (("000", t000), ("001", t001), ("002", t002), ("003", t003), ("004", t004)):
        buf = io.StringIO()
        with redirect_stdout(buf):
            make()
        text = buf.getvalue()
        (OUT / f"{name}.txt").write_text(text)
        refs = sorted(SHARED.glob(f"{name}_*.txt")) if SHARED.is_dir() else []
        for ref in refs:
            same = ref.read_text() == text
            differ += not same
            print(f"{name}: {'equals' if same else 'DIFFERS FROM'} {ref.name}", file=sys.stderr)
    print(f"wrote {OUT} with numpy {np.__version__}", file=sys.stderr)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
