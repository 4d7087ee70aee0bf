"""The Diff page: two traces of one model compared by what they compute (``fuseprof diff``'s aligned view,
``fuseprof.analysis.judgements.changes``): the matched share, A's and B's GPU time per module with the class of change
(fused, compiled, graphed, replaced, moved, new, gone, same), the per-op rows and what stays unmatched. Calls
the analysis facade and the figure builders only."""

from __future__ import annotations

import os
from typing import Any

import streamlit as st
from fuseprof_dashboards.model_page import CEILINGS_ENV, analysis
from fuseprof_dashboards.serve import FIRST_TOP

from fuseprof import figures
from fuseprof.analysis.judgements.changes import Changes, changes, unrelated_evidence
from fuseprof.commands.dashboard import REGISTRY_ENV
from fuseprof.display import md_text


@st.cache_resource(show_spinner="Aligning the two runs…", max_entries=8)  # shared, never modified
def aligned(a: str, b: str, ceilings: str | None, registry: str | None, top: int) -> Changes:
    return changes(analysis(a, ceilings, registry, top), analysis(b, ceilings, registry, top))


def render(traces: dict, data_table, choice) -> None:  # type: ignore[no-untyped-def]
    """The page over the traces (at least two); ``choice`` keeps each choice in the URL."""
    names = list(traces)
    a = choice(st.selectbox, "A (the baseline)", names, "diff-a")
    b = choice(st.selectbox, "B (the change)", [n for n in names if n != a], "diff-b")
    ceilings, registry = os.environ.get(CEILINGS_ENV) or None, os.environ.get(REGISTRY_ENV) or None
    found = aligned(str(traces[a]), str(traces[b]), ceilings, registry, FIRST_TOP)
    s: dict[str, Any] = found.summary  # its values' types by key (changes.Changes)
    st.markdown(md_text(f"{s['matched_a_pct']:.1f}% of A's GPU time matched to B · a step: A "
                        f"{s['step_a_ns'] / 1e3:,.3f} µs, B {s['step_b_ns'] / 1e3:,.3f} µs · unmatched: A "
                        f"{s['unmatched_a_ns'] / 1e3:,.3f} µs, B {s['unmatched_b_ns'] / 1e3:,.3f} µs"))
    if not s["related"]:
        st.warning(md_text(f"These runs look unrelated: {unrelated_evidence(s)}"))
    for note in s["notes"]:
        st.caption(f"Note: {md_text(note)}")
    st.plotly_chart(figures.module_diff_figure(found.modules), key="diff-modules-figure")
    st.caption("Each module's GPU time per step (median over the steps) in A and B; B's kernels are counted under "
               "the module of the A work they align to where B names none (torch.compile, a graph replay).")
    data_table(found.modules, "diff-modules")
    st.subheader("Per op within each module")
    data_table(found.ops, "diff-module-ops")
