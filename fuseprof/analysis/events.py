"""The linked GPU events of a trace (``fuseprof.parse.trace_link``) with their op-registry family:
category, fusion role and family name (``fuseprof.model.op_registry``)."""

from __future__ import annotations

import pandas as pd

from fuseprof.model.op_registry import OpFamily, classify
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import link_gpu_events


def categorized_events(tables: TraceTables, registry: list[OpFamily] | None = None) -> pd.DataFrame:
    """Each GPU event with ``category``, ``role`` and ``family``; a kernel the registry calls
    communication (an RCCL or custom all-reduce kernel) is counted as communication on the timeline."""
    events = link_gpu_events(tables)
    events[["category", "role", "family"]] = classify(events["kind"], events["op"], events["name"], registry)
    comm = (events["category"] == "communication") & (events["kind"] == "kernel")
    events.loc[comm, "kind"] = "communication"
    return events
