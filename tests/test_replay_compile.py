"""torch.compile's saving on work that is already CUDA-graph replays (issue 59: the graph replays got no advice while
the truth measured compile saving 0.14-0.16 ms a step; fuseprof/analysis/paths/replay_compile.py). The runs and the
kernel time they lose are counted here from the raw trace (kernel records, their correlation with the
``cudaGraphLaunch`` that replayed them), the measured saving read from the truth file; then the replays the row must
leave alone (compiled already, a library's kernels) and a hostile replay."""

from __future__ import annotations

import gzip
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from fuseprof.analysis import analyze
from tests.conftest import FIXTURES, FUZZ_RESULTS, by_name, trace_at

TRUTH = FIXTURES / "truth_unprofiled"
ROW = "compile the replayed eager kernels"
# what the raw rule leaves out of a run: GEMMs and attention (cuBLAS/nvjet, cuDNN's SDPA), and the embedding's
# index-select gather (ATen's, but of no memory-bound family in the registry: it ends a run, as any unknown kernel)
_NOT_IN_A_RUN = re.compile(r"nvjet|gemm|cutlass|splitKreduce|sdpa|flash|attention|indexSelect", re.I)


def _raw(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _analyse(path: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(path)[0]


def _raw_runs(doc: dict[str, Any]) -> list[list[float]]:
    """Per run, its kernels' durations (µs): consecutive kernel records of one graph launch (their correlation id
    is a ``cudaGraphLaunch``'s), each ATen's own (``at::native::`` in its name), none of ``_NOT_IN_A_RUN``."""
    events = doc["traceEvents"]
    replays = {e["args"]["correlation"] for e in events
               if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaGraphLaunch"}
    runs: list[list[float]] = []
    run: list[float] = []
    launch = None
    for e in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"]):
        fits = "at::native::" in e["name"] and not _NOT_IN_A_RUN.search(e["name"]) \
            and e["args"]["correlation"] in replays
        if not fits or (run and e["args"]["correlation"] != launch):
            runs += [run] if len(run) > 1 else []
            run = []
        if fits:
            run.append(float(e["dur"]))
            launch = e["args"]["correlation"]
    return runs + ([run] if len(run) > 1 else [])


def _row(result: Any) -> Any:
    worth = result.frames["worth_doing"]
    rows = worth[worth["what"].astype(str).str.startswith(ROW)]
    return rows.iloc[0] if len(rows) else None


@pytest.mark.parametrize("folder, name", [("h100", "decode_graph"), ("h100b", "infer_graph")])
def test_the_runs_and_their_kernel_time_are_the_raw_traces(folder: str, name: str) -> None:
    """Kernels and runs in the row's words, and its GPU saving (Σ members − the longest, per run) to the ns the
    trace's µs hold."""
    path = TRUTH / folder / f"{name}.json.gz"
    runs = _raw_runs(_raw(path))
    assert len(runs) >= 3, "the fixture holds no runs: the test would prove nothing"
    row = _row(_analyse(path))
    assert row is not None
    assert f"{sum(len(r) for r in runs)} memory-bound kernels in {len(runs)} runs" in str(row["what"])
    gpu_us = sum(sum(r) - max(r) for r in runs)
    assert float(row["gpu_saving_ns"]) == pytest.approx(gpu_us * 1e3, abs=len(runs) * 2)


@pytest.mark.parametrize("folder", ["h100", "h100b", "h100c"])
@pytest.mark.parametrize("name", ["decode_graph", "infer_graph"])
def test_a_graph_replay_is_advised_compile_with_its_measured_saving(folder: str, name: str) -> None:
    """First advice, and per step (the raw file's ProfilerStep ranges) within 25% of the compile saving the truth
    measured without the profiler (or its spread where wider): the GPU-bound replay's path loses the kernel time and
    one node lag per kernel fused away."""
    path = TRUTH / folder / f"{name}.json.gz"
    truth = json.loads((TRUTH / folder / f"{name}.truth.json").read_text())
    steps = sum(e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
                for e in _raw(path)["traceEvents"])
    result = _analyse(path)
    first = result.frames["worth_doing"].iloc[0]
    assert str(first["what"]).startswith(ROW)
    claimed, change = float(first["saving_ns"]) / 1e6 / steps, truth["changes"]["compile"]
    assert abs(claimed - change["saving_ms"]) <= max(0.25 * change["saving_ms"], change["saving_spread_ms"]), \
        (claimed, change)
    # the step saving is more than the kernel time alone (the node lags go too) and less than the step
    assert float(first["gpu_saving_ns"]) < float(first["saving_ns"]) < truth["unprofiled_step"]["median_ms"] * 1e6 * steps


def test_an_eager_step_gets_no_such_row() -> None:
    """No kernel of the eager decode is replayed from a graph (no cudaGraphLaunch in the raw file): no row."""
    path = TRUTH / "h100" / "decode_eager.json.gz"
    assert not [e for e in _raw(path)["traceEvents"] if e.get("name") == "cudaGraphLaunch"]
    assert _row(_analyse(path)) is None


@pytest.mark.parametrize("name", by_name("shared:h200-turn4/decode_compiled_ro.json.gz",
                                         "shared:sglang_Qwen3-8B_decode.json.gz",
                                         "shared:vllm_decode_full_graph_execution.json.gz"))
def test_compiled_replays_and_library_kernels_get_no_compile_row(name: str) -> None:
    """A reduce-overhead decode (its replays hold Inductor's Triton kernels: compiled already) and SGLang's and
    vLLM's graph decodes (their memory-bound replayed kernels are the libraries' RoPE and KV-cache writes, which
    torch.compile cannot fuse), each checked in the raw file first."""
    path = trace_at(name)
    kernels = [str(e["name"]) for e in _raw(path)["traceEvents"] if e.get("cat") == "kernel"]
    if "compiled" in name:
        assert any(k.startswith("triton_") for k in kernels)
    else:
        assert any("rotary_embedding_kernel" in k for k in kernels)
    assert _row(_analyse(path)) is None


def test_hostile_a_replay_holding_one_triton_kernel_is_compiled_already(tmp_path: Path) -> None:
    """One kernel of the first replay renamed to an Inductor kernel's name: that replay's runs leave the row (the
    other replays' stay), and the numbers stay finite."""
    doc = _raw(TRUTH / "h100" / "decode_graph.json.gz")
    kernels = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    first = kernels[0]["args"]["correlation"]
    before = len(_raw_runs(doc))
    replay_runs = len(_raw_runs({"traceEvents": [e for e in doc["traceEvents"] if e.get("cat") != "kernel"
                                                 or e["args"]["correlation"] == first]}))  # the first replay's
    kernels[0]["name"] = "triton_poi_fused_embedding_0"
    path = tmp_path / "one_triton.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    row = _row(_analyse(path))
    assert row is not None and replay_runs > 0
    assert f"in {before - replay_runs} runs" in str(row["what"])
    assert 0 < float(row["saving_ns"]) < float("inf")
    FUZZ_RESULTS["held"] += 1
