"""What-if: a plan applied to each step's dependency graph (``fuseprof.analysis.paths.critical_path``), and the step
replayed to see how long it takes then.

Replaying sets each item's start to the latest of its dependencies' points plus their lags, and its end to its
start plus its duration (a synchronising call: when the work it waited for ends, plus the call's own return
time); unchanged, that gives back every original time to the ns (tested). A plan changes durations and lags:

    fuse a chain        its first kernel takes the fusion table's predicted fused time (``predicted_fused_ns``
                        over its chains); every other kernel of the chain, its launch call, and the host time
                        before that call (the op's dispatch and Python: the lag since the thread's previous
                        call) take none — one op and one launch instead of n
    graph a region      no call of the region has host time before it (a replay runs no Python); every call
                        but the first launch takes no time; the first is the graph launch; each kernel's launch
                        and stream lags become ``GRAPH_NODE_NS``, as a graph's nodes run
    compile a region    its memory-bound chains fused, and no host time before the calls that remain (compiled
                        code launches kernel after kernel; each launch keeps its own time)
    zero an item        (the slack of what is on the path) its duration, or its host lag, to 0

The step's time after the plan is the replayed end point minus the step's start. The difference to the span is
the *step saving*; the fusion table's *GPU saving* is kernel time only, and where the host or another stream
sets the step the two differ — the path says why.
"""

from __future__ import annotations

import copy
import statistics
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from fuseprof.analysis.facts.graphs import GRAPH_LAUNCH
from fuseprof.analysis.paths.critical_path import BEFORE, Dep, StepGraph, bind, topological_order
from fuseprof.analysis.paths.plan import Plan
from fuseprof.analysis.paths.replay_lanes import Union, batches, replay_union

# A CUDA graph replay's time per node on the H200: 0.5-0.9 µs (../shared/DESIGN.md, measured); the upper end.
GRAPH_NODE_NS = 900


HOST_LAGS = ("host", "wake", "end")  # the lags that are the host's own work (critical_path's dependency kinds)


def replay(graph: StepGraph, plan: Plan = Plan()) -> int:
    """The step's time (ns) with ``plan`` applied: the replayed end point minus the step's start."""
    return _times(graph, plan)[1][-1] - graph.start_ns


def step_times(graphs: Sequence[StepGraph], plans: Sequence[Sequence[Plan]]) -> np.ndarray:
    """``replay`` of many plans over many steps (rows: ``plans``, columns: ``graphs``; ``plans[p][k]`` is row p's
    plan for step k), all at once on arrays (``fuseprof.analysis.paths.replay_lanes``); in sequence where the arrays
    cannot hold a step (its items' own order has a cycle, or its times would pass int64's reach)."""
    out = np.zeros((len(plans), len(graphs)), np.int64)
    if not graphs or not plans:
        return out
    held, union = _union(graphs)
    for k in sorted(set(range(len(graphs))) - set(held)):
        out[:, k] = [replay(graphs[k], row[k]) for row in plans]
    if not held:
        return out
    ends = union.offsets + np.array([len(graphs[k].kind) - 1 for k in held], np.int64)  # each step's end point
    for rows in batches(len(plans), union.size):
        times = replay_union(union, [[plans[p][k] for k in held] for p in rows])
        out[rows.start:rows.stop, held] = times[1][:, ends] if times is not None else \
            [[replay(graphs[k], plans[p][k]) for k in held] for p in rows]
    return out


def replayed(graph: StepGraph, plan: Plan) -> StepGraph:
    """The step graph at its replayed times, its binding dependencies found again (what ``walk`` reads): the
    critical path after the plan."""
    start, end = _times(graph, plan)
    again = copy.copy(graph)
    again.t0, again.t1, again.end_ns, again.replay_inputs = start, end, end[-1], None
    again.deps = [[Dep(d.src, d.kind, d.offset, d.lag) for d in deps] for deps in graph.deps]
    again.binding = [-1] * len(graph.kind)
    bind(again)
    return again


