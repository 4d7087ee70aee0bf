"""scripts/score_diff_alignment.py on the committed truth sets (issue 62's "Done when": >= 95% of A's GPU time
on the right module of B, every class of change named right).

Expected values come from the truth files and the raw traces, not from the scorer: every truth file is scored
under its own pair name; the A time it judges is the raw trace's GPU time (kernels, copies, memsets whose launch
lies in a ProfilerStep#N range); every miss it reports names a class its truth file expects; the sets reach the
issue's 95% pooled, and their one class miss is explained by the raw B trace (below). All three sets are
rule-writing data now: diff_pairs/h100_d768 was held out until its one scoring (docs/gate.md) and its miss
(RMSNorm -> F.rms_norm read replaced) changed the fused rule.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
RULE_WRITING = [FIXTURES / "diff_truth", FIXTURES / "diff_pairs" / "h100", FIXTURES / "diff_pairs" / "h100_d768"]
STEP = re.compile(r"ProfilerStep#\d+$")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
GRAPH_CALL = "## Call CompiledFxGraph"


def _scorer() -> Any:
    spec = importlib.util.spec_from_file_location("score_diff_alignment", ROOT / "scripts" / "score_diff_alignment.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _truths(folders: list[Path]) -> list[Path]:
    return [f for folder in folders for f in sorted(folder.glob("*.truth.json"))]


def _raw(path: Path) -> list[dict[str, Any]]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]  # type: ignore[no-any-return]


def raw_gpu_ns_in_steps(path: Path) -> float:
    """The GPU time (ns) of the events whose launch call lies inside a ProfilerStep#N range, from the raw JSON."""
    events = _raw(path)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") == "user_annotation" and STEP.match(str(e.get("name", "")))]
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    total = 0.0
    for e in events:
        if e.get("cat") in GPU_CATS:
            at = launches.get(e.get("args", {}).get("correlation"))
            if at is not None and any(a <= at <= b for a, b in steps):
                total += e["dur"] * 1000
    return total


@pytest.fixture(scope="module")
def scored() -> dict[Path, dict[str, Any]]:
    scorer = _scorer()
    return {f: scorer.score(f) for f in _truths(RULE_WRITING)}


def test_every_truth_file_is_scored_on_all_of_its_a_time(scored) -> None:  # type: ignore[no-untyped-def]
    assert len(scored) == 18  # 6 hand-written + 6 + 6 captured (the folders' truth files)
    for path, row in scored.items():
        truth = json.loads(path.read_text())
        assert row["pair"] == f"{path.parent.name}/{truth.get('pair', path.stem)}"
        assert row["a_ns"] == pytest.approx(raw_gpu_ns_in_steps(path.parent / truth["a"]["trace"]), rel=1e-6)


def test_every_miss_names_a_class_its_truth_expects(scored) -> None:  # type: ignore[no-untyped-def]
    for path, row in scored.items():
        truth = json.loads(path.read_text())
        expected = {r["class"] for key in ("matches", "patterns", "regions") for r in truth.get(key, [])}
        for what in row["wrong"]:
            assert re.search(r"expected .* (\w+), got", what).group(1) in expected  # type: ignore[union-attr]


def test_rule_writing_sets_reach_the_issue_bar(scored) -> None:  # type: ignore[no-untyped-def]
    total = _scorer().pooled(list(scored.values()))
    assert total["module_ns"] >= 0.95 * total["a_ns"] and total["class_ns"] >= 0.95 * total["a_ns"]
    for row in scored.values():
        assert row["module_ns"] >= 0.95 * row["a_ns"], row["pair"]


def test_the_one_class_miss_is_a_compiled_gemm_the_trace_does_not_place_in_the_graph(scored) -> None:  # type: ignore[no-untyped-def]
    """infer_compiled's B trace logs Inductor's graph call as a CPU op, not a range (raw below), so fuseprof cannot
    see that its cuBLAS GEMMs are launched by the compiled graph: its Linears read same where the truth says
    compiled. decode_compiled's B trace has the range, and its Linears read compiled."""
    missed = {row["pair"]: row["wrong"] for row in scored.values() if row["class_ns"] < row["a_ns"]}
    missed.pop("h100/optimizer", None)  # its 0.8% of the backward under another module (module miss, class unjudged)
    missed.pop("h100/graph", None)  # its 2.9% outside every module and truth row (unjudged)
    assert set(missed) == {"diff_truth/infer_compiled"}
    assert all(re.match(r".*Linear_\d+: expected .* compiled, got ok same$", what)
               for what in missed["diff_truth/infer_compiled"])
    truth_dir = ROOT / "tests" / "fixtures" / "diff_truth"
    for pair, has_range in (("infer_compiled", False), ("decode_compiled", True)):
        events = _raw(truth_dir / json.loads((truth_dir / f"{pair}.truth.json").read_text())["b"]["trace"])
        cats = {e.get("cat") for e in events if str(e.get("name", "")).startswith(GRAPH_CALL)}
        assert ("user_annotation" in cats) == has_range and cats
