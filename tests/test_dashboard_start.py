"""The dashboard's start-up work (``fuseprof_dashboards.serve``): while the server starts and the browser loads
Streamlit's page, a thread makes what the first page's first run needs, so that run only draws it — a trace's
analysis and its first chart, the first window's GPU timeline (issue 58: the first chart within 1.2x of a
minimal Streamlit app drawing the same figure; scripts/bench_dashboard_first_chart.py measures it)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fuseprof_dashboards import model_page, serve

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.timeline import timeline_windows
from tests.conftest import ROOT

EXAMPLE = ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"


@pytest.fixture
def listening_port():  # type: ignore[no-untyped-def]
    """A port something listens on: the start-up work waits for the server to listen before it begins."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_the_first_chart_is_made_at_start_and_taken_once(listening_port: int, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The example trace: the start-up work leaves its analysis and the figure of its first window (the Model
    page's default), the same bars as the page's own builder makes from a fresh analysis; each is taken once."""
    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "store"))
    for name in ("FUSEPROF_CEILINGS", "FUSEPROF_REGISTRY"):
        monkeypatch.delenv(name, raising=False)
    serve._warm(EXAMPLE, listening_port)
    fresh = analyze(EXAMPLE, top=serve.FIRST_TOP)[0]
    window = timeline_windows(fresh.events)[0]
    key = (str(EXAMPLE), None, None, serve.FIRST_TOP)
    assert serve.take(*key) is not None
    made = serve.take(*key, window)
    assert made is not None, "the first window's figure was not made at start"
    figure, drawn, total = made
    expected, expected_drawn, expected_total = model_page.timeline_figure(fresh.events, window)
    assert (drawn, total) == (expected_drawn, expected_total) == (len(fresh.events[fresh.events["step"] == window]),) * 2
    assert figure == expected  # the same Plotly JSON
    assert serve.take(*key) is None and serve.take(*key, window) is None  # taken once: a later run builds its own
