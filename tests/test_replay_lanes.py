"""The what-if replay on arrays (``fuseprof.analysis.paths.replay_lanes``) against the sequential replay that defines it
(``whatif.replay``: one dependency at a time, in topological order): every step of real captures — a decode of
many syncs, a training step (autograd's thread hand-overs), side streams that wait on each other, a two-GPU rank
with collectives, a rank set of 90 short steps — under every kind of plan the analysis makes (fused chains, things
on the path zeroed, the host scaled, graph capture, compiled regions, overlapped communication) and random ones,
to the ns."""

from __future__ import annotations

import gc
import random
import sys
import tempfile
import weakref
from pathlib import Path

import numpy as np
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.paths.path import chains_of, result_graphs
from fuseprof.analysis.paths.plan import Plan
from fuseprof.analysis.paths.replay_lanes import Union, replay_union
from fuseprof.analysis.paths.whatif import (
    HOST_LAGS,
    compile_plan,
    fuse_plan,
    graph_plan,
    overlap_plan,
    replay,
    step_times,
)
from fuseprof.parse.store import default_store

FIXTURES = Path(__file__).parent / "fixtures"
TRACES = [FIXTURES / "truth" / f"{name}.json.gz" for name in
          ("decode_eager", "train_foreach", "known_path", "sync_bound", "dataloader_wait", "prefill_compiled")] + \
    [FIXTURES / "tp2" / "tp_mlp-rank0.json.gz", FIXTURES / "bundles" / "llama4l-eager-h200"]


def _plans(result, graphs, rng: random.Random) -> list[list[Plan]]:  # type: ignore[no-untyped-def]
    """Every kind of plan the analysis and ``fuseprof whatif`` make, and random durations and lags."""
    chains = [chains_of(row) for _, row in result.fusion.iterrows()]
    rows = [[Plan() for _ in graphs], [Plan(host_scale=0.5) for _ in graphs], [Plan(host_scale=1.7) for _ in graphs]]
    rows += [[fuse_plan(g, c) for g in graphs] for c in chains[:6]]
    rows += [[fuse_plan(g, c).merge(Plan(host_scale=0.8)) for g in graphs] for c in chains[:2]]
    rows += [[graph_plan(g) for g in graphs], [overlap_plan(g) for g in graphs],
             [compile_plan(g, [x for c in chains for x in c]) for g in graphs]]
    for _ in range(4):
        row = []
        for g in graphs:
            plan = Plan()
            for v in rng.sample(range(len(g.kind)), min(6, len(g.kind))):
                plan.duration[v] = rng.randint(0, 2 * max(1, g.t1[v] - g.t0[v]))
            for v in rng.sample(range(len(g.kind)), min(6, len(g.kind))):
                if g.deps[v]:
                    plan.lag[(v, rng.randrange(len(g.deps[v])))] = rng.randint(-1_000, 5_000)
            row.append(plan)
        rows.append(row)
    return rows


def _on_arrays(graphs, plans) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Every step's replayed time on the arrays (``step_times`` replays a step they cannot hold in sequence)."""
    union = Union.of(graphs, HOST_LAGS)
    found = replay_union(union, plans)
    assert found is not None  # not a fallback
    return found[1][:, union.offsets + np.array([len(g.kind) - 1 for g in graphs])]


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_the_arrays_replay_equals_the_sequential_one_to_the_ns(trace: Path) -> None:
    result = analyze([trace])[0]
    graphs = result_graphs(result, default_store().tables(result.source)[0])
    assert graphs
    plans = _plans(result, graphs, random.Random(0))
    slow = np.array([[replay(g, p) for g, p in zip(graphs, row)] for row in plans])
    fast = _on_arrays(graphs, plans)
    assert fast.shape == (len(plans), len(graphs)) and (fast == slow).all()
    assert (fast[0] == [g.span_ns for g in graphs]).all()  # unchanged: every step's span
    assert (step_times(graphs, plans) == slow).all()  # what the analysis calls, on arrays or in sequence


