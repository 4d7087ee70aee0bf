"""The what-if replay of many plans over many steps at once, on arrays (``fuseprof.analysis.paths.whatif`` defines it).

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
synchronisation after every op) costs a few NumPy calls per level (a trace of such steps: 5 ms where the sequential
replay takes 2), and steps of a few dozen items cost more in NumPy calls than in items, so all the steps replayed
together are built and grouped together (a rank's 90 steps of ~28 items, for the fusion table and the path: 7 ms,
in sequence 13; 270 steps: 23 ms, in sequence 50). Times are kept relative to each step's start, so every sum
stays far from int64's limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    from fuseprof.analysis.paths.critical_path import Dep, StepGraph
    from fuseprof.analysis.paths.plan import Plan

_NEG = -(2**62)  # no dependency of that kind: below every time
_CELLS = 2**21  # plans × items per batch (a few int64 matrices of this many cells: ~16 MB each)
_GROUPS = ("call", "gpu", "end")  # the kinds in the order a level takes them (a host call launches GPU work)


_Arrays = TypeVar("_Arrays", bound="StepArrays")  # ``of`` builds a StepArrays or a Union


@dataclass
class StepArrays:
    """Step graphs as arrays, laid end to end (each one's items, lanes and dependencies past the last's): items'
    original times relative to their step's start, kind, lane, the synchronising calls' waited-for item and tail,
    and the dependencies flat (item, source, point: -2 fixed / -1 end / else an offset into the source, lag,
    whether the lag is the host's own, the fixed time) with each item's chain dependency (on the previous item of
    its lane); where each graph's items and dependencies begin. All the steps replayed together are built together
    (a step of a few dozen items costs more in NumPy calls than in items), and kept, grouped (``Union``), in the
    first step's ``replay_inputs`` (``whatif._union``)."""

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
    offsets: np.ndarray  # per graph: its first item
    dep_offsets: np.ndarray  # per graph: its first dependency

    @property
    def acyclic(self) -> bool:
        """Whether the items' own order (a sync after the work it waited for) has no cycle: the arrays can hold
        the steps (a start-and-end order can exist where this one does not: work queued behind what a sync
        launched)."""
        return bool((self.level >= 0).all())

    @classmethod
    def of(cls: type[_Arrays], graphs: Sequence[StepGraph], host_lags: Sequence[str]) -> _Arrays:
        """The arrays of ``graphs``: each graph's lanes, chains and levels worked out on its own (in Python, where a
        graph's lists are short and at hand), the times and the flat dependencies as arrays for all at once."""
        host, kind_of = set(host_lags), {k: i for i, k in enumerate(_GROUPS)}
        kinds: list[int] = []
        lane: list[int] = []
        counts: list[int] = []
        deps: list[Dep] = []
        src: list[int] = []
        point: list[int] = []
        chain: list[int] = []
        level: list[int] = []
        offsets: list[int] = []
        dep_offsets: list[int] = []
        lanes_before = 0
        shapes: dict[tuple[tuple[object, ...], ...], tuple[list[int], list[int]]] = {}
        for graph in graphs:
            base, dep_base = len(kinds), len(deps)
            offsets.append(base)
            dep_offsets.append(dep_base)
            own_kinds = [kind_of[k] for k in graph.kind]
            lanes: dict[tuple[str, str], int] = {}
            own_lane = [lanes.setdefault((k, x), len(lanes)) for k, x in zip(graph.kind, graph.lane)]
            own_counts = [len(d) for d in graph.deps]
            flat = [d for item_deps in graph.deps for d in item_deps]
            own_src = [d.src for d in flat]
            own_point = [-2 if d.src < 0 else -1 if d.offset is None else d.offset for d in flat]
            own_chain, own_level = _shaped(graph, own_kinds, own_lane, own_counts, own_src, own_point, shapes)
            level += own_level
            kinds += own_kinds
            lane += [lanes_before + x for x in own_lane]
            lanes_before += len(lanes)
            counts += own_counts
            deps += flat
            src += [u + base if u >= 0 else u for u in own_src]
            point += own_point
            chain += [c + dep_base if c >= 0 else -1 for c in own_chain]
        n = len(kinds)
        first_dep = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=first_dep[1:])
        starts = np.array(offsets, np.int64)
        item_base = np.repeat(starts, np.diff(np.append(starts, n)))  # per item: its graph's first item
        empty = np.zeros(0, np.int64)
        t0 = np.concatenate([np.asarray(g.t0, np.int64) - g.start_ns for g in graphs]) if graphs else empty
        t1 = np.concatenate([np.asarray(g.t1, np.int64) - g.start_ns for g in graphs]) if graphs else empty
        sync = np.concatenate([np.asarray(g.sync_on, np.int64) for g in graphs]) if graphs else empty
        sync = np.where(sync >= 0, sync + item_base, -1)
        return cls(t0, t1, np.array(kinds, np.int64), np.array(lane, np.int64), sync,
                   np.where(sync >= 0, t1 - t1[np.maximum(sync, 0)], 0), first_dep[:-1],
                   np.repeat(np.arange(n, dtype=np.int64), counts), np.array(src, np.int64),
                   np.array(point, np.int64), np.array([d.lag for d in deps], np.int64),
                   np.array([d.kind in host for d in deps], bool), np.array([d.offset or 0 for d in deps], np.int64),
                   np.array(chain, np.int64), np.array(level, np.int64), starts, np.array(dep_offsets, np.int64))

    def graph_acyclic(self) -> list[bool]:
        """Per graph: whether the arrays can hold it (``acyclic``, graph by graph)."""
        bounds = [*self.offsets.tolist(), len(self.level)]
        return [bool((self.level[a:b] >= 0).all()) for a, b in zip(bounds, bounds[1:])]


