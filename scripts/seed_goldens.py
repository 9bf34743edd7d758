"""Writes tests/data/seeds/*.json: every intermediate of the seed documents' computations,
computed by NumPy (and scipy for seed 001's softmax), for the Rust tests to compare against;
tests/data/seeds/softmax_edges.json: both softmax forms on overflowing, NaN and inf rows;
and tests/data/seeds/propagation.json: a NaN or inf token through one head.

Run from the repository root: .venv/bin/python scripts/seed_goldens.py
"""
import json
import pathlib
import sys

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np
import scipy
from scipy.special import softmax as scipy_softmax

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "seeds"


def stable(scores):
    e = np.exp(scores - np.max(scores, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def naive(scores):
    e = np.exp(scores)
    return e / np.sum(e, axis=1, keepdims=True)


def head(x, wq, wk, wv, soft):
    q, k, v = x @ wq, x @ wk, x @ wv
    scores = (q @ k.T) / np.sqrt(k.shape[1])
    weights = soft(scores)
    return {"wq": wq, "wk": wk, "wv": wv, "q": q, "k": k, "v": v,
            "scores": scores, "weights": weights, "z": weights @ v}


def layer(x, projections, soft, wo=None):
    heads = [head(x, *p, soft) for p in projections]
    concat = np.concatenate([h["z"] for h in heads], axis=1)
    out = {"heads": heads, "concat": concat}
    if wo is not None:
        out["wo"] = wo
        out["output"] = concat @ wo
    return out


def split(wq, wk, wv, h):
    return [(wq[:, i], wk[:, i], wv[:, i]) for i in np.split(np.arange(wk.shape[1]), h)]


def plain(obj):
    if isinstance(obj, np.ndarray):
        return obj.astype(float).tolist()
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    return obj


def write(name, data):
    data = {"numpy": np.__version__, "scipy": scipy.__version__, **plain(data)}
    (OUT / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")




def seed_000():
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    wq1 = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9], [1.0, 1.1, 1.2]])
    wk1 = np.array([[0.3, 0.2, 0.1], [0.6, 0.5, 0.4], [0.9, 0.8, 0.7], [1.2, 1.1, 1.0]])
    wv1 = np.array([[0.7, 0.8, 0.9], [0.4, 0.5, 0.6], [0.1, 0.2, 0.3], [1.3, 1.4, 1.5]])
    wq2 = np.array([[0.2, 0.3, 0.4], [0.5, 0.6, 0.7], [0.8, 0.9, 1.0], [1.1, 1.2, 1.3]])
    wk2 = np.array([[0.4, 0.3, 0.2], [0.7, 0.6, 0.5], [1.0, 0.9, 0.8], [1.3, 1.2, 1.1]])
    wv2 = np.array([[0.9, 1.0, 1.1], [0.6, 0.7, 0.8], [0.3, 0.4, 0.5], [1.4, 1.5, 1.6]])
    wo = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.9, 1.0, 1.1, 1.2],
                   [1.3, 1.4, 1.5, 1.6], [1.7, 1.8, 1.9, 2.0], [2.1, 2.2, 2.3, 2.4]])
    out = layer(x, [(wq1, wk1, wv1), (wq2, wk2, wv2)], stable, wo)
    for h in out["heads"]:
        h["weights_round3"] = np.round(h["weights"], 3)
    write("000", {"x": x, **out})


def seed_001():
    # The document's printed inputs (8 significant digits), as the document shows them.
    w = np.array([
        [0.69453339, 0.56874769, 0.67876956, 0.46420813, 0.72690923],
        [0.45540857, 0.74785557, 0.81749043, 0.28979171, 0.03700459],
        [0.69380642, 0.43719921, 0.67627902, 0.32564306, 0.26195105]])
    wq = np.array([[0.85768293, 0.8097524, 0.1131521], [0.03434299, 0.78957685, 0.98330118],
                   [0.50379376, 0.63112608, 0.67818403], [0.930376, 0.83203011, 0.04887063],
                   [0.61405312, 0.98550047, 0.40614657]])
    wk = np.array([[0.36919691, 0.1361247, 0.72053443], [0.71822876, 0.39686467, 0.04528545],
                   [0.19157466, 0.36145483, 0.2659768], [0.10982799, 0.77172553, 0.55713648],
                   [0.87763333, 0.45291319, 0.10164459]])
    wv = np.array([[0.817592, 0.94143668, 0.22078388], [0.3274662, 0.41683922, 0.81230439],
                   [0.73981798, 0.76074838, 0.09931974], [0.0048496, 0.74979256, 0.64001566],
                   [0.35269625, 0.31325836, 0.31122616]])
    q, k, v = w @ wq, w @ wk, w @ wv
    tokens = [w[i].reshape(5, 1) for i in range(3)]
    per_token = {name: np.concatenate([t.T @ m for t in tokens], axis=0)
                 for name, m in (("q", wq), ("k", wk), ("v", wv))}
    attention = scipy_softmax((q @ k.T) / np.sqrt(k.shape[1]), axis=1) @ v
    write("001", {"w": w, "wq": wq, "wk": wk, "wv": wv, "q": q, "k": k, "v": v,
                  "per_token": per_token, "attention": attention})