def test_every_start_and_end_too() -> None:
    """Not only the step's end: every item's replayed start and end equal the sequential replay's."""
    from fuseprof.analysis.paths.whatif import _times

    trace = FIXTURES / "truth" / "known_path.json.gz"
    result = analyze([trace])[0]
    graphs = result_graphs(result, default_store().tables(result.source)[0])
    plans = _plans(result, graphs, random.Random(1))
    union = Union.of(graphs, HOST_LAGS)
    found = replay_union(union, plans)
    assert found is not None
    for p, row in enumerate(plans):
        for k, (g, plan) in enumerate(zip(graphs, row)):
            start, end = _times(g, plan)
            at = slice(int(union.offsets[k]), int(union.offsets[k]) + len(g.kind))
            assert (found[0][p, at] + g.start_ns == start).all() and (found[1][p, at] + g.start_ns == end).all()


def test_a_rank_of_many_short_steps() -> None:
    """90 steps of ~28 items (the rank set's traces), all in one set of arrays."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    from make_rank_set import make_rank_set  # type: ignore[import-not-found]

    with tempfile.TemporaryDirectory() as tmp:
        make_rank_set(Path(tmp), ranks=2, steps=90, slow_rank=1)
        trace = sorted(Path(tmp).glob("*.json"))[1]
        result = analyze([trace])[0]
        graphs = result_graphs(result, default_store().tables(trace)[0])
        assert len(graphs) == 90
        plans = _plans(result, graphs, random.Random(2))
        slow = np.array([[replay(g, p) for g, p in zip(graphs, row)] for row in plans])
        assert (_on_arrays(graphs, plans) == slow).all()


def test_a_step_graph_is_freed_the_moment_it_is_dropped() -> None:
    """A step graph keeps its replay inputs (the sequential replay's, which item each GPU event is, and on the first
    step the arrays of all) and they keep nothing of it: dropped, it is freed by its count of references, with the
    collector off — no cycle left for the collector's next pass to traverse (every step graph of a rank used to wait
    for it: 54k objects per rank of 270 steps, a 22 ms pass)."""
    trace = FIXTURES / "truth" / "known_path.json.gz"
    result = analyze([trace])[0]
    graphs = result_graphs(result, default_store().tables(result.source)[0])
    assert len(graphs) > 1
    plans = _plans(result, graphs, random.Random(3))  # the fuse plans ask each graph's items
    assert (step_times(graphs, plans)[0] == [g.span_ns for g in graphs]).all()  # the arrays, kept on the first
    assert [replay(g, p) for g, p in zip(graphs, plans[0])] == [g.span_ns for g in graphs]  # the sequential inputs
    assert all(g.replay_inputs is not None for g in graphs)
    refs = [weakref.ref(g) for g in graphs]
    gc.disable()
    try:
        del graphs
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()


def test_the_kept_arrays_answer_only_the_steps_they_were_built_for() -> None:
    """The arrays are kept on the first step for the next replay of the same steps: another list that starts with
    the same step (fewer steps, others, the same step twice, the first list again) gets its own answer, each the
    sequential replay's."""
    trace = FIXTURES / "truth" / "known_path.json.gz"
    result = analyze([trace])[0]
    graphs = result_graphs(result, default_store().tables(result.source)[0])
    assert len(graphs) >= 3
    chains = [chains_of(row) for _, row in result.fusion.iterrows()]
    for picked in ([0, 1], [0, 2], [0], [0, 1, 2], [0, 0], [0, 1], [2, 0]):
        steps = [graphs[k] for k in picked]
        plans = [[Plan() for _ in steps], [Plan(host_scale=0.5) for _ in steps],
                 [fuse_plan(g, chains[0]) for g in steps]]
        slow = [[replay(g, p) for g, p in zip(steps, row)] for row in plans]
        assert step_times(steps, plans).tolist() == slow, picked
