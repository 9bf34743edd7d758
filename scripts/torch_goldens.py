"""Writes tests/data/torch/masks.json: PyTorch's nn.MultiheadAttention (no biases, float64, CPU)
with causal, key-padding and combined masks on batches of 1 to 3, its weights per head and
averaged; F.scaled_dot_product_attention on a fully masked row; and the sinusoidal positional
encoding computed as the Annotated Transformer does. Records torch's version.

Also writes tests/data/torch/conventions.json (notebook 005's fully masked row under
nn.MultiheadAttention, F.scaled_dot_product_attention, d2l's and burn's fills) and
tests/data/torch/cross.json: nn.MultiheadAttention with biases, as self-attention
(in_proj_weight, in_proj_bias) and as cross-attention with kdim != vdim != E (q_proj_weight,
k_proj_weight, v_proj_weight), with and without masks, on batches of 1 to 3, its weights per
head and averaged.

Also writes tests/data/torch/npy/: two layers as .npy files named by their state_dict keys
(`in_proj_weight.npy`, `out_proj.weight.npy`, ...), each with a batch of inputs, its masks and
torch's output and weights, for a test that loads a layer the way a user saves one.

Run from the repository root: .venv/bin/python scripts/torch_goldens.py [PART...], where the
parts are json (the three .json files) and npy; without any, all of them.
"""
import json
import math
import pathlib
import sys

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import torch
import torch.nn.functional as F

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch"


def rows(t):
    return t.detach().tolist()


def run_mha(mha, query, key, value, attn_mask, kpm):
    """The layer's output, its weights per head (average_attn_weights=False) and averaged."""
    with torch.no_grad():
        out, per_head = mha(query, key, value, attn_mask=attn_mask, key_padding_mask=kpm,
                            need_weights=True, average_attn_weights=False)
        out_avg, averaged = mha(query, key, value, attn_mask=attn_mask, key_padding_mask=kpm,
                                need_weights=True, average_attn_weights=True)
    assert torch.equal(out, out_avg)
    return out, per_head, averaged


def mha_case(name, batch, tokens, e, h, causal, padded, seed):
    gen = torch.Generator().manual_seed(seed)
    mha = torch.nn.MultiheadAttention(e, h, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.randn(3 * e, e, generator=gen, dtype=torch.float64))
        mha.out_proj.weight.copy_(torch.randn(e, e, generator=gen, dtype=torch.float64))
    mha.eval()
    x = torch.randn(batch, tokens, e, generator=gen, dtype=torch.float64)
    # True = blocked, nn.MultiheadAttention's polarity.
    attn_mask = torch.triu(torch.ones(tokens, tokens, dtype=torch.bool), 1) if causal else None
    kpm = torch.tensor(padded, dtype=torch.bool) if padded is not None else None
    out, per_head, averaged = run_mha(mha, x, x, x, attn_mask, kpm)
    return {
        "name": name, "h": h, "causal": causal, "padded": padded,
        "in_proj_weight": rows(mha.in_proj_weight), "out_proj_weight": rows(mha.out_proj.weight),
        "x": rows(x), "output": rows(out), "weights": rows(per_head), "averaged": rows(averaged),
    }


def vec(t):
    return t.detach().tolist()


def random_layer(batch, tq, tk, e, h, kdim, vdim, causal, padded, seed):
    """nn.MultiheadAttention(e, h, bias=True, kdim, vdim) with random float64 parameters run on
    a random query (batch, tq, e), key (batch, tk, kdim) and value (batch, tk, vdim);
    self-attention when tk == tq and kdim == vdim == e (the query is then passed as key and
    value). Returns the layer, its inputs and masks, and run_mha's results."""
    gen = torch.Generator().manual_seed(seed)
    mha = torch.nn.MultiheadAttention(e, h, bias=True, kdim=kdim, vdim=vdim, batch_first=True,
                                      dtype=torch.float64)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(rand(*p.shape))
    mha.eval()
    x = rand(batch, tq, e)
    self_attention = mha._qkv_same_embed_dim and tk == tq
    key, value = (x, x) if self_attention else (rand(batch, tk, kdim), rand(batch, tk, vdim))
    attn_mask = torch.triu(torch.ones(tq, tk, dtype=torch.bool), 1) if causal else None
    kpm = torch.tensor(padded, dtype=torch.bool) if padded is not None else None
    return (mha, x, key, value, attn_mask, kpm) + run_mha(mha, x, key, value, attn_mask, kpm)


