"""Writes tests/data/grad/: torch.autograd's gradients of every piece the crate differentiates
by hand (src/learn/grad/), and torch.optim's SGD and AdamW trajectories, all in float64.

Each backward case draws random inputs and a random upstream gradient G, runs the forward pass
in torch in the crate's row convention (x W, W in x out), and takes
`torch.autograd.grad((out * G).sum(), [...])`, so the upstream gradient is exactly G. Besides
the parameters' and the input's gradients, the gradients of the intermediates (q, k, v, scores,
weights, the normalised x, the hidden layers) are taken too, as the crate keeps them all.

Masks are written as `blocked` (true = blocked, as Mask::from_blocked reads them). A query
whose every key is blocked gets zero weights in the crate (PyTorch's nn.MultiheadAttention
gives NaN); torch computes the crate's convention here with the double `where` (the scores of
such a row are replaced before the softmax, so no NaN reaches autograd):
weights = where(row all blocked, 0, softmax(where(row all blocked, 0, scores + mask))).

Files (JSON, numbers as Python writes float64 reprs, which read back to the same bits):
- softmax.json: cases plain, causal, blocked_row: scores, blocked, G, weights, dscores.
- attention.json: cases plain, causal, padding, blocked_row: q, k, v, blocked, G, weights,
  output and dq, dk, dv, dscores, dweights.
- head.json: cases bias_plain, causal, bias_blocked_row: x, wq, wk, wv, (bq, bk, bv), blocked,
  G, z and dx, dwq, dwk, dwv, (dbq, dbk, dbv), dq, dk, dv, dscores, dweights.
- multi_head.json: cases wo_bias_padding (2 heads with biases, W_O, b_O, padding mask) and
  no_wo_causal (3 heads, no W_O): x, heads (as in head.json), wo, bo, G, result and dx,
  dconcat, dwo, dbo, each head's gradients.
- norm.json: layer_norm (x, gamma, beta, eps, G, y, dx, dgamma, dbeta, dxhat) and rms_norm
  (x, weight, eps, G, y, dx, dweight, dxhat).
- feed_forward.json: gelu (x, w1, b1, w2, b2, G, output; dx, dw1, db1, dw2, db2, dhidden,
  dactivated) and swiglu (x, w_gate, w_up, w_down, G, output; dx, dw_gate, dw_up, dw_down,
  dgate, dup, dactivated).
- embedding.json: table, ids (with repeats), G, dtable.
- cross_entropy.json: cases small and large (logits times 60): logits, targets, loss
  (F.cross_entropy, mean over tokens), dlogits.
- optim.json: sgd (lr 0.1, momentum 0.9, weight_decay 0.01) and adamw (lr 0.05, betas
  (0.9, 0.999), eps 1e-8, weight_decay 0.01): a random two-layer linear model trained 10
  steps on a squared error, foreach=False (torch's single-tensor loop); the initial
  parameters, each step's gradients (as torch computed them) and the parameters after each
  step. The Rust test feeds the same gradients to its own optimiser.

Run from the repository root: .venv/bin/python scripts/grad_goldens.py
Deterministic (fixed seeds); rerunning rewrites the same bytes.
"""
import json
import math
import pathlib

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import torch
import torch.nn.functional as F

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "grad"
torch.set_default_dtype(torch.float64)


def lists(t):
    return t.detach().tolist()


def rand(gen, *shape):
    return torch.randn(*shape, generator=gen)


def grads(loss, named):
    """{name: d loss / d tensor} for every named tensor (leaf or intermediate)."""
    names = list(named)
    values = torch.autograd.grad(loss, [named[n] for n in names], retain_graph=True)
    return {"d" + n: lists(g) for n, g in zip(names, values)}


