#!/usr/bin/env python3
"""Write jupyter/tests/nbformat/golden.ipynb: input.ipynb as JupyterLab saves it.

JupyterLab saves a notebook through jupyter_server, which writes it with nbformat: read
(rejoin_lines, strip_transient), then nbformat.write (split_lines at Python's line ends,
sorted keys, one-space indent, non-ASCII kept, a trailing newline). The replay's writer
(`Notebook::to_jupyter_json`) must write the same bytes; jupyter/tests/nbformat.rs checks it.

Run with the nbformat that `attention-lab lab` installs beside JupyterLab (its venv):
    ~/.cache/attention-lab/venv-lab/bin/python scripts/nbformat_golden.py
Rerunning rewrites the same bytes.
"""

import io
import os
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jupyter", "tests", "nbformat")

try:
    import nbformat
except ImportError:
    print(f"{sys.executable}: no nbformat; run this with the Python of lab's venv "
          "(~/.cache/attention-lab/venv-lab/bin/python)", file=sys.stderr)
    sys.exit(2)


def main():
    source = os.path.join(HERE, "input.ipynb")
    with open(source, encoding="utf-8") as f:
        nb = nbformat.reads(f.read(), as_version=nbformat.NO_CONVERT)
    out = io.StringIO()
    nbformat.write(nb, out, version=nbformat.NO_CONVERT)
    with open(os.path.join(HERE, "golden.ipynb"), "w", encoding="utf-8", newline="") as f:
        f.write(out.getvalue())
    print(f"golden.ipynb written with nbformat {nbformat.__version__}")


if __name__ == "__main__":
    main()
