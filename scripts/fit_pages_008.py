#!/usr/bin/env python3
"""Notebook 008's pictures at a projector's size, for e2e/fit.test.mjs (issue 47).

Copies notebooks/008 to a temporary folder with its layer grids and single heads drawn with
`.scale(1.5)` (its `:dep` paths made absolute), replays the copy with
`attention-lab replay --update` (the batch engine: a few seconds once warm), and writes each
picture's HTML, as the notebook would show it, to target/e2e/fit-pages/008-*-150.html. The
notebook itself is not touched. e2e/fit.test.mjs then checks those pages at 150% (text 18 px
and more, no wider than the output area) and saves their screenshots.

Usage: ATTENTION_LAB_MODEL=... python3 scripts/fit_pages_008.py [--bin PATH]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "008_attention_in_a_real_model.ipynb"
OUT = REPO / "target" / "e2e" / "fit-pages"
# What the copy changes: the crates' paths, and the pictures' size.
EDITS = [
    ('path = ".."', f'path = "{REPO}"'),
    ('path = "../plot"', f'path = "{REPO / "plot"}"'),
    ('path = "../model"', f'path = "{REPO / "model"}"'),
    ('.columns(6).title(&format!("layer {layer}"))', '.columns(6).title(&format!("layer {layer}")).scale(1.5)'),
    ('.title(&format!("layer {layer}, head {head}: {what} {score:.3}"))',
     '.title(&format!("layer {layer}, head {head}: {what} {score:.3}")).scale(1.5)'),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache/attention-lab/target"))
    parser.add_argument("--bin", default=str(target / "debug" / "attention-lab"))
    args = parser.parse_args()
    notebook = json.loads(NOTEBOOK.read_text())
    scaled = 0
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        for old, new in EDITS:
            scaled += source.count(old) if "scale" in new else 0
            source = source.replace(old, new)
        cell["source"] = source
    if scaled != 2:
        print(f"fit_pages_008: expected 008's layer_grid and head_map, found {scaled} of them", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "008_150.ipynb"
        copy.write_text(json.dumps(notebook, indent=1))
        subprocess.run([args.bin, "replay", str(copy), "--update"], check=True, stdout=subprocess.DEVNULL)
        replayed = json.loads(copy.read_text())
    OUT.mkdir(parents=True, exist_ok=True)
    written = []
    for i, cell in enumerate(replayed["cells"]):
        source = "".join(cell.get("source", ""))
        for out in cell.get("outputs", []):
            html = out.get("data", {}).get("text/html")
            if not html or "alab-figure" not in "".join(html):
                continue
            if "layer_grid(" in source:
                name = f"008-layer-grid-cell{i}-150"
            elif "head_map(" in source:
                name = f"008-head-map-cell{i}-150"
            else:
                continue
            (OUT / f"{name}.html").write_text("".join(html))
            written.append(name)
    print(f"fit_pages_008: {len(written)} pages in {OUT.relative_to(REPO)}: {', '.join(written)}")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
