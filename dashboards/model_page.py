"""The Model page: a trace's GPU timeline (one window — a step — of its kernels as bars over time per stream),
every section of its analysis (``fuseprof.section_views``, the same sections as ``fuseprof analyze`` and the
report), and a diff of two traces. A trace is a trace file or a bundle keeping one, analysed as ``fuseprof
analyze`` does, through the trace store. Rates come from the
trace's own GPU, or from the measured bundles named with ``fuseprof dashboard --ceilings`` — never from
whatever lies in the folder the dashboard shows. Calls the analysis facade and the view layer only."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from fuseprof_dashboards import first_view
from fuseprof_dashboards.deferred import Deferred
from fuseprof_dashboards.first_view import CEILINGS_ENV

from fuseprof import figures
from fuseprof import first_view as view
from fuseprof.analysis import TraceAnalysis, analyze
from fuseprof.analysis.facts.timeline import timeline_windows
from fuseprof.analysis.judgements.diff import diff_by_category, diff_by_op, diff_totals
from fuseprof.analysis.running.sections import trace_sections
from fuseprof.commands.dashboard import REGISTRY_ENV
from fuseprof.display import human_units, md_text
from fuseprof.errors import FuseprofError
from fuseprof.first_view import FIRST_TOP
from fuseprof.section_views import trace_views

TOP_ROWS = (5, 10, 15, 30, 100)  # rows per top table (``fuseprof analyze --top``)


@st.cache_resource(show_spinner="Analysing the trace…", max_entries=8)  # shared, not copied: never modified
def analysis(trace: str, ceilings: str | None, registry: str | None, top: int) -> TraceAnalysis:
    """The trace's analysis, with the registry ``fuseprof dashboard --registry`` named (``REGISTRY_ENV``), if any."""
    from fuseprof_dashboards.serve import take  # the analysis the server began at start, if it is this one

    return take(trace, ceilings, registry, top) or analyze(Path(trace), top=top, ceilings=Path(ceilings) if ceilings
                                                           else None, registry=Path(registry) if registry else None)[0]


def timeline_figure(events: pd.DataFrame, window: str) -> tuple[str, int, int]:
    """The window's timeline figure as Plotly JSON (``fuseprof.first_view.timeline``, built without Plotly), the events
    it draws and the events the window
    holds. The page draws this JSON whether it draws the top from the kept first view
    (``fuseprof_dashboards.first_view``) or from here: the chart sends the same JSON and stays the same element."""
    return view.timeline(events, window)


@st.cache_resource(max_entries=32)  # a new tab's first chart, built once
def _timeline_figure(trace: str, ceilings: str | None, registry: str | None, top: int, window: str
                     ) -> tuple[str, int, int]:
    from fuseprof_dashboards.serve import take  # the first chart the server built at start, if it is this one

    return take(trace, ceilings, registry, top, window) or timeline_figure(
        analysis(trace, ceilings, registry, top).events, window)


def _timeline(result: TraceAnalysis, key: tuple[str, str | None, str | None, int],  # type: ignore[no-untyped-def]
              choice, later: Deferred, first: first_view.Drawn | None = None) -> dict[str, Any] | None:
    """One window of the trace's GPU events on a time axis, the window chosen in the URL (``window``); the
    widgets kept in ``later`` are drawn right after the chart (the window's picker in its place above it).
    ``first``: the picker's container and the chart, drawn already from the kept view (the first window's).
    What the first view keeps of it where this is the first window: whether it has a picker, the figure."""
    windows = timeline_windows(result.events)
    picker = st.container() if first is None else first.picker
    window = choice(later(picker.selectbox), "Window (step)", windows, "window") if len(windows) > 1 else windows[0]
    figure, drawn, total = _timeline_figure(*key, window)
    if first is None:
        st.plotly_chart(json.loads(figure), key=first_view.CHART_KEY)
    later.draw()
    cut = f"; the first {drawn:,} of its {total:,} are drawn" if total > drawn else ""
    st.caption(f"{total:,} GPU events in {md_text(window)}{cut}. Hover a bar for the kernel, its op and its times; "
               "drag to zoom.")
    return {"picker": len(windows) > 1, "figure": figure} if window == windows[0] else None


NO_SECTION = "none (the timeline alone)"
ALL_SECTIONS = "every section"