class _Flat:
    """A step graph's sequential replay inputs as plain tuples and its unchanged replay: built once per graph,
    since a table replays each step once per row. Each dependency is (source, point, lag, whether the lag is the host's
    own, fixed time): point -2 is a fixed time (the step's start plus an offset), -1 the source's end, else an
    offset into the source's run."""

    def __init__(self, graph: StepGraph) -> None:
        self.dur = [graph.t1[v] - graph.t0[v] for v in range(len(graph.kind))]
        self.calls = [v for v, kind in enumerate(graph.kind) if kind == "call"]
        self.gpu = [v for v, kind in enumerate(graph.kind) if kind == "gpu"]
        self.deps = [tuple((d.src, -2 if d.src == BEFORE else -1 if d.offset is None else d.offset, d.lag,
                            d.kind in HOST_LAGS, graph.start_ns + (d.offset or 0)) for d in deps)
                     for deps in graph.deps]
        self.order = topological_order(graph)
        self.position = [0] * len(graph.kind)
        for k, (v, phase) in enumerate(self.order):
            if phase == 0:
                self.position[v] = k
        self.base = _run(graph, self, Plan(), list(self.dur), [0] * len(self.dur), [0] * len(self.dur), 0)


@dataclass
class _Inputs:
    """A step graph's replay inputs, each built on first use and kept (in its ``replay_inputs``): the sequential
    replay's tuples, which item each GPU event is (each fusion row's plan asks), and, on the first of several
    steps replayed together, their arrays (``_union``).
    It holds no reference back to its graph: graph → inputs → graph would be a cycle, and every step graph (its
    items, dependencies and inputs) would then outlive its analysis until the collector's next pass, which
    traverses all of it (a rank of 270 steps: 54k objects, a 22 ms pass per rank)."""

    flat: _Flat | None = None
    items: dict[object, int] | None = None
    # the steps from this one on that were replayed together (weak references: strong ones would make the cycle
    # again, through this one), the positions of those the arrays hold, and their arrays
    union: tuple[list[weakref.ref[StepGraph]], list[int], Union] | None = None


def _inputs(graph: StepGraph) -> _Inputs:
    if graph.replay_inputs is None:
        graph.replay_inputs = _Inputs()
    return graph.replay_inputs  # type: ignore[return-value]


def _flat(graph: StepGraph) -> _Flat:
    inputs = _inputs(graph)
    if inputs.flat is None:
        inputs.flat = _Flat(graph)
    return inputs.flat


def _union(graphs: Sequence[StepGraph]) -> tuple[list[int], Union]:
    """The positions of the steps the arrays can hold, and their arrays (``replay_lanes``: all built together),
    once for every replay of the same steps (the fusion table's, the path's, ``calibrated_scale``'s forty)."""
    inputs = _inputs(graphs[0])
    if inputs.union is not None:
        refs, held, union = inputs.union
        if len(refs) == len(graphs) and all(r() is g for r, g in zip(refs, graphs)):
            return held, union
    union = Union.of(graphs, HOST_LAGS)
    held = [k for k, ok in enumerate(union.graph_acyclic()) if ok]
    if len(held) < len(graphs):  # a step whose items' own order has a cycle: the others without it
        union = Union.of([graphs[k] for k in held], HOST_LAGS)
    inputs.union = ([weakref.ref(g) for g in graphs], held, union)
    return held, union


def _times(graph: StepGraph, plan: Plan) -> tuple[list[int], list[int]]:
    """Every item's replayed start and end (the module docstring). With the host's times unscaled, every point
    before the first one the plan changes (in the topological order) keeps its unchanged replay's value, so the
    replay starts there."""
    flat = _flat(graph)
    dur = list(flat.dur)
    if plan.host_scale != 1 or plan.gpu_scale != 1:
        for v in flat.calls:
            dur[v] = round(plan.host_scale * dur[v])
        first, start, end = 0, [0] * len(dur), [0] * len(dur)
    else:
        changed = [flat.position[v] for v in plan.duration] + [flat.position[v] for v, _ in plan.lag]
        if not changed:
            return list(flat.base[0]), list(flat.base[1])
        first, start, end = min(changed), list(flat.base[0]), list(flat.base[1])
    for v, d in plan.duration.items():
        dur[v] = d
    if plan.gpu_scale != 1:
        for v in flat.gpu:
            dur[v] = round(plan.gpu_scale * dur[v])
    return _run(graph, flat, plan, dur, start, end, first)


