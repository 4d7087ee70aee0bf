"""The dashboard's first view (``fuseprof_dashboards.first_view``): the Model page's top, kept in the trace store the
first time the page draws it, drawn by a new tab's first run before pandas and the analysis are imported (issue 58:
the first chart within 1.2x of a minimal Streamlit app drawing the same figure). The page drawn from it is the page
drawn without it; it is never used for other bytes, another fuseprof, another input or a URL that chooses."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fuseprof_dashboards import first_view
from fuseprof_dashboards.inputs import find_inputs

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
    found = where.store.get_frames(where.key, where.part, only=())
    assert found is not None, "no view kept"
    view = found[1]
    shutil.rmtree(where.store._entry(where.key, where.part))
    assert where.store.put_frames(where.key, where.part, {}, {**view, **change})


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