def _shaped(graph: StepGraph, kinds: list[int], lane: list[int], counts: list[int], src: list[int], point: list[int],
            shapes: dict[tuple[tuple[object, ...], ...], tuple[list[int], list[int]]]) -> tuple[list[int], list[int]]:
    """A graph's chains (``_chains``) and levels (``_levels``), kept in ``shapes`` by what they read: the step's
    kinds, lanes, sources, which points are ends, and syncs. A loop's steps mostly share one shape, worked out once
    (a rank of 90 steps in 8 shapes: its arrays 4.8 ms -> 3.0)."""
    shape = (tuple(graph.kind), tuple(graph.lane), tuple(counts), tuple(src), tuple([x == -1 for x in point]),
             tuple(graph.sync_on))
    if shape not in shapes:
        first = [0, *accumulate(counts)]
        chains = _chains(lane, src, point, first)
        shapes[shape] = chains, _levels(kinds, chains, src, first, graph.sync_on)
    return shapes[shape]


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
            ) -> list[int]:
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
    return level if done == n else [-1] * n


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
    # whether any item follows a synchronising call on its lane, and whether any item is one: a pass skips the
    # waits' arrays where none is (most groups; a replay's sync matrix only clears syncs, never sets one)
    after_sync: bool
    syncs: bool