def biased_case(name, batch, tq, tk, e, h, kdim, vdim, causal, padded, seed):
    """random_layer's layer, inputs and results, as lists."""
    mha, x, key, value, _, _, out, per_head, averaged = random_layer(
        batch, tq, tk, e, h, kdim, vdim, causal, padded, seed)
    case = {
        "name": name, "h": h, "causal": causal, "padded": padded,
        "in_proj_bias": vec(mha.in_proj_bias), "out_proj_weight": rows(mha.out_proj.weight),
        "out_proj_bias": vec(mha.out_proj.bias),
        "x": rows(x), "key": rows(key), "value": rows(value),
        "output": rows(out), "weights": rows(per_head), "averaged": rows(averaged),
    }
    if mha._qkv_same_embed_dim:
        case["in_proj_weight"] = rows(mha.in_proj_weight)
    else:
        case["q_proj_weight"] = rows(mha.q_proj_weight)
        case["k_proj_weight"] = rows(mha.k_proj_weight)
        case["v_proj_weight"] = rows(mha.v_proj_weight)
    return case


def notebook_006_cross():
    """Notebook 006's cross-attention layer, nn.MultiheadAttention(4, 2, kdim=3, vdim=2), with
    the weights and inputs the notebook prints, in the format of biased_case."""
    t = lambda rows_: torch.tensor(rows_, dtype=torch.float64)  # noqa: E731
    mha = torch.nn.MultiheadAttention(4, 2, kdim=3, vdim=2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.q_proj_weight.copy_(torch.eye(4, dtype=torch.float64))
        mha.k_proj_weight.copy_(t([[1, 0, 1], [0, 1, 0], [0.5, 0.5, 0], [0, 0, 1]]))
        mha.v_proj_weight.copy_(t([[1, 0], [0, 1], [1, 1], [1, -1]]))
        mha.in_proj_bias.copy_(t([0, 0, 0, 0, 0.1, 0.1, 0.1, 0.1, 0, 0, 0.5, 0.5]))
        mha.out_proj.weight.copy_(torch.eye(4, dtype=torch.float64))
        mha.out_proj.bias.copy_(t([0, 0, 1, 1]))
    mha.eval()
    x = t([[[1, 0, 1, 0], [0, 2, 0, 1]]])
    key = t([[[1, 0, 0], [0, 1, 0], [1, 1, 1]]])
    value = t([[[1, 0], [0, 1], [2, 2]]])
    out, per_head, averaged = run_mha(mha, x, key, value, None, None)
    return {
        "name": "notebook_006", "h": 2, "causal": False, "padded": None,
        "q_proj_weight": rows(mha.q_proj_weight), "k_proj_weight": rows(mha.k_proj_weight),
        "v_proj_weight": rows(mha.v_proj_weight), "in_proj_bias": vec(mha.in_proj_bias),
        "out_proj_weight": rows(mha.out_proj.weight), "out_proj_bias": vec(mha.out_proj.bias),
        "x": rows(x), "key": rows(key), "value": rows(value),
        "output": rows(out), "weights": rows(per_head), "averaged": rows(averaged),
    }


def fully_masked():
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(3, 2, generator=gen, dtype=torch.float64)
    k = torch.randn(4, 2, generator=gen, dtype=torch.float64)
    v = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    # SDPA's polarity: True = may attend. Query 1 may attend to nothing.
    allowed = torch.tensor([[True, True, False, True],
                            [False, False, False, False],
                            [True, False, True, True]])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return {"q": rows(q), "k": rows(k), "v": rows(v), "allowed": allowed.tolist(),
            "output": rows(out)}


def conventions():
    """Notebook 005's example under each library's convention: query 0 may not see key 1,
    query 1 may see no key. NaN is kept, so every matrix is stored as Python reprs."""
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 1.0]], dtype=torch.float64)
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=torch.float64)
    blocked = torch.tensor([[False, True, False], [True, True, True]])
    mha = torch.nn.MultiheadAttention(2, 1, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([torch.eye(2, dtype=torch.float64)] * 3))
        mha.out_proj.weight.copy_(torch.eye(2, dtype=torch.float64))
        mha_out, mha_weights = mha(q[None], k[None], v[None], attn_mask=blocked)
    scores = q @ k.T / math.sqrt(2)

    def filled(fill):
        # d2l's masked_softmax (-1e6) and burn (-1e4) replace blocked scores by a fill value.
        w = scores.masked_fill(blocked, fill).softmax(-1)
        return {"weights": reprs(w), "output": reprs(w @ v)}

    return {
        "q": rows(q), "k": rows(k), "v": rows(v), "blocked": blocked.tolist(),
        "mha": {"weights": reprs(mha_weights[0]), "output": reprs(mha_out[0])},
        "sdpa": {"output": reprs(F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked))},
        "d2l": filled(-1e6),
        "burn": filled(-1e4),
    }


