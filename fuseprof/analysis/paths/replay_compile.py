"""What torch.compile would save on work that is already CUDA-graph replays: the replayed eager kernels' runs fused.

A graph replay takes the host out of the step (no launch gaps are left to close), but its nodes are still the eager
kernels it captured: on a decode step of batch 1, dozens of tiny elementwise, copy and reduction kernels a few µs
each, plus a node's lag between each. torch.compile before the capture fuses each run of them between two GEMM or
attention kernels into one kernel (issue 59: the h100 decode and forward graph replays, 0.14–0.16 ms of a 0.26–0.29
ms step measured). Per step graph (``fuseprof.analysis.paths.critical_path``):

    run             consecutive GPU kernels replayed from a graph (``graph_replay``) on one stream, each one of
                    ATen's own kernels (``registry_data.ATEN_KERNEL``: what torch.compile replaces; a library's
                    kernel — SGLang's or vLLM's RoPE and KV-cache write — it cannot fuse) that the op registry calls
                    fusible (``role`` not ``anchor``: no GEMM, convolution, attention or communication) of a
                    memory-bound category (``MEMORY_BOUND``); any other GPU event ends the run, and a replay that
                    holds an Inductor kernel is compiled already: none of its kernels is in a run
    fused run       one kernel as long as its longest member (replayed kernels this small are latency-bound: a
                    fused one does the work of its largest member, in one launch), in place of the run's first
    the others      take no time, and no node lag before them (one node instead of n: the graph's lag between
                    nodes, as the trace shows it, is paid once)

The step saving is the steps replayed with every run fused against the steps replayed unchanged
(``path.plan_savings``), each step's host time as without the profiler: a step the estimate finds GPU-bound
without the profiler (``unprofiled``'s ``verdict``) on the GPU's own path alone (host scale 0, as
``whatif.calibrated_scale`` gives where the GPU's path is longer than the step: graph replays queue ahead of the GPU,
so the host's lead before a step's first node is not in the step's period — on the h100 forward replays the traced
step graph spans 410–490 µs with its ``cudaGraphLaunch`` 216 µs long under CUPTI, while the step measured without
the profiler is 286 µs, 99.5% GPU busy), any other step with the host scaled by ``unprofiled.host_scale``. The GPU
saving is the kernel time removed (Σ members − the longest, per run). Kernels the fusion table already holds (a capture gave them
ops) are left to it, so no kernel is counted twice.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import pandas as pd

from fuseprof.analysis.paths.critical_path import StepGraph
from fuseprof.analysis.paths.path import plan_savings
from fuseprof.analysis.paths.plan import Plan
from fuseprof.model.inductor_names import inductor_kernel
from fuseprof.model.registry_data import ATEN_KERNEL

# the registry's categories of kernels that move memory and compute little: what Inductor fuses into one kernel
MEMORY_BOUND = frozenset({"elementwise", "copy/cast", "reduction"})


@dataclass(frozen=True)
class ReplayCompile:
    """The runs found over the steps, the kernels in them, and the savings over every step (ns)."""

    runs: int
    kernels: int
    step_saving_ns: float
    gpu_saving_ns: float


def fusible(events: pd.DataFrame, held: Collection[object] = ()) -> pd.Series:
    """Per GPU event: a replayed kernel a run may hold (the module docstring); ``held``: events a fusion row holds."""
    if "graph_replay" not in events or events.empty or not events["graph_replay"].notna().any():
        return pd.Series(False, index=events.index)
    names = events["name"].astype(str)
    made = names.isin({n for n in names.unique() if inductor_kernel(n) is not None})  # each name read once
    compiled = events["graph_replay"].isin(events.loc[made, "graph_replay"].dropna().unique())
    return (events["graph_replay"].notna() & (events["kind"] == "kernel") & (events["role"] != "anchor")
            & events["category"].isin(MEMORY_BOUND) & names.str.contains(ATEN_KERNEL, regex=True)
            & ~compiled & ~events.index.isin(list(held)))


def replayed_runs(graph: StepGraph, events: pd.DataFrame, fits: pd.Series) -> list[list[int]]:
    """The step graph's runs (its GPU items, in start order), two kernels or more each; ``fits``: ``fusible``."""
    lanes: dict[str, list[int]] = {}
    for v, e in enumerate(graph.event):
        if e is not None and graph.kind[v] == "gpu":
            lanes.setdefault(graph.lane[v], []).append(v)
    runs: list[list[int]] = []
    for items in lanes.values():
        run: list[int] = []
        replay = None
        for v in sorted(items, key=lambda v: graph.t0[v]):
            e = graph.event[v]
            ok = bool(fits.get(e, False))
            this = events.at[e, "graph_replay"] if ok else None
            if not ok or (run and this != replay):
                if len(run) > 1:
                    runs.append(run)
                run = []
            if ok:
                run.append(v)
                replay = this
        if len(run) > 1:
            runs.append(run)
    return runs


def compile_plan(graph: StepGraph, runs: Sequence[Sequence[int]]) -> Plan:
    """Each run as one kernel as long as its longest member; the others no time and no node lag before them."""
    plan = Plan()
    for run in runs:
        first, *rest = run
        plan.duration[first] = max(graph.t1[v] - graph.t0[v] for v in run)
        for v in rest:
            plan.duration[v] = 0
            for i, d in enumerate(graph.deps[v]):
                if d.kind == "stream":
                    plan.lag[(v, i)] = 0
    return plan


def replay_compile(graphs: Sequence[StepGraph], events: pd.DataFrame, host_scale: float = 1.0,
                   held: Collection[object] = (), gpu_bound: Collection[str] = ()) -> ReplayCompile:
    """The runs of every step fused, replayed (the module docstring); ``held``: GPU events a fusion row holds;
    ``gpu_bound``: the steps (by name) GPU-bound without the profiler, replayed on the GPU's path alone."""
    fits = fusible(events, held)
    if not fits.any():
        return ReplayCompile(0, 0, 0.0, 0.0)
    runs = [replayed_runs(g, events, fits) for g in graphs]
    found = [r for step in runs for r in step]
    if not found:
        return ReplayCompile(0, 0, 0.0, 0.0)
    gpu = sum(sum(g.t1[v] - g.t0[v] for v in r) - max(g.t1[v] - g.t0[v] for v in r)
              for g, step in zip(graphs, runs) for r in step)
    step = sum(plan_savings([g], [[compile_plan(g, r)]], 0.0 if g.step in gpu_bound else host_scale)[0]
               for g, r in zip(graphs, runs) if r)
    return ReplayCompile(len(found), sum(len(r) for r in found), float(step), float(gpu))
