"""The fit of the profiler's cost on real steps (issue 59): the host's speed read from the trace's own launch calls.

Expected values come from the raw trace (its kernel-launch calls' durations, counted here) and the committed fit
(``docs/measurements/profiler-cost-fit-h100-20261206.json``), not from the code under test."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path

import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.unprofiled import host_speed
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, FUZZ_RESULTS

ROOT = Path(__file__).resolve().parents[1]
FIT = json.loads((ROOT / "docs" / "measurements" / "profiler-cost-fit-h100-20261206.json").read_text())
TRUTH = FIXTURES / "truth_unprofiled"
_KERNEL_LAUNCH = re.compile(r"Launch\w*Kernel")


def _raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _launch_durs(doc: dict) -> list[float]:
    return [e["dur"] for e in doc["traceEvents"] if e.get("ph") == "X"
            and e.get("cat") in ("cuda_runtime", "cuda_driver") and _KERNEL_LAUNCH.search(str(e.get("name", "")))]


@pytest.mark.parametrize("folder", ["h100", "h100b"])
def test_host_speed_is_the_median_launch_call_over_the_fits(folder: str) -> None:
    """The h100b host launched faster than the fitting host (its README: train_foreach 6.8 against 12.2 ms), so
    its speed is below 1 and the profiler's cost removed from its steps shrinks by the same factor."""
    trace = TRUTH / folder / "train_foreach.json.gz"
    durs = _launch_durs(_raw(trace))
    assert len(durs) >= 20
    expected = statistics.median(durs) / FIT["reference_launch_us"]  # chrome-trace durations are µs
    assert host_speed(read_trace_tables(trace)) == pytest.approx(expected, rel=1e-3)
    if folder == "h100b":
        assert expected < 0.8


def test_the_estimate_removes_speed_times_the_fitted_cost(tmp_path: Path) -> None:
    """Doubling every launch call's traced duration doubles the host time the estimate removes per step (the
    counts and the setting unchanged)."""
    doc = _raw(TRUTH / "h100b" / "train_sgd_foreach.json.gz")
    base = tmp_path / "base.json"
    base.write_text(json.dumps(doc))
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and \
                _KERNEL_LAUNCH.search(str(e.get("name", ""))):
            e["dur"] = e["dur"] * 2
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(doc))
    removed = [analyze(p)[0].frames["unprofiled"]["host_removed_ns"].to_numpy() for p in (base, slow)]
    assert len(removed[0]) == 3 and (removed[0] > 0).all()
    assert removed[1] == pytest.approx(2 * removed[0], rel=1e-6, abs=1)


@pytest.mark.parametrize("dur,expected", [(0.0, 0.25), (1e9, 4.0), (None, 1.0)],
                         ids=["zero-length-launches", "year-long-launches", "too-few-launches"])
def test_hostile_launch_durations_hold_the_speed_in_its_bounds(tmp_path: Path, dur: float | None,
                                                               expected: float) -> None:
    """Hostile launch calls: zero or absurd durations clamp the speed to 0.25-4; fewer than 20 launches say nothing
    of the host (speed 1). Never a traceback."""
    doc = _raw(TRUTH / "h100" / "decode_compiled.json.gz")
    launches = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
                and _KERNEL_LAUNCH.search(str(e.get("name", "")))]
    if dur is None:
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e not in launches[10:]]
    else:
        for e in launches:
            e["dur"] = dur
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    try:
        speed = host_speed(read_trace_tables(path))
        u = analyze(path)[0].frames["unprofiled"]
    except Exception as exc:  # a traceback is the failure this case exists to catch
        FUZZ_RESULTS["traceback"] += 1
        pytest.fail(f"traceback: {type(exc).__name__}: {exc}")
    wrong = speed != expected or not (u["host_removed_ns"] >= 0).all()
    FUZZ_RESULTS["silently wrong" if wrong else "held"] += 1
    assert not wrong


def test_a_graph_replay_step_pays_no_per_step_cost() -> None:
    """The per-step cost came with eager launches: on h100/infer_graph (one graph launch a step) the profiler added
    30 µs a step (traced − measured, its truth file), and the estimate removes the scaled events alone."""
    from tests.test_unprofiled import _table

    trace = TRUTH / "h100" / "infer_graph.json.gz"
    u = analyze(trace)[0].frames["unprofiled"]
    cost = _table("stack")  # the trace writes record_shapes, with_stack, with_modules
    columns = {"op": "ops", "launch": "launches", "graph_launch": "graph_launches", "sync": "syncs",
               "range": "ranges", "module": "modules", "frame": "frames"}
    assert (u["launches"] == 0).all() and (u["graph_launches"] == 1).all()
    expected = 1e3 * FIT["scale"] * sum(u[c].to_numpy() * cost[k] for k, c in columns.items())
    assert u["host_removed_ns"].to_numpy() == pytest.approx(expected, abs=50)
    assert (u["host_removed_ns"] < 1e3 * FIT["per_step_us"]).all()
