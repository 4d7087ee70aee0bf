"""Any trace a user brings, checked against TraceLens's reports for the same traces.

The traces and reports are in ../shared/thirdparty-traces (AMD-AGI/TraceLens, MIT; SOURCE.md there).
Every expected number is read in the test from TraceLens's CSVs or from the raw trace JSON with
plain ``json``, never from fuseprof's own output. TraceLens reports milliseconds as floats (to
about a ns); fuseprof works in integer ns, so equal means within 0.1% or 1 ns. Where the two
taxonomies split time differently, the test sums both sides as docs/validation.md's table says.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from fuseprof.analysis import analyze, analyze_trace
from fuseprof.cli import main
from tests.conftest import FIXTURES, TRACES, shared_traces

GRAPHS = FIXTURES / "h200-graphs"
VLLM = ("vllm_prefilldecode_piecewise_graph_execution.json.gz", "vllm_prefilldecode_piecewise_graph_capture.json.gz")
# trace -> its report folder, and how fuseprof's categories sum to TraceLens's (docs/validation.md)
TAXONOMY: dict[str, tuple[str, list[tuple[tuple[str, ...], tuple[str, ...]]]]] = {
    "mi300_bert_small_uncased.json.gz": ("mi300_bert_small", [
        (("GEMM",), ("GEMM",)), (("elementwise",), ("elementwise",)), (("normalization",), ("NORM_fwd",)),
        (("reduction",), ("reduce",)), (("attention", "other", "memcpy"), ("other",))]),
    "mi300_falconsai_nsfw_image_detection.json.gz": ("mi300_falconsai", [
        (("GEMM",), ("GEMM",)), (("elementwise",), ("elementwise",)), (("normalization",), ("NORM_fwd",)),
        (("convolution",), ("CONV_fwd",)), (("attention", "copy/cast"), ("other",))]),
    "mi300_resnet_act_checkpoint.json.gz": ("mi300_resnet_act_checkpoint", [
        (("GEMM",), ("GEMM",)), (("convolution",), ("CONV_fwd", "CONV_bwd")),
        (("normalization",), ("NORM_fwd", "NORM_bwd")),
        (("elementwise", "reduction", "copy/cast", "memcpy"), ("elementwise", "other", "multi_tensor_apply", "reduce"))]),
    "sglang_qwen3_8b_prefilldecode.json.gz": ("sglang_qwen3_8b_prefilldecode", [
        (("GEMM",), ("GEMM",)), (("normalization",), ("RMSNorm",)), (("reduction",), ("reduce",)),
        (("attention", "elementwise", "copy/cast", "memcpy", "other"),
         ("InferenceAttention", "elementwise", "RoPE_fwd", "other"))]),
    "torch_compile_triton.json.gz": ("torch_compile_triton", [
        (("GEMM",), ("GEMM",)), (("attention",), ("other",)), (("elementwise", "normalization"), ("triton",))]),
    VLLM[0]: ("vllm_prefilldecode_piecewise", [
        (("normalization",), ("RMSNorm",)),
        (("GEMM", "attention", "elementwise", "reduction", "MoE", "copy/cast", "memcpy"),
         ("GEMM", "other", "InferenceAttention", "triton", "elementwise"))]),
}
MI300 = ["mi300_bert_small_uncased.json.gz", "mi300_falconsai_nsfw_image_detection.json.gz",
         "mi300_resnet_act_checkpoint.json.gz", "sglang_qwen3_8b_prefilldecode.json.gz", "torch_compile_triton.json.gz"]


def _report(folder: str, name: str) -> list[dict[str, str]]:
    with open(shared_traces() / f"{folder}_tracelens_report" / f"{name}.csv") as fh:
        return list(csv.DictReader(fh))


def _raw(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


_RESULTS: dict[str, object] = {}


def _analysed(trace: str):  # type: ignore[no-untyped-def]
    paths = [shared_traces() / trace] + ([shared_traces() / VLLM[1]] if trace == VLLM[0] else [])
    if trace not in _RESULTS:
        (_RESULTS[trace],) = analyze(paths)
    return _RESULTS[trace]


def _every_trace() -> list[Path]:
    shared = sorted(p for p in shared_traces().glob("*.json.gz"))
    bundles = sorted(p for p in TRACES.iterdir() if (p / "raw").is_dir() and list((p / "raw").glob("*.json*")))
    fixtures = sorted(p for p in FIXTURES.glob("*/*.json.gz") if not p.name.endswith(".et.json.gz")) + sorted(GRAPHS.glob("*.json.gz"))
    return shared + bundles + fixtures


@pytest.mark.shared
def test_every_trace_and_bundle_analyses_with_exit_0(capsys) -> None:
    traces = _every_trace()
    assert len(traces) >= 25
    for path in traces:
        assert main(["analyze", str(path), "--format", "json"]) == 0, path
        body = json.loads(capsys.readouterr().out)
        assert body and all("integrity" in v for k, v in body.items() if k not in ("across_ranks", "schema_version")), path


@pytest.mark.parametrize("trace", sorted(TAXONOMY))
@pytest.mark.shared
def test_category_times_equal_tracelens(trace: str) -> None:
    folder, sums = TAXONOMY[trace]
    theirs: dict[str, float] = {}
    for row in _report(folder, "ops_summary_by_category"):
        theirs[row["op category"]] = theirs.get(row["op category"], 0.0) + float(row["total_direct_kernel_time_ms"]) * 1e6
    ours = _analysed(trace).categories.set_index("category")["time_ns"]
    for mine, their in sums:
        left = sum(int(ours.get(c, 0)) for c in mine)
        right = sum(theirs.get(c, 0.0) for c in their)
        assert left == pytest.approx(right, rel=1e-3, abs=1), (mine, their)
    covered = {c for mine, _ in sums for c in mine}
    rest = set(ours.index) - covered - {"memset", "communication"}
    assert not rest, f"categories the taxonomy table does not place: {rest}"


@pytest.mark.parametrize("trace", sorted(TAXONOMY))
@pytest.mark.shared
def test_every_gemm_equals_tracelens(trace: str) -> None:
    """Per GEMM (op and input shapes): FLOPs, bytes, calls and kernel time. TraceLens lists an engine's
    wrapper op (aiter::gemm_a16w16, vllm::rocm_unquantized_gemm) beside the aten op it calls; fuseprof
    charges kernels to the op that launched them, so a wrapper row equals the row of its aten op."""
    roof = _analysed(trace).op_roofline
    rows = _report(TAXONOMY[trace][0], "GEMM")
    assert rows
    for row in rows:
        flops, ns = float(row["GFLOPS_first"]) * 1e9, float(row["Kernel Time (µs)_sum"]) * 1e3
        mine = roof[roof["signature"].str.startswith(f"{row['name']} {row['Input Dims_first']}")]
        if mine.empty:  # a wrapper op: the launching op's row with the same work and time
            mine = roof[((roof["flops"] - flops).abs() <= 1e-6 * flops) & ((roof["time_ns"] - ns).abs() <= 1e-3 * ns)]
            assert row["name"] in ("aiter::gemm_a16w16", "vllm::rocm_unquantized_gemm"), row["name"]
        else:
            assert mine["dram_bytes"].iloc[0] == pytest.approx(float(row["Data Moved (MB)_first"]) * 2**20, rel=1e-9)
        assert len(mine) == 1, (row["name"], row["Input Dims_first"])
        m, n, k = (int(float(row[f"param: {p}"])) for p in "MNK")
        assert mine["flops"].iloc[0] == pytest.approx(flops, rel=1e-9)
        assert mine["flops"].iloc[0] in (2 * m * n * k * int(float(row.get("param: B") or 1)),
                                         2 * m * n * k + m * n)  # + the bias add
        assert mine["calls"].iloc[0] == int(row["name_count"])
        assert mine["time_ns"].iloc[0] == pytest.approx(ns, rel=1e-3)


@pytest.mark.parametrize("trace", sorted(TAXONOMY))
@pytest.mark.shared
def test_timeline_equals_tracelens(trace: str) -> None:
    tl = {r["type"]: float(r["time ms"]) * 1e6 for r in _report(TAXONOMY[trace][0], "gpu_timeline")
          if r.get("is_recompute", "False") == "False"}
    recompute = {r["type"]: float(r["time ms"]) * 1e6 for r in _report(TAXONOMY[trace][0], "gpu_timeline")
                 if r.get("is_recompute") == "True"}
    ours = _analysed(trace).timeline.set_index("stream").loc["all"]
    assert ours["span_ns"] == pytest.approx(tl["total_time"], rel=1e-4, abs=1)
    assert ours["communication_ns"] == pytest.approx(tl["total_comm_time"], rel=1e-4, abs=1)
    assert ours["memcpy_ns"] == pytest.approx(tl["total_memcpy_time"], rel=1e-4, abs=1)
    # TraceLens splits activation-checkpointing recompute off (is_recompute); its two rows add up to ours
    assert ours["computation_ns"] == pytest.approx(tl["computation_time"] + recompute.get("computation_time", 0),
                                                   rel=1e-4, abs=1)
    if not recompute:
        assert ours["busy_ns"] == pytest.approx(tl["busy_time"], rel=1e-4, abs=1)


@pytest.mark.shared
def test_resnet_window_is_the_profiled_steps_and_the_warm_up_is_reported() -> None:
    """The ResNet trace holds GPU work of earlier steps without launch records: counted from the raw
    file, those events are left out, and the profiled steps' span equals TraceLens's total time."""
    raw = _raw(shared_traces() / "mi300_resnet_act_checkpoint.json.gz")
    launched = {e["args"]["correlation"] for e in raw if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    gpu = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    orphans = [e for e in gpu if e["args"].get("correlation") not in launched]
    result = _analysed("mi300_resnet_act_checkpoint.json.gz")
    checks = result.integrity.set_index("check")
    assert checks.loc["kernels_without_launch", "value"] == len(orphans) == 968
    assert checks.loc["events_outside_window", "value"] == 968 and not checks.loc["events_outside_window", "ok"]
    steps = result.steps.set_index("step")
    assert list(steps.index) == ["ProfilerStep#15", "ProfilerStep#16", "ProfilerStep#17", "(outside the profiled steps)"]
    assert steps["events"].sum() == len(gpu)
    assert steps.loc["(outside the profiled steps)", "events"] == 968
    assert result.window == "window: the profiled steps (#15, #16, #17)"
    whole = analyze(shared_traces() / "mi300_resnet_act_checkpoint.json.gz", window="all")[0]
    assert len(whole.events) == len(gpu)


@pytest.mark.parametrize("trace", MI300)
@pytest.mark.shared
def test_mi300_traces_are_judged_against_the_mi300x_roof(trace: str) -> None:
    assert _analysed(trace).roof.label == "MI300X (datasheet)"
    assert _analysed(trace).roof.peak("tensor_bf16") == 1307.4e12


@pytest.mark.shared
def test_vllm_graph_replays_are_attributed_to_their_capture_ops() -> None:
    raw = _raw(shared_traces() / VLLM[0])
    graph_calls = {e["args"]["correlation"] for e in raw if e.get("name") == "hipGraphLaunch"}
    replayed = [e for e in raw if e.get("cat") == "kernel" and e["args"]["correlation"] in graph_calls]
    assert len(graph_calls) == 25 and len(replayed) == 361
    result = _analysed(VLLM[0])
    checks = result.integrity.set_index("check")
    assert checks.loc["graph_kernel_time_attributed_pct", "value"] >= 99
    graph = result.events[result.events["graph_replay"].notna()]
    assert len(graph) == 361 and graph["op"].notna().all()
    launches = result.launches.set_index("launch_api")
    assert launches.loc["hipGraphLaunch", "launches"] == 25 and launches.loc["hipGraphLaunch", "kernels"] == 361
    # the capture names each kernel it launched: the attributed op launched that very kernel name
    capture = _raw(shared_traces() / VLLM[1])
    launched_by = {}
    ops = {e["args"].get("External id"): e["name"] for e in capture if e.get("cat") == "cpu_op"}
    for e in capture:
        if e.get("cat") == "cuda_runtime" and "kernel" in e.get("args", {}):
            launched_by.setdefault(e["args"]["kernel"], set()).add(ops.get(e["args"].get("External id")))
    assert all(op in launched_by[name] for name, op in zip(graph["name"], graph["op"]))


def test_an_unknown_device_is_an_error_that_lists_the_known_ones(capsys) -> None:
    trace = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"
    assert main(["analyze", str(trace), "--device", "H999"]) == 2
    err = capsys.readouterr().err
    assert "unknown GPU" in err and "MI300X" in err and "H200" in err and len(err.strip().splitlines()) == 1
    assert analyze_trace(trace, device="MI355X").roof.label == "MI355X (datasheet)"


@pytest.mark.parametrize(("trace", "folder"), [("h100_bert_small_uncased.json.gz", "h100_bert_small"),
                                               ("h100_falconsai_nsfw_image_detection.json.gz", "h100_falconsai")])
def test_h100_step_window_busy_time_equals_tracelens_within_a_hundredth_of_a_percent(trace: str, folder: str) -> None:
    """These traces profile one step (ProfilerStep#6): the default window is that step."""
    result = analyze_trace(FIXTURES / "thirdparty" / trace)
    assert result.window == "window: the profiled steps (#6)"
    with open(FIXTURES / "thirdparty" / f"{folder}_tracelens_report" / "gpu_timeline.csv") as fh:
        busy = next(float(r["time ms"]) * 1e6 for r in csv.DictReader(fh) if r["type"] == "busy_time")
    assert result.timeline.set_index("stream").loc["all", "busy_ns"] == pytest.approx(busy, rel=1e-4)
