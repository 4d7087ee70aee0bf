"""Time to the first chart: ``fuseprof dashboard TRACE`` against a minimal Streamlit app drawing the same figure.

    python scripts/bench_dashboard_first_chart.py [TRACE] [--repeats 5] [--fresh-store]

TRACE defaults to the committed example trace (the eager Llama trace's raw file). The trace store is warmed
before each of the dashboard's runs (``fuseprof analyze TRACE``, as a user who analysed it once has it; the store
hashes fuseprof's source, so on a tree others edit a warm-up at the start alone can go cold mid-run), and a run
during which the source changed is counted and the result called not valid. ``fuseprof analyze`` keeps the
dashboard's first view (the Model page's top, fuseprof.first_view) beside the analysis, and the dashboard keeps it
the first time it draws it where it is missing; the output says at the start of how many of its runs it was kept.
``--fresh-store``: each of the dashboard's runs gets an empty store of its own ($FUSEPROF_CACHE), filled by
``fuseprof analyze TRACE`` alone — a user's first open after analysing the trace once. The floor is a
Streamlit app whose whole script draws the dashboard's first chart — the Model page's GPU timeline of the first window, built
here by the same analysis and figure builder and read back from its JSON. The two sides alternate in one run,
headless Chromium, each from a cold server: (1) the server's start to the first chart drawn in a new tab,
(2) a second new tab (a new session on the warm server). Both servers run with the Streamlit settings
``fuseprof dashboard`` gives its own (``SERVER_FLAGS``). Prints each side's medians and fuseprof's ratio to
the floor (issue 58's target: at most 1.2).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from bench_dashboard import measure  # noqa: E402

from fuseprof.commands.dashboard import SERVER_FLAGS  # noqa: E402
from tests.browser import CHROMIUM_ARGS, chromium_path, free_port  # noqa: E402

EXAMPLE = ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"
FLOOR_APP = """import plotly.io as pio
import streamlit as st

st.plotly_chart(pio.read_json({path!r}))
"""


def first_figure_json(trace: Path) -> str:
    """The dashboard's first chart for ``trace`` as Plotly JSON: the first window's kernel timeline."""
    from fuseprof_dashboards.model_page import timeline_figure

    from fuseprof.analysis import analyze
    from fuseprof.analysis.facts.timeline import timeline_windows

    result = analyze(trace)[0]
    return timeline_figure(result.events, timeline_windows(result.events)[0])[0]  # the page's own builder


def floor_command(app: Path, port: int) -> list[str]:
    """The floor's server: Streamlit over ``app`` with the settings ``fuseprof dashboard`` gives its own server."""
    return [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port), *SERVER_FLAGS]


def warm_store(trace: Path) -> str:
    """``trace`` analysed once into the store, and the store's version folder that a fresh process reads (it
    hashes fuseprof's source: an edit to any of its files makes the next run's store cold)."""
    subprocess.run([sys.executable, "-m", "fuseprof.cli", "analyze", str(trace)], check=True, stdout=subprocess.DEVNULL)
    return store_version()


def store_version() -> str:
    return subprocess.run([sys.executable, "-c", "from fuseprof.parse.store import code_version; print(code_version())"],
                          check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()


def first_view_kept(trace: Path) -> bool:
    """Whether the store keeps the dashboard's first view of ``trace`` (fuseprof_dashboards.first_view: the page
    writes it the first time it draws its top, so the first of the dashboard's runs goes without it)."""
    return subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from fuseprof_dashboards "
                           "import first_view; print(first_view.kept(Path(sys.argv[1])))", str(trace)],
                          check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip() == "True"


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", type=Path, default=EXAMPLE, help="a torch.profiler trace")
    parser.add_argument("--repeats", type=int, default=5, help="alternating runs of each side (default 5)")
    parser.add_argument("--fresh-store", action="store_true",
                        help="each of the dashboard's runs with an empty store that `fuseprof analyze TRACE` fills")
    args = parser.parse_args()
    warm_store(args.trace)
    cold_store = 0  # the dashboard's runs during which fuseprof's source changed
    with_view = 0  # the dashboard's runs that began with its first view kept in the store
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        figure = Path(tmp) / "figure.json"
        figure.write_text(first_figure_json(args.trace))
        (Path(tmp) / "floor.py").write_text(FLOOR_APP.format(path=str(figure)))
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        runs: dict[str, list[dict[str, float]]] = {"floor": [], "fuseprof": []}
        for _ in range(args.repeats):
            port = free_port()
            runs["floor"].append(measure(browser, floor_command(Path(tmp) / "floor.py", port), port,
                                         f"http://localhost:{port}"))
            if args.fresh_store:  # read by every process started from here on: analyze, the check, the dashboard
                os.environ["FUSEPROF_CACHE"] = tempfile.mkdtemp(prefix="store-", dir=tmp)
            port, warmed = free_port(), warm_store(args.trace)
            with_view += first_view_kept(args.trace)
            runs["fuseprof"].append(measure(browser, [sys.executable, "-m", "fuseprof.cli", "dashboard",
                                                      str(args.trace), "--port", str(port)], port,
                                            f"http://localhost:{port}"))
            cold_store += store_version() != warmed
        browser.close()
    if cold_store:
        print(f"# NOT VALID: fuseprof's source changed during {cold_store} of the dashboard's runs (its store then "
              "cold); run it again on a tree nobody edits")
    store = "a fresh store filled by `fuseprof analyze` alone each run" if args.fresh_store else "warm store"
    print(f"# {args.trace.relative_to(ROOT) if args.trace.is_relative_to(ROOT) else args.trace}, {store}, "
          f"{args.repeats} alternating runs, headless Chromium; medians (min-max); the dashboard's first view kept "
          f"at the start of {with_view} of its {args.repeats} runs")
    print(f"{'':28}{'floor (same figure)':>22}{'fuseprof dashboard':>22}{'ratio':>8}")
    for key, label in (("cold", "cold server to first chart"), ("new_tab", "new tab to first chart")):
        floor, ours = ([r[key] for r in runs[side]] for side in ("floor", "fuseprof"))
        print(f"{label:28}{statistics.median(floor):>8.2f} s ({min(floor):.2f}-{max(floor):.2f})"
              f"{statistics.median(ours):>8.2f} s ({min(ours):.2f}-{max(ours):.2f})"
              f"{statistics.median(ours) / statistics.median(floor):>8.2f}")


if __name__ == "__main__":
    main()
