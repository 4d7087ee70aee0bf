"""The dashboard's first view (``fuseprof_dashboards.first_view``): the Model page's top, kept in the trace store the
first time the page draws it, drawn by a new tab's first run before pandas and the analysis are imported (issue 58:
the first chart within 1.2x of a minimal Streamlit app drawing the same figure). The page drawn from it is the page
drawn without it; it is never used for other bytes, another fuseprof, another input or a URL that chooses."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fuseprof_dashboards import first_view
from fuseprof_dashboards.inputs import find_inputs

import fuseprof.first_view
import fuseprof.parse.store as store_module
from tests.conftest import ROOT, held_safely

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
EAGER = ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"
COMPILED = ROOT / "traces" / "llama4l-compiled-h200" / "raw" / "0-profiler_trace.json.gz"
NAME = "0-profiler_trace.json.gz"


@pytest.fixture
def trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The eager example trace alone in a folder, shown with a store of its own and no --ceilings or --registry."""
    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "store"))
    for name in (first_view.CEILINGS_ENV, "FUSEPROF_REGISTRY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / NAME
    shutil.copy(EAGER, path)
    monkeypatch.setenv("FUSEPROF_TRACES", str(path))
    return path


def _page(params: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """A new tab's first run of the app: each element of the main area, in order, as (kind, what it shows); a
    chart as its Plotly JSON (containers left out: a widget inside one is listed in its place)."""
    at = AppTest.from_file(str(ROOT / "dashboards" / "app.py"), default_timeout=120)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]

    def shown(element: Any) -> str:
        if element.proto is not None and hasattr(element.proto, "spec"):
            return str(element.proto.spec)
        return str(getattr(element, "value", ""))
    return [(type(e).__name__, shown(e)) for e in at.main if type(e).__name__ not in ("Block", "SpecialBlock")]


def _where(path: Path) -> first_view.Slot:
    where = first_view.slot(find_inputs(path))
    assert where is not None
    return where


def _doctor(where: first_view.Slot, **change: Any) -> None:
    """The kept view rewritten with ``change`` (its entry replaced as the store writes one)."""
    part = fuseprof.first_view.part(where.name)
    found = where.store.get_frames(where.key, part, only=())
    assert found is not None, "no view kept"
    view = found[1]
    shutil.rmtree(where.store._entry(where.key, part))
    assert where.store.put_frames(where.key, part, {}, {**view, **change})


def _captions(page: list[tuple[str, str]]) -> list[str]:
    return [text for kind, text in page if kind == "Caption"]


def test_a_new_tab_draws_the_kept_view_and_the_same_page(trace: Path) -> None:
    """The first open keeps the view; a new tab draws the page from it — element for element the page drawn
    without it, the chart's Plotly JSON included — and it is the kept view that a new tab draws (a doctored caption
    shows)."""
    assert not first_view.kept(trace)
    without = _page()
    assert first_view.kept(trace)
    kinds = [kind for kind, _ in without]
    assert kinds[:3] == ["Title", "Caption", "Markdown"] and kinds.count("Title") == 1, kinds
    charts = [text for kind, text in without if kind == "UnknownElement" and text.startswith("{")]
    assert len(charts) == 1 and json.loads(charts[0])["data"], without  # the timeline, once
    with_view = _page()
    assert with_view == without
    _doctor(_where(trace), caption="doctored caption")
    doctored = _page()
    assert _captions(doctored)[0] == "doctored caption" and doctored[2:] == without[2:]


def test_the_view_is_keyed_by_the_traces_bytes(trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The view lives under the SHA-256 of the trace's bytes (the store's key, computed here from the file); the
    same name with other bytes (the compiled trace) finds none and shows the page the other trace gives in a
    store that never saw the first."""
    where = _where(trace)
    assert where.key == hashlib.sha256(trace.read_bytes()).hexdigest()[:32]
    _page()
    _doctor(where, caption="the eager trace's view")
    shutil.copy(COMPILED, trace)
    assert not first_view.kept(trace)
    other = _page()
    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "fresh-store"))
    assert other == _page()  # the compiled trace's own page, as a store without any view draws it
    assert "the eager trace's view" not in _captions(other)
    with gzip.open(COMPILED) as fh:  # its device, read from the raw file: the page is of the compiled trace
        device = json.load(fh)["deviceProperties"][0]["name"]
    assert device in _captions(other)[0], _captions(other)[0]


def test_another_fuseprof_finds_no_view(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A view kept by one fuseprof (its version and source hash: the store's version folder) is not read by
    another: the page is drawn from the analysis, and that fuseprof keeps its own."""
    without = _page()
    _doctor(_where(trace), caption="an older fuseprof's view")
    monkeypatch.setattr(store_module, "code_version", lambda: "v3-9.9.9-0123456789ab")
    assert not first_view.kept(trace)
    assert _page() == without
    assert first_view.kept(trace) and first_view.read(_where(trace))["caption"] == without[1][1]


def test_a_url_that_chooses_draws_no_view(trace: Path) -> None:
    """A shared link (any query parameter) may choose another page, trace, window or rows: no view is drawn."""
    _page()
    _doctor(_where(trace), caption="doctored caption")
    page = _page({"window": "decode_step #1"})
    assert "doctored caption" not in _captions(page)


def test_inputs_that_shape_the_analysis_otherwise_get_no_view(trace: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """--ceilings and --registry (files whose content shapes the analysis), bundles, an execution trace beside the
    trace, and no store: no view is kept or read."""
    folder = trace.parent
    assert first_view.slot(find_inputs(folder)) is not None
    for env in (first_view.CEILINGS_ENV, "FUSEPROF_REGISTRY"):
        with monkeypatch.context() as m:
            m.setenv(env, str(tmp_path))
            assert first_view.slot(find_inputs(folder)) is None, env
    assert first_view.slot(find_inputs(EAGER.parents[1])) is None  # a bundle keeping the trace
    et = folder / "0-profiler_trace.et.json"
    et.write_text("{}")
    assert first_view.slot(find_inputs(folder)) is None
    et.unlink()
    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    assert first_view.slot(find_inputs(folder)) is None


DAMAGED: list[dict[str, Any]] = [
    {"figure": None}, {"figure": 3}, {"caption": ["x"]}, {"verdict": 1}, {"picker": "yes"},
    {"name": "another-trace.json.gz"}, {"caption": None},
]


def test_a_damaged_view_is_not_drawn(trace: Path) -> None:
    """A kept view with a field missing or of the wrong type, or of another trace's name, is not read: the page is
    drawn from the analysis, as without it."""
    without = _page()
    where = _where(trace)
    good = first_view.read(where)
    assert good is not None
    for change in DAMAGED:
        _doctor(where, **good)
        _doctor(where, **change)
        held_safely(first_view.read(where) is not None, f"first view with {change}")
        assert _page() == without, change


# --- the view written by `fuseprof analyze` (fuseprof.first_view), not only by the page ----------------------------


@pytest.mark.parametrize("path", [EAGER, COMPILED], ids=["eager", "compiled"])
def test_the_plain_timeline_is_a_valid_plotly_figure_of_the_windows_kernels(path: Path) -> None:
    """``first_view.timeline_json`` (built without Plotly; the one builder of the timeline) on every window of a
    committed trace, and on its first window with some categories and ops taken away and markup in a kernel's name:
    Plotly accepts it as a figure with its validation on, each window's bars are its kernels with their durations and
    starts in µs (from the events' own columns), and no name's markup survives."""
    import plotly.graph_objects as go

    from fuseprof import first_view as view
    from fuseprof.analysis import analyze
    from fuseprof.analysis.facts.timeline import timeline_windows, window_events

    events = analyze(path)[0].events
    windows = timeline_windows(events)
    cases = [window_events(events, w, view.TIMELINE_BARS)[0] for w in windows]
    hostile = cases[0].copy()
    hostile.loc[hostile.index[::3], "category"] = None
    hostile.loc[hostile.index[1::4], "op"] = None
    hostile.loc[hostile.index[0], "name"] = "<a href='https://example.com'>k</a> & co"
    for rows in [*cases, hostile, hostile.drop(columns=["category", "op"]), hostile.iloc[:0]]:
        figure = json.loads(view.timeline_json(rows, "GPU timeline: <b>w</b>"))
        go.Figure(figure)  # raises on any property Plotly does not know or a value of the wrong type
        bars = [(x, base) for t in figure["data"] for x, base in zip(t["x"], t["base"], strict=True)]
        origin = int(rows["start_ns"].min()) if len(rows) else 0
        assert sorted(bars) == sorted(zip((rows["dur_ns"] / 1e3).tolist(), ((rows["start_ns"] - origin) / 1e3).tolist()))
        categories = set(rows["category"].astype(object).fillna("other")) if "category" in rows else \
            ({"other"} if len(rows) else set())
        assert [t["name"] for t in figure["data"]] == sorted(categories)
    plain = json.loads(view.timeline_json(hostile, "t"))
    assert "<a href" not in json.dumps(plain) and any("&lt;a href=" in c[0] for t in plain["data"] for c in t["customdata"])
    first = json.loads(view.timeline_json(cases[0], "t"))
    assert sum(len(t["x"]) for t in first["data"]) == len(cases[0]) == len(events[events["step"] == windows[0]])


def _analyze_cli(*argv: str) -> set[str]:
    """``fuseprof analyze`` in a fresh interpreter (the store is $FUSEPROF_CACHE); the modules it loaded."""
    code = ("import json, sys; from fuseprof.cli import main; code = main(sys.argv[1:]); "
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code, "analyze", *argv], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return {name.split(".")[0] for name in json.loads(done.stderr.strip().splitlines()[-1])}


def test_analyze_keeps_the_view_the_dashboard_draws(trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``fuseprof analyze TRACE --format json`` (no plotting library loaded) the store keeps the first view, and
    the dashboard's first tab draws the page from it: element for element the page of a store that never saw it,
    and the very view that page keeps for itself."""
    loaded = _analyze_cli(str(trace), "--format", "json")
    assert not loaded & {"plotly", "streamlit"}, sorted(loaded & {"plotly", "streamlit"})
    assert first_view.kept(trace)
    written = first_view.read(_where(trace))
    with_view = _page()
    _doctor(_where(trace), caption="the view analyze wrote")
    assert _captions(_page())[0] == "the view analyze wrote"  # it is that view that is drawn
    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "fresh-store"))
    assert not first_view.kept(trace)
    assert _page() == with_view  # drawn from the analysis, in a store without the view
    assert first_view.read(_where(trace)) == written  # the page's own view: the one analyze wrote, to the byte
    with gzip.open(EAGER) as fh:
        device = json.load(fh)["deviceProperties"][0]["name"]
    assert written is not None and device in written["caption"] and written["name"] == NAME


@pytest.mark.parametrize("options", [["--top", "30"], ["--window", "all"], ["--device", "H100 SXM"]])
def test_analyze_otherwise_keeps_no_view(trace: Path, options: list[str]) -> None:
    """An analysis the dashboard does not make (other rows, window or GPU) keeps no first view; nor does a store
    that is off."""
    from fuseprof.cli import main

    assert main(["analyze", str(trace), "--format", "json", *options]) == 0
    assert not first_view.kept(trace)


def test_analyze_with_the_store_off_keeps_nothing(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fuseprof.cli import main

    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    assert main(["analyze", str(trace), "--format", "json"]) == 0
    monkeypatch.setenv("FUSEPROF_CACHE", str(trace.parents[1] / "store"))
    assert not first_view.kept(trace) and not (trace.parents[1] / "store").exists()
