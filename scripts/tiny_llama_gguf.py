"""Writes model/tests/data/tiny-llama.gguf: a tiny Llama in GGUF (2 blocks, width 64, 4 query
heads sharing 2 key/value heads of 16, SwiGLU 96, context 32, tied embeddings), with random
weights stored as Q4_1 (the projections), Q8_0 (the embeddings) and F32 (the norms), and a
byte-level BPE vocabulary (the 256 byte tokens, a few merges, then <|endoftext|>, <|im_start|>
and <|im_end|>) with a ChatML template: the file the `generate` tests run end to end on a
machine without SmolLM2 (the real model's numbers are checked against transformers in
model/tests/llama.rs).

Run from the repository root: .venv/bin/python scripts/tiny_llama_gguf.py
Deterministic (a fixed seed); rerunning rewrites the same bytes.
"""
import pathlib

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

OUT = pathlib.Path(__file__).resolve().parent.parent / "model" / "tests" / "data" / "tiny-llama.gguf"
LAYERS, WIDTH, HEADS, KV_HEADS, FFN, CONTEXT = 2, 64, 4, 2, 96, 32
HEAD = WIDTH // HEADS


def byte_tokens():
    """GPT-2's printable spelling of the 256 bytes, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    spelled, extra = {}, 0
    for b in range(256):
        if b in keep:
            spelled[b] = chr(b)
        else:
            spelled[b] = chr(256 + extra)
            extra += 1
    return [spelled[b] for b in range(256)]


def main():
    rng = np.random.RandomState(2026)
    tokens = byte_tokens()
    merges = ["Ġ t", "h e", "Ġt he", "Ġ a", "a t", "Ġ c", "Ġc at"]
    for m in merges:
        tokens.append(m.replace(" ", ""))
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    first_special = len(tokens)
    tokens += specials
    types = [1] * first_special + [3] * len(specials)
    vocab = len(tokens)

    w = gguf.GGUFWriter(str(OUT), "llama")
    w.add_block_count(LAYERS)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(WIDTH)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HEAD)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(first_special + 1)
    w.add_eos_token_id(first_special + 2)
    w.add_unk_token_id(first_special)
    w.add_pad_token_id(first_special + 2)
    w.add_add_bos_token(False)
    w.add_chat_template(
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
        "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

    def add(name, rows, cols, kind, scale):
        a = (rng.randn(rows, cols) * scale).astype(np.float32)
        w.add_tensor(name, gguf.quants.quantize(a, kind), raw_dtype=kind)

    add("token_embd.weight", vocab, WIDTH, T.Q8_0, 1.0)
    for l in range(LAYERS):
        w.add_tensor(f"blk.{l}.attn_norm.weight", (1 + 0.1 * rng.randn(WIDTH)).astype(np.float32))
        add(f"blk.{l}.attn_q.weight", HEADS * HEAD, WIDTH, T.Q4_1, 0.3)
        add(f"blk.{l}.attn_k.weight", KV_HEADS * HEAD, WIDTH, T.Q4_1, 0.3)
        add(f"blk.{l}.attn_v.weight", KV_HEADS * HEAD, WIDTH, T.Q4_1, 0.3)
        add(f"blk.{l}.attn_output.weight", WIDTH, HEADS * HEAD, T.Q4_1, 0.1)
        w.add_tensor(f"blk.{l}.ffn_norm.weight", (1 + 0.1 * rng.randn(WIDTH)).astype(np.float32))
        add(f"blk.{l}.ffn_gate.weight", FFN, WIDTH, T.Q4_1, 0.2)
        add(f"blk.{l}.ffn_up.weight", FFN, WIDTH, T.Q4_1, 0.2)
        add(f"blk.{l}.ffn_down.weight", WIDTH, FFN, T.Q4_1, 0.1)
    w.add_tensor("output_norm.weight", np.ones(WIDTH, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{OUT}: {OUT.stat().st_size} bytes, vocabulary {vocab}")


if __name__ == "__main__":
    main()