def _sections(result: TraceAnalysis, data_table, choice) -> None:  # type: ignore[no-untyped-def]
    """The section chosen in the URL (``section``), or every one, or none — what the page opens with: its
    tables cost the browser more than the timeline (the first chart came 1.2 s later with the verdict's two
    tables below it; scripts/bench_dashboard_first_chart.py). Only the chosen section's views are built."""
    def has_rows(table) -> bool:  # type: ignore[no-untyped-def]
        return table.shown and not (table.hide_empty and result.frames.get(table.name, pd.DataFrame()).empty)

    shown_sections = [s for s in trace_sections() if any(has_rows(t) for t in s.tables)]
    chosen = choice(st.selectbox, "Section", [NO_SECTION, *(s.name for s in shown_sections), ALL_SECTIONS], "section")
    for section in shown_sections:
        if chosen not in (ALL_SECTIONS, section.name):
            continue
        st.caption(md_text(section.description))
        for table in filter(has_rows, section.tables):
            for shown in trace_views(result, text=False, only=table.name):
                _table(result, shown, data_table)


def _table(result: TraceAnalysis, shown, data_table) -> None:  # type: ignore[no-untyped-def]
    st.subheader(shown.title.split(" (")[0])
    for flag in shown.flags:
        st.warning(md_text(flag[:1].upper() + flag[1:]))
    if shown.figure is not None and shown.table.name != "timeline":  # drawn as the kernel timeline above
        st.plotly_chart(shown.figure, key=f"model-{shown.table.name}")
    st.dataframe(shown.frame, hide_index=True)
    if shown.summary:
        st.markdown(f"**{md_text(shown.summary)}**")
    data_table(result.frames[shown.table.name], f"model-{shown.table.name}")


def render(traces: dict[str, Path], data_table, choice, later: Deferred,  # type: ignore[no-untyped-def]
           first: first_view.Drawn | None = None, keep: first_view.Slot | None = None) -> None:
    """The page over ``traces`` (name → trace file or bundle); ``choice`` keeps a choice in the URL, ``later``
    holds the sidebar's widgets until the first chart is drawn. ``first``: the page's top down to the first chart,
    drawn already in this run from the view kept in the store (``fuseprof_dashboards.first_view``); ``keep``: where
    that view is kept for this input, written here when this run draws the same top from the analysis."""
    names = list(traces)
    chosen = choice(later(st.sidebar.selectbox), "Trace", names, "trace") if len(names) > 1 else names[0]
    top = int(choice(later(st.sidebar.selectbox), "Rows per top table", [str(n) for n in TOP_ROWS], "top",
                     str(FIRST_TOP)))
    ceilings = os.environ.get(CEILINGS_ENV) or None
    registry = os.environ.get(REGISTRY_ENV) or None
    try:
        result = analysis(str(traces[chosen]), ceilings, registry, top)
    except FuseprofError as exc:  # e.g. a CPU-only capture of `fuseprof run`: it has no GPU kernels to analyse
        st.error(md_text(exc))
        return
    if first is not None and (first.slot.name, top) != (chosen, FIRST_TOP):  # not reached: the view is of this top
        raise RuntimeError(f"the dashboard's first view is of {first.slot.name}, not {chosen} with {top} rows")
    caption, verdict = view.caption(chosen, result), view.verdict(result)
    if first is None:
        st.caption(caption)
        if verdict is not None:
            st.markdown(verdict)
    kept = _timeline(result, (str(traces[chosen]), ceilings, registry, top), choice, later, first)
    if first is None and kept is not None and keep is not None and (keep.name, top) == (chosen, FIRST_TOP):
        first_view.save(keep, {"caption": caption, "verdict": verdict, **kept})
    for note in result.notes:
        st.caption(f"Note: {md_text(note)}")
    failed = result.integrity[~result.integrity["ok"]] if not result.integrity.empty else result.integrity
    if not failed.empty:
        st.warning("Integrity checks failed: " + "; ".join(failed["check"]) + " (the table below says why)")
    _sections(result, data_table, choice)
    others = [n for n in names if n != chosen]
    if not others:
        return
    st.subheader("Diff against another trace")
    other = choice(st.selectbox, "B (A is the trace above)", others, "diff")
    b = analysis(str(traces[other]), ceilings, registry, top)
    st.dataframe(human_units(diff_totals(result, b)), hide_index=True)
    by_category = diff_by_category(result, b)
    st.plotly_chart(figures.diff_figure(by_category), key="model-diff-figure")
    data_table(diff_by_op(result, b), "model-diff-ops")
