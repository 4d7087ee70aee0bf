"""scripts/score_diff_alignment.py on the committed truth sets (issue 62's "Done when": >= 95% of A's GPU time
on the right module of B, every class of change named right).

Expected values come from the truth files and the raw traces, not from the scorer: every truth file is scored
under its own pair name; the A time it judges is the raw trace's GPU time (kernels, copies, memsets whose launch
lies in a ProfilerStep#N range); every miss it reports names a class its truth file expects; the sets reach the
issue's 95% pooled, and their one class miss is explained by the raw B trace (below). All three sets are
rule-writing data now: diff_pairs/h100_d768 was held out until its one scoring (docs/gate.md) and its miss
(RMSNorm -> F.rms_norm read replaced) changed the fused rule. diff_pairs/h100_d1024_fp16 is held out: its score
with the frozen rules is pinned below, its one class miss with its cause from the raw traces.
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
# captured and committed with the rules frozen (0b4ab28), scored once (docs/gate.md); no rule changed after it
HELD_OUT = FIXTURES / "diff_pairs" / "h100_d1024_fp16"
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


def test_no_class_miss_but_the_two_unjudged_remainders(scored) -> None:  # type: ignore[no-untyped-def]
    """infer_compiled's Linears read same until the parser took Inductor's graph call written as a CPU op (its B
    trace's) as well as one written as a range (decode_compiled's); they read compiled now, and no pair has a
    class miss."""
    missed = {row["pair"]: row["wrong"] for row in scored.values() if row["class_ns"] < row["a_ns"]}
    missed.pop("h100/optimizer", None)  # its 0.8% of the backward under another module (module miss, class unjudged)
    missed.pop("h100/graph", None)  # its 2.9% outside every module and truth row (unjudged)
    assert missed == {}


def test_a_graph_call_written_as_a_cpu_op_marks_the_gemms_it_launches() -> None:
    """From the raw B trace of infer_compiled: its graph calls are CPU ops (no range of that name), and the
    kernels fuseprof places under a graph call are those of the aten::mm ops inside a call's time span on its
    thread (45 of them, each launching a GEMM, some a memset too) and the call's own Triton kernels."""
    from fuseprof.analysis import analyze
    from fuseprof.analysis.judgements.align import side

    truth_dir = ROOT / "tests" / "fixtures" / "diff_truth"
    trace = truth_dir / json.loads((truth_dir / "infer_compiled.truth.json").read_text())["b"]["trace"]
    events = _raw(trace)
    calls = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events if str(e.get("name", "")).startswith(GRAPH_CALL)]
    assert calls and {e.get("cat") for e in events if str(e.get("name", "")).startswith(GRAPH_CALL)} == {"cpu_op"}
    inside = {e["args"]["External id"] for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"
              and any(s <= e["ts"] < t and tid == e["tid"] for s, t, tid in calls)}
    assert len(inside) == 45
    linked = analyze(trace)[0].events
    mm = linked[linked["op"] == "aten::mm"]
    assert set(mm.loc[mm["graph_call"].notna(), "op_id"].astype(int)) == inside
    assert mm["graph_call"].notna().all() and side(analyze(trace)[0]).units["compiled"].all()


@pytest.fixture(scope="module")
def held_out() -> dict[str, dict[str, Any]]:
    scorer = _scorer()
    return {row["pair"]: row for row in (scorer.score(f) for f in _truths([HELD_OUT]))}


def _module_ops(path: Path, module: str) -> dict[str, int]:
    """The CPU ops inside the first profiled step's first call of ``module`` (its nn.Module span, same thread)."""
    events = _raw(path)
    step = next(e for e in events if e.get("cat") == "user_annotation" and STEP.match(str(e.get("name", ""))))
    call = next(e for e in events if e.get("cat") == "python_function" and e["name"] == f"nn.Module: {module}"
                and step["ts"] <= e["ts"] <= step["ts"] + step["dur"])
    found: dict[str, int] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and e["tid"] == call["tid"] and call["ts"] <= e["ts"] < call["ts"] + call["dur"]:
            found[e["name"]] = found.get(e["name"], 0) + 1
    return found


def test_the_once_held_out_set_reads_every_class_right_since_the_rule_counts_calls(held_out) -> None:  # type: ignore[no-untyped-def]
    """h100_d1024_fp16 was scored once held out with the rules frozen at 0b4ab28 (docs/gate.md: class 99.1%, the
    two SwiGLUMLPs of silu_fused `replaced` where the truth says `fused`) and is rule-writing data since: the fused
    rule now counts op calls, not distinct names. From the raw traces: the MLP's own elementwise calls are
    aten::mul x2 + aten::sigmoid in A and aten::silu + aten::mul in B — one name went and one came, but three
    calls became two. Every pair now reads 100% on module and class."""
    assert len(held_out) == 6
    for pair, row in held_out.items():
        truth = json.loads((HELD_OUT / f"{pair.split('/')[1]}.truth.json").read_text())
        assert row["a_ns"] == pytest.approx(raw_gpu_ns_in_steps(HELD_OUT / truth["a"]["trace"]), rel=1e-6)
        assert row["module_ns"] == row["a_ns"] and row["class_ns"] == row["a_ns"], (pair, row["wrong"])
    a = _module_ops(HELD_OUT / "silu_written.json.gz", "SwiGLUMLP_0")
    b = _module_ops(HELD_OUT / "eager.json.gz", "SwiGLUMLP_0")
    assert (a["aten::mul"], a["aten::sigmoid"], b["aten::mul"], b["aten::silu"]) == (2, 1, 1, 1)
    assert {k for k in a if k not in b} == {"aten::sigmoid"} and {k for k in b if k not in a} == {"aten::silu"}


def test_the_fourth_model_held_out_scores_as_recorded() -> None:
    """h100_d1536 (heads of 128, bf16, 1 x 512 tokens) was committed before fuseprof read it (772a96b) and scored
    once with the class rules frozen at 4bef1e6 (docs/gate.md): every pair 100% on module and class, all of A's
    GPU time judged (the A time summed from the raw traces' kernels in the profiled steps)."""
    scorer = _scorer()
    folder = FIXTURES / "diff_pairs" / "h100_d1536"
    rows = [scorer.score(f) for f in _truths([folder])]
    assert len(rows) == 6
    for row in rows:
        truth = json.loads((folder / f"{row['pair'].split('/')[1]}.truth.json").read_text())
        assert row["a_ns"] == pytest.approx(raw_gpu_ns_in_steps(folder / truth["a"]["trace"]), rel=1e-6)
        assert row["module_ns"] == row["class_ns"] == row["a_ns"] and row["unjudged_ns"] == 0, (row["pair"], row["wrong"])
