"""Two runs aligned by what they compute (issue 62): ``fuseprof.analysis.judgements.align``, ``changes`` and the gate's
module rules, on the committed H100 pairs (eager / compiled / graphed decode, foreach / fused AdamW). Every
expected number is counted here from the raw trace JSON (kernels, launches, ProfilerStep ranges, the
``nn.Module`` ranges of the CPU thread), never from fuseprof's tables; the hostile cases count in FUZZ_RESULTS."""

from __future__ import annotations

import gzip
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.judgements.align import CELLS, _pairs, align
from fuseprof.analysis.judgements.changes import change_class, changes
from fuseprof.analysis.judgements.gate import parse_rules
from fuseprof.cli import main
from fuseprof.errors import InvalidArgumentError
from tests import trace_rewrite
from tests.conftest import FIXTURES, FUZZ_RESULTS, TRACES, shared_traces

H100 = FIXTURES / "truth_unprofiled" / "h100"
EAGER, COMPILED, GRAPH = H100 / "decode_eager.json.gz", H100 / "decode_compiled.json.gz", H100 / "decode_graph.json.gz"
CAPTURE = H100 / "decode_graph.capture.json.gz"
STEP = re.compile(r"^ProfilerStep#\d+$")


def _raw(path: Path) -> list[dict[str, Any]]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]  # type: ignore[no-any-return]


def _steps(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """The CPU's ProfilerStep#N ranges (user annotations), in order."""
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("cat") == "user_annotation" and STEP.match(str(e.get("name", ""))))


