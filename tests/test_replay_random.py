"""The what-if replay on arrays (``fuseprof.analysis.paths.replay_lanes``) against the sequential one that defines it
(``whatif._times``) on random step graphs: built by the builder's own steps (``_add_calls``, ``_add_gpu`` with its
syncs, ``_add_end``, ``bind`` with its contention) from random host calls and GPU work — several threads handing
work over, several streams and devices, stream waits, many synchronising calls, nested and overlapping calls,
zero-length items, GPU work that starts before its launch, timestamps near 1.7e18 ns — under random plans
(durations, syncs' durations included, lag overrides, negative lags, host scales 0, 0.3, 0.5, 1.7, 4) and the
analysis' own plans. Every item's start and end, every plan, several steps in one set of arrays, to the ns.

The last two tests keep the case this generator found first (see their docstrings): sync tails, which the host scale
does not shrink, were left out of ``replay_union``'s bound on times, so a lane's cut could be too small."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

from fuseprof.analysis.facts.sync_edges import SyncEdges
from fuseprof.analysis.paths.critical_path import (
    StepGraph,
    _add_calls,
    _add_end,
    _add_gpu,
    bind,
    topological_order,
    walk,
)
from fuseprof.analysis.paths.plan import Plan
from fuseprof.analysis.paths.replay_lanes import StepArrays, Union, replay_union
from fuseprof.analysis.paths.whatif import (
    HOST_LAGS,
    _times,
    fuse_plan,
    graph_plan,
    overlap_plan,
    replay,
    step_times,
    zero_plan,
)

HUGE = 1_700_000_000_000_000_000


class _History:
    """``StreamHistory``'s one method over plain (start, end, lane) rows: earlier steps' work on each stream."""

    def __init__(self, rows: list[tuple[int, int, str]]) -> None:
        self.by_lane: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for t0, t1, lane in rows:
            self.by_lane[lane].append((t0, t1))

    def ended_before(self, lane: str, first: int) -> int | None:
        ends = [e for s, e in self.by_lane.get(lane, []) if s < first]
        return max(ends) if ends else None


def _build(start: int, calls: list[tuple], gpu: list[tuple], partners: dict[str, set[str]],
           history: list[tuple[int, int, str]] = (), wait_times: dict[str, list[int]] | None = None) -> StepGraph:
    """A step graph as ``step_graphs`` builds one: calls (t0, t1, role, name, tid, correlation) and GPU work
    (t0, t1, role, name, lane, correlation, tid), each sorted by start here."""
    calls = sorted(calls, key=lambda c: c[0])
    gpu = sorted(gpu, key=lambda r: r[0])
    end = max([start + 10] + [c[1] for c in calls] + [r[1] for r in gpu])
    graph = StepGraph("step", start, end)
    by_correlation = _add_calls(graph, calls, partners)
    _add_gpu(graph, [tuple(r) + (k,) for k, r in enumerate(gpu)], _History(list(history) + [(r[0], r[1], r[4]) for r in gpu]),
             by_correlation, wait_times or {}, SyncEdges())  # no recorded waits: the wait calls' guess
    _add_end(graph)
    bind(graph)
    return graph


def _random_graph(rng: random.Random) -> StepGraph:
    start = rng.choice([0, 1_000, HUGE + rng.randrange(10**9)])
    tids = [str(100 + i) for i in range(rng.randint(1, 3))]
    partners: dict[str, set[str]] = defaultdict(set)
    for a in tids:
        for b in tids:
            if a < b and rng.random() < 0.6:
                partners[a].add(b)
                partners[b].add(a)
    lanes = rng.sample(["0:7", "0:13", "0:21", "1:7"], rng.randint(1, 4))
    overlap = rng.choice([0, 0.1, 0.3, 0.7])  # how often a thread's next call starts inside the last (nesting)
    clock = {t: start + rng.randint(0, 50) for t in tids}
    calls = []
    for corr in range(rng.randint(1, 30)):
        tid = rng.choice(tids)
        t0 = clock[tid]
        dur = rng.choice([0, 0, 1, rng.randint(1, 30), rng.randint(1, 300)])
        role = rng.choices(["launch", "sync", "runtime", "wait call"], [5, 2, 1, 1])[0]
        calls.append((t0, t0 + dur, role, f"call{corr}", tid, corr))
        clock[tid] = t0 + rng.randint(1, 3) if rng.random() < overlap else \
            t0 + dur + rng.choice([0, 0, 1, rng.randint(1, 50)])
    gpu, last_end = [], {}
    for t0, _, role, _, tid, corr in sorted(calls):
        if role in ("launch", "sync") and rng.random() < 0.8:
            for _ in range(rng.choice([1, 1, 1, 2])):
                lane = rng.choice(lanes)
                at = max(t0 + rng.choice([-5, 0, 1, rng.randint(1, 40)]),  # before its launch too (a clock off)
                         last_end.get(lane, -(10**30)) + rng.choice([-3, 0, 0, 2, rng.randint(0, 30)]))
                dur = rng.choice([0, 1, rng.randint(1, 60), rng.randint(1, 400)])
                kind = rng.choice(["kernel", "kernel", "memcpy", "communication"])
                gpu.append((at, at + dur, kind, f"k{len(gpu)}", lane, corr, tid))
                last_end[lane] = at + dur
    if rng.random() < 0.3:  # work without a launch in the trace
        at = start + rng.randint(0, 500)
        gpu.append((at, at + rng.randint(0, 50), "memset", "memset", rng.choice(lanes), None, tids[0]))
    history = [(start - 100, start + rng.randint(-50, 80), lane) for lane in lanes if rng.random() < 0.5]
    wait_times: dict[str, list[int]] = defaultdict(list)
    for t0, _, role, _, tid, _ in sorted(calls):
        if role == "wait call":
            wait_times[tid].append(t0)
    return _build(start, calls, gpu, partners, history, dict(wait_times))


def _random_plans(rng: random.Random, g: StepGraph) -> list[Plan]:
    n = len(g.kind)
    syncs = [v for v in range(n) if g.sync_on[v] >= 0]
    plans = [Plan(), Plan(host_scale=0), Plan(host_scale=0.5), Plan(host_scale=1.7), Plan(host_scale=4)]
    for _ in range(8):
        plan = Plan(host_scale=rng.choice([1, 1, 1, 0, 0.3, 0.5, 1.7, 4]))
        for v in rng.sample(range(n), min(n, rng.randint(0, 4))):
            plan.duration[v] = rng.choice([0, rng.randint(0, 2 * max(1, g.t1[v] - g.t0[v]) + 5)])
        for v in rng.sample(syncs, min(len(syncs), rng.randint(0, 2))):
            plan.duration[v] = rng.randint(0, 50)
        for v in rng.sample(range(n), min(n, rng.randint(0, 4))):
            if g.deps[v]:
                plan.lag[(v, rng.randrange(len(g.deps[v])))] = rng.randint(-500, 500)
        plans.append(plan)
    events = [e for e in g.event if e is not None]
    if events:
        plans.append(fuse_plan(g, [(rng.sample(events, min(len(events), 3)), rng.randint(0, 100))]))
    path = walk(g)
    plans += [graph_plan(g), overlap_plan(g), graph_plan(g).merge(Plan(host_scale=0.5)),
              zero_plan(g, path["item"].tolist(), path["to_item"].tolist(), path["dep"].tolist(),
                        path["dur_ns"].tolist())]
    return plans


def _assert_equal(graphs: list[StepGraph], plans: list[list[Plan]], found: tuple[np.ndarray, np.ndarray],
                  union: Union) -> None:
    for p, row in enumerate(plans):
        for k, (g, plan) in enumerate(zip(graphs, row)):
            start, end = _times(g, plan)
            at = slice(int(union.offsets[k]), int(union.offsets[k]) + len(g.kind))
            assert (found[0][p, at] + g.start_ns).tolist() == start, (p, k)
            assert (found[1][p, at] + g.start_ns).tolist() == end, (p, k)


def _compare(graphs: list[StepGraph], rng: random.Random) -> None:
    per_graph = [_random_plans(rng, g) for g in graphs]
    rows = max(len(p) for p in per_graph)
    plans = [[mine[r % len(mine)] for mine in per_graph] for r in range(rows)]
    union = Union.of(graphs, HOST_LAGS)
    found = replay_union(union, plans)
    if found is None:  # only for an item graph with a cycle (a sync after work queued behind what it launched)
        assert not union.acyclic
        return
    _assert_equal(graphs, plans, found, union)


def test_random_graphs_every_start_and_end() -> None:
    rng = random.Random(20260501)
    compared = alone = 0
    for _ in range(400):
        graphs = []
        for _ in range(rng.randint(1, 5)):
            g = _random_graph(rng)
            try:
                topological_order(g)  # nested calls can close a cycle in the builder itself: no replay at all
            except RuntimeError:
                continue
            if (StepArrays.of([g], HOST_LAGS).level < 0).any():
                _compare([g], rng)  # on its own: it would send the whole union to the fallback
                alone += 1
            else:
                graphs.append(g)
        if graphs:
            _compare(graphs, rng)  # several steps in one set of arrays, their groups shared
            compared += 1
    assert compared > 300 and alone < 100


def test_scales_that_differ_by_plan_and_step_every_start_and_end() -> None:
    """Host and GPU scales that differ from plan to plan and step to step in one set of arrays (the loop period's
    host-only and GPU-only rows, each step's own plan merged in): each step's calls, host lags and GPU work scaled
    by its own plan's factors, the GPU's after the plan's own durations, as the sequential replay does it."""
    rng = random.Random(20261207)
    compared = 0
    for _ in range(60):
        graphs = []
        for _ in range(rng.randint(2, 5)):
            g = _random_graph(rng)
            try:
                topological_order(g)
            except RuntimeError:
                continue
            if StepArrays.of([g], HOST_LAGS).acyclic:
                graphs.append(g)
        if not graphs:
            continue
        per_graph = [_random_plans(rng, g) for g in graphs]
        plans = [[rng.choice(mine).merge(Plan(host_scale=rng.choice([1, 1, 0, 0.3, 1.7]),
                                              gpu_scale=rng.choice([1, 1, 0, 0.5, 2.5]))) for mine in per_graph]
                 for _ in range(6)]
        union = Union.of(graphs, HOST_LAGS)
        found = replay_union(union, plans)
        assert found is not None
        _assert_equal(graphs, plans, found, union)
        compared += 1
    assert compared > 40


# --- the disagreement -----------------------------------------------------------------------------------


def _tail_chain(n: int, tail: int, ladder: list[tuple], more: int = 0) -> StepGraph:
    """Thread A: ``n`` synchronising calls v_i, each waiting for a kernel g_i launched by the call before it and
    ending just after v_i started, so v_i's tail (t1[v] - t1[g]) is ~``tail``. The syncs overlap (each starts
    inside the last, as nested calls do), which the builder takes as it finds them: each call after the last one's
    end. Then ``ladder``'s calls on threads B and C (a launch call's kernel ends with the sync after it: tail 0), and
    ``more`` long-tail syncs on B after those."""
    calls, gpu = [], []
    for i in range(n):
        calls += [(10 * i, 10 * i + 1, "launch", "L", "A", ("a", i)),
                  (10 * i + 2, 10 * i + 2 + tail, "sync", "v", "A", None)]
        gpu.append((10 * i + 1, 10 * i + 3, "kernel", "g", "0:1", ("a", i), "A"))
    calls += ladder
    gpu += [(t0 + 1, t0 + 5, "kernel", "h", "0:2", corr, "B") for t0, _, role, _, _, corr in ladder if role == "launch"]
    t = max(c[0] for c in calls) + 100
    for i in range(more):
        calls += [(t + 10 * i, t + 10 * i + 1, "launch", "M", "B", ("c", i)),
                  (t + 10 * i + 2, t + 10 * i + 2 + tail, "sync", "w", "B", None)]
        gpu.append((t + 10 * i + 1, t + 10 * i + 3, "kernel", "h", "0:2", ("c", i), "B"))
    return _build(0, calls, gpu, {"B": {"C"}, "C": {"B"}})


def test_minimal_sync_tails_past_the_cut() -> None:
    """10 overlapping syncs on thread A (tail ~1e6 each) and 10 quick calls handed
    back and forth between threads B and C (a wake each: a level each), replayed with ``host_scale=0`` (what
    ``calibrated_scale`` tries first). A's replay reaches 10 x 1e6, but ``replay_union``'s ``reach`` counts the
    plan's durations (the calls': 0 here) and not the syncs' tails, which the scale leaves whole: reach ~ 2e6, so
    the cut 4*reach+1 ~ 8e6 is less than A's times. In the (level 9, call) group, lane A comes first and its
    ``other - total`` stays above C's lane-first value, so the cumulative max carries it into lane C: C's last call,
    at 0 in the sequential replay, started at 998,892 on the arrays while the tails were not counted in ``reach``
    (any ``host_scale`` < ~0.1 with enough chained tails did it)."""
    ladder = [(100 + 2 * j, 101 + 2 * j, "runtime", "w", "BC"[j % 2], None) for j in range(10)]
    g = _tail_chain(10, 10**6, ladder)
    assert len(g.kind) == 41
    plan = Plan(host_scale=0)
    union = Union.of([g], HOST_LAGS)
    found = replay_union(union, [[plan]])
    assert found is not None
    start, end = _times(g, plan)
    assert (found[0][0] + g.start_ns).tolist() == start  # item 29 (C's last call) was 998892, not 0
    assert (found[1][0] + g.start_ns).tolist() == end


def test_step_times_with_the_host_at_zero() -> None:
    """The same leak seen in the step's time through ``step_times``: 40 overlapping syncs on A, a ladder of 42
    quick syncs on B (tail 0, a level each), then 30 long-tail syncs on B, whose times the leak pushed past A's
    end."""
    ladder = []
    for i in range(42):
        t = 500 + 10 * i
        ladder += [(t, t + 1, "launch", "M", "B", ("b", i)), (t + 2, t + 5, "sync", "w", "B", None)]
    g = _tail_chain(40, 1000, ladder, more=30)
    plan = Plan(host_scale=0)
    assert StepArrays.of([g], HOST_LAGS).acyclic  # the arrays take it: not the sequential replay against itself
    assert step_times([g], [[plan]])[0, 0] == replay(g, plan)


# --- cycles the generator found in the builder --------------------------------------------------------------


def _queued_behind_a_later_launch() -> StepGraph:
    """Thread 100: a sync [35, 56] and, nested inside it, a launch at 38 whose kernel runs [39, 40] on stream 0:21;
    a memset no launch call names runs [47, 56] on 0:21, queued behind that kernel. The memset ended last while
    the sync ran, but waiting for it would close a cycle: the sync's end, the nested launch (after the sync on its
    thread), its kernel, the memset queued behind it, the sync's end."""
    calls = [(35, 56, "sync", "cudaDeviceSynchronize", "100", None), (38, 38, "launch", "cudaLaunchKernel", "100", 5)]
    gpu = [(39, 40, "kernel", "k", "0:21", 5, "100"), (47, 56, "memset", "memset", "0:21", None, "100")]
    return _build(0, calls, gpu, {})


def test_a_sync_never_waits_for_work_queued_behind_a_later_launch() -> None:
    g = _queued_behind_a_later_launch()
    assert g.sync_on[0] == -1  # the memset (item 3) is queued behind the nested launch's kernel
    topological_order(g)  # acyclic: the replay and the walk can take it


def test_another_thread_s_later_launch_does_not_stop_a_sync_waiting() -> None:
    """Thread T launches K_b at 10 and synchronises from 20 to 200; thread T2 launches K_c at 30, and K_b waits on
    its stream for K_c. K_b is queued behind a launch made after the sync started, but on a thread the sync does
    not hand work to: no cycle, and K_b (the work that ended last while the sync ran) is what it waited for."""
    from fuseprof.analysis.paths.critical_path import Dep, _add_syncs

    g = StepGraph("step", 0, 300)
    a0 = g.add("call", "launch", "cudaLaunchKernel", "T", 0, 2)
    a1 = g.add("call", "launch", "cudaLaunchKernel", "T", 10, 12)
    sync = g.add("call", "sync", "cudaDeviceSynchronize", "T", 20, 200)
    c = g.add("call", "launch", "cudaLaunchKernel", "T2", 30, 32)
    ka = g.add("gpu", "kernel", "K_a", "0:7", 15, 35)
    kc = g.add("gpu", "kernel", "K_c", "0:9", 40, 55)
    kb = g.add("gpu", "kernel", "K_b", "0:8", 60, 190)
    g.deps[ka], g.deps[kc] = [Dep(a0, "launch", 0)], [Dep(c, "launch", 0)]
    g.deps[kb] = [Dep(a1, "launch", 0), Dep(kc, "wait", None)]
    _add_syncs(g, {})  # no sync the trace names the work of: the last to end while it ran
    assert g.sync_on[sync] == kb


def test_a_cycle_is_an_error_not_an_endless_walk() -> None:
    """Two calls of no duration at one time, each bound to the other (no builder makes this; a trace of
    zero-length nested calls came close): the walk stops with an error after visiting every item, instead of
    going round until memory runs out."""
    import pytest

    from fuseprof.analysis.paths.critical_path import Dep

    g = StepGraph("step", 0, 5)
    for _ in range(2):
        g.add("call", "runtime", "call", "100", 5, 5)
    g.add("end", "end", "(step end)", "", 5, 5)
    g.deps[0], g.deps[1], g.deps[2] = [Dep(1, "host", None)], [Dep(0, "host", None)], [Dep(1, "end", None)]
    g.binding = [0, 0, 0]
    with pytest.raises(RuntimeError, match="cycle"):
        walk(g)


def test_a_step_the_arrays_cannot_hold_is_replayed_in_sequence_beside_the_others() -> None:
    """``step_times`` over steps of which some have a cycle in their items' own order (not in their starts and
    ends): those replayed in sequence, the rest on the arrays, every answer the sequential one."""
    rng = random.Random(7)
    graphs, cyclic = [], 0
    while len(graphs) < 12 or not cyclic:
        g = _random_graph(rng)
        try:
            topological_order(g)
        except RuntimeError:
            continue
        if not StepArrays.of([g], HOST_LAGS).acyclic:
            cyclic += 1
        graphs.append(g)
    plans = [[Plan(host_scale=s)] * len(graphs) for s in (1, 0.5, 0)]
    slow = [[replay(g, p) for g, p in zip(graphs, row)] for row in plans]
    assert step_times(graphs, plans).tolist() == slow and 0 < cyclic < len(graphs)
