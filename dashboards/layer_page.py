"""The Layer page: one capture bundle per variant and shape — latency as called, kernels and launches
per call, where the time goes (GEMM, attention, memory-bound, host gaps), the memory roofline and,
where a fused variant sits beside eager, Amdahl's limit. Calls the breakdown model and the figure
builders only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from fuseprof import figures
from fuseprof.tables.breakdown import fusion_amdahl, variant_breakdown


@st.cache_data(show_spinner="Reading the capture…", max_entries=8)
def breakdown(bundle: str) -> pd.DataFrame:
    return variant_breakdown(Path(bundle))


@st.cache_data(max_entries=8)
def amdahl(bundle: str) -> pd.DataFrame:
    return fusion_amdahl(Path(bundle))


def render(captures: tuple[Path, ...], data_table, choice) -> None:  # type: ignore[no-untyped-def]
    """The page over the capture bundles (decoder layers first); ``choice`` keeps a choice in the URL."""
    bundles = dict(sorted(((b.name, b) for b in captures), key=lambda item: (not item[0].startswith("decoder_layer"),
                                                                               item[0])))
    chosen = choice(st.selectbox, "Capture bundle", list(bundles), "layer-bundle")
    frame = breakdown(str(bundles[chosen]))
    shapes = list(dict.fromkeys(frame["shape"]))
    shape = choice(st.selectbox, "Shape", shapes, "layer-shape")
    st.plotly_chart(figures.breakdown_figure(frame, shape), key="layer-breakdown")
    st.caption("Kernel time per call from torch.profiler (warm L2), split by category; the grey rest of the "
               "as-called latency (CUDA events, L2 flushed) is host work and launch gaps. "
               "`fuseprof columns` gives every column's formula.")
    data_table(frame.drop(columns=["case", "dtype"]), "layer-breakdown")
    variants = set(frame["variant"])
    if {"eager", "fused_cuda"} <= variants:
        st.subheader("Amdahl: what the fused kernels can give the layer")
        st.dataframe(amdahl(str(bundles[chosen])), hide_index=True)
        st.caption("replaced_share: eager kernel time in the chains fused_cuda replaces; amdahl_limit = 1 / (1 − "
                   "replaced_share); memory_bound_limit: were every memory-bound kernel free.")
