"""The dashboard's first view, drawn before pandas and the analysis are imported (issue 58: the first chart within
1.2x of a minimal Streamlit app drawing the same figure).

Where ``fuseprof dashboard`` shows one trace file's Model page first (traces only, no ``--ceilings`` or
``--registry``), the page's top — the title, the trace's caption, the verdict and the first window's timeline — is
kept in the trace store beside the trace's own entry, as JSON: its text and the figure's Plotly JSON. A new tab's
first script run (a bare URL) reads it with the store's JSON reader and draws it; only then does ``app.py`` import
pandas and the analysis (1-1.5 s on this machine, which held the first chart back) and draw the rest of the page
in the same run, in order after it. ``fuseprof analyze TRACE`` writes it with the analysis it stores
(``fuseprof.first_view``, which builds it and says where it is kept); the page writes it the first time it draws the
same top from the analysis where it is missing.

It is never stale: it lives in the entry of the trace's content key (the SHA-256 of its bytes), under the store's
version folder (fuseprof's version and the hash of its source), under a name made of the trace's name and the rows
per top table; a trace with an execution trace beside it (which shapes the analysis) gets none.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st
from fuseprof_dashboards.inputs import Inputs, find_inputs

from fuseprof import first_view as view
from fuseprof.commands.dashboard import REGISTRY_ENV
from fuseprof.errors import FuseprofError
from fuseprof.parse.execution_trace import execution_trace_beside
from fuseprof.parse.hashing import content_key
from fuseprof.parse.store import TraceStore, default_store

CEILINGS_ENV = "FUSEPROF_CEILINGS"  # as dashboards/model_page.py reads it (that module imports pandas)
TITLE = "fuseprof — Model"
CHART_KEY = "model-kernel-timeline"
# The process's first run pauses this long after the chart before it imports pandas and the analysis (1-1.5 s
# holding the interpreter): meanwhile the server sends the chart and Plotly's code (4.7 MB, gzipped as it goes out),
# which those imports held back. scripts/bench_dashboard_first_chart.py, 5 runs each at load 2.6-4: cold, the
# dashboard's first chart 1.22x the floor's with no pause, 0.95x with 0.5 s, 1.07x with 1 s, 1.00x with 1.5 s.
# The rest of that first page comes up to this much later; a new tab on the running server (pandas loaded) never waits
FIRST_RUN_PAUSE_S = 0.5


@dataclass(frozen=True)
class Slot:
    """Where the first view of an input is kept: the store and the trace's content key; ``name``: the trace the view
    is of (the Model page's first; the store entry's part is ``fuseprof.first_view.part`` of it)."""

    store: TraceStore
    key: str
    name: str


@dataclass
class Drawn:
    """What this script run drew of the view: the Model page's top down to the first chart; ``picker``: the
    container above the chart that the window's picker goes in (None where the trace has one window)."""

    slot: Slot
    picker: Any


def slot(inputs: Inputs, store: TraceStore | None = None) -> Slot | None:
    """Where the first view of ``inputs`` is kept, or None where the dashboard opens with none: bundles (the capture
    pages and a bundle's own rows), ``--ceilings`` or ``--registry`` (files whose content shapes the analysis), a
    trace with an execution trace beside it, no store."""
    store = store or default_store()
    if (inputs.bundles or not inputs.traces or store.root is None or os.environ.get(CEILINGS_ENV)
            or os.environ.get(REGISTRY_ENV)):
        return None
    name, trace = next(iter(inputs.traces.items()))
    if not trace.is_file() or execution_trace_beside(trace) is not None:
        return None
    try:
        key = content_key(trace)
    except OSError:
        return None
    return Slot(store, key, name)


def read(where: Slot) -> dict[str, Any] | None:
    """The view kept at ``where``, or None (absent, or not a view of this name: then not used)."""
    return view.read(where.store, where.key, where.name)


def save(where: Slot, kept_view: dict[str, Any]) -> bool:
    """Keep ``kept_view`` at ``where`` (once: a view already there is the same one); whether it is there."""
    return view.save(where.store, where.key, where.name, kept_view)


def kept(path: Path) -> bool:
    """Whether the store keeps the first view of ``path`` (what ``fuseprof dashboard PATH`` was given)."""
    try:
        where = slot(find_inputs(path))
    except FuseprofError:
        return False
    return where is not None and read(where) is not None


def draw(path: Path) -> Drawn | None:
    """The first view of ``path``'s Model page, drawn when this run is a new tab's (no query parameters) and one is
    kept; what was drawn, or None (nothing drawn: the page draws itself)."""
    if st.query_params:  # a shared link or a rerun: the URL may choose another page, trace, window or rows
        return None
    try:
        where = slot(find_inputs(path))
    except FuseprofError:
        return None
    found = read(where) if where is not None else None
    if where is None or found is None:
        return None
    st.set_page_config(page_title="fuseprof", layout="wide")
    st.title(TITLE)
    st.caption(found["caption"])
    if found["verdict"] is not None:
        st.markdown(found["verdict"])
    picker = st.container() if found["picker"] else None
    st.plotly_chart(json.loads(found["figure"]), key=CHART_KEY)
    if "pandas" not in sys.modules:  # this process's first page: its heavy imports are next
        time.sleep(FIRST_RUN_PAUSE_S)
    return Drawn(where, picker)
