"""The docs' report screenshots: `fuseprof report` of the committed eager Llama trace and of a shared MI300
trace, opened in headless Chromium at 1280 px. Writes docs/screenshots/report-*.png.

    python scripts/report_screenshots.py [../shared/thirdparty-traces/mi300_bert_small_uncased.json.gz]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402

MI300 = ROOT.parent / "shared" / "thirdparty-traces" / "mi300_bert_small_uncased.json.gz"


def main() -> None:
    sources = {"llama4l-eager": ROOT / "traces" / "llama4l-eager-h200",
               "mi300-bert": Path(sys.argv[1]) if len(sys.argv) > 1 else MI300}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for name, source in sources.items():
            report = Path(tmp) / f"{name}.html"
            subprocess.run([sys.executable, "-m", "fuseprof.cli", "report", str(source), "-o", str(report)], check=True)
            page = browser.new_page(viewport={"width": 1280, "height": 1500})
            page.goto(report.as_uri())
            page.wait_for_selector("body[data-drawn='1']", timeout=90_000)
            target = ROOT / "docs" / "screenshots" / f"report-{name}.png"
            page.screenshot(path=str(target))
            print(target)
        browser.close()


if __name__ == "__main__":
    main()
