"""The linked GPU events of a trace (``fuseprof.parse.trace_link``) with their op-registry family:
category, fusion role and family name (``fuseprof.model.registry``)."""

from __future__ import annotations

import pandas as pd

from fuseprof.analysis.graphs import attribute_replays
from fuseprof.model.registry import Registry, classify
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import link_gpu_events


def categorized_events(tables: TraceTables, registry: Registry,
                       capture_windows: list[pd.DataFrame] | None = None) -> tuple[pd.DataFrame, str | None]:
    """Each GPU event with ``category``, ``role`` and ``family`` (after graph-replayed kernels take the
    ops of their capture, when ``capture_windows`` are given), and how replays were matched. A kernel
    the registry calls communication (an RCCL or custom all-reduce kernel) is communication on the
    timeline."""
    events, checked_by = attribute_replays(link_gpu_events(tables), capture_windows or [])
    events[["category", "role", "family"]] = classify(registry, events["kind"], events["op"], events["name"])
    comm = (events["category"] == "communication") & (events["kind"] == "kernel")
    events.loc[comm, "kind"] = "communication"
    return events, checked_by if capture_windows else None
