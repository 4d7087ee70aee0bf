"""The dashboard's first chart comes first (issue 58: within 1.2x of a minimal Streamlit app drawing the same
figure; scripts/bench_dashboard_first_chart.py measures it). The server sends the Model page's timeline before any
widget, so the browser fetches Plotly's code before the widgets' (fuseprof_dashboards.deferred), while every
widget still shows where it did; the server runs without Streamlit's full collection after each run and without
"magic", and the benchmark's floor runs with the same settings; URL values that name nothing still give the
default view, never the value itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuseprof.commands.dashboard import SERVER_FLAGS
from tests.browser import CHROMIUM_ARGS, PLOT_SELECTOR, free_port, require_browser, wait_healthy
from tests.conftest import ROOT, held_safely

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
EXAMPLE = ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"
RUNNER_SETTINGS = {"--runner.postScriptGC": "false", "--runner.magicEnabled": "false"}


def _settings(argv: list[str]) -> dict[str, str]:
    return {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag.startswith("--")}


def _elements_in_arrival_order(frames: list[bytes]) -> list[str]:
    """The element kinds the server sent, in the order the browser received them (Streamlit's ForwardMsgs)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    kinds = []
    for frame in frames:
        msg = ForwardMsg()
        msg.ParseFromString(frame)
        if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
            kinds.append(msg.delta.new_element.WhichOneof("type"))
    return kinds


@pytest.mark.browser
@pytest.mark.parametrize("view_kept", [False, True], ids=["no-first-view", "first-view-kept"])
def test_the_timeline_is_sent_before_any_widget_and_the_widgets_stay_in_place(view_kept: bool, tmp_path: Path) -> None:
    """`fuseprof dashboard` on the example trace in headless Chromium: the timeline is the first element after
    the title and the verdict's text, before the page radio and the two selectboxes (before: radio, selectbox,
    selectbox, chart); on screen the page radio stays above "Rows per top table" in the sidebar and the window's
    picker above the chart; the server process runs with the runner settings, as the benchmark's floor does. The
    same where the store keeps the first view (fuseprof_dashboards.first_view: the top drawn from it before pandas
    is imported, the rest after it in the same run)."""
    sync_playwright, executable = require_browser()
    from fuseprof_dashboards import first_view

    env = {**os.environ, "FUSEPROF_CACHE": str(tmp_path / "store")}
    for name in (first_view.CEILINGS_ENV, "FUSEPROF_REGISTRY"):
        env.pop(name, None)
    if view_kept:  # the page drawn once, in a process of its own: it keeps the view
        subprocess.run([sys.executable, "-c", "from streamlit.testing.v1 import AppTest; "
                        f"AppTest.from_file({str(ROOT / 'dashboards' / 'app.py')!r}, default_timeout=120).run()"],
                       env={**env, "FUSEPROF_TRACES": str(EXAMPLE)}, check=True, capture_output=True)
        with pytest.MonkeyPatch.context() as m:
            m.setenv("FUSEPROF_CACHE", env["FUSEPROF_CACHE"])
            assert first_view.kept(EXAMPLE)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fuseprof.cli", "dashboard", str(EXAMPLE), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_healthy(proc, port)
        server_argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode().split("\0")  # the command became it
        frames: list[bytes] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
            page.goto(f"http://localhost:{port}")
            page.wait_for_selector(PLOT_SELECTOR, timeout=120_000)
            page.get_by_text("Rows per top table").wait_for(timeout=60_000)
            sidebar = page.locator('[data-testid="stSidebar"]')
            radio_y = sidebar.locator('[role="radiogroup"]').bounding_box()["y"]
            rows_y = sidebar.locator('[data-testid="stSelectbox"]').filter(has_text="Rows per top table").bounding_box()["y"]
            picker_y = page.locator('[data-testid="stSelectbox"]').filter(has_text="Window (step)").bounding_box()["y"]
            chart_y = page.locator(".js-plotly-plot").first.bounding_box()["y"]
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    kinds = _elements_in_arrival_order([f for f in frames if isinstance(f, bytes)])
    assert "plotly_chart" in kinds, kinds
    first_chart = kinds.index("plotly_chart")
    widgets = [i for i, kind in enumerate(kinds) if kind in ("radio", "selectbox")]
    assert widgets and min(widgets) > first_chart, kinds  # before: radio, selectbox, selectbox, then the chart
    assert radio_y < rows_y and picker_y < chart_y, (radio_y, rows_y, picker_y, chart_y)
    assert RUNNER_SETTINGS.items() <= _settings(server_argv).items(), server_argv


def test_the_benchmarks_floor_runs_with_the_dashboards_settings() -> None:
    """Fairness: the floor's server gets every setting `fuseprof dashboard` gives its own, the runner's
    included."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_dashboard_first_chart import floor_command

    floor = _settings(floor_command(Path("floor.py"), 8765))
    assert _settings(list(SERVER_FLAGS)).items() <= floor.items() and RUNNER_SETTINGS.items() <= floor.items(), floor


HOSTILE_URLS = [
    {"page": "Roofline"},  # a page this input has nothing for
    {"top": "1e9"}, {"top": "-1"}, {"top": "abc"},  # rows per table: not one of the choices
    {"window": "<img src=x onerror=alert(1)>"}, {"window": "decode_step #999"},  # a window the trace lacks
    {"trace": "../../etc/passwd"},  # a trace that is not an input
    {"section": "**bold** [link](http://example.invalid)"},
]


@pytest.mark.parametrize("params", HOSTILE_URLS, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()))
def test_a_url_value_that_names_nothing_gives_the_default_view(params: dict[str, str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The choices are read before their widgets are drawn (after the chart): a value that is not one of the
    options is replaced by the default in the widget and the URL, the first window's chart is drawn, and the
    value itself appears nowhere on the page."""
    monkeypatch.setenv("FUSEPROF_TRACES", str(EXAMPLE))
    at = AppTest.from_file(str(ROOT / "dashboards" / "app.py"), default_timeout=90)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="choice-page").value == "Model" and at.selectbox(key="choice-top").value == "15"
    assert at.selectbox(key="choice-window").value == "prefill"
    shown = [str(e.value) for kind in ("markdown", "caption", "title", "subheader") for e in getattr(at, kind)]
    rendered = [text for value in params.values() for text in shown if value in text]
    held_safely(rendered, f"URL {params}")
    chosen = {key: at.query_params.get(key) for key in ("page", "top", "window", "section")}  # widgets' choices
    assert not set(params.values()) & set(chosen.values()), chosen  # one trace: no Trace choice, its value unused