@dataclass
class Union(StepArrays):
    """Step graphs' arrays grouped for the passes (``Union.of(graphs, host_lags)``)."""

    def __post_init__(self) -> None:
        self.size = len(self.t0)
        self.is_call = self.group == 0
        self.is_gpu = self.group == 1
        # each item's and each dependency's step (its position in the graphs): a plan's scales reach them by it
        graphs = np.arange(len(self.offsets))
        self.item_graph = np.repeat(graphs, np.diff(np.append(self.offsets, self.size)))
        self.dep_graph = np.repeat(graphs, np.diff(np.append(self.dep_offsets, len(self.dep_src))))
        level = self.level
        # what no plan changes, of a bound on every time a replay reaches (``replay_union``): the original times,
        # the offsets, the fixed times and the synchronising calls' tails (a scale on the host leaves them whole)
        self.reach = (int(np.abs(self.t0).max(initial=0)) + int(np.abs(self.t1).max(initial=0))
                      + int(np.abs(self.dep_point).sum()) + int(np.abs(self.dep_fixed).sum())
                      + int(np.abs(self.tail).sum()))
        # items by (level, kind, lane, item): each (level, kind) a group, its lanes end to end, each in order
        ordered = np.lexsort((np.arange(self.size), self.lane, self.group, level))
        key = level[ordered] * len(_GROUPS) + self.group[ordered]
        cuts = np.flatnonzero(np.diff(key)) + 1
        self.groups = self._groups(ordered, cuts) if self.size else []

    def _groups(self, ordered: np.ndarray, cuts: np.ndarray) -> list[_Group]:
        """Each group's chains and its other dependencies. A dependency belongs to its item's group (a chain too: it
        is one of its item's own), so the other dependencies of every group come from one sort of them all by
        (group, position in the group, dependency), not from a scan of every dependency and item per group (a
        window of 814 groups over 65k items, hta_v100_ddp_profile_memory's: ``Union.of`` 280-295 -> 120-123 ms)."""
        parts = np.split(ordered, cuts)
        sizes = np.diff(np.concatenate(([0], cuts, [self.size])))
        gid = np.empty(self.size, np.int64)
        position = np.empty(self.size, np.int64)
        gid[ordered] = np.repeat(np.arange(len(parts)), sizes)
        position[ordered] = np.arange(self.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        chains = [self._chain(items) for items in parts]
        chained = np.zeros(len(self.dep_src), bool)
        for _, chain in chains:
            chained[chain[chain >= 0]] = True
        ext = np.flatnonzero(~chained)
        ext = ext[np.lexsort((ext, position[self.dep_item[ext]], gid[self.dep_item[ext]]))]
        bounds = np.searchsorted(gid[self.dep_item[ext]], np.arange(len(parts) + 1))
        return [self._group(items, pred, chain, ext[bounds[g]:bounds[g + 1]], position)
                for g, (items, (pred, chain)) in enumerate(zip(parts, chains))]

    def _chain(self, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A group's items' previous item on their lane (-1 at a lane's first) and their dependency on it (-1: none)."""
        same = np.zeros(len(items), bool)
        same[1:] = self.lane[items[1:]] == self.lane[items[:-1]]
        pred = np.where(same, np.roll(items, 1), -1)
        chain = np.where(same, self.chain[items], -1)
        return pred, np.where((chain >= 0) & (self.dep_src[np.maximum(chain, 0)] == pred), chain, -1)

    def _group(self, items: np.ndarray, pred: np.ndarray, chain: np.ndarray, ext: np.ndarray, position: np.ndarray
               ) -> _Group:
        """One group from its chains and its other dependencies (``ext``, by position in the group)."""
        at_pos = position[self.dep_item[ext]]
        starts = np.flatnonzero(np.r_[True, at_pos[1:] != at_pos[:-1]]) if len(ext) else np.zeros(0, np.int64)
        has_ext = np.zeros(len(items), bool)
        has_ext[at_pos[starts]] = True
        return _Group(items, pred, chain, ext, starts, has_ext, ~has_ext & (chain < 0),
                      bool(((self.sync_on[np.maximum(pred, 0)] >= 0) & (chain >= 0)).any()),
                      bool((self.sync_on[items] >= 0).any()))


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
    offsets, first_dep = union.offsets.tolist(), union.first_dep.tolist()
    # every plan's durations and lags as (row, position, value) in parallel lists, set at once: a rank's short steps
    # make thousands of small plans, and NumPy's cost per call would be most of the replay (a tuple per entry
    # instead: the 131 MB trace's replay inputs 25 -> 51 ms); the scales as (plans × steps) matrices, applied a
    # row at a time (``_scaled``; before, a few NumPy calls per plan and step: a rank's loop periods 3-4 ms a call -> 0.5)
    dur_row: list[int] = []
    dur_at: list[int] = []
    dur_value: list[int] = []
    lag_row: list[int] = []
    lag_at: list[int] = []
    lag_value: list[int] = []
    host_scale: list[float] = []
    gpu_scale: list[float] = []
    for row, per_graph in enumerate(plans):
        for k, plan in enumerate(per_graph):
            host_scale.append(plan.host_scale)
            gpu_scale.append(plan.gpu_scale)
            if plan.duration:
                dur_row += [row] * len(plan.duration)
                dur_at += [v + offsets[k] for v in plan.duration]
                dur_value += plan.duration.values()
            if plan.lag:
                lag_row += [row] * len(plan.lag)
                lag_at += [first_dep[offsets[k] + v] + i for v, i in plan.lag]
                lag_value += plan.lag.values()
    host = np.array(host_scale, np.float64).reshape(p, len(offsets))
    _scaled(dur, host, union.item_graph, np.flatnonzero(union.is_call))  # before the plans' own durations
    _scaled(lag, host, union.dep_graph, np.flatnonzero(union.dep_host))
    rows, at = np.array(dur_row, np.int64), np.array(dur_at, np.int64)
    dur[rows, at] = np.array(dur_value, np.int64)
    sync[rows, at] = False
    # after the plans' own durations, which it scales too
    _scaled(dur, np.array(gpu_scale, np.float64).reshape(p, len(offsets)), union.item_graph, np.flatnonzero(union.is_gpu))
    lag[np.array(lag_row, np.int64), np.array(lag_at, np.int64)] = np.array(lag_value, np.int64)
    return dur, lag, sync


def _scaled(values: np.ndarray, scale: np.ndarray, graph_of: np.ndarray, columns: np.ndarray) -> None:
    """``values``' ``columns`` (items or dependencies; ``graph_of``: each one's step) times their plan's factor
    (``scale``: plans × steps), rounded, where that factor is not 1: ``rint(factor × value)`` element by element,
    as a plan at a time did. Row by row, one factor for the whole row where its steps share it (a loop period's
    rows: no matrix of factors over a large window's items)."""
    for row in np.flatnonzero((scale != 1).any(axis=1)).tolist():
        factors, mine = scale[row], values[row, columns]
        if (factors == factors[0]).all():
            values[row, columns] = np.rint(factors[0] * mine).astype(np.int64)
            continue
        factor = factors[graph_of[columns]]
        values[row, columns] = np.where(factor != 1, np.rint(factor * mine).astype(np.int64), mine)


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
    own = dur[:, pred]
    if g.after_sync:
        waits = sync[:, pred] & linked
        own = np.where(waits, np.minimum(union.tail[pred], own), own)
        waited = end[:, np.maximum(union.sync_on[pred], 0)] + union.tail[pred] + lag[:, chain]
        other = np.where(waits, np.maximum(other, waited), other)
    step = np.where(linked, own + lag[:, chain], -cut)
    total = np.cumsum(step, axis=1)
    start[:, items] = total + np.maximum.accumulate(other - total, axis=1)
    mine = start[:, items]
    end[:, items] = np.where(sync[:, items],
                             np.maximum(mine + np.minimum(union.tail[items], dur[:, items]),
                                        end[:, np.maximum(union.sync_on[items], 0)] + union.tail[items]),
                             mine + dur[:, items]) if g.syncs else mine + dur[:, items]


def batches(count: int, size: int) -> list[range]:
    """Plan rows in batches that keep each matrix near ``_CELLS`` cells."""
    step = max(1, _CELLS // max(size, 1))
    return [range(i, min(i + step, count)) for i in range(0, count, step)]
