#!/usr/bin/env python3
"""NumPy's matrix products, bit for bit, for tests/matmul_parity.rs.

Run: .venv/bin/python scripts/matmul_goldens.py

Case i draws its inputs from np.random.RandomState(i).randn (the library replays that stream),
so only the shapes and the products' bits are stored. Both factors have at least two rows and
two columns, and the inner dimension is at most 12: products with a single row or column go through BLAS's gemv/dot kernels, whose
order of summation differs (README, "Parity with NumPy"). `a @ bt.T` is the scores' shape of
product (Q @ K.T, a transposed view).
"""

import json
import os

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "matmul.json")


def bits(m):
    return [format(int(b), "016x") for b in np.ascontiguousarray(m).view(np.uint64).ravel()]


def main():
    shapes = np.random.default_rng(2026)
    cases = []
    for seed in range(200):
        # Inner dimension up to 12 (d and d_k of the tutorials' layers): at 16, 6 of 300
        # products differ from NumPy's in the last bit (README, "Parity with NumPy").
        m, n = (int(v) for v in shapes.integers(2, 10, size=2))
        k = int(shapes.integers(2, 13))
        rs = np.random.RandomState(seed)
        a, b, bt = rs.randn(m, k), rs.randn(k, n), rs.randn(n, k)
        cases.append({"seed": seed, "m": m, "k": k, "n": n,
                      "ab": bits(a @ b), "abt": bits(a @ bt.T)})
    golden = {"numpy": np.__version__, "blas": np.show_config(mode="dicts")["Build Dependencies"]["blas"]["version"],
              "cases": cases}
    with open(OUT, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"{OUT}: {len(cases)} products")


if __name__ == "__main__":
    main()
