"""What removing the synchronisations saves without the profiler: each step with sync idle replayed
(``fuseprof.analysis.paths.whatif``) with the host's time scaled to what it is without the profiler
(``unprofiled.host_scale``), with its synchronising calls waiting and without.

A step's sync idle (``fuseprof.analysis.facts.idle``: from the GPU falling idle while the host sat in a sync until the
host's next launch call) is the host finishing the call and doing the work after it. Removing the sync saves that
only where the host could otherwise have run ahead of the GPU: in a loop the host bounds anyway, the same work then
leaves launch gaps instead, and removing the syncs saves nothing. The replay says which, call by call: a sync that
no longer waits (no time of its own, the host's work around it kept) lets the host launch earlier exactly where the
GPU still had work queued. So the sync idle without the profiler is that saving (at most the traced sync idle), and
the rest of the traced sync idle is the host's own work: launch idle (host-bound), as the truth files' rule reads
it ("sync: what removing the syncs saves; host-bound: the rest").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.idle import verdict_of, verdict_terms
from fuseprof.analysis.facts.unprofiled import host_scale
from fuseprof.analysis.paths.critical_path import StepGraph
from fuseprof.analysis.paths.plan import Plan
from fuseprof.analysis.paths.whatif import step_times

WINDOW = {"(window)": "all"}  # the step graphs' name of a window without steps, and the idle table's


def no_sync_plan(graph: StepGraph, scale: float = 1.0) -> Plan:
    """Every synchronising call of the step (one that waited for GPU work: ``sync_on``) taking no time, so the host
    goes on at once; the host's other time × ``scale``."""
    return Plan({v: 0 for v, on in enumerate(graph.sync_on) if on >= 0}, host_scale=scale)


def sync_savings(graphs: Sequence[StepGraph], scale: float) -> dict[str, int]:
    """Per step (the idle table's name) that has a synchronising call: the step time removing its syncs saves,
    both replays with the host's time × ``scale``. Every step is replayed, those without a sync unchanged in both
    rows (each step's replay is its own): the arrays of the whole step set, which the fusion table's and the path's
    replays read after, are built once, not once more for the steps with a sync (a rank: 59 of its 90 steps)."""
    held = [k for k, g in enumerate(graphs) if any(on >= 0 for on in g.sync_on)]
    if not held:
        return {}
    scaled = Plan(host_scale=scale)
    without = [scaled] * len(graphs)
    for k in held:
        without[k] = no_sync_plan(graphs[k], scale)
    times = step_times(graphs, [[scaled] * len(graphs), without])
    return {WINDOW.get(graphs[k].step, graphs[k].step): int(times[0][k] - times[1][k]) for k in held}


def with_sync_saving(estimate: pd.DataFrame, idle: pd.DataFrame, graphs: Sequence[StepGraph]) -> pd.DataFrame:
    """``estimate`` (the unprofiled table) with each step's sync idle as traced (``idle_sync_ns``) and without the
    profiler (``idle_sync_unprofiled_ns``: what removing its syncs saves, within 0 and the traced sync idle), the
    rest of it added to the launch idle without the profiler (the host's own work); the step time is unchanged."""
    if estimate.empty:
        return _beside_data(estimate.assign(idle_sync_ns=pd.Series(dtype="int64"),
                                            idle_sync_unprofiled_ns=pd.Series(dtype="int64")))
    steps = estimate["step"].astype(str)
    rows = idle.assign(step=idle["step"].astype(str)).drop_duplicates("step").set_index("step").reindex(steps)
    sync = rows["idle_sync_ns"].fillna(0).to_numpy(np.int64)
    saved = sync_savings(graphs, host_scale(estimate)) if (sync > 0).any() else {}
    # a step the replay cannot read (no call that waited for GPU work) keeps its traced sync idle
    kept = np.clip(steps.map(saved).fillna(pd.Series(sync, index=steps.index)).to_numpy(np.int64), 0, sync)
    out = estimate.assign(idle_sync_ns=sync, idle_sync_unprofiled_ns=kept)
    out["idle_launch_unprofiled_ns"] = estimate["idle_launch_unprofiled_ns"].to_numpy(np.int64) + sync - kept
    out["verdict"] = [verdict_of({**r, "idle_launch_ns": u, "idle_data_ns": d, "idle_sync_ns": k}) for r, u, d, k in zip(
        verdict_terms(rows), out["idle_launch_unprofiled_ns"], out["idle_data_unprofiled_ns"], kept)]
    return _beside_data(out)


def _beside_data(estimate: pd.DataFrame) -> pd.DataFrame:
    """The sync columns placed after the data idle's, as the table reads them: each cause as traced, then without."""
    columns = [c for c in estimate.columns if c not in ("idle_sync_ns", "idle_sync_unprofiled_ns")]
    at = columns.index("idle_data_unprofiled_ns") + 1 if "idle_data_unprofiled_ns" in columns else len(columns)
    return estimate[columns[:at] + ["idle_sync_ns", "idle_sync_unprofiled_ns"] + columns[at:]]
