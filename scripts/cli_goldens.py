#!/usr/bin/env python3
"""Write the inputs and NumPy's expected outputs for the CLI tests into cli/classroom/tests/data/.

Run: .venv/bin/python scripts/cli_goldens.py
Deterministic (fixed seeds); rerunning rewrites the same bytes.

- show/: .npy files (float64, float32, int64, int32, bool; 0-D to 3-D; C and Fortran order;
  big-endian) and broken files; show/cases.json lists each `show` command line with the file
  in show/expected/ that holds what NumPy prints (print(a), repr(a), np.set_printoptions).
- solve/: the matrices of a few problems; solve/cases.json lists each `solve` command line with
  its expected text (NumPy's step-by-step prints) or JSON (every intermediate, NaN and
  infinities as the strings "NaN", "Infinity", "-Infinity"); also masked problems (--causal,
  --padding, --mask, a fully masked row), cross-attention (--kv) and biases.
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

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli", "classroom", "tests", "data")


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


def solve(x, heads, wo, naive=False, mask=None, kv=None, biases=None, bo=None):
    """Every intermediate, as a NumPy worked example computes it.

    mask: the additive mask (0 or -inf where blocked) added to the scores; a row whose
    scores are all -inf gets zero weights (as attention-lab documents; PyTorch MHA gives NaN).
    kv: (key, value) inputs of cross-attention. biases: (b_Q, b_K, b_V) per head. bo: b_O.
    """
    key, value = kv if kv is not None else (x, x)
    steps = []
    for n, (wq, wk, wv) in enumerate(heads):
        q, k, v = x @ wq, key @ wk, value @ wv
        if biases is not None:
            bq, bk, bv = biases[n]
            q, k, v = q + bq, k + bk, v + bv
        scores = q @ k.T / np.sqrt(k.shape[1])
        if mask is not None:
            scores = scores + mask
        weights = softmax(scores, naive)
        if mask is not None:
            weights[np.all(scores == -np.inf, axis=1)] = 0.0
        z = weights @ v
        steps.append({"q": q, "k": k, "v": v, "scores": scores, "weights": weights, "z": z})
    concat = np.concatenate([h["z"] for h in steps], axis=1)
    output = concat @ wo if wo is not None else None
    if bo is not None:
        output = output + bo
    return steps, concat, output


def print_solution(steps, concat, output, mask=None):
    if mask is not None:
        if np.all((mask == 0) | (mask == -np.inf)):
            print("Mask (True = blocked):\n", mask == -np.inf)
        else:
            print("Mask (added to the scores):\n", mask)
        print()
    plus = "" if mask is None else " + mask"
    for i, h in enumerate(steps, 1):
        dk = h["k"].shape[1]
        print(f"Head {i} - Q_{i}:\n", h["q"])
        print(f"Head {i} - K_{i}:\n", h["k"])
        print(f"Head {i} - V_{i}:\n", h["v"])
        print(f"Head {i} - scores = Q_{i} K_{i}^T / sqrt({dk}){plus}:\n", h["scores"])
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


def solution_json(steps, concat, output, mask=None):
    masked = {} if mask is None else {"mask": json_value(mask)}
    return json.dumps({
        **masked,
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
    cases = [(name, args, problem + ({},), kind, opts)
             for name, args, problem, kind, opts in cases]
    cases += masked_cases(save, x, heads, wo, x32, w6)
    cases += backward_cases(save, x, heads, wo, x32, w6)
    listed = []
    for name, args, (cx, cheads, cwo, naive, extra), kind, opts in cases:
        extra = dict(extra)
        g = extra.pop("g", None)
        steps, concat, output = solve(cx.astype(np.float64), cheads, cwo, naive, **extra)
        mask = extra.get("mask")
        grads = None if g is None else torch_backward(cx.astype(np.float64), cheads, cwo, g, **extra)
        expected = f"{name}.{kind}"
        if kind == "txt":
            def show():
                print_solution(steps, concat, output, mask)
                if grads is not None:
                    print_backward(grads, cheads, cwo is not None, extra.get("bo") is not None)
            text = printed(show, **opts)
        else:
            text = solution_json(steps, concat, output, mask)
            if grads is not None:
                text = text[:-2] + ", \"backward\": " + json.dumps(backward_json(grads)) + "}\n"
        write(os.path.join(out, expected), text)
        listed.append({"args": args, kind: expected})
    write(os.path.join(out, "cases.json"), json.dumps(listed, indent=1) + "\n")


def blocked(b):
    """The additive mask of a boolean one (True = blocked, as nn.MultiheadAttention)."""
    return np.where(b, -np.inf, 0.0)


def causal(n):
    return blocked(np.triu(np.ones((n, n), dtype=bool), 1))


def padding(queries, padded):
    return blocked(np.tile(np.array(padded, dtype=bool), (queries, 1)))


def masked_cases(save, x, heads, wo, x32, w6):
    """solve's masks, cross-attention and biases (issue 11): the problems above and a few more,
    drawn from their own stream so the matrices above keep their bytes."""
    rs = np.random.RandomState(11)
    x3 = np.array([[1, 0, 2, 0], [0, 1, 0, 1], [2, 1, 0, 0]], dtype=np.int64)
    save("x3.npy", x3)
    # A fully masked second row: zero weights, zero Z row.
    full = np.array([[False, True, True], [True, True, True], [False, False, True]])
    save("mask_full.npy", full)
    additive = np.array([[0.0, -1.0, -np.inf], [0.5, 0.0, -np.inf], [0.0, -2.0, 0.0]])
    save("mask_add.npy", additive)
    save("mask_int.npy", np.zeros((2, 2), dtype=np.int64))
    # Cross-attention: keys 5 wide (kdim), values 2 wide (vdim), E = 4, three memory tokens.
    memory_k = np.round(rs.uniform(-1, 1, (3, 5)), 2)
    memory_v = np.round(rs.uniform(-1, 1, (3, 2)), 2)
    cross = [(np.round(rs.uniform(-1, 1, (4, 3)), 2), np.round(rs.uniform(-1, 1, (5, 3)), 2),
              np.round(rs.uniform(-1, 1, (2, 2)), 2)) for _ in range(2)]
    cross_biases = [tuple(np.round(rs.uniform(-1, 1, n), 2) for n in (3, 3, 2)) for _ in range(2)]
    cross_wo = np.round(rs.uniform(-1, 1, (4, 4)), 2)
    cross_bo = np.round(rs.uniform(-1, 1, 4), 2)
    save("memory_k.npy", memory_k)
    save("memory_v.npy", memory_v)
    for i, (wq, wk, wv) in enumerate(cross, 1):
        save(f"cq{i}.npy", wq)
        save(f"ck{i}.npy", wk)
        save(f"cv{i}.npy", wv)
    for i, (bq, bk, bv) in enumerate(cross_biases, 1):
        save(f"bq{i}.npy", bq)
        save(f"bk{i}.npy", bk)
        save(f"bv{i}.npy", bv)
    save("cwo.npy", cross_wo)
    save("bo.npy", cross_bo)
    # Biases split with the weights, as PyTorch's in_proj_bias: b_Q and b_O only.
    split_bq = np.round(rs.uniform(-1, 1, 6), 2)
    split_wo = np.round(rs.uniform(-1, 1, (6, 6)), 2)
    split_bo = np.round(rs.uniform(-1, 1, 6), 2)
    save("wo6.npy", split_wo)
    zeros3 = np.zeros(3)

    two = ["--x", "x.npy", "--wq", "wq1.npy,wq2.npy", "--wk", "wk1.npy,wk2.npy",
           "--wv", "wv1.npy,wv2.npy", "--wo", "wo.npy"]
    three = ["--x", "x3.npy"] + two[2:]
    cross_args = ["--x", "x.npy", "--wq", "cq1.npy,cq2.npy", "--wk", "ck1.npy,ck2.npy",
                  "--wv", "cv1.npy,cv2.npy", "--wo", "cwo.npy"]
    bias_args = ["--bq", "bq1.npy,bq2.npy", "--bk", inline(cross_biases[0][1]) + ","
                 + inline(cross_biases[1][1]), "--bv", "bv1.npy", "--bv", "bv2.npy",
                 "--bo", "bo.npy"]
    split_heads = [(w6["q"][:, s], w6["k"][:, s], w6["v"][:, s])
                   for s in (slice(0, 3), slice(3, 6))]
    split_biases = [(split_bq[s], zeros3, zeros3) for s in (slice(0, 3), slice(3, 6))]
    pad3 = padding(3, [False, False, True])
    cases = []
    for kind, flag, opts in (("txt", ["--precision", "4"], {"precision": 4}),
                             ("json", ["--json"], None)):
        cases += [
            ("causal", two + ["--causal"] + flag, (x, heads, wo, False, {"mask": causal(2)}),
             kind, opts),
            ("causal_padding", three + ["--causal", "--padding", "[false,false,true]"] + flag,
             (x3, heads, wo, False, {"mask": causal(3) + pad3}), kind, opts),
            ("mask_full_row", three + ["--mask", "mask_full.npy"] + flag,
             (x3, heads, wo, False, {"mask": blocked(full)}), kind, opts),
            ("mask_additive", three + ["--mask", "mask_add.npy", "--softmax", "naive"] + flag,
             (x3, heads, wo, True, {"mask": additive}), kind, opts),
            ("cross_biases", cross_args + ["--kv", "memory_k.npy,memory_v.npy",
                                           "--padding", "[false,false,true]"] + bias_args + flag,
             (x, cross, cross_wo, False, {"mask": padding(2, [False, False, True]),
                                           "kv": (memory_k, memory_v), "biases": cross_biases,
                                           "bo": cross_bo}), kind, opts),
            ("split_biases", ["--x", "x32.npy", "--wq", "wq6.npy", "--wk", "wk6.npy",
                              "--wv", "wv6.npy", "--split", "2", "--wo", "wo6.npy",
                              "--bq", inline(split_bq), "--bo", inline(split_bo)] + flag,
             (x32, split_heads, split_wo, False, {"biases": split_biases, "bo": split_bo}),
             kind, opts),
        ]
    # One memory for keys and values (kdim = vdim = 4) and an inline boolean mask.
    memory = np.round(rs.uniform(-1, 1, (3, 4)), 2)
    save("memory.npy", memory)
    inline_mask = np.array([[False, True, False], [True, False, False]])
    cases.append(
        ("cross_inline_mask", two[:2] + ["--kv", "memory.npy"] + two[2:] + [
            "--mask", json.dumps(inline_mask.tolist()).lower().replace(" ", ""),
            "--precision", "3", "--suppress"],
         (x, heads, wo, False, {"mask": blocked(inline_mask), "kv": (memory, memory)}),
         "txt", {"precision": 3, "suppress": True}))
    return cases


# ---------------------------------------------------------------- solve --backward

def torch_backward(x, heads, wo, g, mask=None, biases=None, bo=None, kv=None):
    """Every gradient of L with dL/d(result) = g, by torch.autograd in float64: independent
    of the library's hand-written backward pass (no row may be fully masked: torch's softmax
    gives NaN there)."""
    import torch
    assert kv is None
    leaf = lambda a: torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)
    X = leaf(x)
    ws = [[leaf(w) for w in h] for h in heads]
    bs = [[leaf(b) for b in hb] for hb in biases] if biases is not None else None
    WO = leaf(wo) if wo is not None else None
    BO = leaf(bo) if bo is not None else None
    kept = []
    for n, (WQ, WK, WV) in enumerate(ws):
        Q, K, V = X @ WQ, X @ WK, X @ WV
        if bs is not None:
            Q, K, V = Q + bs[n][0], K + bs[n][1], V + bs[n][2]
        S = Q @ K.T / np.sqrt(K.shape[1])
        if mask is not None:
            S = S + torch.tensor(mask)
        A = torch.softmax(S, dim=1)
        Z = A @ V
        for t in (Q, K, V, S, A, Z):
            t.retain_grad()
        kept.append((Q, K, V, S, A, Z))
    concat = torch.cat([h[5] for h in kept], dim=1)
    concat.retain_grad()
    result = concat
    if WO is not None:
        result = concat @ WO
        if BO is not None:
            result = result + BO
    result.backward(torch.tensor(np.asarray(g, dtype=np.float64)))
    grad = lambda t: t.grad.numpy()
    out = {"dresult": np.asarray(g, dtype=np.float64), "dconcat": grad(concat),
           "dwo": None if WO is None else grad(WO)}
    if BO is not None:
        out["dbo"] = grad(BO)
    out["heads"] = []
    for n, (Q, K, V, S, A, Z) in enumerate(kept):
        h = {"dz": grad(Z), "dweights": grad(A), "dscores": grad(S), "dq": grad(Q),
             "dk": grad(K), "dv": grad(V), "dwq": grad(ws[n][0]), "dwk": grad(ws[n][1]),
             "dwv": grad(ws[n][2])}
        if bs is not None:
            h.update({"dbq": grad(bs[n][0]), "dbk": grad(bs[n][1]), "dbv": grad(bs[n][2])})
        out["heads"].append(h)
    out["dx"] = grad(X)
    return out


def print_backward(grads, heads, has_wo, has_bo):
    """What `solve --backward` prints after the forward steps."""
    print()
    if has_wo:
        print("G = dL/d(Z W_O" + (" + b_O" if has_bo else "") + "):\n", grads["dresult"])
        print("dL/dZ = G W_O^T:\n", grads["dconcat"])
        print("dL/dW_O = Z^T G:\n", grads["dwo"])
        if has_bo:
            print("dL/db_O = G summed over the tokens:\n", grads["dbo"])
    else:
        print("G = dL/dZ:\n", grads["dresult"])
    start = 0
    for i, h in enumerate(grads["heads"], 1):
        dk = heads[i - 1][1].shape[1]
        end = start + h["dz"].shape[1]
        print()
        p = lambda label, m: print(f"Head {i} - {label}:\n", m)
        p(f"dL/dZ_{i} = dL/dZ[:, {start}:{end}]", h["dz"])
        p(f"dL/dweights = dL/dZ_{i} V_{i}^T", h["dweights"])
        p("dL/dscores = weights * (dL/dweights - rowsum(weights * dL/dweights))", h["dscores"])
        p(f"dL/dQ_{i} = dL/dscores K_{i} / sqrt({dk})", h["dq"])
        p(f"dL/dK_{i} = dL/dscores^T Q_{i} / sqrt({dk})", h["dk"])
        p(f"dL/dV_{i} = weights^T dL/dZ_{i}", h["dv"])
        for m in "QKV":
            p(f"dL/dW_{m} = X^T dL/d{m}_{i}", h[f"dw{m.lower()}"])
        for m in "QKV":
            if f"db{m.lower()}" in h:
                p(f"dL/db_{m} = dL/d{m}_{i} summed over the tokens", h[f"db{m.lower()}"])
        start = end
    print()
    print("dL/dX = sum over the heads of dL/dQ_i W_Q^T + dL/dK_i W_K^T + dL/dV_i W_V^T:\n",
          grads["dx"])


def backward_json(grads):
    vec = lambda v: json_value(v[None, :])[0]
    value = lambda k, m: None if m is None else (vec(m) if k.startswith("db") else json_value(m))
    out = {k: value(k, m) for k, m in grads.items() if k != "heads"}
    out["heads"] = [{k: value(k, m) for k, m in h.items()} for h in grads["heads"]]
    # The documented key order: heads before dx.
    return {k: out[k] for k in [k for k in out if k not in ("heads", "dx")] + ["heads", "dx"]}


def backward_cases(save, x, heads, wo, x32, w6):
    """solve --backward (issue 31): the gradients by torch.autograd, from their own stream."""
    rs = np.random.RandomState(31)
    g = np.round(rs.uniform(-1, 1, (2, 4)), 2)
    save("g.npy", g)
    g_concat = np.round(rs.uniform(-1, 1, (2, 6)), 2)
    x3 = np.array([[1, 0, 2, 0], [0, 1, 0, 1], [2, 1, 0, 0]], dtype=np.int64)
    g3 = np.round(rs.uniform(-1, 1, (3, 4)), 2)
    split_bq = np.round(rs.uniform(-1, 1, 6), 2)
    split_wo = np.round(rs.uniform(-1, 1, (6, 6)), 2)
    split_bo = np.round(rs.uniform(-1, 1, 6), 2)
    g6 = np.round(rs.uniform(-1, 1, (3, 6)), 2)
    save("g6.npy", g6)
    zeros3 = np.zeros(3)
    split_heads = [(w6["q"][:, s], w6["k"][:, s], w6["v"][:, s])
                   for s in (slice(0, 3), slice(3, 6))]
    split_biases = [(split_bq[s], zeros3, zeros3) for s in (slice(0, 3), slice(3, 6))]
    no_wo = ["--x", "x.npy", "--wq", "wq1.npy,wq2.npy", "--wk", "wk1.npy,wk2.npy",
             "--wv", "wv1.npy,wv2.npy"]
    two = no_wo + ["--wo", "wo.npy"]
    three = ["--x", "x3.npy"] + two[2:]
    pad3 = padding(3, [False, False, True])
    cases = []
    for kind, flag, opts in (("txt", ["--precision", "4"], {"precision": 4}),
                             ("json", ["--json"], None)):
        cases += [
            ("backward", two + ["--backward", "--dz", "g.npy"] + flag,
             (x, heads, wo, False, {"g": g}), kind, opts),
            ("backward_causal_ones", two + ["--causal", "--backward"] + flag,
             (x, heads, wo, False, {"mask": causal(2), "g": np.ones((2, 4))}), kind, opts),
            ("backward_no_wo", no_wo + ["--backward", "--dz", inline(g_concat)] + flag,
             (x, heads, None, False, {"g": g_concat}), kind, opts),
            ("backward_causal_padding", three + ["--causal", "--padding", "[false,false,true]",
                                                 "--backward", "--dz", inline(g3)] + flag,
             (x3, heads, wo, False, {"mask": causal(3) + pad3, "g": g3}), kind, opts),
        ]
    # JSON only: dL/db_K is zero but for rounding noise (each row of dL/dS sums to 0), which
    # torch and the library round differently, so it prints differently.
    cases.append(
        ("backward_split_biases", ["--x", "x32.npy", "--wq", "wq6.npy", "--wk", "wk6.npy",
                                   "--wv", "wv6.npy", "--split", "2", "--wo",
                                   inline(split_wo), "--bq", inline(split_bq), "--bo",
                                   inline(split_bo), "--backward", "--dz", "g6.npy", "--json"],
         (x32, split_heads, split_wo, False, {"biases": split_biases, "bo": split_bo,
                                               "g": g6}), "json", None),
    )
    return cases


# ---------------------------------------------------------------- exercise

def draw(seed, tokens=2, dim=4, heads=2, dk=3, decimals=1, backward=False):
    """The exercise's matrices, in the CLI's documented draw order (G last, with --backward)."""
    rs = np.random.RandomState(seed)
    x = rs.randint(0, 3, (tokens, dim)).astype(np.float64)
    w = lambda rows, cols: np.round(rs.uniform(-1, 1, (rows, cols)), decimals) + 0.0
    hs = [[w(dim, dk), w(dim, dk), w(dim, dk)] for _ in range(heads)]
    wo = w(heads * dk, dim)
    drawn = {"x": x.tolist(), "heads": [[m.tolist() for m in h] for h in hs], "wo": wo.tolist()}
    if backward:
        drawn["g"] = w(tokens, dim).tolist()
    return drawn


def exercise_goldens():
    # Not fresh(): the sheets beside these files are made by the CLI itself.
    out = os.path.join(ROOT, "exercise")
    os.makedirs(out, exist_ok=True)
    configs = {
        "seed7": {"seed": 7},
        "seed2026_wide": {"seed": 2026, "tokens": 3, "dim": 5, "heads": 3, "dk": 2, "decimals": 2},
        "seed7_backward": {"seed": 7, "backward": True},
    }
    for name, cfg in configs.items():
        write(os.path.join(out, f"{name}.draws.json"), json.dumps(draw(**cfg), indent=1) + "\n")


if __name__ == "__main__":
    show_goldens()
    solve_goldens()
    exercise_goldens()
