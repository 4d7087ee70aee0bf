"""The hand-over dependency of the step graph (``critical_path._add_calls``: a call on autograd's thread waits for
the call of its partner thread that ended last since the thread's previous call), found since issue 61's speed work
by a search over the partner's ends instead of a scan of its calls per call (17.9 s -> 0.29 s for the 42k calls of
the shared DDP trace taken as one step). Expected here by the definition, a scan of every call of the step."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuseprof.analysis.paths.critical_path import BEFORE, StepGraph, _wake_partners, step_graphs
from fuseprof.analysis.running.analyze import windowed_events
from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, shared_traces


def _expected(graph: StepGraph, v: int, partners: dict[str, set[str]]) -> list[int]:
    """Per partner thread of call ``v``'s, the first of its calls in the step that ended last in (the end of
    ``v``'s thread's previous call, or the step's start; ``v``'s start], by a scan."""
    calls = [u for u in range(v) if graph.kind[u] == "call"]
    mine = [u for u in calls if graph.lane[u] == graph.lane[v]]
    since = graph.t1[mine[-1]] if mine else graph.start_ns
    found = []
    for other in partners.get(graph.lane[v], ()):
        ended = [u for u in calls if graph.lane[u] == other and since < graph.t1[u] <= graph.t0[v]]
        if ended:
            latest = max(graph.t1[u] for u in ended)
            found.append(next(u for u in ended if graph.t1[u] == latest))
    return found


def _check(path: Path) -> int:
    tables = read_trace_tables(path)
    found = windowed_events(tables)
    partners = _wake_partners(tables)
    assert partners, f"{path.name}: no hand-over threads (the test would check nothing)"
    wakes = 0
    for graph in step_graphs(found.events, tables, DEFAULT, found.iterations):
        for v, kind in enumerate(graph.kind):
            if kind != "call":
                continue
            got = [d.src for d in graph.deps[v] if d.kind == "wake"]
            assert all(src != BEFORE for src in got)
            assert got == _expected(graph, v, partners), (graph.step, v)
            wakes += len(got)
    return wakes


def test_each_hand_over_is_the_partners_latest_call_since_the_threads_previous() -> None:
    assert _check(FIXTURES / "truth" / "train_checkpoint.json.gz") > 0


@pytest.mark.shared
def test_hand_overs_on_a_shared_ddp_training_trace() -> None:
    assert _check(shared_traces() / "mi300_resnet_act_checkpoint.json.gz") > 0
