"""The what-if replay of many plans over many steps at once, on arrays (``fuseprof.analysis.whatif`` defines it).

The sequential replay walks a step's items in topological order and sets each start to the latest of its
dependencies' points plus their lags: one Python step per dependency, per plan, per step (the fusion table replays
every row in every step, the path table every thing on the path: on a 131 MB trace, ~900 replays of 3,700-item
steps took 2 s). Here the same numbers come from NumPy, every plan and every step in one set of arrays:

    lanes    a host thread's calls, or a GPU stream's work, each after the previous one on its lane (the "host" and
             "stream" dependency): start_k = max(start_{k-1} + own_{k-1} + lag_k, other_k), a max-plus recurrence
             whose closed form is start = S + cummax(other - S) with S the running sum of own + lag — one cumulative
             sum and one cumulative max for all the lanes of a group laid end to end (a lane's first item cuts the
             sum by more than any time, so no earlier lane's term survives past it)
    others   every other dependency (launch, wait, wake, contention, the step's start, the end point's), read from
             times already computed, the latest per item by one ``maximum.reduceat``
    groups   the items in an order where every dependency but the lane's own comes from an earlier group: an item's
             level is its sources' level, one more where the source is not of an earlier kind (calls, then GPU
             work, then end points) — a synchronising call after the work it waited for, a stream wait or a
             hand-over between threads after its source — and the groups go by (level, kind)

So one pass over the groups gives every time exactly, the sequential replay's answer to the ns
(tests/test_replay_lanes.py checks it on every step of the committed traces). A step of very many levels (a
synchronisation after every op) costs a few NumPy calls per level; ``whatif.step_times`` replays those in
sequence. Times are kept relative to each step's start, so every sum stays far from int64's limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from fuseprof.analysis.critical_path import StepGraph
    from fuseprof.analysis.whatif import Plan

_NEG = -(2**62)  # no dependency of that kind: below every time
_CELLS = 2**21  # plans × items per batch (a few int64 matrices of this many cells: ~16 MB each)
_GROUPS = ("call", "gpu", "end")  # the kinds in the order a level takes them (a host call launches GPU work)


@dataclass
class StepArrays:
    """One step graph as arrays (built once per graph, kept in its ``replay_inputs``): items' original times
    relative to the step's start, kind, lane, the synchronising calls' waited-for item and tail, and the
    dependencies flat (item, source, point: -2 fixed / -1 end / else an offset into the source, lag, whether the
    lag is the host's own, the fixed time) with each item's chain dependency (on the previous item of its lane)."""

    t0: np.ndarray
    t1: np.ndarray
    group: np.ndarray
    lane: np.ndarray
    sync_on: np.ndarray
    tail: np.ndarray
    first_dep: np.ndarray
    dep_item: np.ndarray
    dep_src: np.ndarray
    dep_point: np.ndarray
    dep_lag: np.ndarray
    dep_host: np.ndarray
    dep_fixed: np.ndarray
    chain: np.ndarray
    level: np.ndarray

    @property
    def acyclic(self) -> bool:
        """Whether the items' own order (a sync after the work it waited for) has no cycle: the arrays can hold
        the step (a start-and-end order can exist where this one does not: work queued behind what a sync
        launched)."""
        return bool(len(self.level) == 0 or self.level[0] >= 0)

    @classmethod
    def of(cls, graph: StepGraph, host_lags: Sequence[str]) -> StepArrays:
        n, start, host = len(graph.kind), graph.start_ns, set(host_lags)
        t0 = np.array(graph.t0, np.int64) - start
        t1 = np.array(graph.t1, np.int64) - start
        kinds = [_GROUPS.index(k) for k in graph.kind]
        lanes: dict[tuple[str, str], int] = {}
        lane = [lanes.setdefault((k, x), len(lanes)) for k, x in zip(graph.kind, graph.lane)]
        sync_on = np.array(graph.sync_on, np.int64)
        tail = np.where(sync_on >= 0, t1 - t1[np.maximum(sync_on, 0)], 0)
        counts = [len(d) for d in graph.deps]
        first_dep = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=first_dep[1:])
        flat = [d for deps in graph.deps for d in deps]
        src = [d.src for d in flat]
        point = [-2 if d.src < 0 else -1 if d.offset is None else d.offset for d in flat]
        chain = _chains(lane, src, point, first_dep.tolist())
        return cls(t0, t1, np.array(kinds, np.int64), np.array(lane, np.int64), sync_on, tail, first_dep[:-1],
                   np.repeat(np.arange(n, dtype=np.int64), counts), np.array(src, np.int64),
                   np.array(point, np.int64), np.array([d.lag for d in flat], np.int64),
                   np.array([d.kind in host for d in flat], bool), np.array([d.offset or 0 for d in flat], np.int64),
                   np.array(chain, np.int64), _levels(kinds, chain, src, first_dep.tolist(), graph.sync_on))


def _chains(lane: list[int], src: list[int], point: list[int], first_dep: list[int]) -> list[int]:
    """Per item, its dependency (flat position) on the previous item of its lane, by that item's end; -1: none."""
    chain = [-1] * len(lane)
    previous: dict[int, int] = {}
    for v, at in enumerate(lane):
        pred = previous.get(at)
        previous[at] = v
        if pred is not None:
            for j in range(first_dep[v], first_dep[v + 1]):
                if src[j] == pred and point[j] == -1:
                    chain[v] = j
                    break
    return chain


def _levels(kind: list[int], chain: list[int], src: list[int], first_dep: list[int], sync_on: list[int]
            ) -> np.ndarray:
    """Each item's level (the module docstring), its sources first (Kahn's order over the items: the dependencies
    and the work a sync waited for); -1 for every item when they form a cycle (possible where the order of starts
    and ends has none: work a sync waited for queued behind what the sync itself launched)."""
    n = len(kind)
    after: list[list[int]] = [[] for _ in range(n)]
    needs = [0] * n
    for v in range(n):
        for j in range(first_dep[v], first_dep[v + 1]):
            u = src[j]
            if u >= 0:
                after[u].append(v)
                needs[v] += 1
        if sync_on[v] >= 0:
            after[sync_on[v]].append(v)
            needs[v] += 1
    ready = [v for v in range(n) if needs[v] == 0]
    level = [0] * n
    done = 0
    while ready:
        v = ready.pop()
        done += 1
        best, mine = 0, kind[v]
        for j in range(first_dep[v], first_dep[v + 1]):
            u = src[j]
            if u >= 0:
                up = level[u] if j == chain[v] or kind[u] < mine else level[u] + 1
                if up > best:
                    best = up
        g = sync_on[v]
        if g >= 0 and level[g] + (kind[g] >= mine) > best:
            best = level[g] + (kind[g] >= mine)
        level[v] = best
        for w in after[v]:
            needs[w] -= 1
            if needs[w] == 0:
                ready.append(w)
    return np.array(level, np.int64) if done == n else np.full(n, -1, np.int64)


@dataclass
class _Group:
    """The items of one kind in lane order, and what a pass needs of them."""

    items: np.ndarray  # item ids, lane by lane, each lane in item order
    pred: np.ndarray  # the previous item on the lane (-1 at a lane's first)
    chain: np.ndarray  # the flat dependency on it (-1: none, the lane's sum is cut there)
    ext: np.ndarray  # the other dependencies, by item in ``items`` order
    ext_at: np.ndarray  # where each item's run of ``ext`` starts (items with none: not listed)
    has_ext: np.ndarray  # per position: whether it has any other dependency
    no_deps: np.ndarray  # per position: no dependency at all (it starts when it did)


class Union:
    """Several step graphs as one set of arrays (each graph's items, lanes and dependencies offset past the last's),
    grouped for the passes."""

    def __init__(self, arrays: Sequence[StepArrays]) -> None:
        items = np.cumsum([0] + [len(a.t0) for a in arrays])
        deps = np.cumsum([0] + [len(a.dep_src) for a in arrays])
        lanes = np.cumsum([0] + [int(a.lane.max()) + 1 if len(a.lane) else 0 for a in arrays])
        self.offsets, self.dep_offsets, self.size = items[:-1], deps[:-1], int(items[-1])

        def joined(name: str, shift: np.ndarray | None = None, keep_negative: bool = False) -> np.ndarray:
            parts = []
            for k, a in enumerate(arrays):
                part = getattr(a, name)
                if shift is not None:
                    part = np.where(part >= 0, part + shift[k], part) if keep_negative else part + shift[k]
                parts.append(part)
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)

        self.t0, self.t1, self.group = joined("t0"), joined("t1"), joined("group")
        self.lane = joined("lane", lanes[:-1])
        self.sync_on, self.tail = joined("sync_on", self.offsets, True), joined("tail")
        self.first_dep = joined("first_dep", self.dep_offsets)
        self.dep_item, self.dep_src = joined("dep_item", self.offsets), joined("dep_src", self.offsets, True)
        self.dep_point, self.dep_lag = joined("dep_point"), joined("dep_lag")
        self.dep_host, self.dep_fixed = joined("dep_host"), joined("dep_fixed")
        self.chain = joined("chain", self.dep_offsets, True)
        self.is_call = self.group == 0
        level = joined("level")
        self.acyclic = bool((level >= 0).all())
        # what no plan changes, of a bound on every time a replay reaches (``replay_union``): the original times,
        # the offsets, the fixed times and the synchronising calls' tails (a scale on the host leaves them whole)
        self.reach = (int(np.abs(self.t0).max(initial=0)) + int(np.abs(self.t1).max(initial=0))
                      + int(np.abs(self.dep_point).sum()) + int(np.abs(self.dep_fixed).sum())
                      + int(np.abs(self.tail).sum()))
        # items by (level, kind, lane, item): each (level, kind) a group, its lanes end to end, each in order
        ordered = np.lexsort((np.arange(self.size), self.lane, self.group, level))
        key = level[ordered] * len(_GROUPS) + self.group[ordered]
        cuts = np.flatnonzero(np.diff(key)) + 1
        self.groups = [self._group(items) for items in np.split(ordered, cuts)] if self.size else []

    def _group(self, items: np.ndarray) -> _Group:
        same = np.zeros(len(items), bool)
        same[1:] = self.lane[items[1:]] == self.lane[items[:-1]]
        pred = np.where(same, np.roll(items, 1), -1)
        chain = np.where(same, self.chain[items], -1)
        chain = np.where((chain >= 0) & (self.dep_src[np.maximum(chain, 0)] == pred), chain, -1)
        position = np.full(self.size, -1, np.int64)
        position[items] = np.arange(len(items))
        in_group = position[self.dep_item] >= 0
        chained = np.zeros(len(self.dep_src), bool)
        chained[chain[chain >= 0]] = True
        ext = np.flatnonzero(in_group & ~chained)
        ext = ext[np.argsort(position[self.dep_item[ext]], kind="stable")]
        at_pos = position[self.dep_item[ext]]
        starts = np.flatnonzero(np.r_[True, at_pos[1:] != at_pos[:-1]]) if len(ext) else np.zeros(0, np.int64)
        has_ext = np.zeros(len(items), bool)
        has_ext[at_pos[starts]] = True
        return _Group(items, pred, chain, ext, starts, has_ext, ~has_ext & (chain < 0))

    def items_of(self, k: int) -> np.ndarray:
        return np.arange(self.offsets[k], self.offsets[k + 1] if k + 1 < len(self.offsets) else self.size)

    def deps_of(self, k: int) -> np.ndarray:
        return np.arange(self.dep_offsets[k],
                         self.dep_offsets[k + 1] if k + 1 < len(self.dep_offsets) else len(self.dep_src))


