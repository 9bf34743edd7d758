"""Runs the importing script under the repository's own virtual environment, `.venv`.

Import it before NumPy, SciPy or torch: `python3 scripts/x.py` (or `./scripts/x.py`) then
re-executes itself with `<repository>/.venv/bin/python`, so the goldens always come from the
pinned versions in requirements.txt, wherever the repository is checked out.
Set up the venv once, from the repository root:

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
"""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"


def _in_venv() -> bool:
    return pathlib.Path(sys.prefix).resolve() == VENV.resolve()


if not _in_venv():
    if not PYTHON.exists():
        sys.exit(f"error: {VENV}: no virtual environment; create it with "
                 f"`python3 -m venv .venv && .venv/bin/pip install -r requirements.txt`")
    if os.environ.get("ATTENTION_LAB_VENV_REEXEC"):
        sys.exit(f"error: {PYTHON}: does not run inside {VENV}")
    os.environ["ATTENTION_LAB_VENV_REEXEC"] = "1"
    os.execv(str(PYTHON), [str(PYTHON), *sys.argv])
