"""Busy as the kernels take queued back to back (``fuseprof.analysis.facts.queued``), against the GPU busy the
un-profiled truth measured on the card that made each trace: the step's kernels queued behind a spin kernel
(``gpu_busy`` in tests/fixtures/truth_unprofiled/*/*.truth.json, written before fuseprof read the trace). The union
of the kernels' intervals leaves out the gap a GPU leaves between kernels even when fed; the union with each gap's
queued latency is what the bound's 80% rule reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.queued import DEFAULT_NS, MIN_QUEUED, graph_closes_ns, queued_ns
from fuseprof.analysis.running.sections.verdict import queued_busy

ROOT = Path(__file__).resolve().parents[1]
PAIRED = sorted((ROOT / "tests" / "fixtures" / "truth_unprofiled").glob("h200l/*.truth.json"))


def test_a_trace_with_enough_queued_gaps_uses_their_median_and_one_without_the_default() -> None:
    # six whole-other gaps before stream launches (queued: 1.0-2.0 us), one launch gap of 50 us, one graph gap
    length = np.array([1_000, 1_200, 1_300, 1_500, 1_900, 2_000, 50_000, 700])
    other = np.array([1_000, 1_200, 1_300, 1_500, 1_900, 2_000, 3_000, 700])
    graph = np.array([False] * 7 + [True])
    got = queued_ns(length, graph, other)
    median = 1_400  # of the six queued stream gaps: (1,300 + 1,500) / 2
    assert got.tolist() == [1_000, 1_200, 1_300, median, median, median, median, min(700, DEFAULT_NS[True])]
    few = queued_ns(length[:MIN_QUEUED - 1], graph[:MIN_QUEUED - 1], other[:MIN_QUEUED - 1])
    assert few.tolist() == np.minimum(length[:MIN_QUEUED - 1], DEFAULT_NS[False]).tolist()


def test_a_graph_closes_the_other_idle_after_eager_launches_beyond_a_node_latency() -> None:
    # queued graph-node gaps of 400-600 ns and one of 800 (six: median 525); eager gaps: a late launch whose work
    # started 3,000 ns after its call returned, a queued 1,400 ns gap, a gap all launch idle (no other part)
    length = np.array([400, 450, 500, 550, 600, 20_000, 1_400, 9_000, 800])
    other = np.array([400, 450, 500, 550, 600, 3_000, 1_400, 0, 800])
    graph = np.array([True] * 5 + [False, False, False, True])
    assert graph_closes_ns(length, graph, other).tolist() == [0, 0, 0, 0, 0, 3_000 - 525, 1_400 - 525, 0, 0]
    few = graph_closes_ns(length[5:8], graph[5:8], other[5:8])  # no graph gaps: the default node latency
    assert few.tolist() == [3_000 - DEFAULT_NS[True], 1_400 - DEFAULT_NS[True], 0]


def test_the_queued_part_comes_from_other_idle_first_then_launch() -> None:
    busy, left = queued_busy({"busy_ns": 100.0, "idle_other_ns": 3.0, "idle_launch_ns": 10.0, "idle_sync_ns": 5.0}, 7.0)
    assert busy == 107.0 and left == {"busy_ns": 100.0, "idle_other_ns": 0.0, "idle_launch_ns": 6.0, "idle_sync_ns": 5.0}
    busy, left = queued_busy({"busy_ns": 100.0, "idle_other_ns": 1.0, "idle_launch_ns": -2.0}, 7.0)
    assert busy == 101.0 and left["idle_launch_ns"] == -2.0  # nothing taken from idle the estimate has removed


@pytest.mark.parametrize("path", PAIRED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_busy_as_queued_is_the_busy_measured_apart_from_the_profiler(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    truth = json.loads(path.read_text())
    result = analyze(str(path).replace(".truth.json", ".json.gz"))[0]
    idle = result.frames["idle"]
    steps = idle[idle["step"].astype(str) != "(between steps)"]
    union = float(steps["busy_ns"].mean()) / 1e6
    queued = union + float(steps["idle_queued_ns"].mean()) / 1e6
    measured = truth["gpu_busy"]["median_ms"]
    assert union < 0.95 * measured  # the union alone falls short of the measured busy (0.66-0.93x on h200l)
    assert 0.97 * measured <= queued <= 1.12 * measured, (union, queued, measured)
