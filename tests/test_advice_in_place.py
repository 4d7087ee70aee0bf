"""Advice that knows what is in place (issue 59, point 3): a trace whose GPU work is replayed CUDA graphs never
gets "use CUDA graphs"; its host-bound gaps are named as the host's work between replays. Which traces are graph
replays is read from the raw file here (the share of kernel records that share their correlation id with a
``*GraphLaunch`` runtime call), not from fuseprof's own linking."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fuseprof.analysis import analyze
from tests.conftest import FIXTURES, ROOT, shared_traces

GRAPHS_ROW = "close the host-bound gaps (CUDA graphs"
BETWEEN_REPLAYS_ROW = "shorten the host's work between graph replays"


def _graph_share(path: Path) -> float:
    """Of the raw trace's kernel records, the share launched by a graph launch (correlation ids shared)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    graph_ids = {e.get("args", {}).get("correlation") for e in events
                 if e.get("ph") == "X" and "GraphLaunch" in str(e.get("name", "")) and e.get("cat") in
                 ("cuda_runtime", "cuda_driver")}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return sum(e.get("args", {}).get("correlation") in graph_ids for e in kernels) / len(kernels)


def _advice(path: Path) -> list[str]:
    worth = analyze(path)[0].frames["worth_doing"]
    return [str(w) for w in worth["what"]]


def _assert_no_graph_advice(path: Path) -> None:
    assert _graph_share(path) > 0.9, "the fixture is not a graph replay: the test would prove nothing"
    advice = _advice(path)
    assert not any(a.startswith(GRAPHS_ROW) for a in advice), advice


def test_a_committed_graph_replay_gets_no_graph_advice() -> None:
    path = FIXTURES / "h200-graphs" / "graph-replay.json.gz"
    _assert_no_graph_advice(path)
    # its 125 µs of host gaps before graph launches are named as the host's work between replays where any of them
    # is left without the profiler; the profiler's share of the host's own time (docs/profiler-cost.md) is more than
    # them on every step, and leaves none of them
    result = analyze(path)[0]
    left = float(result.frames["unprofiled"]["idle_launch_unprofiled_ns"].sum())
    named = [w for w in result.frames["worth_doing"].itertuples() if str(w.what).startswith(BETWEEN_REPLAYS_ROW)]
    assert float(result.frames["idle"]["idle_launch_ns"].sum()) > 100_000  # the host gaps are there as traced
    steps = result.frames["unprofiled"]
    assert (steps["idle_launch_ns"] < steps["host_removed_ns"]).all()  # 63.7 and 61.4 µs a step
    assert (left, named) == (0.0, [])  # so no host work is left between the replays, and no row claims any


def test_an_eager_trace_still_gets_graph_advice() -> None:
    """The other side: where kernels are launched one by one and the host left the GPU waiting, graphs are
    advice (an eager trace whose idle table has launch idle, so the rule is not simply gone)."""
    path = FIXTURES / "h200-graphs" / "idle-causes.json.gz"
    assert _graph_share(path) == 0
    result = analyze(path)[0]
    assert result.frames["idle"]["idle_launch_ns"].sum() > 0
    assert any(str(w).startswith(GRAPHS_ROW) for w in result.frames["worth_doing"]["what"])


@pytest.mark.shared
@pytest.mark.parametrize("name", ["sglang_Qwen3-8B_decode.json.gz", "vllm_decode_full_graph_execution.json.gz",
                                  "h200-turn4/decode_graph_replay.json.gz", "h200-turn4/decode_compiled_ro.json.gz"])
def test_shared_graph_replays_get_no_graph_advice(name: str) -> None:
    _assert_no_graph_advice(shared_traces() / name)


def test_rows_carry_the_split() -> None:
    """The idle table's launch idle before graph replays is a part of its launch idle, never more."""
    idle = analyze(ROOT / "tests" / "fixtures" / "h200-graphs" / "graph-replay.json.gz")[0].frames["idle"]
    assert (idle["idle_launch_graph_ns"] <= idle["idle_launch_ns"]).all()
    assert idle["idle_launch_graph_ns"].sum() == idle["idle_launch_ns"].sum() > 0


def _whatif_graph_step(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[float], list[float], str]:
    from fuseprof.cli import main

    assert main(["whatif", str(path), "--graph", "step", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert main(["whatif", str(path), "--graph", "step"]) == 0
    return [r["span_ns"] for r in rows], [r["after_ns"] for r in rows], capsys.readouterr().out


def test_whatif_graph_on_a_graph_replay_changes_nothing_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    spans, after, text = _whatif_graph_step(FIXTURES / "h200-graphs" / "graph-replay.json.gz", capsys)
    assert spans and after == spans
    assert "CUDA graph launch already; the plan changes nothing" in text


def test_whatif_graph_on_eager_steps_still_saves(capsys: pytest.CaptureFixture[str]) -> None:
    spans, after, text = _whatif_graph_step(FIXTURES / "h200-graphs" / "idle-causes.json.gz", capsys)
    assert sum(after) < sum(spans)
    assert "changes nothing" not in text


@pytest.mark.shared
def test_whatif_graph_on_the_shared_graph_decode_changes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """The H200 graph decode that `whatif --graph step` once predicted 8.4% slower."""
    spans, after, _ = _whatif_graph_step(shared_traces() / "h200-turn4" / "decode_graph_replay.json.gz", capsys)
    assert after == spans