def causal(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def padding(n, padded):
    blocked = torch.zeros(n, n, dtype=torch.bool)
    blocked[:, padded] = True
    return blocked


def blocked_row(n, row):
    blocked = causal(n)
    blocked[row, :] = True
    return blocked


def masked_softmax(scores, blocked):
    """The crate's masked softmax: -inf where blocked, a fully blocked row all zeros."""
    if blocked is None:
        return F.softmax(scores, dim=-1)
    masked = scores.masked_fill(blocked, float("-inf"))
    empty = blocked.all(dim=-1, keepdim=True)
    safe = torch.where(empty, torch.zeros_like(masked), masked)
    return torch.where(empty, torch.zeros_like(safe), F.softmax(safe, dim=-1))


def blocked_json(blocked, n_q, n_k):
    b = torch.zeros(n_q, n_k, dtype=torch.bool) if blocked is None else blocked
    return b.tolist()


def softmax_cases(gen):
    cases = {}
    for name, blocked in [("plain", None), ("causal", causal(4)), ("blocked_row", blocked_row(4, 2))]:
        scores = rand(gen, 4, 4).requires_grad_()
        g = rand(gen, 4, 4)
        weights = masked_softmax(scores, blocked)
        cases[name] = {
            "scores": lists(scores), "blocked": blocked_json(blocked, 4, 4), "G": lists(g),
            "weights": lists(weights),
            **grads((weights * g).sum(), {"scores": scores}),
        }
    return cases


def attention_forward(q, k, v, blocked):
    scores = q @ k.T / math.sqrt(k.shape[1])
    weights = masked_softmax(scores, blocked)
    return scores, weights, weights @ v


def attention_cases(gen):
    cases = {}
    masks = [("plain", None), ("causal", causal(5)), ("padding", padding(5, [1, 4])),
             ("blocked_row", blocked_row(5, 3))]
    for name, blocked in masks:
        q, k = rand(gen, 5, 3).requires_grad_(), rand(gen, 5, 3).requires_grad_()
        v = rand(gen, 5, 2).requires_grad_()
        g = rand(gen, 5, 2)
        scores, weights, output = attention_forward(q, k, v, blocked)
        cases[name] = {
            "q": lists(q), "k": lists(k), "v": lists(v), "blocked": blocked_json(blocked, 5, 5),
            "G": lists(g), "weights": lists(weights), "output": lists(output),
            **grads((output * g).sum(),
                    {"q": q, "k": k, "v": v, "scores": scores, "weights": weights}),
        }
    return cases


def make_head(gen, d, d_k, d_v, biases):
    head = {"wq": rand(gen, d, d_k), "wk": rand(gen, d, d_k), "wv": rand(gen, d, d_v)}
    if biases:
        head.update(bq=rand(gen, d_k), bk=rand(gen, d_k), bv=rand(gen, d_v))
    for t in head.values():
        t.requires_grad_()
    return head


def head_forward(head, x, blocked):
    def proj(w, b):
        return x @ head[w] + head[b] if b in head else x @ head[w]

    q, k, v = proj("wq", "bq"), proj("wk", "bk"), proj("wv", "bv")
    scores, weights, z = attention_forward(q, k, v, blocked)
    return {"q": q, "k": k, "v": v, "scores": scores, "weights": weights}, z


def head_cases(gen):
    cases = {}
    for name, biases, blocked in [("bias_plain", True, None), ("causal", False, causal(4)),
                                  ("bias_blocked_row", True, blocked_row(4, 1))]:
        x = rand(gen, 4, 6).requires_grad_()
        head = make_head(gen, 6, 3, 2, biases)
        g = rand(gen, 4, 2)
        inter, z = head_forward(head, x, blocked)
        cases[name] = {
            "x": lists(x), **{n: lists(t) for n, t in head.items()},
            "blocked": blocked_json(blocked, 4, 4), "G": lists(g), "z": lists(z),
            **grads((z * g).sum(), {"x": x, **head, **inter}),
        }
    return cases


def multi_head_cases(gen):
    cases = {}
    layouts = [("wo_bias_padding", 2, True, padding(5, [0, 3])), ("no_wo_causal", 3, False, causal(5))]
    for name, h, wo_bias, blocked in layouts:
        x = rand(gen, 5, 6).requires_grad_()
        heads = [make_head(gen, 6, 2, 3, wo_bias) for _ in range(h)]
        outs = [head_forward(head, x, blocked) for head in heads]
        concat = torch.cat([z for _, z in outs], dim=1)
        case = {"x": lists(x), "blocked": blocked_json(blocked, 5, 5)}
        named = {"x": x, "concat": concat}
        if wo_bias:
            wo, bo = rand(gen, 3 * h, 4).requires_grad_(), rand(gen, 4).requires_grad_()
            result = concat @ wo + bo
            case.update(wo=lists(wo), bo=lists(bo))
            named.update(wo=wo, bo=bo)
        else:
            result = concat
        g = rand(gen, *result.shape)
        loss = (result * g).sum()
        case.update(G=lists(g), result=lists(result), **grads(loss, named))
        case["heads"] = []
        for head, (inter, _) in zip(heads, outs):
            entry = {n: lists(t) for n, t in head.items()}
            entry.update(grads(loss, {**head, **inter}))
            case["heads"].append(entry)
        cases[name] = case
    return cases


def norm_cases(gen):
    x = rand(gen, 5, 6).requires_grad_()
    gamma, beta = rand(gen, 6).requires_grad_(), rand(gen, 6).requires_grad_()
    eps = 1e-5
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    xhat = (x - mean) / torch.sqrt(var + eps)
    y = xhat * gamma + beta
    assert torch.allclose(y, F.layer_norm(x, (6,), gamma, beta, eps), rtol=1e-13, atol=1e-13)
    g = rand(gen, 5, 6)
    layer = {"x": lists(x), "gamma": lists(gamma), "beta": lists(beta), "eps": eps,
             "G": lists(g), "y": lists(y),
             **grads((y * g).sum(), {"x": x, "gamma": gamma, "beta": beta, "xhat": xhat})}

    x = rand(gen, 5, 6).requires_grad_()
    weight = rand(gen, 6).requires_grad_()
    eps = 1e-6
    xhat = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = weight * xhat
    g = rand(gen, 5, 6)
    rms = {"x": lists(x), "weight": lists(weight), "eps": eps, "G": lists(g), "y": lists(y),
           **grads((y * g).sum(), {"x": x, "weight": weight, "xhat": xhat})}
    return {"layer_norm": layer, "rms_norm": rms}


def feed_forward_cases(gen):
    x = rand(gen, 4, 5).requires_grad_()
    w1, b1 = rand(gen, 5, 7).requires_grad_(), rand(gen, 7).requires_grad_()
    w2, b2 = rand(gen, 7, 5).requires_grad_(), rand(gen, 5).requires_grad_()
    hidden = x @ w1 + b1
    activated = F.gelu(hidden)  # exact erf GELU
    output = activated @ w2 + b2
    g = rand(gen, 4, 5)
    gelu = {"x": lists(x), "w1": lists(w1), "b1": lists(b1), "w2": lists(w2), "b2": lists(b2),
            "G": lists(g), "output": lists(output),
            **grads((output * g).sum(), {"x": x, "w1": w1, "b1": b1, "w2": w2, "b2": b2,
                                         "hidden": hidden, "activated": activated})}

    x = rand(gen, 4, 5).requires_grad_()
    w_gate, w_up = rand(gen, 5, 7).requires_grad_(), rand(gen, 5, 7).requires_grad_()
    w_down = rand(gen, 7, 5).requires_grad_()
    gate, up = x @ w_gate, x @ w_up
    activated = F.silu(gate) * up
    output = activated @ w_down
    g = rand(gen, 4, 5)
    swiglu = {"x": lists(x), "w_gate": lists(w_gate), "w_up": lists(w_up),
              "w_down": lists(w_down), "G": lists(g), "output": lists(output),
              **grads((output * g).sum(), {"x": x, "w_gate": w_gate, "w_up": w_up,
                                           "w_down": w_down, "gate": gate, "up": up,
                                           "activated": activated})}
    return {"gelu": gelu, "swiglu": swiglu}


def embedding_case(gen):
    table = rand(gen, 7, 4).requires_grad_()
    ids = [3, 1, 3, 0, 6, 3]
    g = rand(gen, len(ids), 4)
    x = F.embedding(torch.tensor(ids), table)
    return {"table": lists(table), "ids": ids, "G": lists(g),
            **grads((x * g).sum(), {"table": table})}


def cross_entropy_cases(gen):
    cases = {}
    for name, scale in [("small", 1.0), ("large", 60.0)]:
        logits = (rand(gen, 6, 7) * scale).requires_grad_()
        targets = [0, 3, 6, 3, 2, 5]
        loss = F.cross_entropy(logits, torch.tensor(targets))
        cases[name] = {"logits": lists(logits), "targets": targets, "loss": loss.item(),
                       **grads(loss, {"logits": logits})}
    return cases


def train(gen, make_optimizer, settings):
    w1, w2 = rand(gen, 3, 4).requires_grad_(), rand(gen, 4, 2).requires_grad_()
    x, y = rand(gen, 8, 3), rand(gen, 8, 2)
    record = {**settings, "w1": lists(w1), "w2": lists(w2), "steps": []}
    optimizer = make_optimizer([w1, w2])
    for _ in range(10):
        optimizer.zero_grad()
        loss = ((x @ w1 @ w2 - y) ** 2).mean()
        loss.backward()
        step = {"g1": lists(w1.grad), "g2": lists(w2.grad)}
        optimizer.step()
        step.update(w1=lists(w1), w2=lists(w2))
        record["steps"].append(step)
    return record


def optim_cases(gen):
    sgd = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}
    adamw = {"lr": 0.05, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}
    return {
        "sgd": train(gen, lambda p: torch.optim.SGD(p, **sgd, foreach=False), sgd),
        "adamw": train(gen, lambda p: torch.optim.AdamW(
            p, lr=adamw["lr"], betas=tuple(adamw["betas"]), eps=adamw["eps"],
            weight_decay=adamw["weight_decay"], foreach=False), adamw),
    }


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    groups = {
        "softmax": softmax_cases, "attention": attention_cases, "head": head_cases,
        "multi_head": multi_head_cases, "norm": norm_cases, "feed_forward": feed_forward_cases,
        "embedding": embedding_case, "cross_entropy": cross_entropy_cases, "optim": optim_cases,
    }
    for seed, (name, make) in enumerate(groups.items()):
        gen = torch.Generator().manual_seed(31_000 + seed)
        (OUT / f"{name}.json").write_text(json.dumps(make(gen), indent=1) + "\n")
        print(f"wrote {OUT / name}.json")


if __name__ == "__main__":
    main()