def seed_003():
    x = np.array([[0.7, -0.8, -1.2, -1., -0., -0.3], [2.7, 0.1, 1.6, 1.8, 1.5, 0.3],
                  [0.1, 2.6, -0.1, -1.3, -0.5, -0.7], [1.1, 1.5, 1., -0.5, 0.4, 0.4],
                  [-0.7, -0.7, 0.7, -1.5, -0.8, 1.]])
    wq = np.array([[-1.7, 1.6, 0.9, -0.5, 0.4, -1.], [-0.4, 1., -0.3, 1., 0.5, 1.1],
                   [0.4, -0.9, -1., 0.5, -1.4, 0.], [0.3, 1.4, -1.2, 0.2, 0.1, 1.6],
                   [-0.8, 0.8, -0.7, -1.3, 0.3, 0.8], [1.1, 0.3, -1.5, -2.3, 2.2, -0.7]])
    wk = np.array([[0.3, -0.4, -1.3, 0.3, -1.7, 1.1], [-2.3, -1.1, 0.6, -1.2, 2.2, 0.3],
                   [1.1, -0.4, -0.5, 1.9, -1.1, -1.2], [-0.4, 1., -1.7, 0., -3.3, -1.4],
                   [-0.9, -1.1, -1., 1.4, 1.3, 1.2], [-0.7, 0.4, 0.4, -1.4, -0.2, -0.5]])
    wv = np.array([[-0.1, 0.7, 1., -0.1, 1.6, 0.9], [0.4, -1., -0.7, -0.6, -0.9, -0.1],
                   [-0.4, 0.5, -1.4, 0.1, 0.6, 0.4], [1.4, -1.3, -1.3, -0.6, 1.6, -0.2],
                   [-0.4, -0.6, -1.4, -1., 0.4, -0.8], [0.2, 0.5, 0.4, -0.5, 1.4, 2.3]])
    perm = [1, 0, 2, 3, 4]
    xp = x[perm, :]
    write("003", {"x": x, "wq": wq, "wk": wk, "wv": wv, "perm": perm, "x_perm": xp,
                  "h1": layer(x, split(wq, wk, wv, 1), naive),
                  "h3": layer(x, split(wq, wk, wv, 3), naive),
                  "h1_perm": layer(xp, split(wq, wk, wv, 1), naive),
                  "h3_perm": layer(xp, split(wq, wk, wv, 3), naive)})


def seed_004():
    x = np.array([[1, 2], [3, 4]])
    eye, swap = np.array([[1, 0], [0, 1]]), np.array([[0, 1], [1, 0]])
    wv1, wv2 = np.array([[1, 0], [0, -1]]), np.array([[0, 1], [-1, 0]])
    wo = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]])
    write("004", {"x": x, **layer(x, [(eye, swap, wv1), (swap, eye, wv2)], naive, wo)})


def encode(m):
    # NaN is not JSON: values are Python's repr strings ('nan', 'inf', '-inf'), with the shape
    # so that empty matrices keep their column count.
    return {"shape": list(m.shape), "rows": [[repr(float(v)) for v in row] for row in m.tolist()]}


def softmax_edges():
    cases = [[[1.0, 2.0, 3.0]], [[709.0, 709.78, 0.0]], [[710.0, 0.0]], [[1000.0, 999.0]],
             [[-1000.0, -1001.0]], [[np.nan, 1.0]], [[np.inf, 1.0]], [[-np.inf, 1.0]],
             [[-np.inf, -np.inf]], [[np.inf, np.inf]], [[0.0] * 9 + [1.0] * 200],
             [[-0.0, -0.0]], np.zeros((0, 3)).tolist()]
    # A 2x0 matrix is left out: np.max raises on it (we return a 2x0 matrix, tested in Rust).
    out = []
    with np.errstate(all="ignore"):
        for c in cases:
            a = np.array(c, dtype=float).reshape(len(c), -1 if len(c) else 3)
            out.append({"scores": a, "stable": stable(a), "naive": naive(a), "scipy": scipy_softmax(a, axis=1)})
    data = [{k: encode(v) for k, v in case.items()} for case in out]
    (OUT / "softmax_edges.json").write_text(json.dumps({"numpy": np.__version__, "cases": data}, indent=1) + "\n")


def propagation():
    # A NaN or an inf in one token, through one stable head: what NumPy gives for every step.
    w = np.array([[1.0, 0.5], [0.0, 1.0], [-1.0, 2.0]])
    cases = {}
    with np.errstate(all="ignore"):
        for name, bad in (("nan", np.nan), ("inf", np.inf), ("neg_inf", -np.inf)):
            x = np.array([[1.0, 2.0, 3.0], [0.5, bad, 1.0], [2.0, 1.0, 0.0]])
            h = head(x, w, w[:, ::-1].copy(), w, stable)
            cases[name] = {"x": x, **{k: h[k] for k in ("q", "k", "v", "scores", "weights", "z")}}
    data = {name: {k: encode(v) for k, v in c.items()} for name, c in cases.items()}
    data["wq"] = data["wv"] = encode(w)
    data["wk"] = encode(w[:, ::-1])
    (OUT / "propagation.json").write_text(json.dumps({"numpy": np.__version__, **data}, indent=1) + "\n")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for make in (seed_000, seed_001, seed_003, seed_004, softmax_edges, propagation):
        make()
    print(f"wrote {OUT} with numpy {np.__version__}", file=sys.stderr)
