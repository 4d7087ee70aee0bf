"""The Model page: every section of a whole-model trace bundle's analysis (``fuseprof.section_views``, the
same sections as ``fuseprof analyze`` and the report), and a diff of two bundles. Rates come from the
trace's own GPU, or from the measured bundles named with ``fuseprof dashboard --ceilings`` — never from
whatever lies in the folder the dashboard shows. Calls the analysis facade and the view layer only."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from fuseprof import figures
from fuseprof.analysis import TraceAnalysis, analyze
from fuseprof.analysis.diff import diff_by_category, diff_by_op, diff_totals
from fuseprof.bundle.files import RAW, find_bundles
from fuseprof.display import human_units, md_text
from fuseprof.errors import FuseprofError
from fuseprof.section_views import trace_views

CEILINGS_ENV = "FUSEPROF_CEILINGS"  # what `fuseprof dashboard --ceilings` names (a ceilings or bench bundle)


@st.cache_data(show_spinner="Analysing the trace…", max_entries=8)
def analysis(bundle: str, ceilings: str | None) -> TraceAnalysis:
    return analyze(Path(bundle), ceilings=Path(ceilings) if ceilings else None)[0]


def trace_bundles(traces: Path) -> list[Path]:
    """Bundles that keep a torch.profiler trace (captures and ingested traces)."""
    return [b for b in find_bundles(traces) if any((b / RAW).glob("*.json*"))]


def _sections(result: TraceAnalysis, data_table) -> None:  # type: ignore[no-untyped-def]
    described: set[str] = set()
    for shown in trace_views(result, text=False):
        st.subheader(shown.title.split(" (")[0])
        if shown.section.name not in described:
            described.add(shown.section.name)
            st.caption(md_text(shown.section.description))
        for flag in shown.flags:
            st.warning(md_text(flag[:1].upper() + flag[1:]))
        if shown.figure is not None:
            st.plotly_chart(shown.figure, key=f"model-{shown.table.name}")
        st.dataframe(shown.frame, hide_index=True)
        if shown.summary:
            st.markdown(f"**{md_text(shown.summary)}**")
        data_table(result.frames[shown.table.name], f"model-{shown.table.name}")


def render(traces: Path, data_table) -> None:  # type: ignore[no-untyped-def]
    bundles = {b.name: b for b in trace_bundles(traces)}
    if not bundles:
        st.info("No bundle with a torch.profiler trace in this folder; `fuseprof ingest TRACE` makes one.")
        return
    names = sorted(bundles, key=lambda n: (not n.startswith("llama4l"), n))
    chosen = st.selectbox("Trace bundle", names, key="model-bundle")
    ceilings = os.environ.get(CEILINGS_ENV) or None
    try:
        result = analysis(str(bundles[chosen]), ceilings)
    except FuseprofError as exc:  # e.g. a CPU-only capture of `fuseprof run`: it has no GPU kernels to analyse
        st.info(md_text(exc))
        return
    for note in result.notes:
        st.caption(f"Note: {md_text(note)}")
    whole = result.timeline.iloc[0]
    st.caption(f"{md_text(result.device or 'device unknown')} · roof: {md_text(result.roof.label)} · span "
               f"{whole['span_ns'] / 1e3:,.3f} µs, GPU busy {whole['busy_ns'] / 1e3:,.3f} µs ({whole['busy_pct']:.1f}%)")
    failed = result.integrity[~result.integrity["ok"]] if not result.integrity.empty else result.integrity
    if not failed.empty:
        st.warning("Integrity checks failed: " + "; ".join(failed["check"]) + " (the table below says why)")
    _sections(result, data_table)
    st.subheader("Diff against another trace")
    others = [n for n in names if n != chosen]
    if not others:
        return
    other = st.selectbox("B (A is the bundle above)", others, key="model-diff")
    b = analysis(str(bundles[other]), ceilings)
    st.dataframe(human_units(diff_totals(result, b)), hide_index=True)
    by_category = diff_by_category(result, b)
    st.plotly_chart(figures.diff_figure(by_category), key="model-diff-figure")
    data_table(diff_by_op(result, b), "model-diff-ops")

