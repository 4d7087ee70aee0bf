"""Execute every notebook under notebooks/ top to bottom and save it with its outputs.

    python scripts/run_notebooks.py [NAME ...]

The committed notebooks are this script's output on the committed traces (CI re-executes them in
tests/test_notebooks.py, checks that their outputs equal the committed ones and their conclusions). Outputs are
committed because GitHub shows a notebook's saved outputs and runs none of its scripts: each notebook draws its
figures with the ``plotly_mimetype+png`` renderers, the figure's JSON (drawn by the front end's own Plotly,
offline) and a PNG of it (kaleido, with the system's Chromium) beside it — nothing loaded from a CDN.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def run(path: Path) -> float:
    book = nbformat.read(path, as_version=4)
    start = time.monotonic()
    NotebookClient(book, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    for cell in book.cells:
        cell.metadata.pop("execution", None)  # when each cell ran: noise in every diff, and nothing a reader needs
    nbformat.write(book, path)
    return time.monotonic() - start


def main() -> None:
    names = sys.argv[1:] or sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    for name in names:
        print(f"{name}: {run(NOTEBOOKS / f'{name}.ipynb'):.1f} s", flush=True)


if __name__ == "__main__":
    main()
