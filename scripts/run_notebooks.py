"""Execute every notebook under notebooks/ top to bottom and save it with its outputs.

    python scripts/run_notebooks.py [NAME ...]

The committed notebooks are this script's output on the committed traces (CI re-executes them in
tests/test_notebooks.py and checks their conclusions).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def run(path: Path) -> float:
    book = nbformat.read(path, as_version=4)
    start = time.monotonic()
    NotebookClient(book, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    for cell in book.cells:  # when each cell ran: noise in every diff, and nothing a reader needs
        cell.metadata.pop("execution", None)
    nbformat.write(book, path)
    return time.monotonic() - start


def main() -> None:
    names = sys.argv[1:] or sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    for name in names:
        print(f"{name}: {run(NOTEBOOKS / f'{name}.ipynb'):.1f} s", flush=True)


if __name__ == "__main__":
    main()
