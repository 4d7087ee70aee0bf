"""The un-profiled truth set (tests/fixtures/truth_unprofiled, issue 59 point 5) and its scorer's arithmetic.

Each truth file must state its bound by its own rule from its own numbers, its traces must be plain torch.profiler
exports (no fuseprof metadata, so that fuseprof's estimate is what gets scored) and compact; the scorer maps advice
to the change it names and counts a saving right within 25% or the measured spread, never otherwise.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRUTH = ROOT / "tests" / "fixtures" / "truth_unprofiled"
FILES = sorted(TRUTH.glob("*/*.truth.json"))


def _scorer() -> Any:
    spec = importlib.util.spec_from_file_location("score_unprofiled", ROOT / "scripts" / "score_unprofiled.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules.setdefault(spec.name, module)  # type: ignore[union-attr]  (its dataclasses look themselves up there)
    spec.loader.exec_module(sys.modules[spec.name])  # type: ignore[union-attr]
    return sys.modules[spec.name]  # type: ignore[union-attr]


def test_the_set_has_the_workloads_the_issue_names() -> None:
    names = {p.name.removesuffix(".truth.json") for p in FILES}
    assert len(FILES) >= 12
    assert {"train_foreach", "train_fused", "infer_eager", "infer_compiled", "data_bound", "sync_bound",
            "decode_eager", "decode_graph"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_truth_states_its_bound_by_its_rule(path: Path) -> None:
    truth = json.loads(path.read_text())
    step, busy = truth["unprofiled_step"], truth["gpu_busy"]
    assert step["n"] >= 20 and step["p10_ms"] <= step["median_ms"] <= step["p90_ms"]
    assert truth["card"]["gpu"].startswith("NVIDIA H")  # the card is named
    assert round(100 * busy["median_ms"] / step["median_ms"], 1) == truth["busy_pct"]
    idle = max(step["median_ms"] - busy["median_ms"], 0.0)
    if busy["median_ms"] >= 0.8 * step["median_ms"]:
        assert truth["bound"] == "GPU-bound"
    else:
        causes = truth["idle_causes_ms"]
        assert sum(causes.values()) == pytest.approx(idle, abs=1e-3)
        assert truth["bound"] == max(causes, key=causes.__getitem__)
    for change in truth["changes"].values():
        if isinstance(change, dict) and "paired_savings_ms" in change:  # paired rounds: each round's medians
            rounds = zip(step["round_medians_ms"], change["step"]["round_medians_ms"], change["paired_savings_ms"])
            assert all(paired == pytest.approx(b - c, abs=2e-4) for b, c, paired in rounds)
            assert change["saving_ms"] == pytest.approx(statistics.median(change["paired_savings_ms"]), abs=2e-4)
        elif isinstance(change, dict):  # one loop each: its saving is the two medians' difference
            assert change["saving_ms"] == pytest.approx(step["median_ms"] - change["step"]["median_ms"], abs=1e-3)
        else:
            assert change.startswith(("n/a", "not measured"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_trace_is_a_plain_compact_profiler_export_with_its_settings(path: Path) -> None:
    truth = json.loads(path.read_text())
    trace = path.parent / truth["trace"]
    assert trace.stat().st_size < 2_000_000
    raw = json.loads(gzip.decompress(trace.read_bytes()))
    assert not [k for k in raw if "fuseprof" in k.lower()]
    assert raw.get("record_shapes", 0) == int(truth["profiler"]["record_shapes"])
    assert raw.get("with_stack", 0) == int(truth["profiler"]["with_stack"])
    steps = {e["name"] for e in raw["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert len(steps) == 3  # wait 1, warm-up 1, active 3
    for key in ("eager_twin", "capture"):
        if key in truth:
            assert (path.parent / (f"{truth[key]}.truth.json" if key == "eager_twin" else truth[key])).exists()


def test_the_whole_set_stays_small() -> None:
    assert sum(p.stat().st_size for p in TRUTH.rglob("*") if p.is_file()) < 25_000_000


def _truth(**changes: Any) -> dict[str, Any]:
    return {"unprofiled_step": {"median_ms": 10.0, "p10_ms": 9.5, "p90_ms": 10.5}, "idle_ms": 8.0,
            "changes": changes}


def _timed(saving: float, spread: float) -> dict[str, Any]:
    return {"variant": "v", "saving_ms": saving, "saving_spread_ms": spread, "step": {"median_ms": 10.0 - saving}}


def _result(what: str, saving_ns: float, steps: int = 3) -> dict[str, Any]:
    return {"worth_doing": [{"what": what, "saving_ns": saving_ns}],
            "steps": [{"step": f"ProfilerStep#{i}"} for i in range(steps)] + [{"step": "(between steps)"}]}


def test_advice_maps_to_the_change_it_names() -> None:
    change_of = _scorer().change_of
    assert change_of("close the host-bound gaps (CUDA graphs, torch.compile mode='reduce-overhead')") == "graphs"
    assert change_of("shorten the host's work between graph replays") == "host_idle"
    assert change_of("remove synchronisations (.item())") == "no_syncs"
    assert change_of("fuse: memory-bound chain — aten::add → aten::mul ×12") == "fusion"
    assert change_of("fuse: cross-entropy — aten::nll_loss_backward → aten::_log_softmax_backward_data") == "fusion"
    assert change_of("overlap data loading (DataLoader workers)") == "data_prefetched"
    assert change_of("tune aten::mm") is None
    norm = "fuse: memory-bound chain — aten::add → aten::pow → aten::mean → aten::add → aten::rsqrt → aten::mul ×24"
    assert change_of(norm, {"changes": {"fusion": {}, "fusion_norm": {}}}) == "fusion_norm"
    assert change_of(norm, {"changes": {"fusion": {}}}) == "fusion"  # no RMSNorm fusion measured apart
    assert change_of("fuse: softmax — aten::mul → aten::softmax", {"changes": {"fusion_norm": {}}}) == "fusion"


def test_a_saving_counts_within_25_percent_or_the_spread_per_step() -> None:
    score = _scorer().score_advice
    truth = _truth(graphs=_timed(8.0, 0.5))
    # 3 steps: 3 x 9.9 ms claimed is 9.9 ms a step, 1.24x the measured 8 ms -> right (25% is 2 ms)
    assert score(truth, _result("close the host-bound gaps (CUDA graphs)", 29.7e6))["ok"]
    assert not score(truth, _result("close the host-bound gaps (CUDA graphs)", 30.3e6))["ok"]  # 10.1: 2.1 off
    wide = _truth(graphs=_timed(1.0, 3.0))  # the spread (3 ms) is wider than 25% of 1 ms
    assert score(wide, _result("close the host-bound gaps (CUDA graphs)", 11.9e6))["ok"]
    assert not score(wide, _result("close the host-bound gaps (CUDA graphs)", 12.3e6))["ok"]


def test_advice_for_a_change_that_cannot_apply_is_wrong() -> None:
    score = _scorer().score_advice
    truth = _truth(graphs="n/a: .item() cannot be captured", no_syncs=_timed(2.0, 0.1))
    row = score(truth, _result("close the host-bound gaps (CUDA graphs)", 6e6))
    assert not row["ok"] and row["why"].startswith("n/a")
    assert not score(truth, _result("tune aten::mm", 6e6))["ok"]  # no change of the workload named


def test_no_advice_is_right_only_when_nothing_measured_saves_much() -> None:
    score = _scorer().score_advice
    empty = {"worth_doing": [], "steps": []}
    assert score(_truth(compile=_timed(0.3, 0.2)), empty)["ok"]  # 3% of the step
    assert not score(_truth(compile=_timed(2.0, 0.2)), empty)["ok"]


def test_a_bound_is_the_same_in_either_vocabulary_and_only_then() -> None:
    same = _scorer().same_bound
    assert same("data loading", "data-bound") and same("host-bound", "host-bound")
    assert not same("data loading", "host-bound") and not same("GPU-bound", None)


def test_the_calibration_row_sets_each_prediction_beside_its_measurement() -> None:
    """Per step: the estimate the mean of the unprofiled table's steps, the profiler's cost traced − estimate and
    traced − measured, each measured change beside the first row naming it (none: not predicted), the changes named."""
    scorer = _scorer()
    truth = _truth(graphs=_timed(8.0, 0.5), compile=_timed(3.0, 0.2), fusion="n/a: no chain")
    steps = [{"span_ns": span, "step_unprofiled_ns": est, "step_unprofiled_low_ns": est - 1e6,
              "step_unprofiled_high_ns": est + 1e6, "source": "estimated: recorded events x H100"}
             for span, est in ((20e6, 11e6), (22e6, 13e6), (21e6, 12e6))]
    result = {**_result("close the host-bound gaps (CUDA graphs)", 27e6), "unprofiled": steps}
    result["worth_doing"].append({"what": "close the host-bound gaps again", "saving_ns": 99e6})
    row = scorer.calibration(truth, result)
    assert (row["traced_ms"], row["estimate_ms"], row["estimate_low_ms"]) == (21.0, 12.0, 11.0)
    assert row["measured_ms"] == 10.0 and row["source"] == "estimated" and row["advised"] == ["graphs", "graphs"]
    assert row["changes"] == {"graphs": {"predicted_ms": 9.0, "measured_ms": 8.0, "spread_ms": 0.5},
                              "compile": {"predicted_ms": None, "measured_ms": 3.0, "spread_ms": 0.2}}
    table = scorer.calibration_table([{"trace": "h/x", "settings": "shapes", "calibration": row}])
    assert "| h/x | shapes | 21.000 | 12.000 (11.000–13.000) | 10.000 (9.500–10.500) | 1.20 | 9.000 / 11.000 |" in table
    assert "graphs 9.000 / 8.000 ±0.500; compile - / 3.000 ±0.200 | graphs, graphs |" in table


def test_the_host_drift_is_the_capture_over_the_rounds_median_per_reference() -> None:
    """host_drift: the mean of the readings on either side of the capture over the median of the rounds' (4.0 over
    median(2, 4, 6) = 4 -> 1.00; 3.0 over median(1, 1, 2) = 1 -> 3.00); nothing recorded, nothing said."""
    scorer = _scorer()
    ref = {"rounds": [{"python": 2.0, "launches": 1.0}, {"python": 4.0, "launches": 1.0},
                      {"python": 6.0, "launches": 2.0}],
           "before_capture": [{"python": 3.0, "launches": 2.0}], "after_capture": [{"python": 5.0, "launches": 4.0}]}
    assert scorer.host_drift({"host_reference_ms": ref}) == "python 1.00, launches 3.00"
    assert scorer.host_drift({}) == ""


def test_the_h100h_set_scores_with_the_profilers_share() -> None:
    """h100h (truth timed before its process ran any profiler) was held out and scored once with the rules frozen at
    e52484c: bound 13/13, first advice 7/13, CUDA graphs over-claimed 1.26-1.67x
    (docs/measurements/unprofiled-scores-h100h-heldout-20261207.txt). It is a fitting set since (the profiler's share,
    ``scripts/fit_profiler_cost.py``): the bound stays right on all, and every first advice is within 25% of its
    truth, the scorer reading the truth files; train_sgd_fused's CUDA graphs, 0.74x the measured saving before the
    graph row counted the launches' submission latency (a9d43ae), is 0.75-0.9x since."""
    scorer = _scorer()
    rows = {p.name.removesuffix(".truth.json"): scorer.score(p) for p in sorted((TRUTH / "h100h").glob("*.truth.json"))}
    assert len(rows) == 13 and all(r["bound_ok"] for r in rows.values())
    assert {name for name, r in rows.items() if not r["ok"]} == set()
    graphs = rows["train_sgd_fused"]
    measured = json.loads((TRUTH / "h100h" / "train_sgd_fused.truth.json").read_text())["changes"]["graphs"]
    assert graphs["change"] == "graphs" and graphs["measured_ms"] == pytest.approx(measured["saving_ms"])
    assert 0.75 * measured["saving_ms"] < graphs["claimed_ms"] < 0.9 * measured["saving_ms"]


