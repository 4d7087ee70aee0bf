"""The Model page: a whole-model trace bundle's timeline, categories, per-op roofline and fusion
opportunities, and a diff of two bundles. Calls the analysis facade and the figure builders only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from fuseprof import figures
from fuseprof.analysis import TraceAnalysis, analyze
from fuseprof.analysis.diff import diff_by_category, diff_by_op, diff_totals
from fuseprof.bundle.files import RAW, find_bundles, read_manifest
from fuseprof.display import human_units, md_text
from fuseprof.errors import FuseprofError
from fuseprof.model.devices import DEVICES, REFERENCE_DEVICE
from fuseprof.model.roofline import datasheet_roof


@st.cache_data(show_spinner="Analysing the trace…", max_entries=8)
def analysis(bundle: str, ceilings: str | None) -> TraceAnalysis:
    return analyze(Path(bundle), ceilings=Path(ceilings) if ceilings else None)[0]


def measured_folder(traces: Path) -> str | None:
    """The dashboard's folder, when it holds measured rates (ceilings or bench bundles): the user named
    it, so its rates apply to every trace shown."""
    kinds = {read_manifest(b).get("kind") for b in find_bundles(traces)}
    return str(traces) if kinds & {"ceilings", "bench"} else None


def trace_bundles(traces: Path) -> list[Path]:
    """Bundles that keep a torch.profiler trace (captures and ingested traces)."""
    return [b for b in find_bundles(traces) if any((b / RAW).glob("*.json*"))]


def render(traces: Path, data_table) -> None:  # type: ignore[no-untyped-def]
    bundles = {b.name: b for b in trace_bundles(traces)}
    if not bundles:
        st.info("No bundle with a torch.profiler trace in this folder; `fuseprof ingest TRACE` makes one.")
        return
    names = sorted(bundles, key=lambda n: (not n.startswith("llama4l"), n))
    chosen = st.selectbox("Trace bundle", names, key="model-bundle")
    ceilings = measured_folder(traces)
    try:
        result = analysis(str(bundles[chosen]), ceilings)
    except FuseprofError as exc:  # e.g. a CPU-only capture of `fuseprof run`: it has no GPU kernels to analyse
        st.info(md_text(exc))
        return
    for note in result.notes:
        st.caption(f"Note: {md_text(note)}")
    whole = result.timeline.iloc[0]
    st.caption(f"{md_text(result.device or 'device unknown')} · roof: {md_text(result.roof.label)} · span {whole['span_ns'] / 1e3:,.3f} µs, "
               f"GPU busy {whole['busy_ns'] / 1e3:,.3f} µs ({whole['busy_pct']:.1f}%)")
    failed = result.integrity[~result.integrity["ok"]] if not result.integrity.empty else result.integrity
    if not failed.empty:
        st.warning("Integrity checks failed: " + "; ".join(failed["check"]) + " (the table below says why)")
    with st.expander(f"Integrity check, {result.window}", expanded=not failed.empty):
        st.dataframe(result.integrity, hide_index=True)
    if not result.idle.empty:
        st.caption("Idle time by cause (launch: the GPU waited for the host; sync: the host waited for the GPU), "
                   "per profiler step: fuseprof/analysis/idle.py")
        st.dataframe(human_units(result.idle), hide_index=True)
    left, right = st.columns(2)
    left.plotly_chart(figures.timeline_figure(result.timeline), key="model-timeline")
    right.plotly_chart(figures.categories_figure(result.categories), key="model-categories")
    data_table(result.timeline, "model-timeline")
    data_table(result.categories, "model-categories")
    if result.op_roofline.empty:
        st.info("No per-op roofline: the trace was captured without record_shapes=True.")
    else:
        reference = datasheet_roof(DEVICES[REFERENCE_DEVICE])
        st.plotly_chart(figures.roofline_figure(result.op_roofline, [result.roof], reference), key="model-roofline")
        data_table(result.op_roofline.drop(columns=["signature"]).assign(signature=result.op_roofline["signature"]),
                   "model-op-roofline")
    st.subheader("Fusion opportunities")
    st.caption("Chains of memory-bound kernels between GEMM / attention / communication kernels, grouped by op "
               "sequence and ranked by predicted saving (fused bytes at the copy rate plus one kernel's fixed cost). "
               "% busy and % span: what the GPU and the whole run gain (Amdahl). Formulas: fuseprof/analysis/fusion.py.")
    shown = ["class", "signature", "count", "kernels_per_chain", "measured_ns", "fused_bytes", "predicted_fused_ns",
             "saving_ns", "share_of_busy_pct", "share_of_span_pct", "launches_saved", "known_fusion"]
    st.dataframe(human_units(result.fusion[shown]) if not result.fusion.empty else pd.DataFrame(), hide_index=True)
    data_table(result.fusion, "model-fusion")
    st.subheader("Fusion audit")
    st.caption("Is each fusion of the catalogue done in this trace? fused (the kernel that does it), not fused (time "
               "now, predicted saving) or not present: fuseprof/analysis/audit.py.")
    st.dataframe(human_units(result.audit), hide_index=True)
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
