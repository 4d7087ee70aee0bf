"""The linked GPU events of a trace (``fuseprof.parse.trace_link``) with their op-registry family:
category, fusion role and family name (``fuseprof.model.registry``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.graphs import attribute_replays
from fuseprof.analysis.facts.replay_twin import align_replays, eager_steps
from fuseprof.model.registry import FALLBACK, Registry, classify
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import link_gpu_events

# kernel names that say what they compute whatever op launched them: a replayed kernel named so whose captured
# op computes something else was given the op of another graph's node
_UNMISTAKABLE = ("GEMM", "attention")
TWIN_CHECK = "eager kernel alignment"  # how replays were matched where eager twins, not a capture, attribute them


def _capture_disagrees(registry: Registry, events: pd.DataFrame) -> pd.Series:
    """Per graph-replayed kernel given an op through a capture: whether its name's category (GEMM, attention)
    differs from what its op computes (``_op_computes``: a GEMM kernel given ``aten::pow`` or a view). The capture of another graph with as many nodes
    pairs by count and order alone on CUDA (its capture names no kernels); this is what gives it away."""
    replayed = events["graph_replay"].notna() & events["op"].notna() & (events["kind"] == "kernel")
    part = events[replayed]
    by_name = classify(registry, part["kind"], pd.Series(pd.NA, index=part.index, dtype="string"), part["name"])
    own = {op: _op_computes(registry, op) for op in part["op"].unique()}
    ops_say = part["op"].map(own)
    disagrees = by_name["category"].isin(_UNMISTAKABLE) & ops_say.notna() & (ops_say != by_name["category"])
    return disagrees.reindex(events.index, fill_value=False).astype(bool)


def _op_computes(registry: Registry, op: str) -> str | None:
    """What the registry says an op computes, by its name alone: its family's category; 'view' for a view (a
    view launches no kernel); None when it knows nothing of the op."""
    if registry.role(op).view:
        return "view"
    family = registry.match("kernel", op, "")
    return family.category if family.op else None


def categorized_events(tables: TraceTables, registry: Registry, capture_windows: list[pd.DataFrame] | None = None,
                       twins: tuple[TraceTables, ...] = ()) -> tuple[pd.DataFrame, str | None]:
    """Each GPU event with ``category``, ``role`` and ``family`` (after graph-replayed kernels take the
    ops of their capture, when ``capture_windows`` are given, else of the eager kernels they align to in the
    ``twins`` or in the trace's own eager steps), and how replays were matched. A kernel
    the registry calls communication (an RCCL or custom all-reduce kernel) is communication on the
    timeline."""
    events, checked_by = attribute_replays(link_gpu_events(tables), capture_windows or [])
    events = attributed_without_capture(events, twins)
    events[["category", "role", "family"]] = classify(registry, events["kind"], events["op"], events["name"])
    by_family = (events["attributed_by"] == "none") & (events["family"] != FALLBACK.family)
    events.loc[by_family, "attributed_by"] = "family"
    if capture_windows or twins:
        events["capture_disagrees"] = _capture_disagrees(registry, events)
    comm = (events["category"] == "communication") & (events["kind"] == "kernel")
    events.loc[comm, "kind"] = "communication"
    return events, checked_by if capture_windows else TWIN_CHECK if twins else None


def attributed_without_capture(events: pd.DataFrame, twins: tuple[TraceTables, ...]) -> pd.DataFrame:
    """``events`` with ``attributed_by`` (capture / eager twin / warm-up / none; graph-replayed kernels only, NA
    for the rest) and ``attribution_confidence``: the replayed kernels no capture attributed aligned to the eager
    steps of the ``twins``, then to the trace's own eager (warm-up) steps (``fuseprof.analysis.facts.replay_twin``)."""
    replayed = events["graph_replay"].notna()
    by = np.where(events["graph_attributed"], "capture", "none")
    events["attributed_by"] = pd.Series(by, index=events.index, dtype="string").where(replayed)
    events["attribution_confidence"] = np.where(events["graph_attributed"], 1.0, np.nan)
    if not replayed.any() or events.loc[replayed, "graph_attributed"].all():
        return events
    twin_steps = [s for twin in twins for s in eager_steps(link_gpu_events(twin))]
    events = align_replays(events, twin_steps, "eager twin")
    return align_replays(events, eager_steps(events), "warm-up")
