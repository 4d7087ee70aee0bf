"""The profiler's cost on real steps (issue 59): a share of the host's own time, which needs no host speed, and the
host's speed read from the trace's own launch calls where a dropped call's own cost is asked in µs.

Expected values come from the raw trace (its kernel-launch calls' durations, counted here) and the committed
calibration constants, not from the code under test."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path

import numpy as np
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.unprofiled import host_cost_between, host_speed
from fuseprof.model.profiler_cost import REFERENCE_LAUNCH_US
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, FUZZ_RESULTS

ROOT = Path(__file__).resolve().parents[1]
TRUTH = FIXTURES / "truth_unprofiled"
_KERNEL_LAUNCH = re.compile(r"Launch\w*Kernel")


def _raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _launch_durs(doc: dict) -> list[float]:
    return [e["dur"] for e in doc["traceEvents"] if e.get("ph") == "X"
            and e.get("cat") in ("cuda_runtime", "cuda_driver") and _KERNEL_LAUNCH.search(str(e.get("name", "")))]


@pytest.mark.parametrize("folder", ["h100h", "h100i"])
def test_host_speed_is_the_median_launch_call_over_the_calibrations(folder: str) -> None:
    """h100h's host launched about twice as fast as h100i's, the calibration's (its README: train_foreach 5.6
    against 10.1 ms un-profiled), so its speed is near 0.5 and h100i's near 1."""
    trace = TRUTH / folder / "train_foreach.json.gz"
    durs = _launch_durs(_raw(trace))
    assert len(durs) >= 20
    expected = statistics.median(durs) / REFERENCE_LAUNCH_US  # chrome-trace durations are µs
    assert host_speed(read_trace_tables(trace)) == pytest.approx(expected, rel=1e-3)
    assert (expected < 0.7) if folder == "h100h" else (0.8 < expected < 1.2)


def test_the_share_needs_no_host_speed_and_a_dropped_calls_cost_does(tmp_path: Path) -> None:
    """Doubling every launch call's traced duration (the host's speed as read) leaves the host time the estimate
    removes per step as it was (a share of the step's own time), and doubles the profiler's cost that a dropped
    call's interval carries (µs per event × the speed)."""
    doc = _raw(TRUTH / "h100i" / "train_sgd_foreach.json.gz")
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
    assert removed[1] == pytest.approx(removed[0], abs=1)
    result = analyze(base)[0]
    whole = (np.array([0], np.int64), np.array([2**62], np.int64))
    costs = [int(host_cost_between(read_trace_tables(p), result.registry)(*whole)[0]) for p in (base, slow)]
    assert costs[0] > 0 and costs[1] == pytest.approx(2 * costs[0], rel=1e-3)


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


def test_a_graph_replay_step_loses_only_its_launch_idle() -> None:
    """On h100/infer_graph (one graph launch a step) the profiler's share of the host's time is far more than the
    GPU's few µs of launch idle a step: the estimate closes that idle and no more (the replay's kernels are the
    GPU's own time), and its median is within 5% of the step measured apart from the profiler (its truth file)."""
    trace = TRUTH / "h100" / "infer_graph.json.gz"
    u = analyze(trace)[0].frames["unprofiled"]
    assert (u["launches"] == 0).all() and (u["graph_launches"] == 1).all()
    assert (u["host_removed_ns"] > 0).all()
    expected = u["span_ns"] - np.minimum(u["idle_launch_ns"], u["host_removed_ns"])
    assert (u["step_unprofiled_ns"] == expected).all()
    truth = json.loads((TRUTH / "h100" / "infer_graph.truth.json").read_text())
    assert u["step_unprofiled_ns"].median() / 1e6 == pytest.approx(truth["unprofiled_step"]["median_ms"], rel=0.05)


def test_a_synchronising_call_waits_only_inside_its_step(tmp_path: Path) -> None:
    """The host's waits are each synchronising call's time inside its own step, never negative: on
    h100h/sync_bound, one call made to last 1,000 s (a hostile duration) leaves the other steps' removal as it was
    and its own step's at or above 0; one made negative removes no more than a zero-length call would."""
    doc = _raw(TRUTH / "h100h" / "sync_bound.json.gz")
    syncs = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
             and "Synchronize" in str(e.get("name", ""))]
    assert syncs

    def removed(dur: float) -> np.ndarray:
        syncs[0]["dur"] = dur
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps(doc))
        return analyze(path)[0].frames["unprofiled"]["host_removed_ns"].to_numpy()

    original = syncs[0]["dur"]
    zero, huge, negative = removed(0.0), removed(1e9), removed(-500.0)
    syncs[0]["dur"] = original
    assert (huge >= 0).all() and (zero > 0).all()
    changed = zero != huge
    assert changed.sum() <= 1  # the call's own step alone
    assert (negative == zero).all()
