"""A step's time in the loop that repeats it, without the profiler: what a fusion's saving is measured in
(``path.loop_savings``: the fusion table's step saving, and ``whatif``'s without the profiler).

A step replayed alone (``whatif.step_times``) begins with the host's lead before its first kernel. In a loop whose
host never waits for the GPU, that lead runs while the GPU still works on the step before, and the loop's period is
the longer of the host's own time per step (``H``: the step replayed with every GPU item taking no time) and the
GPU's own path (``G``: replayed with no host time):

    period = max(H, G)                  where the step makes no synchronising call
    period = the step replayed alone    where it does: the host waits for the GPU, and the next step's host lead
                                        runs with the GPU idle

both with the host's time as it is without the profiler (``unprofiled.host_scale``). The replay of one step alone
counted that lead on h100/prefill_eager (4-layer Llama prefill, GPU-bound): the eager step 4.80 ms for 4.35
measured, and its SDPA fusion 1.53 ms a step for 0.92 measured; by the loop's period the step is 4.36 and the
saving 1.18 (max(H, G) after the fusion: the fused step is host-bound, its host 3.2 ms), 1.09 with each dropped
call's own time (docs/profiler-cost.md).

A synchronising call that only the window's last step makes, as that step's last call, is the capture's own end
(torch.profiler's stop, a harness's synchronize before the trace is written), not the loop's: that step is
replayed as the others are — a window of one step too, whose one sync at its end cannot be told from the
capture's (taken as the capture's: on a GPU-bound step a fusion then saves no more than it takes off the GPU's path).

The GPU's own path leaves out the host's time a plan keeps for itself too (a call a fusion drops keeps the part of
its time that was its own without the profiler, ``path.without_profiler_drops``): every call at no time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fuseprof.analysis.paths.critical_path import StepGraph
from fuseprof.analysis.paths.plan import Plan
from fuseprof.analysis.paths.whatif import step_times

JOINED_CELLS = 2**17  # plan rows × items up to which the period's kinds of row are replayed in one call (~1 MB a matrix)


def waits_for_gpu(graphs: Sequence[StepGraph]) -> list[bool]:
    """Per step, whether its host waits for the GPU: a synchronising call, other than the capture's closing one
    (the module docstring)."""
    syncs = [[v for v, on in enumerate(g.sync_on) if on >= 0] for g in graphs]
    waits = [bool(s) for s in syncs]
    if waits and waits[-1] and not any(waits[:-1]):
        last = graphs[-1]
        calls = [v for v, kind in enumerate(last.kind) if kind == "call"]
        latest = max(calls, key=lambda v: last.t0[v])
        if syncs[-1] == [latest]:
            waits[-1] = False
    return waits


def loop_periods(graphs: Sequence[StepGraph], plans: Sequence[Sequence[Plan]], host_scale: float = 1.0
                 ) -> np.ndarray:
    """Per row of ``plans`` (one plan per step) and step, the step's period in its loop (ns; the module
    docstring), the host's time scaled by ``host_scale``: every row replayed at once."""
    if not graphs or not plans:
        return np.zeros((len(plans), len(graphs)), np.int64)
    waits = np.array(waits_for_gpu(graphs))
    # replayed alone only where some step waits (each row once more: a large window's arrays)
    kinds = ["host", "gpu", "alone"] if waits.any() else ["host", "gpu"]
    if len(kinds) * len(plans) * sum(len(g.kind) for g in graphs) <= JOINED_CELLS:
        # a few small matrices: every kind's rows in one replay call, its passes over the steps once, not per kind
        times = np.split(step_times(graphs, [row for kind in kinds for row in _rows(kind, graphs, plans, host_scale)]),
                         len(kinds))
    else:  # one replay call per kind of row: a call's arrays hold all its rows at once (a large window's peak memory)
        times = [step_times(graphs, _rows(kind, graphs, plans, host_scale)) for kind in kinds]
    period = np.maximum(times[0], times[1])
    return np.where(waits[None, :], times[2], period) if len(times) > 2 else period


def _rows(kind: str, graphs: Sequence[StepGraph], plans: Sequence[Sequence[Plan]], host_scale: float
          ) -> list[list[Plan]]:
    """Each row's plans replayed for one of the period's terms: the host alone (every GPU item taking no time), the
    GPU alone (no host time), or the step as it is; the host's time scaled by ``host_scale``."""
    if kind == "host":
        host_only = Plan(host_scale=host_scale, gpu_scale=0.0)
        return [[p.merge(host_only) for p in row] for row in plans]
    if kind == "gpu":
        gpu_only = Plan(host_scale=0.0)
        return [[_no_host(g, p).merge(gpu_only) for g, p in zip(graphs, row)] for row in plans]
    scaled = Plan(host_scale=host_scale)
    return [[p.merge(scaled) for p in row] for row in plans]


def _no_host(graph: StepGraph, plan: Plan) -> Plan:
    """``plan`` with every call's time it sets at 0 (the host scale of 0 leaves a plan's own durations as set)."""
    if not any(graph.kind[v] == "call" and d for v, d in plan.duration.items()):
        return plan
    return Plan({v: 0 if graph.kind[v] == "call" else d for v, d in plan.duration.items()}, plan.lag,
                plan.host_scale, plan.gpu_scale)