def _capture_module() -> Any:
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("capture_unprofiled_truth",
                                                  ROOT / "scripts" / "capture_unprofiled_truth.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules.setdefault(spec.name, module)  # type: ignore[union-attr]  (its dataclasses look themselves up there)
    spec.loader.exec_module(sys.modules[spec.name])  # type: ignore[union-attr]
    return sys.modules[spec.name]  # type: ignore[union-attr]


def test_paired_rounds_rotate_the_variants_and_capture_after_the_middle_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """capture_unprofiled_truth.timed_variants with the loops replaced by a log: every variant once a round, the
    order rotated, the profiled capture after round rounds // 2; --rounds 0 captures first, then one loop each."""
    module = _capture_module()
    log: list[str] = []
    steps = {"base": lambda: None, "a": lambda: None, "b": lambda: None}
    names = {id(f): n for n, f in steps.items()}
    monkeypatch.setattr(module, "step_times", lambda step, n=30: log.append(names[id(step)]) or [1.0] * n)
    monkeypatch.setattr(module, "host_reference_ms", lambda: log.append("host") or {"python": float(len(log))})
    host: dict[str, list[dict[str, float]]] = {}
    times = module.timed_variants(steps, 4, lambda: log.append("capture"), host)
    assert log == ["host", "base", "a", "b", "host", "a", "b", "base", "host", "capture", "host", "host", "b", "base",
                   "a", "host", "base", "a", "b"]
    assert {k: len(v) for k, v in times.items()} == {"base": 4, "a": 4, "b": 4}
    # the host's speed read before each round and on either side of the capture, in the order taken
    assert host == {"rounds": [{"python": 1.0}, {"python": 5.0}, {"python": 12.0}, {"python": 16.0}],
                    "before_capture": [{"python": 9.0}], "after_capture": [{"python": 11.0}]}
    log = [x for x in log if x != "host"]
    assert log == ["base", "a", "b", "a", "b", "base", "capture", "b", "base", "a", "base", "a", "b"]
    log.clear()
    times = module.timed_variants(steps, 0, lambda: log.append("capture"))
    assert log == ["capture", "base", "a", "b"] and all(len(v) == 1 and len(v[0]) == 30 for v in times.values())


def test_a_savings_spread_is_the_loops_own_not_the_pooled_rounds() -> None:
    """Two rounds whose loops each spread 0.1 ms but sit 1 ms apart: the pooled p10-p90 is about 1 ms wide, the
    saving's spread (the mean of the two loops' widths, median over rounds) is the loops' own."""
    module = _capture_module()
    loop = [5.0 + 0.1 * i / 9 for i in range(10)]
    base = module.pooled([loop, [t + 1.0 for t in loop]])
    change = module.pooled([[t - 3 for t in loop], [t - 2 for t in loop]])
    widths = statistics.quantiles(loop, n=10)
    assert base["p90_ms"] - base["p10_ms"] > 0.9
    assert module.saving_spread(base, change) == pytest.approx(round(widths[-1] - widths[0], 4), abs=1e-4)