def _run(graph: StepGraph, flat: _Flat, plan: Plan, dur: list[int], start: list[int], end: list[int], first: int
         ) -> tuple[list[int], list[int]]:
    """The replay from position ``first`` of the order on: a start is the latest of its dependencies' points
    plus their lags; an end is the start plus the duration, or a sync's (the module docstring)."""
    scale, lags, t0, t1, sync_on, deps = plan.host_scale, plan.lag, graph.t0, graph.t1, graph.sync_on, flat.deps
    relagged = {v for v, _ in lags}
    order = flat.order
    for k in range(first, len(order)):
        v, phase = order[k]
        if phase == 0:
            best = None
            for i, (src, point, lag, host, fixed) in enumerate(deps[v]):
                at = fixed if point == -2 else end[src] if point == -1 else start[src] + min(point, dur[src])
                if v in relagged and (v, i) in lags:
                    lag = lags[(v, i)]
                elif scale != 1 and host:
                    lag = round(scale * lag)
                if best is None or at + lag > best:
                    best = at + lag
            start[v] = t0[v] if best is None else best
            continue
        end[v] = start[v] + dur[v]
        g = sync_on[v]
        if g >= 0 and v not in plan.duration:  # a sync returns after the work it waited for, plus its own time
            tail = t1[v] - t1[g]
            end[v] = max(start[v] + min(tail, dur[v]), end[g] + tail)
    return start, end


def calibrated_scale(graphs: Sequence[StepGraph], measured_ns: float) -> float:
    """The factor on the host's time that makes the steps' median replay equal a step time measured apart from
    the profiler (which slows the host: every op it records, more with an execution trace or the Python stack),
    found by bisection in [0, 4]; 0 where the GPU's own path is longer than the measured step."""
    def median(scale: float) -> float:
        return float(statistics.median(step_times(graphs, [[Plan(host_scale=scale)] * len(graphs)])[0].tolist()))

    lo, hi = 0.0, 4.0
    if median(lo) >= measured_ns:
        return 0.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if median(mid) < measured_ns else (lo, mid)
    return (lo + hi) / 2


def _items_of(graph: StepGraph) -> dict[object, int]:
    """Which item each GPU event (by its index in the events) is."""
    inputs = _inputs(graph)
    if inputs.items is None:
        inputs.items = {e: v for v, e in enumerate(graph.event) if e is not None}
    return inputs.items


def _launch_call(graph: StepGraph, v: int) -> int | None:
    return next((d.src for d in graph.deps[v] if d.kind == "launch" and d.src != BEFORE), None)


def _host_before(graph: StepGraph, call: int, plan: Plan, window: tuple[int, int] | None = None) -> None:
    """No host time before ``call`` (the part of its lag inside ``window`` where one is given)."""
    for i, d in enumerate(graph.deps[call]):
        if d.kind == "host":
            since = graph.t0[call] - d.lag  # where the host's work before the call began
            kept = 0 if window is None else max(0, min(window[0], graph.t0[call]) - since)
            plan.lag[(call, i)] = kept


def _drop_call(graph: StepGraph, call: int, plan: Plan, window: tuple[int, int] | None = None) -> None:
    """A call that no longer happens: no time, and no host time before it."""
    plan.duration[call] = 0
    _host_before(graph, call, plan, window)


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


def _window(graph: StepGraph, window: tuple[int, int] | None) -> tuple[tuple[int, int], list[int], list[int]]:
    """The window (default: the whole step), the host calls that started in it, and those that launched work."""
    lo, hi = window or (graph.start_ns, graph.end_ns)
    inside = [v for v, k in enumerate(graph.kind) if k == "call" and lo <= graph.t0[v] < hi]
    launches = sorted({c for v, k in enumerate(graph.kind) if k == "gpu" for c in [_launch_call(graph, v)]
                       if c is not None and lo <= graph.t0[c] < hi}, key=lambda c: graph.t0[c])
    return (lo, hi), inside, launches


def already_graphs(graph: StepGraph, window: tuple[int, int] | None = None) -> bool:
    """Whether every call that launched work in ``window`` (default: the step) is a graph launch (or none did)."""
    return all(GRAPH_LAUNCH.search(graph.name[c]) for c in _window(graph, window)[2])


def already_compiled(graph: StepGraph, compiled: tuple[np.ndarray, np.ndarray],
                     window: tuple[int, int] | None = None) -> bool:
    """Whether every call that launched work in ``window`` (default: the step) started inside compiled code
    (``compiled``: the start and end of each range or op the registry names a compiled region), and one did."""
    starts, ends = compiled
    launches = _window(graph, window)[2]
    return bool(launches) and all(bool(((starts <= graph.t0[c]) & (graph.t0[c] < ends)).any()) for c in launches)