def replay_union(union: Union, plans: Sequence[Sequence[Plan]]) -> tuple[np.ndarray, np.ndarray] | None:
    """Every item's replayed start and end (relative to its step's start; rows: plans, columns: the union's items),
    ``plans[p][k]`` applied to graph k; None where the arrays cannot hold it (a cycle, times past int64's reach)."""
    if not union.acyclic:
        return None
    dur, lag, sync = _inputs(union, plans)
    start = np.broadcast_to(union.t0, dur.shape).copy()
    end = np.broadcast_to(union.t1, dur.shape).copy()
    # every time a replay reaches is a fixed time plus durations, lags, offsets and tails along a path, so within
    # ±reach: a lane's first item cuts its running sum by more than twice that
    reach = union.reach + int(np.abs(dur).sum(axis=1).max(initial=0)) + int(np.abs(lag).sum(axis=1).max(initial=0))
    cut = 4 * reach + 1
    if cut * (union.size + 1) >= 2**61:
        return None
    for group in union.groups:
        _pass(union, group, start, end, dur, lag, sync, cut)
    return start, end


def _inputs(union: Union, plans: Sequence[Sequence[Plan]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per plan: every item's duration, every dependency's lag, and which synchronising calls still wait (a sync the
    plan gives a duration to does not): the sequential replay's rules (``whatif._times`` and ``_run``)."""
    p = len(plans)
    base_dur = union.t1 - union.t0
    dur = np.broadcast_to(base_dur, (p, union.size)).copy()
    lag = np.broadcast_to(union.dep_lag, (p, len(union.dep_lag))).copy()
    sync = np.broadcast_to(union.sync_on >= 0, (p, union.size)).copy()
    for row, per_graph in enumerate(plans):
        for k, plan in enumerate(per_graph):
            if plan.host_scale != 1:
                items, deps = union.items_of(k), union.deps_of(k)
                calls = items[union.is_call[items]]
                dur[row, calls] = np.rint(plan.host_scale * base_dur[calls]).astype(np.int64)
                hosts = deps[union.dep_host[deps]]
                lag[row, hosts] = np.rint(plan.host_scale * union.dep_lag[hosts]).astype(np.int64)
            if plan.duration:
                at = np.fromiter(plan.duration.keys(), np.int64, len(plan.duration)) + union.offsets[k]
                dur[row, at] = np.fromiter(plan.duration.values(), np.int64, len(plan.duration))
                sync[row, at] = False
            if plan.lag:
                at = np.array([union.first_dep[union.offsets[k] + v] + i for v, i in plan.lag], np.int64)
                lag[row, at] = np.fromiter(plan.lag.values(), np.int64, len(plan.lag))
    return dur, lag, sync


def _pass(union: Union, g: _Group, start: np.ndarray, end: np.ndarray, dur: np.ndarray, lag: np.ndarray,
          sync: np.ndarray, cut: int) -> None:
    """One group's items from the times of the groups before it: the other dependencies, then every lane's
    recurrence at once (the module docstring)."""
    items, rows = g.items, start.shape[0]
    other = np.full((rows, len(items)), _NEG, np.int64)
    if len(g.ext):
        src, point = union.dep_src[g.ext], union.dep_point[g.ext]
        s = np.maximum(src, 0)
        at = np.where(point == -2, union.dep_fixed[g.ext],
                      np.where(point == -1, end[:, s], start[:, s] + np.minimum(point, dur[:, s])))
        other[:, g.has_ext] = np.maximum.reduceat(at + lag[:, g.ext], g.ext_at, axis=1)
    if g.no_deps.any():
        other[:, g.no_deps] = union.t0[items[g.no_deps]]
    linked = g.chain >= 0
    pred, chain = np.maximum(g.pred, 0), np.maximum(g.chain, 0)
    waits = sync[:, pred] & linked
    own = np.where(waits, np.minimum(union.tail[pred], dur[:, pred]), dur[:, pred])
    step = np.where(linked, own + lag[:, chain], -cut)
    waited = end[:, np.maximum(union.sync_on[pred], 0)] + union.tail[pred] + lag[:, chain]
    other = np.where(waits, np.maximum(other, waited), other)
    total = np.cumsum(step, axis=1)
    start[:, items] = total + np.maximum.accumulate(other - total, axis=1)
    mine = start[:, items]
    end[:, items] = np.where(sync[:, items],
                             np.maximum(mine + np.minimum(union.tail[items], dur[:, items]),
                                        end[:, np.maximum(union.sync_on[items], 0)] + union.tail[items]),
                             mine + dur[:, items])


def batches(count: int, size: int) -> list[range]:
    """Plan rows in batches that keep each matrix near ``_CELLS`` cells."""
    step = max(1, _CELLS // max(size, 1))
    return [range(i, min(i + step, count)) for i in range(0, count, step)]
