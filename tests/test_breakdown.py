"""The per-variant breakdown of the committed decoder-layer capture (H200), checked against the raw
profiler trace and timings read without fuseprof's parsers."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from fuseprof.errors import InvalidArgumentError
from fuseprof.tables.breakdown import fusion_amdahl, variant_breakdown
from tests.conftest import TRACES

BUNDLE = TRACES / "decoder_layer-bfloat16-h200-20261129t174445z"
CALLS = 3  # manifest: profiler repeats_per_range


@pytest.fixture(scope="module")
def layer() -> pd.DataFrame:
    return variant_breakdown(BUNDLE).set_index(["variant", "shape"])


def _raw_range(label: str) -> tuple[list[dict], list[dict]]:
    """Launch-API events inside the CPU range ``label`` and the GPU events they launched."""
    events = json.load(gzip.open(BUNDLE / "raw" / "profiler_trace.json.gz"))["traceEvents"]
    (span,) = [e for e in events if e.get("cat") == "user_annotation" and e["name"] == label]
    inside = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and span["ts"] <= e["ts"] <= span["ts"] + span["dur"]]
    correlations = {e["args"]["correlation"] for e in inside}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and e["args"].get("correlation") in correlations]
    launches = [e for e in inside if e["args"]["correlation"] in {g["args"]["correlation"] for g in gpu}]
    return launches, gpu


@pytest.mark.parametrize("variant, launches_per_call", [("eager_graph", 1), ("eager", 43), ("compiled_graphs", 4)])
def test_kernels_and_launches_per_call_from_the_raw_trace(layer: pd.DataFrame, variant: str,
                                                          launches_per_call: int) -> None:
    launches, gpu = _raw_range(f"fuseprof:{variant}:1x1x2048")
    assert len(launches) / CALLS == launches_per_call == layer.loc[(variant, "1x1x2048"), "launches_per_call"]
    assert len(gpu) / CALLS == layer.loc[(variant, "1x1x2048"), "kernels_per_call"]
    # trace durations are µs with ns fractions
    assert layer.loc[(variant, "1x1x2048"), "kernel_us"] == pytest.approx(sum(e["dur"] for e in gpu) / CALLS, abs=1e-3)
    # a graph replay launches the same kernels as the eager call it recorded
    assert layer.loc[("eager_graph", "1x1x2048"), "kernels_per_call"] == layer.loc[("eager", "1x1x2048"),
                                                                                  "kernels_per_call"]


def test_latency_and_roofline_from_the_timings_file(layer: pd.DataFrame) -> None:
    timings = pd.read_parquet(BUNDLE / "timings.parquet").set_index(["variant", "shape"])
    for variant in ("eager", "fused_cuda", "eager_graph", "compiled", "compiled_graphs"):
        assert layer.loc[(variant, "1x1x2048"), "as_called_us"] == timings.loc[(variant, "1x1x2048"),
                                                                             "as_called_median_ns"] / 1e3
    copy_ns = min(timings.loc[("copy", "1x1x2048"), "gpu_median_ns"], timings.loc[("copy_sm", "1x1x2048"),
                                                                                  "gpu_median_ns"])
    eager = timings.loc[("eager", "1x1x2048")]
    assert layer.loc[("eager", "1x1x2048"), "pct_of_memory_roofline"] == pytest.approx(
        100 * copy_ns / eager["as_called_median_ns"])
    # batch-1 decode bytes: bf16 weights 2·(6144·4096 + 4096·4096 + 3·14336·4096 + 2·4096), the K and V cache
    # 2·2·(8·2048·128), the new token's K and V 2·2·(8·128), its rotary rows 2·2·128, hidden/residual in and out
    weights = 2 * (6144 * 4096 + 4096 * 4096 + 3 * 14336 * 4096 + 2 * 4096)
    assert layer.loc[("eager", "1x1x2048"), "bytes"] == weights + 4 * 8 * 2048 * 128 + 4 * 8 * 128 + 4 * 128 + 8 * 4096
    # the graph variants have no separate GPU time; the others do
    assert layer.xs("eager_graph")["gpu_us"].isna().all() and layer.xs("eager")["gpu_us"].notna().all()


def test_shares_put_graph_replayed_flash_attention_under_attention(layer: pd.DataFrame) -> None:
    """In a graph no op launches cuDNN's SDPA kernel; its name (which mentions wgmma) must still say attention."""
    for variant in ("eager_graph", "compiled_graphs"):
        assert layer.loc[(variant, "1x2048x2048"), "attention_share"] == pytest.approx(
            layer.loc[("eager", "1x2048x2048"), "attention_share"], rel=0.35)
    # the GEMM share from the raw trace: the time of kernels launched by aten::mm/addmm/linear in that range
    _, gpu = _raw_range("fuseprof:eager:64x1x2048")
    events = json.load(gzip.open(BUNDLE / "raw" / "profiler_trace.json.gz"))["traceEvents"]
    gemm_ops = {e["args"]["External id"] for e in events
                if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm", "aten::bmm")}
    gemm = sum(e["dur"] for e in gpu if e["args"].get("External id") in gemm_ops)
    assert layer.loc[("eager", "64x1x2048"), "gemm_share"] == pytest.approx(gemm / sum(e["dur"] for e in gpu), rel=1e-6)


def test_amdahl_share_is_the_time_that_disappears_plus_the_fused_kernels(layer: pd.DataFrame) -> None:
    amdahl = fusion_amdahl(BUNDLE).set_index("shape")
    _, gpu = _raw_range("fuseprof:fused_cuda:1x1x2048")
    own = sum(e["dur"] for e in gpu if e["name"].split("<")[0].split("::")[-1] in ("add_rms_norm_kernel",
                                                                                   "silu_mul_kernel")) / CALLS
    eager, fused = layer.loc[("eager", "1x1x2048"), "kernel_us"], layer.loc[("fused_cuda", "1x1x2048"), "kernel_us"]
    row = amdahl.loc["1x1x2048"]
    assert row["fused_kernels_us"] == pytest.approx(own, abs=1e-3)
    assert row["replaced_share"] == pytest.approx((eager - fused + own) / eager)
    assert 1 < row["measured_speedup"] < row["amdahl_limit"] < row["memory_bound_limit"]


def test_breakdown_of_a_bench_bundle_is_an_error() -> None:
    with pytest.raises(InvalidArgumentError, match="needs a capture bundle"):
        variant_breakdown(TRACES / "bench-h200-20261129t174201z")
