"""How fast does the dashboard's first page render over many bundles?

Makes N bundles (default 100) by copying the committed H200 captures under new names, starts
``fuseprof dashboard`` on them, and times in headless Chromium the navigation to the Roofline
page until its Plotly chart is drawn: first visit (loads and parses every bundle) and a second
visit (Streamlit's cache warm). Usage: python scripts/bench_dashboard.py [N]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fuseprof.bundle import find_bundles, read_manifest  # noqa: E402
from tests.browser import CHROMIUM_ARGS, PLOT_SELECTOR, chromium_path, dashboard  # noqa: E402


def make_bundles(target: Path, count: int) -> None:
    sources = [b for b in find_bundles(ROOT / "traces") if read_manifest(b).get("kind") == "capture"]
    for i in range(count):
        source = sources[i % len(sources)]
        shutil.copytree(source, target / f"{source.name}-copy{i:03d}")


def time_first_chart(page, url: str) -> float:
    start = time.perf_counter()
    page.goto(f"{url}/?page=Roofline")
    page.wait_for_selector(PLOT_SELECTOR, timeout=120_000)
    return time.perf_counter() - start


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    with tempfile.TemporaryDirectory() as tmp:
        make_bundles(Path(tmp), count)
        with dashboard(Path(tmp)) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            cold = time_first_chart(page, url)
            warm = [time_first_chart(page, url) for _ in range(5)]
            browser.close()
    print(f"{count} bundles: first visit {cold:.2f} s (every bundle loaded and parsed), "
          f"cached visits median {statistics.median(warm):.2f} s (min {min(warm):.2f}, max {max(warm):.2f})")


if __name__ == "__main__":
    main()