def graph_plan(graph: StepGraph, window: tuple[int, int] | None = None) -> Plan:
    """The host calls in ``window`` (default: the whole step) replaced by one graph launch, the first call that
    launched work: no host time before any call of the window (a replay runs no Python), every other call takes
    no time (synchronising calls still wait for the GPU), and the kernels they launched run as a graph's nodes,
    ``GRAPH_NODE_NS`` after the launch and after the previous node on their stream. Work already replayed from a
    graph stays as it ran (its nodes' lags are a graph's already, and may be shorter: programmatic dependent launch),
    and a window whose every launch is a graph launch is left as it is: graphs are in place, the plan changes
    nothing (``already_graphs``)."""
    span, inside, launches = _window(graph, window)
    plan = Plan()
    if already_graphs(graph, window):
        return plan
    for call in inside:
        if call == launches[0]:
            _host_before(graph, call, plan, span)
            continue
        _drop_call(graph, call, plan, span)
        if graph.sync_on[call] >= 0:
            plan.duration.pop(call)  # a sync keeps waiting; only its host time before it goes
    chosen = {c for c in launches if not GRAPH_LAUNCH.search(graph.name[c])}
    for v, deps in enumerate(graph.deps):
        if graph.kind[v] != "gpu" or _launch_call(graph, v) not in chosen:
            continue
        for i, d in enumerate(deps):
            if d.kind in ("launch", "stream"):
                plan.lag[(v, i)] = GRAPH_NODE_NS
    return plan


def compile_plan(graph: StepGraph, chains: Iterable[tuple[Sequence[object], float]],
                 window: tuple[int, int] | None = None,
                 compiled: tuple[np.ndarray, np.ndarray] | None = None) -> Plan:
    """``window`` (default: the whole step) compiled: ``chains`` (the memory-bound chains in it) fused, and no
    host time before the calls that remain there — compiled code calls each kernel's launcher straight after the
    last, without Python or the dispatcher in between; the launch calls keep their own time. Calls already inside
    compiled code (``compiled``: the spans ``already_compiled`` reads) are left as they ran: compiling them again
    changes nothing."""
    span, inside, _ = _window(graph, window)
    if compiled is not None and compiled[0].size:
        starts, ends = compiled
        inside = [c for c in inside if not ((starts <= graph.t0[c]) & (graph.t0[c] < ends)).any()]
    items = _items_of(graph)
    launched = {e: graph.t0[c] for e, v in items.items() for c in [_launch_call(graph, v)] if c is not None}
    mine = [(m, t) for m, t in chains if any(span[0] <= launched.get(e, -1) < span[1] for e in m)]
    plan = fuse_plan(graph, mine)
    for call in inside:
        if call not in plan.duration:
            _host_before(graph, call, plan, span)
    return plan


def zero_plan(graph: StepGraph, item: Sequence[int], to_item: Sequence[int], dep: Sequence[int],
              dur: Sequence[int]) -> Plan:
    """The path's segments (parallel lists: the item, or the item and dependency position of a lag, and the
    time on the path) taking no time: an item's own time, or a lag's."""
    plan = Plan()
    for v, to, at, d in zip(item, to_item, dep, dur):
        if v >= 0:
            plan.duration[v] = max(0, graph.t1[v] - graph.t0[v] - d)
        elif to >= 0 and at >= 0:
            plan.lag[(to, at)] = max(0, graph.deps[to][at].lag - d)
    return plan


def overlap_plan(graph: StepGraph) -> Plan:
    """Communication overlapped: work after a collective's kernel on its stream no longer waits for it (as if the
    collective ran on a stream of its own); what waits for the collective's result — a sync, the step's end —
    still does."""
    plan = Plan()
    for v, deps in enumerate(graph.deps):
        if graph.kind[v] != "gpu":
            continue
        for i, d in enumerate(deps):
            if d.kind == "stream" and d.src != BEFORE and graph.role[d.src] == "communication":
                plan.lag[(v, i)] = -(graph.t1[d.src] - graph.t0[d.src]) + d.lag
    return plan


def not_late_plan(graph: StepGraph, waits: dict[int, int]) -> Plan:
    """A rank not late: each collective kernel of this rank (by its start) shortened by ``waits`` — the time it
    waited for the late rank beyond the last of the others."""
    plan = Plan()
    for v, kind in enumerate(graph.kind):
        if kind == "gpu" and graph.role[v] == "communication" and graph.t0[v] in waits:
            plan.duration[v] = max(0, graph.t1[v] - graph.t0[v] - waits[graph.t0[v]])
    return plan
