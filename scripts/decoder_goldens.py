"""Writes tests/data/decoder/: tiny random decoders computed by transformers' LlamaForCausalLM in
float64, and grouped-query attention computed by F.scaled_dot_product_attention(enable_gqa=True).

Llama casts to float32 in three places, which would leave float64 only in name: RMSNorm's
`hidden_states.to(torch.float32)`, the rotary embedding's float32 inverse frequencies and
angles, and the eager attention's `softmax(..., dtype=torch.float32)`. This script replaces
those three functions by the same formulas kept in float64 (scripts/llama_f64.py: the math is
the code's, line for line), so the goldens hold to 1e-10 and not to float32's 1e-7.

For each model (a folder under tests/data/decoder/):
- config.json: the sizes, theta, epsilon, tied or not, the prompt's ids and the greedy ids;
- weights as .npy in the library's row convention (x W, so each nn.Linear weight transposed):
  embed (vocab x E), per layer L: L.attn_norm, L.wq (E x H d), L.wk and L.wv (E x H_kv d),
  L.wo (H d x E), L.mlp_norm, L.w_gate and L.w_up (E x F), L.w_down (F x E); norm; lm_head
  (E x vocab, absent when tied);
- logits.npy (tokens x vocab) and L.weights.npy (H x tokens x tokens), from output_attentions;
- greedy: `generate(do_sample=False)` ids after the prompt, in config.json.

gqa.json: F.scaled_dot_product_attention(q, k, v, enable_gqa=True) with H query heads sharing
H_kv key/value heads, causal and not, and one with a sliding-window boolean mask.

Run from the repository root: .venv/bin/python scripts/decoder_goldens.py
Deterministic (fixed seeds); rerunning rewrites the same bytes.
"""
import json
import pathlib

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

import llama_f64  # the three float32 casts of Llama, kept in float64

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "decoder"


llama_f64.patch()


def save(folder, name, t):
    np.save(folder / f"{name}.npy", np.ascontiguousarray(t.detach().numpy()), allow_pickle=False)


def model_case(name, seed, vocab, e, heads, kv_heads, head_dim, ffn, layers, theta, tied,
               prompt_len, new_tokens):
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=e, intermediate_size=ffn, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
        max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=tied,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        attention_bias=False, mlp_bias=False, hidden_act="silu",
        attn_implementation="eager", bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    model = LlamaForCausalLM(config).to(torch.float64).eval()
    with torch.no_grad():
        # Default init draws tiny weights (std 0.02): scale them up so that softmax is far from
        # uniform and the greedy ids are far from ties; norms' gains away from 1.
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5 * 2.0)
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.npy"):
        old.unlink()
    m = model.model
    save(folder, "embed", m.embed_tokens.weight)
    for i, layer in enumerate(m.layers):
        a = layer.self_attn
        save(folder, f"{i}.attn_norm", layer.input_layernorm.weight)
        save(folder, f"{i}.wq", a.q_proj.weight.T)
        save(folder, f"{i}.wk", a.k_proj.weight.T)
        save(folder, f"{i}.wv", a.v_proj.weight.T)
        save(folder, f"{i}.wo", a.o_proj.weight.T)
        save(folder, f"{i}.mlp_norm", layer.post_attention_layernorm.weight)
        save(folder, f"{i}.w_gate", layer.mlp.gate_proj.weight.T)
        save(folder, f"{i}.w_up", layer.mlp.up_proj.weight.T)
        save(folder, f"{i}.w_down", layer.mlp.down_proj.weight.T)
    save(folder, "norm", m.norm.weight)
    if not tied:
        save(folder, "lm_head", model.lm_head.weight.T)
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, vocab, (1, prompt_len), generator=gen)
    with torch.no_grad():
        out = model(ids, output_attentions=True, use_cache=False)
        greedy = model.generate(ids, max_new_tokens=new_tokens, do_sample=False,
                                attention_mask=torch.ones_like(ids), pad_token_id=0)
    save(folder, "logits", out.logits[0])
    for i, w in enumerate(out.attentions):
        save(folder, f"{i}.weights", w[0])
    (folder / "config.json").write_text(json.dumps({
        "vocab": vocab, "e": e, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
        "ffn": ffn, "layers": layers, "theta": theta, "eps": 1e-6, "tied": tied,
        "prompt": ids[0].tolist(), "greedy": greedy[0, prompt_len:].tolist(),
        "transformers": transformers.__version__, "torch": torch.__version__,
    }, indent=1) + "\n")


def gqa_cases():
    gen = torch.Generator().manual_seed(31)
    cases = []
    for name, heads, kv_heads, n, d, causal, window in [
        ("gqa_4_2", 4, 2, 5, 3, False, None),
        ("gqa_4_2_causal", 4, 2, 5, 3, True, None),
        ("mqa_3_1_causal", 3, 1, 4, 2, True, None),
        ("gqa_6_3_window_2", 6, 3, 7, 4, False, 2),
    ]:
        q = torch.randn(heads, n, d, generator=gen, dtype=torch.float64)
        k = torch.randn(kv_heads, n, d, generator=gen, dtype=torch.float64)
        v = torch.randn(kv_heads, n, d, generator=gen, dtype=torch.float64)
        mask = None
        if window is not None:
            i = torch.arange(n)[:, None]
            j = torch.arange(n)[None, :]
            # True = may attend (SDPA's boolean polarity): the last `window` tokens up to i.
            mask = (j <= i) & (j > i - window)
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                           enable_gqa=True)
        cases.append({"name": name, "causal": causal, "window": window,
                      "q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "z": z.tolist()})
    (OUT / "gqa.json").write_text(json.dumps({"torch": torch.__version__, "cases": cases}) + "\n")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    model_case("llama_gqa", seed=7, vocab=40, e=16, heads=4, kv_heads=2, head_dim=4, ffn=24,
               layers=2, theta=10000.0, tied=False, prompt_len=7, new_tokens=6)
    model_case("llama_mqa_tied", seed=11, vocab=24, e=12, heads=3, kv_heads=1, head_dim=4, ffn=20,
               layers=2, theta=500.0, tied=True, prompt_len=5, new_tokens=5)
    gqa_cases()


if __name__ == "__main__":
    main()
