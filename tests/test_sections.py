"""The table of sections: the terminal, JSON, the HTML report and the dashboard's Model page list the same
sections; a new section is one module (docs/sections.md's worked example, added from a temporary folder)
and appears in all four, with values counted from the raw trace here."""

from __future__ import annotations

import gzip
import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest

import fuseprof.analysis.running.sections as sections_package
from fuseprof.analysis import analyze
from fuseprof.analysis.running.sections import shown_tables
from fuseprof.cli import main
from fuseprof.report import report_html
from fuseprof.section_views import trace_views
from tests.conftest import ROOT, TRACES

EAGER = TRACES / "llama4l-eager-h200"
AppTest = pytest.importorskip("streamlit.testing.v1").AppTest


def _example() -> str:
    """The worked example's module, as docs/sections.md prints it."""
    text = (ROOT / "docs" / "sections.md").read_text()
    return re.search(r"Save\s+this as `fuseprof/analysis/running/sections/copies.py`:\n\n```python\n(.*?)```", text, re.S).group(1)


@pytest.fixture
def with_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    extra = tmp_path / "more_sections"
    extra.mkdir()
    (extra / "copies.py").write_text(_example())
    monkeypatch.setattr(sections_package, "__path__", [*sections_package.__path__, str(extra)])
    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "store"))  # a section outside the package: a fresh store
    sections_package.sections.cache_clear()
    yield
    sections_package.sections.cache_clear()


def _titles(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [shown.title for shown in trace_views(result)]


def _model_page(monkeypatch: pytest.MonkeyPatch) -> AppTest:
    import streamlit as st

    st.cache_data.clear()  # the page's analyses, cached by an earlier test without the new section
    st.cache_resource.clear()  # (the Model page keeps its analyses as resources, shared across sessions)
    monkeypatch.setenv("FUSEPROF_TRACES", str(TRACES))
    at = AppTest.from_file(str(ROOT / "dashboards" / "app.py"), default_timeout=120)
    at.query_params["page"] = "Model"
    at.query_params["trace"] = EAGER.name  # the page's choices live in the URL
    at.query_params["section"] = "every section"  # it opens on the timeline alone
    at.run()
    assert not at.exception and not at.error
    return at


def _check_every_view(capsys, monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    (result,) = analyze(EAGER)
    titles = _titles(result)
    assert main(["analyze", str(EAGER), "--wide"]) == 0
    terminal = capsys.readouterr().out
    report = report_html([result], plotly="cdn")
    page = _model_page(monkeypatch)
    subheaders = [s.value for s in page.subheader]
    for title in titles:
        assert title in terminal, title
        assert html.escape(title) in report, title
        assert title.split(" (")[0] in subheaders, title
    assert main(["analyze", str(EAGER), "--format", "json"]) == 0
    tables = json.loads(capsys.readouterr().out)[result.name]
    assert {t.name for s in sections_package.trace_sections() for t in s.tables if t.shown} <= set(tables)
    return titles


def test_every_view_lists_every_section(capsys, monkeypatch) -> None:
    titles = _check_every_view(capsys, monkeypatch)
    assert titles[0] == "Verdict: what bounds the run" and len(titles) >= 12


def test_a_new_section_is_one_module_and_every_view_shows_it(with_copies, capsys, monkeypatch) -> None:
    titles = _check_every_view(capsys, monkeypatch)
    assert "Copies by direction" in titles
    events = json.loads(gzip.decompress((EAGER / "raw" / "0-profiler_trace.json.gz").read_bytes()))["traceEvents"]
    copies = Counter(re.search(r"Memcpy (\w+)", e["name"]).group(1) for e in events if e.get("cat") == "gpu_memcpy")
    assert main(["analyze", str(EAGER), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["llama4l-eager-h200/raw/0-profiler_trace.json.gz"]["copies"]
    assert {r["direction"]: r["count"] for r in rows} == dict(copies) and sum(copies.values()) == 9


@pytest.mark.shared
def test_a_percentage_above_100_is_flagged_where_it_is_shown(tmp_path: Path, capsys) -> None:
    """The 2-GPU pair's rank 0 with every GEMM kernel made to last 30 µs: its largest aten::mm (2·M·N·K from the
    raw Input Dims) would run above the H200's dense BF16 datasheet peak, so the per-op roofline's % roof is
    above 100 and every view says so above the table; the trace as captured has no such flag."""
    from tests.conftest import shared_traces

    source = shared_traces() / "h200_2gpu" / "tp_mlp_rank0.json.gz"
    trace = json.loads(gzip.decompress(source.read_bytes()))
    for event in trace["traceEvents"]:
        if event.get("cat") == "kernel" and event["name"].startswith("nvjet"):
            event["dur"] = 30.0
    (m, k), (_, n) = max((e["args"]["Input Dims"][:2] for e in trace["traceEvents"] if e.get("name") == "aten::mm"),
                         key=lambda d: d[0][0] * d[0][1] * d[1][1])
    assert 2 * m * n * k / 30e-6 > 989e12  # the H200's dense BF16 peak, datasheet
    (tmp_path / "fast.json").write_text(json.dumps(trace))
    flagged = {shown.table.name: shown.flags for shown in trace_views(analyze([tmp_path / "fast.json"])[0])}
    assert any(f.startswith("% roof: ") and "above 100%" in f for f in flagged["op_roofline"])
    clean = {shown.table.name: shown.flags for shown in trace_views(analyze([source])[0])}
    assert not any("above 100%" in f for flags in clean.values() for f in flags)
    assert main(["analyze", str(tmp_path / "fast.json")]) == 0
    assert "⚠ % roof: " in capsys.readouterr().out


def table_is_empty(result, name: str) -> bool:  # type: ignore[no-untyped-def]
    return shown_tables(result)[name].empty


def test_every_table_is_flagged_in_every_view_when_a_check_it_rests_on_fails() -> None:
    """Each table that declares checks it rests on, on a real trace whose integrity table says each of those
    checks failed in turn: the table's view says that check failed (the audit's flags were looked up by table
    name in another table and never shown)."""
    (result,) = analyze(TRACES / "llama4l-eager-h200")
    declared = [t for s in sections_package.trace_sections() for t in s.tables if t.rests_on and t.shown]
    assert len(declared) >= 6
    for table in declared:
        for check in table.rests_on:
            integrity = result.integrity.copy()
            integrity["ok"] = integrity["check"] != check
            result.integrity = integrity
            views = list(trace_views(result, only=table.name))
            if not views and table.hide_empty and table_is_empty(result, table.name):
                continue  # a table with no rows is not shown (a trace without memory records): no flag to carry
            (shown,) = views
            assert any(check in flag for flag in shown.flags), (table.name, check, shown.flags)