def reprs(t):
    return {"shape": list(t.shape), "rows": [[repr(x) for x in r] for r in t.detach().tolist()]}


def positional(tokens, d):
    # The Annotated Transformer's form: exp(-log(10000) 2i/d) rather than 10000^(-2i/d).
    pe = torch.zeros(tokens, d, dtype=torch.float64)
    position = torch.arange(0, tokens, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * -(math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return {"tokens": tokens, "d_model": d, "pe": rows(pe)}


def npy_layer(folder, tq, tk, e, h, kdim, vdim, causal, padded, seed):
    """random_layer's layer saved as one .npy file per state_dict entry, with its inputs,
    masks, output and weights (per head and averaged)."""
    import numpy as np

    mha, query, key, value, attn_mask, kpm, out, per_head, averaged = random_layer(
        len(padded), tq, tk, e, h, kdim, vdim, causal, padded, seed)
    arrays = dict(mha.state_dict())
    arrays.update({"query": query, "key": key, "value": value, "key_padding_mask": kpm,
                   "attn_output": out, "attn_output_weights": per_head,
                   "attn_output_weights_averaged": averaged})
    if attn_mask is not None:
        arrays["attn_mask"] = attn_mask
    folder.mkdir(parents=True, exist_ok=True)
    for name, t in arrays.items():
        np.save(folder / f"{name}.npy", t.detach().numpy())
    (folder / "torch_version.txt").write_text(torch.__version__ + "\n")


def write_npy():
    npy = OUT / "npy"
    # Packed in_proj_weight (kdim = vdim = E), causal and padded.
    npy_layer(npy / "self", 3, 3, 4, 2, 4, 4, True, [[False, False, False], [False, False, True]], 21)
    # Separate q/k/v_proj_weight (kdim != vdim != E), padded.
    npy_layer(npy / "cross", 2, 4, 4, 2, 3, 5, False,
              [[False, False, True, True], [False, False, False, False],
               [False, True, False, False]], 22)


def main():
    parts = sys.argv[1:] or ["json", "npy"]
    for part in parts:
        if part not in ("json", "npy"):
            sys.exit(f"error: unknown part {part!r}: the parts are json and npy")
    if "npy" in parts:
        write_npy()
    if "json" in parts:
        write_json()


def write_json():
    torch.manual_seed(0)
    golden = {
        "torch": torch.__version__,
        "mha": [
            mha_case("causal", 1, 4, 4, 2, True, None, 1),
            mha_case("padding", 3, 4, 6, 3, False,
                     [[False, False, False, True], [False, False, True, True],
                      [False, False, False, False]], 2),
            mha_case("causal_padding", 2, 5, 4, 2, True,
                     [[False, False, False, False, True], [False, False, False, True, True]], 3),
        ],
        "sdpa_fully_masked": fully_masked(),
        "positional": positional(50, 16),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "masks.json").write_text(json.dumps(golden) + "\n")
    cross = {
        "torch": torch.__version__,
        "mha": [
            biased_case("self_bias", 2, 4, 4, 4, 2, 4, 4, False, None, 11),
            biased_case("self_bias_causal_padding", 3, 5, 5, 6, 3, 6, 6, True,
                        [[False] * 5, [False, False, False, False, True],
                         [False, False, True, True, True]], 12),
            biased_case("cross", 1, 3, 6, 4, 2, 5, 3, False, None, 13),
            biased_case("cross_padding", 3, 2, 5, 6, 2, 3, 7, False,
                        [[False, False, False, False, True], [False, True, False, True, True],
                         [False] * 5], 14),
            biased_case("cross_kdim_only", 2, 4, 3, 4, 4, 2, 4, False, None, 15),
            notebook_006_cross(),
        ],
    }
    (OUT / "cross.json").write_text(json.dumps(cross) + "\n")
    (OUT / "conventions.json").write_text(
        json.dumps({"torch": torch.__version__, **conventions()}) + "\n")


if __name__ == "__main__":
    main()
