"""What-if: a plan applied to each step's dependency graph (``fuseprof.analysis.critical_path``), and the step
replayed to see how long it takes then.

Replaying sets each item's start to the latest of its dependencies' points plus their lags, and its end to its
start plus its duration (a synchronising call: when the work it waited for ends, plus the call's own return
time); unchanged, that gives back every original time to the ns (tested). A plan changes durations and lags:

    fuse a chain        its first kernel takes the fusion table's predicted fused time (``predicted_fused_ns``
                        over its chains); every other kernel of the chain, its launch call, and the host time
                        before that call (the op's dispatch and Python: the lag since the thread's previous
                        call) take none — one op and one launch instead of n
    graph a region      every call launched in the region but the first takes no time and no host time before
                        it (a replay runs no Python); the first is the graph launch; each kernel's launch lag
                        becomes ``GRAPH_NODE_NS`` after the one before it on its stream, as a graph's nodes run
    zero an item        (the slack of what is on the path) its duration, or its host lag, to 0

The step's time after the plan is the replayed end point minus the step's start. The difference to the span is
the *step saving*; the fusion table's *GPU saving* is kernel time only, and where the host or another stream
sets the step the two differ — the path says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from fuseprof.analysis.critical_path import BEFORE, StepGraph

# A CUDA graph replay's time per node on the H200: 0.5-0.9 µs (../shared/DESIGN.md, measured); the upper end.
GRAPH_NODE_NS = 900


@dataclass
class Plan:
    """Changes to a step graph: item → new duration, (item, dependency position) → new lag."""

    duration: dict[int, int] = field(default_factory=dict)
    lag: dict[tuple[int, int], int] = field(default_factory=dict)

    def merge(self, other: Plan) -> Plan:
        return Plan({**self.duration, **other.duration}, {**self.lag, **other.lag})


def replay(graph: StepGraph, plan: Plan = Plan()) -> int:
    """The step's time (ns) with ``plan`` applied: the replayed end point minus the step's start."""
    n = len(graph.kind)
    dur = [graph.t1[v] - graph.t0[v] for v in range(n)]
    for v, d in plan.duration.items():
        dur[v] = d
    start, end = [0] * n, [0] * n
    for v, phase in graph.order:
        if phase == 0:
            deps = graph.deps[v]
            start[v] = max((graph.avail(d, start, end, dur) + plan.lag.get((v, i), d.lag) for i, d in enumerate(deps)),
                           default=graph.t0[v])
            continue
        end[v] = start[v] + dur[v]
        g = graph.sync_on[v]
        if g >= 0:  # a sync returns after the work it waited for, plus its own return time
            tail = graph.t1[v] - graph.t1[g]
            end[v] = max(start[v] + min(tail, dur[v]), end[g] + tail) if v not in plan.duration else end[v]
    return end[n - 1] - graph.start_ns


def _items_of(graph: StepGraph) -> dict[object, int]:
    """Which item each GPU event (by its index in the events) is."""
    return {e: v for v, e in enumerate(graph.event) if e is not None}


def _launch_call(graph: StepGraph, v: int) -> int | None:
    return next((d.src for d in graph.deps[v] if d.kind == "launch" and d.src != BEFORE), None)


def _drop_call(graph: StepGraph, call: int, plan: Plan) -> None:
    """A launch call that no longer happens: no time, and no host time before it."""
    plan.duration[call] = 0
    for i, d in enumerate(graph.deps[call]):
        if d.kind == "host":
            plan.lag[(call, i)] = 0


def fuse_plan(graph: StepGraph, chains: Iterable[tuple[Sequence[object], float]]) -> Plan:
    """Each chain (its GPU events' indices in launch order, its predicted fused time) as one kernel."""
    items, plan = _items_of(graph), Plan()
    for members, fused_ns in chains:
        mine = [items[e] for e in members if e in items]
        if not mine:
            continue
        first, *rest = sorted(mine, key=lambda v: graph.t0[v])
        plan.duration[first] = int(round(fused_ns))
        for v in rest:
            plan.duration[v] = 0
            call = _launch_call(graph, v)
            first_call = _launch_call(graph, first)
            if call is not None and call != first_call:
                _drop_call(graph, call, plan)
    return plan


def graph_plan(graph: StepGraph, window: tuple[int, int] | None = None) -> Plan:
    """The host calls in ``window`` (default: the whole step) replaced by one graph launch, the first call that
    launched work: every other call there takes no time and no host time before it (synchronising calls still
    wait for the GPU), and the kernels they launched run as a graph's nodes, ``GRAPH_NODE_NS`` after the launch
    and after the previous node on their stream."""
    lo, hi = window or (graph.start_ns, graph.end_ns)
    inside = [v for v, k in enumerate(graph.kind) if k == "call" and lo <= graph.t0[v] < hi]
    launches = sorted({c for v, k in enumerate(graph.kind) if k == "gpu" for c in [_launch_call(graph, v)]
                       if c is not None and lo <= graph.t0[c] < hi}, key=lambda c: graph.t0[c])
    plan = Plan()
    if not launches:
        return plan
    for call in inside:
        if call != launches[0]:
            _drop_call(graph, call, plan)
            if graph.sync_on[call] >= 0:
                plan.duration.pop(call)  # a sync keeps waiting; only its host time before it goes
    chosen = set(launches)
    for v, deps in enumerate(graph.deps):
        if graph.kind[v] != "gpu" or _launch_call(graph, v) not in chosen:
            continue
        for i, d in enumerate(deps):
            if d.kind in ("launch", "stream"):
                plan.lag[(v, i)] = GRAPH_NODE_NS
    return plan


def zero_plan(graph: StepGraph, segments: pd.DataFrame) -> Plan:
    """The path's ``segments`` taking no time: an item's own time, or a lag's."""
    plan = Plan()
    for row in segments.itertuples():
        if row.item >= 0:
            plan.duration[int(row.item)] = max(0, graph.t1[row.item] - graph.t0[row.item] - int(row.dur_ns))
        elif row.to_item >= 0 and row.dep >= 0:
            dep = graph.deps[int(row.to_item)][int(row.dep)]
            plan.lag[(int(row.to_item), int(row.dep))] = max(0, dep.lag - int(row.dur_ns))
    return plan
