"""The diff pairs' truth (tests/fixtures/diff_pairs, issue 62 point 4) agrees with the raw traces it names.

Every module path a truth file names is read here from the raw trace itself (the nn.Module events' nesting on
their thread), never through fuseprof; step counts, the ops and ranges a pair says change, the timing arithmetic and
the float64 checks are checked the same way. The capture script's bad arguments are clear errors.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FUZZ_RESULTS

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "tests" / "fixtures" / "diff_pairs"
FILES = sorted(PAIRS.glob("*/*.truth.json"))
CLASSES = {"same", "fused", "compiled", "graphed", "replaced"}
LR = 1e-4  # the training pair's AdamW learning rate (scripts/capture_diff_pairs.py)
FP8_ROUNDOFF = 2.0 ** -4  # e4m3's unit roundoff (3 mantissa bits)


@cache
def _events(path: Path) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"])


def _module_paths(path: Path) -> set[str]:
    """Each nn.Module event's path: the module events enclosing it on its thread, outermost first, " / "-joined."""
    modules = sorted((e for e in _events(path) if str(e.get("name", "")).startswith("nn.Module: ")),
                     key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    paths: set[str] = set()
    stack: list[tuple[Any, float, str]] = []
    for e in modules:
        while stack and (stack[-1][0] != e["tid"] or stack[-1][1] < e["ts"] + e["dur"]):
            stack.pop()
        stack.append((e["tid"], e["ts"] + e["dur"], e["name"].removeprefix("nn.Module: ")))
        paths.add(" / ".join(name for _, _, name in stack))
    return paths


def _steps(path: Path) -> set[str]:
    return {e["name"] for e in _events(path) if e.get("cat") == "user_annotation"
            and str(e["name"]).startswith("ProfilerStep#")}


def _names(path: Path) -> set[str]:
    return {str(e.get("name", "")) for e in _events(path)}


def _truth(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_the_set_has_the_pairs_the_issue_names_and_every_class() -> None:
    truths = [_truth(p) for p in FILES]
    assert {"compile", "sdpa", "optimizer", "int8_fused", "graph"} <= {t["pair"] for t in truths}
    named = {m["class"] for t in truths for m in t["matches"]} | {r["class"] for t in truths for r in t["regions"]}
    assert named == CLASSES
    size = sum(p.stat().st_size for p in PAIRS.rglob("*") if p.is_file())
    assert size < 6e6, f"{size / 1e6:.1f} MB: the fixtures must stay small"


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_named_module_path_is_in_its_trace(path: Path) -> None:
    truth = _truth(path)
    a_trace = path.parent / truth["a"]["trace"]
    a_paths = _module_paths(a_trace)
    assert a_paths, "A's trace records no module"
    assert {m["a"] for m in truth["matches"]} == a_paths  # every module of A has its row, and no other row
    for m in truth["matches"]:
        b_file = path.parent / m.get("b_trace", truth["b"]["trace"])
        assert m["b"] in _module_paths(b_file), (m["name"], m["b"], b_file.name)
        assert m["class"] in CLASSES
    assert len({m["name"] for m in truth["matches"]}) == len(truth["matches"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_trace_holds_the_profiler_steps_the_truth_states(path: Path) -> None:
    truth = _truth(path)
    for side in ("a", "b"):
        trace = path.parent / truth[side]["trace"]
        assert len(_steps(trace)) == truth["profiler_steps"] == 3
    if "capture" in truth["b"]:  # a graph replay: its kernels have no module; the capture has them, in no step
        capture = path.parent / truth["b"]["capture"]
        assert not _steps(capture) and _module_paths(capture)
        assert not _module_paths(path.parent / truth["b"]["trace"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_ops_and_ranges_said_to_change_are_in_the_traces(path: Path) -> None:
    truth = _truth(path)
    a_names, b_names = (_names(path.parent / truth[s]["trace"]) for s in ("a", "b"))
    for row in truth["ops"]:
        for key, names in (("a_ops", a_names), ("b_ops", b_names)):
            listed = row[key] if isinstance(row[key], list) else []
            for op in (o for o in listed if re.fullmatch(r"aten::\w+", o)):  # op names, not the prose beside them
                assert op in names, (row, op)
    for region in truth["regions"]:
        if region["a"].startswith("Optimizer."):
            assert region["a"] in a_names and region["b"] in b_names
    if truth["pair"] == "optimizer":  # the foreach step's per-tensor-list ops are gone from the fused one
        assert "aten::_fused_adamw_" in b_names and "aten::_fused_adamw_" not in a_names
        assert "aten::_foreach_addcdiv_" in a_names and "aten::_foreach_addcdiv_" not in b_names


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_unprofiled_times_and_float64_checks_add_up(path: Path) -> None:
    truth = _truth(path)
    for side in ("a", "b"):
        timed = truth["unprofiled"][side]
        rounds = timed["loop_rounds"]
        assert len(rounds) == 3
        for spread in (*rounds, timed["isolated_l2_flushed"]):
            assert 0 < spread["p10_ms"] <= spread["median_ms"] <= spread["p90_ms"]
        assert timed["loop_median_ms"] == pytest.approx(statistics.median(r["median_ms"] for r in rounds), abs=1e-4)
        check = truth[side]["check_vs_float64"]
        if "first_update" in check:  # AdamW's first update is about lr * sign(g): a flipped sign moves 2 * lr
            assert check["loss"]["relative_error"] < 1e-3
            assert check["first_update"]["max_abs_error"] <= 2 * LR * 1.05
        else:
            # bf16 operands; fp8 e4m3 (torch._scaled_mm) rounds each operand to 3 mantissa bits: within 2^-4
            bound = FP8_ROUNDOFF if "_scaled_mm" in truth[side]["what"] else 1e-2
            assert check["finite"] and check["relative_error"] < bound


SCRIPTS = ROOT / "scripts"


@pytest.mark.parametrize("args", [
    ["capture_diff_pairs.py", "--out", "{tmp}/x", "--only", "compile,nonesuch"],
    ["capture_diff_pairs.py", "--only", "compile"],
    ["capture_long_decode.py", "--out", "{tmp}/x.json", "--steps", "3"],
    ["capture_long_decode.py", "--out", "{tmp}/x.json.gz", "--steps", "0"],
    ["capture_diff_pairs_d768.py", "--out", "{tmp}/x", "--only", "fp8,nonesuch"],
    ["capture_diff_pairs_d768.py", "--only", "sdpa"],
    ["capture_diff_pairs_d768.py", "--out", "{tmp}/x", "--d", "1000", "--heads", "16"],
], ids=["unknown pair", "no --out", "not .json.gz", "zero steps", "d768 unknown pair", "d768 no --out",
        "d768 d not a multiple of heads"])
def test_bad_arguments_are_clear_errors_that_write_nothing(tmp_path: Path, args: list[str]) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    run = subprocess.run([sys.executable, str(SCRIPTS / argv[0]), *argv[1:]], capture_output=True, text=True,
                         timeout=120)
    last = run.stderr.strip().splitlines()[-1]
    clear = run.returncode == 2 and "error:" in last and "Traceback" not in run.stderr
    FUZZ_RESULTS["clear error" if clear else "traceback"] += 1
    assert clear, run.stderr
    assert not any(tmp_path.iterdir())
