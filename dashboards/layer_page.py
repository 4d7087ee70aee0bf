"""The Layer page: one capture bundle per variant and shape — latency as called, kernels and launches
per call, where the time goes (GEMM, attention, memory-bound, host gaps), the memory roofline and,
where a fused variant sits beside eager, Amdahl's limit. Calls the breakdown model and the figure
builders only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from fuseprof import figures
from fuseprof.bundle.files import find_bundles, read_manifest
from fuseprof.tables.breakdown import fusion_amdahl, variant_breakdown


@st.cache_data(show_spinner="Reading the capture…", max_entries=8)
def breakdown(bundle: str) -> pd.DataFrame:
    return variant_breakdown(Path(bundle))


@st.cache_data(max_entries=8)
def amdahl(bundle: str) -> pd.DataFrame:
    return fusion_amdahl(Path(bundle))


def capture_bundles(traces: Path) -> dict[str, Path]:
    """Bundles written by `fuseprof profile` (their calls were timed and traced), decoder layers first."""
    found = {b.name: b for b in find_bundles(traces) if read_manifest(b).get("kind") == "capture"}
    return dict(sorted(found.items(), key=lambda item: (not item[0].startswith("decoder_layer"), item[0])))


def render(traces: Path, data_table) -> None:  # type: ignore[no-untyped-def]
    bundles = capture_bundles(traces)
    if not bundles:
        st.info("No capture bundle in this folder; `fuseprof profile CASE --copy-baseline` makes one.")
        return
    chosen = st.selectbox("Capture bundle", list(bundles), key="layer-bundle")
    frame = breakdown(str(bundles[chosen]))
    shapes = list(dict.fromkeys(frame["shape"]))
    shape = st.selectbox("Shape", shapes, key="layer-shape")
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