def _kernels_by_launch(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each kernel with the runtime call that launched it (joined on the correlation id)."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {})}
    return [(k, launches[k["args"]["correlation"]]) for k in events
            if k.get("cat") == "kernel" and k["args"].get("correlation") in launches]


def _module_ranges(events: list[dict[str, Any]], leaf: str) -> list[tuple[int, float, float]]:
    """(tid, start, end) of each call of the nn.Module named ``leaf`` (its python_function event)."""
    return [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in events
            if e.get("cat") == "python_function" and e.get("name") == f"nn.Module: {leaf}"]


def _inside(launch: dict[str, Any], ranges: list[tuple[int, float, float]]) -> bool:
    return any(tid == launch["tid"] and start <= launch["ts"] <= end for tid, start, end in ranges)


def _per_step_ns(events: list[dict[str, Any]], leaves: list[str]) -> list[int]:
    """GPU time per ProfilerStep of the kernels launched inside any of the modules ``leaves`` (ns)."""
    ranges = [r for leaf in leaves for r in _module_ranges(events, leaf)]
    out = []
    for start, end in _steps(events):
        out.append(sum(round(k["dur"] * 1000) for k, launch in _kernels_by_launch(events)
                       if start <= launch["ts"] <= end and _inside(launch, ranges)))
    return out


@pytest.fixture(scope="module")
def eager() -> Any:
    return analyze(EAGER)[0]


# --- alignment on the committed pairs ----------------------------------------------------------------------

def test_a_graph_replay_aligns_kernel_for_kernel_with_its_eager_step(eager) -> None:  # type: ignore[no-untyped-def]
    """The replay runs the captured eager kernels in order: every A kernel of a step pairs 1:1 with a B kernel of
    the same name, and every module's class is 'graphed' (the raw traces: 3 steps, GPU events / 3 per step)."""
    raw_a, raw_b = _raw(EAGER), _raw(GRAPH)
    gpu = sum(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in raw_a)  # the argmax's copy back too
    per_step = gpu // len(_steps(raw_a))
    assert per_step * len(_steps(raw_a)) == gpu
    graph = analyze(GRAPH, graph_capture=[CAPTURE])[0]
    found = changes(eager, graph)
    units = found.alignment.units
    ref_a = units[(units["side"] == "A") & units["reference"]]
    ref_b = units[(units["side"] == "B") & units["reference"]].set_index("pair")
    assert len(ref_a) == per_step and (ref_a["pair"] >= 0).all()
    assert (ref_a["name"].to_numpy() == ref_b.loc[ref_a["pair"], "name"].to_numpy()).all()
    assert found.summary["matched_a_pct"] == 100.0 and set(found.modules["change"]) == {"graphed"}
    replays = {e["args"].get("correlation") for e in raw_b if e.get("name") == "cudaGraphLaunch"}
    # one graph launch per step runs all the step's kernels: each module counts one launch in B
    assert len(replays) == len(_steps(raw_b)) and set(found.modules["launches_b"]) == {1.0}


def test_compiled_gemms_pair_by_op_and_shapes_and_every_module_is_compiled(eager) -> None:  # type: ignore[no-untyped-def]
    """Each eager aten::mm pairs with the compiled run's aten::mm of the same (functional) input shapes, in order;
    Inductor calls mm with out=, a third input, so B's first two shapes are compared (raw cpu_op Input Dims)."""
    def mm_dims(path: Path) -> list[Any]:
        events = _raw(path)
        start, end = _steps(events)[0]
        return [e["args"]["Input Dims"][:2] for e in sorted(events, key=lambda e: e.get("ts", 0))
                if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm" and start <= e["ts"] <= end]

    assert mm_dims(EAGER) == mm_dims(COMPILED) and len(mm_dims(EAGER)) == 15
    found = changes(eager, analyze(COMPILED)[0])
    units = found.alignment.units
    ref_a = units[(units["side"] == "A") & units["reference"] & (units["op"] == "aten::mm")]
    ref_b = units[(units["side"] == "B") & units["reference"]].set_index("pair")
    partners = ref_b.loc[ref_a["pair"]]
    assert (ref_a["pair"] >= 0).all() and (partners["op"] == "aten::mm").all()
    assert list(ref_a["sig"]) == list(partners["sig"])  # signature() keeps the functional inputs only
    # raw: every aten::mm of B runs inside Inductor's graph-call range, so the Linears are compiled like the rest
    # (the same cuBLAS kernel, launched by the compiled graph: changes.py's 'compiled')
    events = _raw(COMPILED)
    calls = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "user_annotation"
             and e.get("name", "").startswith("## Call CompiledFxGraph")]
    start, end = _steps(events)[0]
    mms = [e["ts"] for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm" and start <= e["ts"] <= end]
    assert len(mms) == 15 and all(any(a <= t <= b for a, b in calls) for t in mms)
    classes = found.modules.set_index("part")["change"]
    assert classes.filter(like="RMSNorm").eq("compiled").all() and classes.filter(like="Linear_").eq("compiled").all()
    assert found.summary["matched_a_pct"] == 100.0


def test_foreach_adamw_against_fused_is_fused_in_the_optimizer_and_same_elsewhere() -> None:
    """The optimizer's kernels per step (raw: the multi_tensor_apply kernels launched inside 'Optimizer.step'
    ranges) fall from A's count to B's, class 'fused'; the forward and backward are the same kernels."""
    def optimizer_kernels(path: Path) -> int:
        events = _raw(path)
        ranges = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("Optimizer.step")]
        count = sum(_inside(launch, ranges) for _, launch in _kernels_by_launch(events))
        return count // len(_steps(events))

    a, b = analyze(H100 / "train_foreach.json.gz")[0], analyze(H100 / "train_fused.json.gz")[0]
    found = changes(a, b)
    row = found.modules.set_index("part").loc["(optimizer)"]
    assert (row["kernels_a"], row["kernels_b"]) == (optimizer_kernels(H100 / "train_foreach.json.gz"),
                                                    optimizer_kernels(H100 / "train_fused.json.gz"))
    assert row["change"] == "fused" and row["kernels_b"] < row["kernels_a"]
    others = found.modules[found.modules["part"] != "(optimizer)"]
    assert set(others["change"]) == {"same"} and found.summary["matched_a_pct"] == 100.0


@pytest.mark.shared
def test_two_vendors_of_one_model_match_module_for_module() -> None:
    """H100 and MI300 runs of BERT: the same module paths (raw: the nn.Module events' names), every module
    matched, the GEMMs of one vendor's family against the other's ('moved')."""
    folder = shared_traces()
    pa, pb = folder / "h100_bert_small_uncased.json.gz", folder / "mi300_bert_small_uncased.json.gz"
    names = [{e["name"] for e in _raw(p) if e.get("cat") == "python_function" and
              str(e.get("name", "")).startswith("nn.Module: ")} for p in (pa, pb)]
    assert names[0] == names[1]
    found = changes(analyze(pa)[0], analyze(pb)[0])
    assert found.summary["matched_a_pct"] == 100.0 and found.summary["related"]
    linear = found.modules[found.modules["part"].str.contains("Linear_")]
    assert len(linear) and set(linear["change"]) == {"moved"}


# --- the gate: one module slower while the step is faster --------------------------------------------------

@pytest.fixture(scope="module")
def mlp_slower(tmp_path_factory) -> tuple[Path, float, list[int], list[int]]:  # type: ignore[no-untyped-def]
    """decode_eager with Layer 0's MLP kernels 1.6× as long and both attentions' kernels half as long: the
    step gets faster while one module regresses by 60%. Returns B's path, the busy change and MLP_0's GPU time
    per step in A and B, counted from the raw JSON (kernels launched inside the module's CPU range)."""
    events = _raw(EAGER)
    mlp = _module_ranges(events, "MLP_0")
    attention = _module_ranges(events, "Attention_0") + _module_ranges(events, "Attention_1")
    edited = trace_rewrite.load(EAGER)
    by_id = {id(e): e for e in edited["traceEvents"]}
    kernels = _kernels_by_launch(edited["traceEvents"])
    saved = 0.0
    for kernel, launch in kernels:
        factor = 1.6 if _inside(launch, mlp) else 0.5 if _inside(launch, attention) else 1.0
        saved += by_id[id(kernel)]["dur"] * (1 - factor)
        by_id[id(kernel)]["dur"] = round(kernel["dur"] * factor, 3)
    path = trace_rewrite.save(edited, tmp_path_factory.mktemp("module-gate") / "mlp-slower.json.gz")
    return path, saved, _per_step_ns(events, ["MLP_0"]), _per_step_ns(edited["traceEvents"], ["MLP_0"])


def test_one_module_slower_while_the_step_is_faster_fails_the_module_rule(mlp_slower, capsys) -> None:  # type: ignore[no-untyped-def]
    path, saved, a_steps, b_steps = mlp_slower
    assert saved > 0  # the whole step is faster (raw: the time taken from the attentions exceeds MLP_0's gain)
    code = main(["diff", str(EAGER), str(path), "--fail-on", "busy:+5%,module:Llama_0/Layer_0/MLP_0:+10%",
                 "--format", "json"])
    rows = {r["rule"]: r for r in json.loads(capsys.readouterr().out)}
    assert code == 1
    busy, module = rows["busy:+5%"], rows["module:Llama_0/Layer_0/MLP_0:+10%"]
    assert busy["status"] == "ok" and busy["change"] < 0
    assert module["status"] == "BROKEN" and module["module"] == "Llama_0 / Layer_0 / MLP_0"
    assert module["a"] == pytest.approx(statistics.median(a_steps), abs=3)
    assert module["b"] == pytest.approx(statistics.median(b_steps), abs=3)
    assert module["change_pct"] == pytest.approx(60.0, abs=0.2)


def test_every_module_rule_names_the_regressed_modules_and_passes_the_rest(mlp_slower, capsys) -> None:  # type: ignore[no-untyped-def]
    path = mlp_slower[0]
    assert main(["diff", str(EAGER), str(path), "--fail-on", "module:*:+10%"]) == 1
    broken = [line for line in capsys.readouterr().out.splitlines() if line.startswith("BROKEN ")]
    assert broken and all("Layer_0 / MLP_0" in line for line in broken)
    assert main(["diff", str(EAGER), str(path), "--fail-on", "busy:+5%"]) == 0  # the busy rule alone passes


def test_an_unknown_module_is_an_error_with_the_nearest_path(capsys) -> None:
    assert main(["diff", str(EAGER), str(COMPILED), "--fail-on", "module:Llama_0/Layer_0/MLP:+5%"]) == 2
    err = capsys.readouterr().err
    assert "is in neither trace; did you mean Llama_0 / Layer_0 / MLP_0" in err and len(err.strip().splitlines()) == 1


def test_diff_prints_the_module_table_and_its_json_rows(capsys) -> None:
    assert main(["diff", str(EAGER), str(COMPILED), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "by module (aligned by what is computed" in out and "aligned: 100.0% of A's GPU time" in out
    assert main(["diff", str(EAGER), str(COMPILED), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    tables = {r["table"] for r in rows}
    assert {"modules", "module_ops", "alignment"} <= tables
    kernel_ns = sum(round(e["dur"] * 1000) for e in _raw(EAGER) if e.get("cat") == "kernel") / 3
    modules = [r for r in rows if r["table"] == "modules"]
    assert sum(r["time_ns_a"] for r in modules) == pytest.approx(kernel_ns, rel=0.02)  # medians, not means


def test_unrelated_runs_are_said_with_their_evidence(capsys) -> None:
    other = FIXTURES / "thirdparty" / "b200_eager.json.gz"
    assert main(["diff", str(TRACES / "llama4l-eager-h200"), str(other)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"unrelated: \d+\.\d% of A's GPU time is in module paths B also has", out)


# --- hostile inputs (each counted in FUZZ_RESULTS) -----------------------------------------------------------

def _count(outcome: str) -> None:
    FUZZ_RESULTS[outcome] += 1


@pytest.mark.parametrize(("rules", "said"), [
    ("module:*:+nan%", "write QUANTITY:+LIMIT"),
    ("module:*:+1e999%", "write QUANTITY:+LIMIT"),
    ("module::+5%", "write QUANTITY:+LIMIT"),
    ("module:Llama_0/Layer_0:+5%,module:Llama_0 / Layer_0:+5%", "given twice"),
    ("module:*:+5%,module:*:+5%", "given twice"),
])
def test_hostile_module_rules_are_clear_errors(rules: str, said: str, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgumentError, match=re.escape(said)):
        parse_rules(rules)
    assert main(["diff", str(EAGER), str(COMPILED), "--fail-on", rules]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    _count("clear error")


def test_hostile_a_trace_without_gpu_work_is_a_clear_error(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    trace = trace_rewrite.load(EAGER)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in trace_rewrite.GPU]
    bare = trace_rewrite.save(trace, tmp_path / "no-gpu.json")
    assert main(["diff", str(EAGER), str(bare)]) == 2
    err = capsys.readouterr().err
    assert "no GPU kernels, memcpys or memsets" in err and len(err.strip().splitlines()) == 1
    _count("clear error")


def test_hostile_a_step_without_gpu_work_is_left_out_and_said(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """B: decode_eager with the GPU work of its first step removed (raw: the GPU events inside the first
    ProfilerStep's GPU range; 107 kernels and a memcpy). fuseprof's steps are those with GPU work, so B has 2: each
    module's B value in the diff is the median of those two (their mean); the gate refuses the pair."""
    trace = trace_rewrite.load(EAGER)
    marks = sorted((e for e in trace["traceEvents"] if e.get("cat") == "gpu_user_annotation"
                    and STEP.match(str(e.get("name", "")))), key=lambda e: e["ts"])
    first = marks[0]
    trace["traceEvents"] = [e for e in trace["traceEvents"] if not (
        e.get("cat") in trace_rewrite.GPU and first["ts"] <= e["ts"] < first["ts"] + first["dur"])]
    path = trace_rewrite.save(trace, tmp_path / "empty-step.json")
    found = changes(analyze(EAGER)[0], analyze(path)[0])
    units = found.alignment.units
    b = units[units["side"] == "B"].groupby(["part", "step"])["dur_ns"].sum().unstack("step")
    assert b.shape[1] == 2
    table = found.modules.set_index("part")
    assert (table.loc[b.index, "time_ns_b"] == b.mean(axis=1)).all()
    # the gate refuses it: the step's launch calls are there without their kernels (records dropped), fail closed
    assert main(["diff", str(EAGER), str(path), "--fail-on", "module:*:+50%"]) == 2
    assert "107 kernel launch call(s) without their kernel" in capsys.readouterr().err
    _count("clear error")


def test_hostile_one_side_without_modules_borrows_the_other_sides(eager, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """B: decode_eager with its nn.Module events removed: B's kernels take A's module paths through the
    alignment, so each module's B time equals its A time (the same kernels)."""
    trace = trace_rewrite.load(EAGER)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if not str(e.get("name", "")).startswith("nn.Module")]
    stripped = analyze(trace_rewrite.save(trace, tmp_path / "no-modules.json"))[0]
    assert stripped.events["module"].isna().all()
    found = changes(eager, stripped)
    named = found.modules[~found.modules["part"].str.startswith("(")]
    assert (named["time_ns_a"] == named["time_ns_b"]).all() and found.summary["matched_a_pct"] == 100.0
    _count("identical")


def test_hostile_mismatched_step_counts_compare_medians(eager, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """B: the same trace's steps repeated twice over (6 steps against A's 3): the medians per module agree."""
    twice = trace_rewrite.repeat_steps(trace_rewrite.load(EAGER), 2)
    for cat in ("user_annotation", "gpu_user_annotation"):  # the copies' step numbers overlap: number them anew
        marks = sorted((e for e in twice["traceEvents"] if e.get("cat") == cat and STEP.match(str(e.get("name", "")))),
                       key=lambda e: e["ts"])
        for k, e in enumerate(marks):
            e["name"] = f"ProfilerStep#{k}"
    six = analyze(trace_rewrite.save(twice, tmp_path / "x2.json"))[0]
    assert six.events["profiler_step"].nunique() == 6
    found = changes(eager, six)
    table = found.modules
    assert (table["time_ns_a"] == table["time_ns_b"]).all() and set(table["change"]) == {"same"}
    _count("identical")


def _units(n: int, category: str = "elementwise") -> pd.DataFrame:
    return pd.DataFrame({"module": "m", "has_module": False, "op": [f"op{i % 7}" for i in range(n)],
                         "sig": [f"op{i % 7} [[{i % 5}]]" for i in range(n)], "name": [f"k{i % 11}" for i in range(n)],
                         "category": category, "anchor": np.arange(n) % 9 == 0, "dur_ns": 1000})


def test_hostile_huge_steps_are_bounded() -> None:
    """12,000 × 12,000 units (144 M cells, 36 × the bound): aligned through anchors and slices in seconds."""
    notes: list[str] = []
    began = time.monotonic()
    pairs = _pairs(_units(12_000), _units(12_000), notes)
    assert time.monotonic() - began < 60 and len(pairs) == 12_000  # identical sequences: every unit paired
    assert 12_000 * 12_000 > CELLS and all(i == j for i, j in pairs)
    _count("held")


def test_hostile_no_pair_is_allowed_across_categories() -> None:
    notes: list[str] = []
    assert _pairs(_units(50, "GEMM"), _units(40, "elementwise"), notes) == [] and not notes
    _count("held")


def test_hostile_empty_sides_align_to_nothing(eager) -> None:  # type: ignore[no-untyped-def]
    notes: list[str] = []
    assert _pairs(_units(0), _units(5), notes) == [] and _pairs(_units(5), _units(0), notes) == []
    empty = _units(0).assign(group=[], graphed=[])
    assert change_class(empty, empty.iloc[:0]) == "new"
    _count("held")


def test_hostile_a_trace_against_itself_is_all_same(eager) -> None:  # type: ignore[no-untyped-def]
    found = changes(eager, eager)
    assert set(found.modules["change"]) == {"same"} and (found.modules["delta_ns"] == 0).all()
    assert align(eager, eager).units.groupby("side")["dur_ns"].sum().nunique() == 1
    _count("identical")


PAIRS = FIXTURES / "diff_pairs" / "h100"


def test_eager_attention_against_sdpa_passes_a_busy_rule(capsys) -> None:  # type: ignore[no-untyped-def]
    """issue 62's done-when: the eager -> SDPA pair (tests/fixtures/diff_pairs/h100, the same model with attention
    by hand, then F.scaled_dot_product_attention) was 'unrelated' (rc 2); it shares every module path (raw: the
    nn.Module events' names are the same set), so the gate compares it, and busy:+5% passes (B does less work)."""
    a, b = PAIRS / "forward_eager_attention.json.gz", PAIRS / "forward_sdpa.json.gz"
    names = [{e["name"] for e in _raw(p) if e.get("cat") == "python_function" and
              str(e.get("name", "")).startswith("nn.Module: ")} for p in (a, b)]
    assert names[0] == names[1]
    kernel_ns = [sum(round(e["dur"] * 1000) for e in _raw(p) if e.get("cat") == "kernel") for p in (a, b)]
    assert kernel_ns[1] < kernel_ns[0]
    assert main(["diff", str(a), str(b), "--fail-on", "busy:+5%", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["status"] == "ok" and row["change"] < 0
    found = changes(analyze(a)[0], analyze(b)[0])
    assert found.summary["related"] and found.summary["module_share_pct"] == 100.0
