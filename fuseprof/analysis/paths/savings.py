"""One saving per opportunity: the step time it removes, estimated without the profiler. Every view reads it here.

A fusion row's ``step_saving_ns`` is the steps' period in their loop with its chains fused (``whatif``, through
``path.fusion_step_savings`` and ``loop_period``) less their period unchanged, both with the host's time scaled to
what it is without the profiler (``unprofiled.host_scale``): on a GPU-bound step it is near the GPU saving
(``saving_ns``: kernel time only, shown beside it) until the host's own time takes over, on a host-bound one it is
the host's launches and dispatch the fusion removes. Where the
steps cannot be replayed (no step graph) the GPU saving stands in. The verdict's "worth doing", the fusion table,
the audit, the report and the dashboard all quote this number (``saving``), the GPU saving beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.unprofiled import BETWEEN, host_scale
from fuseprof.analysis.paths.critical_path import StepGraph
from fuseprof.analysis.paths.path import drop_cost, fusion_step_savings
from fuseprof.model.registry import Registry
from fuseprof.parse.trace_events import TraceTables


def step_savings(graphs: Sequence[StepGraph], fusion: pd.DataFrame, estimate: pd.DataFrame, tables: TraceTables,
                 registry: Registry) -> pd.Series:
    """Per fusion row, the step time it removes without the profiler (``estimate``: the unprofiled table), in the
    steps' loop (``path.loop_savings``), each dropped call removing its own time (``path.drop_cost``: the profiler's
    cost read from ``tables`` only where the host is scaled)."""
    scale = host_scale(estimate)
    return fusion_step_savings(graphs, fusion, scale, drop_cost(tables, registry, scale) if len(fusion) else None)


def saving(fusion: pd.DataFrame) -> pd.Series:
    """The one saving of each fusion row: its step saving, the GPU saving where no step could be replayed."""
    if fusion.empty:
        return pd.Series(dtype="float64")
    step = fusion["step_saving_ns"].astype("Float64") if "step_saving_ns" in fusion else pd.Series(
        pd.NA, index=fusion.index, dtype="Float64")
    return step.fillna(fusion["saving_ns"].astype("Float64")).astype("float64")


def held_by(fusion: pd.DataFrame, entries: Sequence[set[object]]) -> list[tuple[float, float]]:
    """Per entry (its labels: GPU events, a catalogue fusion's instances), the saving and GPU saving of the
    opportunity rows that hold any of them, summed; NaN where no row holds one. Where the other entries' labels hold
    members of the same row, the row's saving is split by how many of its members each holds: the Q/K/V and the
    gate/up GEMMs in one "same input" row share its one saving instead of each claiming all of it; an entry alone on
    its rows quotes their number. Every entry at once: a row's members held by each entry are counted once (the
    split's whole is the same sum for every entry), and the table's savings read once, not per entry."""
    out = [(float("nan"), float("nan"))] * len(entries)
    if fusion.empty or not any(entries):
        return out
    rows = [set(members) for members in fusion["members"]]
    held = np.array([[len(labels.intersection(members)) for members in rows] for labels in entries], np.int64)
    total = held.sum(axis=0)
    one, gpu = saving(fusion).to_numpy(np.float64), fusion["saving_ns"].astype("float64").to_numpy()
    for k, mine in enumerate(held):
        # by position: the table's index is unique (its rows' order, or a subset's)
        found = np.flatnonzero(mine > 0)
        if len(found):
            shares = mine[found] / total[found]
            out[k] = (_sum(one[found] * shares), _sum(gpu[found] * shares))
    return out


def _sum(values: np.ndarray) -> float:
    """``Series.sum(min_count=1)`` on an array, as pandas sums it (the missing values as 0, one NumPy sum; NaN
    where none is present), without a Series and its look-ups per call (the audit asks per catalogue entry)."""
    present = ~np.isnan(values)
    return float(np.where(present, values, 0.0).sum()) if present.any() else float("nan")


def of_class(fusion: pd.DataFrame, cls: str) -> tuple[float, float]:
    """The saving and GPU saving of a class's rows (the optimizer step: its parameters' kernels)."""
    rows = fusion[fusion["class"] == cls] if "class" in fusion else fusion.iloc[:0]
    if rows.empty:
        return float("nan"), float("nan")
    return float(saving(rows).sum(min_count=1)), float(rows["saving_ns"].astype("float64").sum(min_count=1))


def scaled_graph_part(idle: pd.DataFrame, estimate: pd.DataFrame) -> tuple[float, float]:
    """The launch idle without the profiler, split: before eager launches (what CUDA graphs would close, with the
    other idle after those launches beyond a graph node's latency, ``idle_graph_closes_ns``) and before graph launches
    (the host's own work between replays), each step's graph part scaled as its launch idle. The eager part is the
    steps' own: the idle between steps (after a step's last kernel, before the next step's start: its tail and the
    profiler's own ``step()``) is in no step's estimate without the profiler, which the saving is a part of
    (h100o/infer_compiled: 643 µs between 3 steps made the saving 1.09x the estimated step). One-time start-up in
    the steps' launch idle is no graph's to close (``idle_startup_ns``)."""
    if idle.empty:
        return 0.0, 0.0
    by_step = estimate.set_index(estimate["step"].astype(str))["idle_launch_unprofiled_ns"] if len(estimate) else \
        pd.Series(dtype="int64")
    steps = idle["step"].astype(str)
    launch = idle["idle_launch_ns"].to_numpy(np.float64)
    after = steps.map(by_step).fillna(idle["idle_launch_ns"]).to_numpy(np.float64)  # between steps: unchanged
    ratio = np.divide(after, launch, out=np.ones_like(after), where=launch > 0)
    graphed = idle["idle_launch_graph_ns"].to_numpy(np.float64) * ratio
    closes = idle["idle_graph_closes_ns"].to_numpy(np.float64) if "idle_graph_closes_ns" in idle else 0.0
    own = (steps != BETWEEN).to_numpy()
    eager = after - graphed + closes - idle["idle_startup_ns"].to_numpy(np.float64)
    return max(float((eager * own).sum()), 0.0), float(graphed.sum())
