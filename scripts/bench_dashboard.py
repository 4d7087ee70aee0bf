"""The dashboard's first chart against the floor: a minimal Streamlit app that draws one Plotly chart.

    python scripts/bench_dashboard.py [--bundles 100] [--repeats 3]

Makes N bundles (copies of the committed H200 captures under new names). For each side — the
minimal app, and ``fuseprof dashboard`` over the N bundles — it starts a cold server and times, in
headless Chromium: (1) from the server's start to its first Plotly chart drawn in a new tab (import,
first run, loading), and (2) a second, new tab (a new session: Streamlit's caches warm). The two
sides alternate in one run on this machine; the script prints the medians and fuseprof's ratio to
the floor, and the bytes each new tab downloads.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fuseprof.bundle.files import find_bundles, read_manifest  # noqa: E402
from tests.browser import CHROMIUM_ARGS, PLOT_SELECTOR, chromium_path, free_port  # noqa: E402

MINIMAL_APP = """import plotly.graph_objects as go
import streamlit as st

st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 4, 9])))
"""


def make_bundles(target: Path, count: int) -> None:
    sources = [b for b in find_bundles(ROOT / "traces") if read_manifest(b).get("kind") in ("capture", "ceilings")]
    for i in range(count):
        source = sources[i % len(sources)]
        shutil.copytree(source, target / f"{source.name}-copy{i:03d}")


def start(argv: list[str], port: int) -> tuple[subprocess.Popen, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    while True:
        try:
            with urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=1) as reply:
                if reply.status == 200:
                    return proc, started
        except OSError:
            time.sleep(0.05)
        if proc.poll() is not None:
            raise RuntimeError(f"{argv[:4]} exited with {proc.returncode}")


def visit(browser, url: str) -> tuple[float, int]:
    """Seconds until the first Plotly chart is drawn in a new tab, and the bytes it downloaded."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = context.new_page()
    received = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: received.append(len(payload))))
    page.on("response", lambda r: received.append(int(r.headers.get("content-length", 0) or 0)))
    t = time.perf_counter()
    page.goto(url)
    page.wait_for_selector(PLOT_SELECTOR, timeout=180_000)
    elapsed = time.perf_counter() - t
    context.close()
    return elapsed, sum(received)


def measure(browser, argv: list[str], port: int, url: str) -> dict[str, float]:
    proc, started = start(argv, port)
    try:
        t = time.perf_counter()
        first, _ = visit(browser, url)
        cold = (t - started) + first
        new_tab, size = visit(browser, url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"cold": cold, "new_tab": new_tab, "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundles", type=int, default=100, help="bundles for fuseprof's side (default 100)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of each side (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        tmp_path = Path(tmp)
        make_bundles(tmp_path / "bundles", args.bundles)
        (tmp_path / "minimal.py").write_text(MINIMAL_APP)
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        runs: dict[str, list[dict[str, float]]] = {"floor": [], "fuseprof": []}
        for _ in range(args.repeats):
            port = free_port()
            runs["floor"].append(measure(browser, [sys.executable, "-m", "streamlit", "run", str(tmp_path / "minimal.py"),
                                                   "--server.port", str(port), "--server.headless", "true",
                                                   "--browser.gatherUsageStats", "false"], port,
                                         f"http://localhost:{port}"))
            port = free_port()
            runs["fuseprof"].append(measure(browser, [sys.executable, "-m", "fuseprof.cli", "dashboard",
                                                      str(tmp_path / "bundles"), "--port", str(port)], port,
                                            f"http://localhost:{port}/?page=Roofline"))
        browser.close()
    med = {side: {k: statistics.median(r[k] for r in rs) for k in ("cold", "new_tab", "bytes")}
           for side, rs in runs.items()}
    print(f"{'':28}{'floor (1 chart)':>16}{f'fuseprof ({args.bundles} bundles)':>24}{'ratio':>8}")
    for key, label in (("cold", "cold server to first chart"), ("new_tab", "new tab to first chart")):
        print(f"{label:28}{med['floor'][key]:>14.2f} s{med['fuseprof'][key]:>22.2f} s"
              f"{med['fuseprof'][key] / med['floor'][key]:>8.2f}")
    print(f"{'bytes per new tab':28}{med['floor']['bytes'] / 1e6:>13.2f} MB{med['fuseprof']['bytes'] / 1e6:>21.2f} MB")


if __name__ == "__main__":
    main()
