"""Execute every notebook under notebooks/ top to bottom and save it with its outputs.

    python scripts/run_notebooks.py [NAME ...]

The committed notebooks are this script's output on the committed traces (CI re-executes them in
tests/test_notebooks.py, checks that their outputs equal the committed ones and their conclusions).
Each Plotly figure also gets a static PNG beside its interactive form, drawn by Plotly.js itself in headless
Chromium (``Plotly.toImage``): GitHub shows a notebook's images but runs none of its scripts, so without it
every chart is blank there.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"
sys.path.insert(0, str(ROOT))


def run(path: Path, draw: Any) -> float:
    book = nbformat.read(path, as_version=4)
    start = time.monotonic()
    NotebookClient(book, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    for cell in book.cells:
        cell.metadata.pop("execution", None)  # when each cell ran: noise in every diff, and nothing a reader needs
        for output in cell.get("outputs", []):
            if PLOTLY in output.get("data", {}):
                output["data"]["image/png"] = draw(output["data"][PLOTLY])
    nbformat.write(book, path)
    return time.monotonic() - start


def main() -> None:
    import plotly.offline
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, chromium_path

    names = sys.argv[1:] or sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_content(f"<html><body><script>{plotly.offline.get_plotlyjs()}</script></body></html>")

        def draw(figure: dict[str, Any]) -> str:
            """The figure as a PNG (base64, as a notebook holds it), at its own size or Plotly's default."""
            layout = figure.get("layout", {})
            url = page.evaluate("([fig, w, h]) => Plotly.toImage(fig, {format: 'png', width: w, height: h})",
                                [json.loads(json.dumps(figure)), layout.get("width", 900), layout.get("height", 450)])
            return base64.b64encode(base64.b64decode(url.split(",", 1)[1])).decode()

        for name in names:
            print(f"{name}: {run(NOTEBOOKS / f'{name}.ipynb', draw):.1f} s", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
