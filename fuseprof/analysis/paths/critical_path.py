"""Each step as a dependency graph of what the trace recorded, and the step's critical path through it.

The items of a step (an iteration, ``fuseprof.analysis.facts.iterations``; the whole window where there are none) are
its host calls (every runtime and driver call that started in it, on every thread), its GPU work (every kernel,
memcpy and memset it launched) and one end point (the step's end: the later of the iteration's end and the last
work's end). An item starts when the last of its dependencies allows:

    host     a call after the previous call on its thread; the time between is the host's own work (Python,
             dispatch, the op around it); a thread's first call after the step's start
    wake     a call on autograd's thread after the last call of the thread that ran the forward ops (and back):
             ``backward()`` hands the work over and waits for it (the decoder's ``autograd`` table says which
             threads; the hand-over is the only cross-thread edge)
    launch   GPU work after the call that launched it (by correlation id; a graph replay's after its graph
             launch) has reached the GPU: the call's start plus its own time up to the work's start
    stream   GPU work after the previous work on its stream
    wait     GPU work after the work on another stream its stream waited for: as the trace's synchronisation
             records state it (``fuseprof.analysis.facts.sync_edges``: Kineto's ``Stream Wait Event``, the stream and the
             event record waited on); in a trace without them, after the latest work on another stream of its
             device, where its launching thread queued a stream wait (``StreamWaitEvent``) since its stream's
             previous launch
    contention  GPU work that was ready (every dependency's point plus its kind's median lag) and still did not
             start while one item of another stream ran over the whole wait: it waited for that item's SMs, and
             starts as long before that item's end as it did
A synchronising call (the registry's ``sync`` host cause) ends when the GPU work it waited for — the last to end
while it ran; a stream or event sync the trace records waits for its own stream's work only — has ended. Edge lags are measured: the gap the trace shows on the dependency that bound (the
latest to allow), and for the others the smaller of their gap and the median bound lag of their kind, so the
graph replayed unchanged gives every item's start back to the ns (``fuseprof.analysis.paths.whatif``).

The critical path walks back from the end point along the binding dependencies: each item's own time (as far as
the path entered it) and each dependency's lag, down to the step's start. So its length is the step's span to
the ns by construction; what the analysis says is what lies on it: which items, ops, modules and ranges, and
what kind of time (``CATEGORIES``, grouped into ``BOUNDS``).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.iterations import Iterations
from fuseprof.analysis.facts.sync_edges import SyncEdges, sync_edges
from fuseprof.analysis.facts.timeline import device_streams
from fuseprof.model.registry import Registry
from fuseprof.parse.nesting import around, innermost
from fuseprof.parse.text_arrays import text_dtype
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import named

BEFORE = -1  # a dependency on the step's start (or on work before the step: a constant time)
# what each kind of time on the path is, and the bound each belongs to
CATEGORIES = {"kernel": "GPU kernel", "memcpy": "GPU kernel", "memset": "GPU kernel", "queue": "GPU kernel",
              "communication": "communication", "host": "launch/host", "launch": "launch/host",
              "launch latency": "launch/host", "runtime": "launch/host", "sync": "sync", "event wait": "sync",
              "allocator": "allocator", "data loading": "data loading", "previous step": "previous step"}
BOUNDS = ("GPU kernel", "launch/host", "sync", "allocator", "communication", "data loading", "previous step")
_GAP_CATEGORY = {"host": "host", "wake": "host", "launch": "launch latency", "stream": "queue",
                 "wait": "event wait", "end": "host", "contention": "queue"}
_PRIORITY = {"contention": 0, "stream": 1, "wait": 2, "launch": 3, "host": 4, "wake": 5, "end": 6}  # ties: GPU first


@dataclass(slots=True)
class Dep:
    """One start dependency: ``src`` item (``BEFORE``: the step's start plus ``offset``), its ``kind``, the point
    of ``src`` it waits for (``offset`` ns after src's start; None: src's end) and the lag after that point."""

    src: int
    kind: str
    offset: int | None
    lag: int = 0


@dataclass
class StepGraph:
    """One step's items (parallel lists: ``kind`` call/gpu/end, ``role``, ``name``, ``lane`` — a thread or
    a stream —, original ``t0``/``t1``, the GPU event's index in the events for GPU items), their start
    dependencies (``deps``, with the ``binding`` one's position) and the GPU item each synchronising call waited
    for (``sync_on``, -1: none). Built whole before any replay: ``fuseprof.analysis.paths.whatif`` keeps its inputs in
    ``replay_inputs``."""

    step: str
    start_ns: int
    end_ns: int
    kind: list[str] = field(default_factory=list)
    role: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    lane: list[str] = field(default_factory=list)
    t0: list[int] = field(default_factory=list)
    t1: list[int] = field(default_factory=list)
    event: list[object] = field(default_factory=list)
    deps: list[list[Dep]] = field(default_factory=list)
    binding: list[int] = field(default_factory=list)
    sync_on: list[int] = field(default_factory=list)
    replay_inputs: object = field(default=None, repr=False, compare=False)  # whatif's, built on the first replay

    def add(self, kind: str, role: str, name: str, lane: str, t0: int, t1: int, event: object = None) -> int:
        self.kind.append(kind)
        self.role.append(role)
        self.name.append(name)
        self.lane.append(lane)
        self.t0.append(t0)
        self.t1.append(t1)
        self.event.append(event)
        self.deps.append([])
        self.binding.append(-1)
        self.sync_on.append(-1)
        return len(self.kind) - 1

    def extend(self, kind: str, role: list[str], name: list[str], lane: list[str], t0: list[int], t1: list[int],
               event: list[object] | None = None) -> int:
        """``add`` for many items of one kind at once (parallel lists): the first one's number. A step's calls and
        GPU work go in whole, before their dependencies: an item's own fields never depend on another's."""
        first, n = len(self.kind), len(role)
        self.kind += [kind] * n
        self.role += role
        self.name += name
        self.lane += lane
        self.t0 += t0
        self.t1 += t1
        self.event += event if event is not None else [None] * n
        self.deps += [[] for _ in range(n)]
        self.binding += [-1] * n
        self.sync_on += [-1] * n
        return first

    @property
    def span_ns(self) -> int:
        return self.end_ns - self.start_ns

    def avail(self, dep: Dep, start: list[int] | None = None, end: list[int] | None = None,
              dur: list[int] | None = None) -> int:
        """When ``dep``'s point is reached: on the original times, or on replayed ones (``start``/``end``/``dur``)."""
        if dep.src == BEFORE:
            return self.start_ns + (dep.offset or 0)
        if dep.offset is None:
            return (end if end is not None else self.t1)[dep.src]
        own = dur[dep.src] if dur is not None else self.t1[dep.src] - self.t0[dep.src]
        return (start if start is not None else self.t0)[dep.src] + min(dep.offset, own)


def _steps(events: pd.DataFrame, calls: pd.DataFrame, iterations: Iterations) -> list[tuple[str, int, int]]:
    """(name, start, end of its range) per step whose GPU work the window holds; one for the whole window without
    iterations."""
    if iterations.found and events["profiler_step"].notna().any():
        shown = set(events["profiler_step"].dropna().astype(str).tolist())
        ranges = iterations.ranges
        return [(name, int(start), int(start + dur)) for name, start, dur in zip(
            ranges["name"].astype(str).tolist(), ranges["start_ns"].tolist(), ranges["dur_ns"].tolist()) if name in shown]
    starts = [events["start_ns"].min()] + ([calls["start_ns"].min()] if len(calls) else [])
    ends = [events["end_ns"].max()] + ([(calls["start_ns"] + calls["dur_ns"]).max()] if len(calls) else [])
    return [("(window)", int(min(starts)), int(max(ends)))] if len(events) else []


def _wake_partners(tables: TraceTables) -> dict[str, set[str]]:
    """Per thread, the threads it hands work to and back from: autograd's threads and the forward ops' threads."""
    backward = set(tables.autograd["tid"].astype(str)) if len(tables.autograd) else set()
    if not backward:  # no thread to hand work to (an inference's trace): the forward ops' threads unread
        return defaultdict(set)
    forward = set(tables.forward_ops["tid"].astype(str)) - backward if len(tables.forward_ops) else set()
    partners: dict[str, set[str]] = defaultdict(set)
    for b in backward:
        for f in forward:
            partners[b].add(f)
            partners[f].add(b)
    return partners


def bind(graph: StepGraph) -> None:
    """Each item's binding dependency (the latest to allow its start; ties by ``_PRIORITY``) and every lag:
    the measured gap on the binding one, the smaller of the gap and the kind's median bound lag on the others."""
    gaps: dict[str, list[int]] = defaultdict(list)
    t0, t1, binding, start, priority = graph.t0, graph.t1, graph.binding, graph.start_ns, _PRIORITY
    several: list[int] = []  # the items with more than one dependency: only theirs are capped after
    for v, deps in enumerate(graph.deps):
        if not deps:
            continue
        mine, best, best_at, best_rank = t0[v], -1, 0, 0
        for i, d in enumerate(deps):
            src, offset = d.src, d.offset  # graph.avail(d), inlined: a trace binds every item of every step
            reached = start + (offset or 0) if src == BEFORE else t1[src] if offset is None else \
                t0[src] + min(offset, t1[src] - t0[src])
            at = reached if reached < mine else mine
            d.lag = mine - at
            rank = priority[d.kind]
            # the latest, ties to the lower rank, the first of equals: max() over (at, -rank)
            if best < 0 or at > best_at or (at == best_at and rank < best_rank):
                best, best_at, best_rank = i, at, rank
        binding[v] = best
        gaps[deps[best].kind].append(deps[best].lag)
        if len(deps) > 1:
            several.append(v)
    typical = {kind: _median(values) for kind, values in gaps.items()}
    for v in several:
        b = binding[v]
        for i, d in enumerate(graph.deps[v]):
            if i != b:
                d.lag = min(d.lag, typical.get(d.kind, 0))
    _contention(graph, typical)


def _median(values: list[int]) -> int:
    """``int(np.median(values))`` without NumPy's cost per call (a step binds a few kinds of lags, and a trace has
    thousands of steps): the middle value, or the mean of the middle two, truncated."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else int((ordered[middle - 1] + ordered[middle]) / 2)


def _contention(graph: StepGraph, typical: dict[str, int]) -> None:
    """GPU items that waited, ready, while another stream's item ran over the whole wait: after that item
    (``contention``, binding, its lag negative: the item started that long before the other ended)."""
    lanes: dict[str, list[int]] = defaultdict(list)
    for v, kind in enumerate(graph.kind):
        if kind == "gpu":
            lanes[graph.lane[v]].append(v)
    # only an item on a device with another stream can have waited for one (most steps run one stream a device:
    # their items are skipped without a readiness each)
    streams = Counter(lane.split(":")[0] for lane in lanes)
    shared = {lane for lane in lanes if streams[lane.split(":")[0]] > 1}
    if not shared:
        return
    for v, kind in enumerate(graph.kind):
        if kind != "gpu" or not graph.deps[v] or graph.lane[v] not in shared:
            continue
        ready = max(graph.avail(d) + typical.get(d.kind, 0) for d in graph.deps[v])
        if ready >= graph.t0[v]:
            continue
        device = graph.lane[v].split(":")[0]
        for lane, items in lanes.items():
            if lane == graph.lane[v] or lane.split(":")[0] != device:
                continue
            k = bisect.bisect_right(items, ready, key=lambda u: graph.t0[u]) - 1
            if k >= 0 and graph.t1[items[k]] >= graph.t0[v]:
                u, was = items[k], graph.deps[v][graph.binding[v]]
                was.lag = min(was.lag, typical.get(was.kind, 0))
                graph.deps[v].append(Dep(u, "contention", None, graph.t0[v] - graph.t1[u]))
                graph.binding[v] = len(graph.deps[v]) - 1
                break


def topological_order(graph: StepGraph) -> list[tuple[int, int]]:
    """A topological order of (item, 0: start / 1: end) (Kahn's): a launch dependency needs its call's start, the
    others their source's end, a sync's end the end of the work it waited for. What the sequential replay walks
    (``fuseprof.analysis.paths.whatif``), worked out when it first does."""
    n = len(graph.kind)
    after: list[list[int]] = [[] for _ in range(2 * n)]
    needs = [0] * (2 * n)
    for v, deps in enumerate(graph.deps):
        start = 2 * v
        for d in deps:
            if d.src != BEFORE:
                after[2 * d.src + (0 if d.offset is not None else 1)].append(start)
                needs[start] += 1
        after[start].append(start + 1)
        needs[start + 1] += 1
        if graph.sync_on[v] >= 0:
            after[2 * graph.sync_on[v] + 1].append(start + 1)
            needs[start + 1] += 1
    ready = [k for k in range(2 * n) if needs[k] == 0]
    order = []
    while ready:
        k = ready.pop()
        order.append((k // 2, k % 2))
        for b in after[k]:
            needs[b] -= 1
            if needs[b] == 0:
                ready.append(b)
    if len(order) != 2 * n:
        raise RuntimeError(f"step {graph.step}: the dependency graph has a cycle")  # built acyclic: a bug if seen
    return order


def _roles(calls: pd.DataFrame, registry: Registry, launched: set[object]) -> pd.Series:
    """Per host call: sync, allocator or event wait (the registry's host causes), launch (it enqueued work that
    is in the trace), else runtime."""
    role = np.full(len(calls), "runtime", dtype=object)
    role[calls["correlation"].isin(launched).to_numpy()] = "launch"
    for cause in registry.host_causes:
        if cause.calls:
            role[named(calls, cause.calls)] = {"sync": "sync", "allocator": "allocator",
                                               "event wait": "wait call"}.get(cause.cause, "runtime")
    return pd.Series(role, index=calls.index, dtype=object)


def step_graphs(events: pd.DataFrame, tables: TraceTables, registry: Registry, iterations: Iterations
                ) -> list[StepGraph]:
    """Every step's dependency graph (the module docstring), for the window's GPU ``events``. The calls and the
    GPU work are read out of their tables once, as plain lists in start order, and each step takes its slice:
    a step costs its own items, not a table lookup each (a trace of many short steps)."""
    calls = tables.launches.assign(tid=tables.launches["tid"].astype(str))
    calls = calls.sort_values("start_ns", kind="stable")
    role = _roles(calls, registry, set(events["correlation"].dropna()))
    calls = calls.assign(role=role)
    partners = _wake_partners(tables)
    # the columns the graphs read, with each event's lane: not a copy of every column the events hold
    gpu_events = events[_GPU_COLUMNS].assign(lane=device_streams(events).to_numpy())
    history = StreamHistory(gpu_events)
    edges = sync_edges(tables.syncs, events)
    wait_times = {} if edges.waits else _wait_times(calls)  # the records, not a guess
    gpu = _GpuRows(gpu_events)
    call_rows = _call_rows(calls)
    call_starts = calls["start_ns"].to_numpy(np.int64)
    out = []
    for name, start, range_end in _steps(events, calls, iterations):
        in_step = gpu.all if name == "(window)" else gpu.by_step.get(name, [])
        mine = call_rows[np.searchsorted(call_starts, start, "left"):np.searchsorted(call_starts, range_end, "left")]
        end = max([range_end, max(gpu.rows[k][1] for k in in_step) if len(in_step) else range_end,
                   max(t1 for _, t1, *_ in mine) if mine else range_end])
        graph = StepGraph(name, start, end)
        by_correlation = _add_calls(graph, mine, partners)
        _add_gpu(graph, [gpu.rows[k] for k in in_step], history, by_correlation, wait_times, edges)
        _add_end(graph)
        bind(graph)
        out.append(graph)
    return out


def _wait_times(calls: pd.DataFrame) -> dict[str, list[int]]:
    """Per thread, the starts of its stream-wait calls in order (a missing thread has none: a grouping by thread
    drops it); read as lists, not a frame filtered and grouped."""
    waits = (calls["role"] == "wait call").to_numpy(bool)
    times: dict[str, list[int]] = {}
    for tid, at in zip(calls["tid"].to_numpy()[waits].tolist(),
                       calls["start_ns"].astype("int64").to_numpy()[waits].tolist()):
        if not pd.isna(tid):
            times.setdefault(tid, []).append(at)
    return {tid: sorted(starts) for tid, starts in times.items()}


def _call_rows(calls: pd.DataFrame) -> list[tuple[int, int, str, str, str, object]]:
    """(start, end, role, name, thread, correlation id or None) per host call, in the table's order."""
    starts = calls["start_ns"].astype("int64").tolist()
    ends = (calls["start_ns"] + calls["dur_ns"]).astype("int64").tolist()
    correlation = _present(calls["correlation"])
    return list(zip(starts, ends, _text(calls["role"]), _text(calls["name"]), calls["tid"].tolist(), correlation))


def _present(column: pd.Series) -> list[object]:
    """Each value, a missing one as None (one ``notna`` over the column: ``pd.notna`` per value cost a pandas
    call per event)."""
    return [v if ok else None for v, ok in zip(column.tolist(), column.notna().to_numpy().tolist())]


def _text(column: pd.Series) -> list[str]:
    """Each value as text, a missing one as 'nan' (``astype(str)`` keeps it missing under pandas 3)."""
    return [str(v) for v in column.tolist()]


_GPU_COLUMNS = ["start_ns", "end_ns", "category", "kind", "correlation", "name", "tid", "profiler_step"]


class _GpuRows:
    """The GPU events as (start, end, role, name, lane, correlation id or None, thread, index) in start order
    (stable: ties keep the events' order), and each step's positions among them."""

    def __init__(self, events: pd.DataFrame) -> None:
        ordered = events.sort_values("start_ns", kind="stable")
        role = ["communication" if c == "communication" else str(k or "kernel")
                for c, k in zip(ordered["category"].tolist(), ordered["kind"].tolist())]
        correlation = _present(ordered["correlation"])
        self.rows = list(zip(ordered["start_ns"].astype("int64").tolist(), ordered["end_ns"].astype("int64").tolist(),
                             role, _text(ordered["name"]), ordered["lane"].tolist(), correlation,
                             _text(ordered["tid"]), ordered.index.tolist()))
        self.all = range(len(self.rows))
        # a column grouped by an array, not the frame: a frame grouped by an array prints it into an exception
        groups = ordered["start_ns"].groupby(ordered["profiler_step"].astype(str).to_numpy(), sort=False).indices
        self.by_step = {str(k): v.tolist() for k, v in groups.items()}


def _add_calls(graph: StepGraph, calls: Sequence[tuple[int, int, str, str, str, object]],
               partners: dict[str, set[str]]) -> dict[object, int]:
    """The step's host calls (``_call_rows``) as items, each after its thread's previous call (or a partner
    thread's latest, for a hand-over); which item each correlation id's call is."""
    by_correlation: dict[object, int] = {}
    last: dict[str, int] = {}
    # per thread a partner hands work from: its calls' ends in order (ties: in start order) and their items, so the
    # hand-over (the latest end after the thread's previous call, by the call's start) is one search, not a scan of
    # the partner's calls so far per call (a training step's backward thread: calls x forward calls)
    watched = {other for others in partners.values() for other in others}
    ends: dict[str, tuple[list[int], list[int]]] = {tid: ([], []) for tid in watched}
    columns: list[tuple[Any, ...]] = list(zip(*calls)) if calls else [()] * 6
    first = graph.extend("call", *(list(c) for c in (columns[2], columns[3], columns[4], columns[0], columns[1])))
    deps, start_ns = graph.deps, graph.start_ns
    for v, (t0, t1, role, name, tid, correlation) in enumerate(calls, start=first):
        if correlation is not None:
            by_correlation.setdefault(correlation, v)
        prev = last.get(tid)
        deps[v].append(Dep(prev, "host", None) if prev is not None else Dep(BEFORE, "host", 0))
        for other in partners.get(tid, ()):
            handed = _handed(ends[other], graph.t1[prev] if prev is not None else start_ns, t0)
            if handed is not None:
                deps[v].append(Dep(handed, "wake", None))
        last[tid] = v
        if tid in watched:
            at = bisect.bisect_right(ends[tid][0], t1)
            ends[tid][0].insert(at, t1)
            ends[tid][1].insert(at, v)
    return by_correlation


def _handed(ends: tuple[list[int], list[int]], since: int, until: int) -> int | None:
    """The item that ended last in (``since``, ``until``] among a thread's calls (``ends``: their ends in order,
    equal ends in start order, and their items), the first of equals; None where none did."""
    times, items = ends
    k = bisect.bisect_right(times, until)
    if not k or times[k - 1] <= since:
        return None
    return items[bisect.bisect_left(times, times[k - 1])]


def _add_gpu(graph: StepGraph, in_step: Sequence[tuple[int, int, str, str, str, object, str, object]],
             history: StreamHistory, by_correlation: dict[object, int], wait_times: dict[str, list[int]],
             edges: SyncEdges) -> None:
    """The step's GPU work (``_GpuRows``, in start order) as items, after its launch call, its stream's previous
    work and the work on other streams it waited for: the trace's records (``edges``), else, where its thread
    queued a stream wait (``wait_times``: every thread's, in order; those between a step's launches are the
    step's own), the latest work on another stream."""
    item_of: dict[object, int] = {}
    last: dict[str, int] = {}
    launched: dict[str, int] = {}  # per stream: when its previous work's launch call started
    done: dict[str, list[int]] = defaultdict(list)  # per stream, its GPU items so far (they end in order)
    columns: list[tuple[Any, ...]] = list(zip(*in_step)) if in_step else [()] * 8
    first = graph.extend("gpu", *(list(c) for c in (columns[2], columns[3], columns[4], columns[0], columns[1],
                                                     columns[7])))
    for v, (t0, t1, role, name, lane, correlation, tid, idx) in enumerate(in_step, start=first):
        call = by_correlation.get(correlation) if correlation is not None else None
        if call is not None:
            graph.deps[v].append(Dep(call, "launch", max(0, min(graph.t1[call], t0) - graph.t0[call])))
        prev = last.get(lane)
        if prev is not None:
            graph.deps[v].append(Dep(prev, "stream", None))
        else:  # the stream's first work in the step: after what other steps queued ahead of it there
            previous = history.ended_before(lane, t0)
            if previous is not None and previous > graph.start_ns:
                graph.deps[v].append(Dep(BEFORE, "stream", previous - graph.start_ns))
        for src in edges.gpu.get(idx, ()):  # an earlier item only: the graph stays acyclic whatever the clocks say
            if item_of.get(src, v) < v:
                graph.deps[v].append(Dep(item_of[src], "wait", None))
        times = wait_times.get(tid)
        if call is not None and times is not None and \
                bisect.bisect_right(times, graph.t0[call]) > bisect.bisect_left(times, launched.get(lane, graph.start_ns)):
            other = _latest_ended(graph, done, lane, t0)
            if other is not None:
                graph.deps[v].append(Dep(other, "wait", None))
        if not graph.deps[v]:
            graph.deps[v].append(Dep(BEFORE, "launch", 0))
        last[lane] = v
        if call is not None:
            launched[lane] = graph.t0[call]
        done[lane].append(v)
        item_of[idx] = v
    _add_syncs(graph, {v: item_of.get(edges.host[c], -1) for c, v in by_correlation.items() if c in edges.host}
               if edges.host else {})


def _latest_ended(graph: StepGraph, done: dict[str, list[int]], lane: str, t: int) -> int | None:
    """The GPU item on another stream of ``lane``'s device that ended last by ``t`` (a stream's items end in
    order: a search per stream)."""
    device, best = lane.split(":")[0], None
    for other, items in done.items():
        if other == lane or other.split(":")[0] != device:
            continue
        k = bisect.bisect_right(items, t, key=lambda u: graph.t1[u]) - 1
        if k >= 0 and (best is None or graph.t1[items[k]] > graph.t1[best]):
            best = items[k]
    return best


class StreamHistory:
    """Per lane (the events' ``lane`` column), its GPU events' starts in order and the latest end among them so
    far: when the work queued on a stream ahead of a time had ended, by one search."""

    def __init__(self, events: pd.DataFrame) -> None:
        self._by_lane: dict[str, tuple[list[int], list[int]]] = {}
        starts, ends = events["start_ns"].to_numpy(np.int64), events["end_ns"].to_numpy(np.int64)
        for lane, rows in events["start_ns"].groupby(events["lane"].to_numpy(), sort=False).indices.items():
            ordered = rows[np.argsort(starts[rows], kind="stable")]
            self._by_lane[str(lane)] = (starts[ordered].tolist(), np.maximum.accumulate(ends[ordered]).tolist())

    def ended_before(self, lane: str, first: int) -> int | None:
        """When the other steps' work queued on ``lane`` ahead of a step's first work there (starting at
        ``first``) ended (a constant that work waits for); None: none was. A stream runs in order, so that is the
        work on it that started before the step's first — the step's own work starts later by definition: on a
        trace whose host runs steps ahead, the previous steps' kernels start after the step's host range began,
        and are still ahead of it."""
        starts, ends = self._by_lane[lane]
        k = bisect.bisect_left(starts, first)
        return ends[k - 1] if k else None


def _add_syncs(graph: StepGraph, waited: dict[int, int]) -> None:
    """Each synchronising call waits for the GPU item that ended last while it ran (a call the trace's records
    name the work of — ``waited``, per call item: the GPU item, -1 for none in the step — for that item only),
    among the work launched before it started, and queued behind none that its own threads launched after (a sync cannot wait for work launched
    after it: on a trace whose GPU clock is off, an item launched later can seem to end inside it; and work queued
    behind a launch that came after the sync on its thread, or on a thread it hands work to, would close a cycle —
    the sync, that launch, the work behind it, the sync. Another thread's later launch closes none: allowed)."""
    gpu = [v for v, k in enumerate(graph.kind) if k == "gpu"]
    syncs = [v for v, role in enumerate(graph.role) if role == "sync" and graph.kind[v] == "call"]
    if not gpu or not syncs:  # what the GPU items are queued behind is read for a sync only
        return
    threads = _thread_groups(graph)
    own: dict[int, int | None] = {}  # per GPU item: when its launch call started
    behind: dict[int, dict[int, int]] = {}  # per GPU item and thread group: the latest launch it is queued behind
    for v in gpu:  # in the order added: what it is queued behind (stream, stream wait) comes first
        own[v] = None
        latest: dict[int, int] = {}
        for d in graph.deps[v]:
            if d.src == BEFORE:
                continue
            if d.kind == "launch":
                own[v] = graph.t0[d.src]
                found = {threads[graph.lane[d.src]]: graph.t0[d.src]}
            elif d.kind in ("stream", "wait"):
                found = behind[d.src]
            else:
                continue
            for group, at in found.items():
                if at > latest.get(group, at - 1):
                    latest[group] = at
        behind[v] = latest
    order = sorted(gpu, key=lambda v: graph.t1[v])
    ends = [graph.t1[v] for v in order]  # a search per sync: a list's bisect, no array a step
    for v in syncs:
        mine, only = threads[graph.lane[v]], waited.get(v)
        k = bisect.bisect_right(ends, graph.t1[v]) - 1
        while k >= 0 and ends[k] > graph.t0[v]:
            if only is not None and order[k] != only:
                k -= 1
                continue
            launched, late = own[order[k]], behind[order[k]].get(mine)
            if (launched is None or launched < graph.t0[v]) and (late is None or late < graph.t0[v]):
                graph.sync_on[v] = order[k]
                break
            k -= 1


def _thread_groups(graph: StepGraph) -> dict[str, int]:
    """Per host thread of the step, its group: threads that hand work to each other (a wake dependency) are one."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for v, kind in enumerate(graph.kind):
        if kind == "call":
            root(graph.lane[v])
            for d in graph.deps[v]:
                if d.kind == "wake" and d.src != BEFORE:
                    parent[root(graph.lane[d.src])] = root(graph.lane[v])
    roots = {x: root(x) for x in parent}
    numbers = {r: i for i, r in enumerate(dict.fromkeys(roots.values()))}
    return {x: numbers[r] for x, r in roots.items()}


def _add_end(graph: StepGraph) -> None:
    """The end point, after the last item of every thread and stream."""
    last: dict[str, int] = {}
    for v, lane in enumerate(graph.lane):
        if lane not in last or graph.t1[v] >= graph.t1[last[lane]]:
            last[lane] = v
    v = graph.add("end", "end", "(step end)", "", graph.end_ns, graph.end_ns)
    graph.deps[v] = [Dep(u, "end", None) for u in last.values()] or [Dep(BEFORE, "end", 0)]


# --- the path -------------------------------------------------------------------------------------------

PATH_COLUMNS = ["start_ns", "end_ns", "category", "item", "lane", "to_item", "dep"]
Segment = tuple[int, int, str, int, str, int, int]


def walk(graph: StepGraph) -> pd.DataFrame:
    """The critical path (the module docstring) as contiguous segments from the step's start to its end: start,
    end, category, the item whose own time it is (-1: a lag), the lane (thread or stream) the time was spent on
    and, for a lag, the dependency it belongs to (``to_item``, ``dep``: its position in the item's deps)."""
    path = pd.DataFrame(walk_segments(graph), columns=PATH_COLUMNS)
    path["dur_ns"] = path["end_ns"] - path["start_ns"]
    return path


def walk_segments(graph: StepGraph) -> list[Segment]:
    """``walk``'s rows (``PATH_COLUMNS``), in time order: many steps' paths make one table at once. The graph's
    lists are read as locals and ``avail`` inlined: a long step's path is tens of thousands of segments."""
    rows: list[Segment] = []
    sync_on, t0, t1, lane, role = graph.sync_on, graph.t0, graph.t1, graph.lane, graph.role
    binding, deps, start_ns = graph.binding, graph.deps, graph.start_ns
    v, t = len(graph.kind) - 1, graph.end_ns
    for _ in range(2 * len(graph.kind) + 2):  # a path visits an item once: more steps is a cycle, never an endless walk
        g = sync_on[v]
        if g >= 0 and t1[g] > t0[v] and t >= t1[g]:
            rows.append((t1[g], t, "sync", v, lane[v], -1, -1))
            v, t = g, t1[g]
            continue
        if t > t0[v]:
            rows.append((t0[v], t, _ITEM_CATEGORY.get(role[v], role[v]), v, lane[v], -1, -1))
        t = t0[v]
        b = binding[v]
        dep = deps[v][b] if b >= 0 else None
        if dep is None:
            reached = start_ns
        else:
            src, offset = dep.src, dep.offset
            reached = start_ns + (offset or 0) if src == BEFORE else t1[src] if offset is None else \
                t0[src] + min(offset, t1[src] - t0[src])
        at = min(max(reached, start_ns), t)
        if t > at:
            host_lane = lane[dep.src] if dep is not None and dep.kind == "end" and dep.src != BEFORE else lane[v]
            rows.append((at, t, _GAP_CATEGORY[dep.kind] if dep else "host", -1, host_lane, v, b))
        if dep is None or dep.src == BEFORE:
            if at > start_ns:
                rows.append((start_ns, at, "previous step", -1, lane[v], v, b))
            return rows[::-1]
        v, t = dep.src, at
    raise RuntimeError(f"step {graph.step}: the dependency graph has a cycle")  # built acyclic: a bug if seen


_ITEM_CATEGORY = {"wait call": "runtime", "end": "host"}  # an item's own time on the path: its role, but these


class HostLookup:
    """What the host was doing, per thread, built once per trace and kept per thread as the steps ask: the CPU ops'
    and ``record_function`` ranges' spans, and the synchronisations' host time (``idle.sync_spans``). A step's
    labels then cost its own path's length, not the trace's."""

    def __init__(self, tables: TraceTables, registry: Registry) -> None:
        self.tables, self.registry = tables, registry
        self._spans: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
        self._sync: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._by_tid: dict[str, tuple[dict[str, np.ndarray], tuple[np.ndarray, ...]]] = {}
        loading = [c.ranges for c in registry.host_causes if c.cause == "data loading" and c.ranges]
        self.loading = "|".join(f"(?:{p})" for p in loading)

    def spans(self, kind: str, lane: str) -> list[tuple[int, int, str]]:
        """(start, end, name) of the ``ops`` or ``annotations`` on thread ``lane``."""
        if (kind, lane) not in self._spans:
            if kind not in self._by_tid:
                # each thread's rows (positions, in order: a stable sort of the threads' codes, as a grouping finds
                # them; a missing thread is none) and the columns as arrays: a rank's paths ask for a thread or two of
                # a table of a few hundred rows, where a grouping and three takes a thread were a pandas call each
                table = getattr(self.tables, kind)
                codes, names = pd.factorize(table["tid"].astype(str))
                order = np.argsort(codes, kind="stable")
                bounds = np.searchsorted(codes[order], np.arange(len(names) + 1)).tolist()
                # (objects, as the columns' own values: a nullable column's missing value stays missing, not NaN)
                ends = table["start_ns"] + table["dur_ns"]
                self._by_tid[kind] = ({str(t): order[a:b] for t, a, b in zip(names, bounds, bounds[1:])},
                                      (table["start_ns"].to_numpy(object), ends.to_numpy(object),
                                       table["name"].astype(str).to_numpy(object)))
            threads, columns = self._by_tid[kind]
            mine = threads.get(lane, np.zeros(0, np.int64))
            self._spans[(kind, lane)] = list(zip(*(column[mine].tolist() for column in columns)))
        return self._spans[(kind, lane)]

    def sync(self, lane: str) -> tuple[np.ndarray, np.ndarray]:
        """The merged intervals of host time synchronisations cost on thread ``lane``."""
        if lane not in self._sync:
            from fuseprof.analysis.facts.idle import sync_spans

            self._sync[lane] = sync_spans(self.tables, self.registry, lane)
        return self._sync[lane]


def labelled(graphs: Sequence[StepGraph], path: pd.DataFrame, events: pd.DataFrame, host_lookup: HostLookup
             ) -> pd.DataFrame:
    """The steps' path segments (``graph``: the step's position in ``graphs``; a unique index) with what they
    were: ``name`` (a kernel, a call, or the host op), the ``op`` and ``module`` (a GPU item's, by its launch; host
    time's: the innermost op around it on its thread), the ``record_function`` ranges around it (``ranges``), and
    host time inside a data-loading range (the registry's host causes) as ``data loading``. Every step at once:
    the cost is the paths' length, not steps × trace."""
    graph_of, item_of = path["graph"].tolist(), path["item"].tolist()
    gpu = [v >= 0 and graphs[k].kind[v] == "gpu" for k, v in zip(graph_of, item_of)]
    # the labels as lists, set once: a step set's path is a few hundred rows, where each masked assignment into
    # the frame cost a pandas call (about ninety a trace, whatever its size)
    labels: dict[str, list[Any]] = {"name": [""] * len(path), "op": [pd.NA] * len(path),
                                    "module": [pd.NA] * len(path), "ranges": [pd.NA] * len(path)}
    on_gpu = [i for i, g in enumerate(gpu) if g]
    # the GPU items' events by position (the events' index is unique), four columns taken, not every column's rows
    rows = events.index.get_indexer_for([graphs[graph_of[i]].event[item_of[i]] for i in on_gpu])
    if (rows < 0).any():  # -1 would take the last event's labels
        raise KeyError("a GPU item's event is not among the events")
    for column, values in labels.items():
        for i, value in zip(on_gpu, events[column].iloc[rows].to_numpy().tolist()):
            values[i] = value
    for i, (k, v) in enumerate(zip(graph_of, item_of)):
        if v >= 0 and not gpu[i]:
            labels["name"][i] = graphs[k].name[v]
    host = [i for i, g in enumerate(gpu) if not g]
    middle = ((path["start_ns"] + path["end_ns"]) // 2).tolist()
    lanes = path["lane"].tolist()
    by_lane: dict[Any, list[int]] = {}
    for i in host:
        by_lane.setdefault(lanes[i], []).append(i)
    for lane in sorted(by_lane):  # as a groupby walks them
        points = [(middle[i], i) for i in by_lane[lane]]
        found = innermost(host_lookup.spans("ops", str(lane)), points)
        around_points = {i: " / ".join(live) for i, live in around(host_lookup.spans("annotations", str(lane)), points)}
        for column, at_point in (("op", found), ("ranges", around_points)):
            for i, value in at_point.items():
                labels[column][i] = value
    categories = path["category"].tolist()
    for i, category in enumerate(categories):
        if item_of[i] < 0 and category not in ("host", "data loading"):  # latency, queueing: no host work
            labels["name"][i] = category
    for i in host:
        if labels["name"][i] == "":
            op = labels["op"][i]
            labels["name"][i] = "(Python, between ops)" if pd.isna(op) else op
    categories = _sync_host(categories, lanes, middle, host_lookup)
    if host_lookup.loading:
        loading = re.compile(host_lookup.loading)
        # one search per distinct range text: a path's host segments repeat the same few nests of ranges
        searched: dict[str, bool] = {}
        categories = ["data loading" if c == "host" and _searched(loading, r if isinstance(r, str) else "", searched)
                      else c for c, r in zip(categories, labels["ranges"])]
    text = text_dtype()
    return path.assign(name=pd.Series(labels["name"], index=path.index, dtype=text),
                       **{c: pd.Series(labels[c], index=path.index, dtype=object) for c in ("op", "module", "ranges")},
                       category=pd.Series(categories, index=path.index, dtype=path["category"].dtype))


def _searched(pattern: re.Pattern[str], text: str, found: dict[str, bool]) -> bool:
    """Whether ``pattern`` is found in ``text``, remembered in ``found`` per text."""
    hit = found.get(text)
    if hit is None:
        hit = found[text] = pattern.search(text) is not None
    return hit


def _sync_host(categories: list[str], lanes: list[Any], middle: list[int], host_lookup: HostLookup) -> list[str]:
    """Host time on the path inside a synchronising op (``.item()``, ``.cpu()``: ``idle.sync_spans``) — its own
    work and its calls — is sync, as the idle analysis counts it: ``categories`` with those segments' changed (by
    their ``middle`` point on their lane)."""
    by_lane: dict[Any, list[int]] = {}
    for i, category in enumerate(categories):
        if category in ("host", "launch", "runtime"):
            by_lane.setdefault(lanes[i], []).append(i)
    for lane, rows in by_lane.items():
        starts, ends = host_lookup.sync(str(lane))
        if not starts.size:
            continue
        at = np.array([middle[i] for i in rows], np.int64)
        k = np.searchsorted(starts, at, side="right") - 1
        for i in np.array(rows)[(k >= 0) & (ends[np.maximum(k, 0)] > at)].tolist():
            categories[i] = "sync"
    return categories
