"""Issue 60 point 3: cost models use the dtypes the trace records, and no predicted time implies more bandwidth
than the device has.

- The optimizer step's bytes: each element is as wide as the scalar type the step's own kernels are built for (a
  foreach kernel's functor names it: ``BinaryOpScalarFunctor<float, …>``), so FSDP2's AdamW over fp32 shards, whose
  gradients autograd records as the bf16 unsharded parameter's, costs 4 B an element, not 2 (the issue's case).
- A copy model faster than the device's peak DRAM rate (a bench of another GPU, a fit through L2-resident copies)
  is bounded by the peak, and the analysis says so.

Expected values are worked from the committed train_foreach trace's raw JSON: every AccumulateGrad's recorded
shape (its numel), × 4 bytes × 7 (AdamW reads w, g, m, v and writes w, m, v). Hostile variations count on the fuzz
line."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fuseprof.analysis.judgements.fusion import CopyModel
from fuseprof.analysis.running.analyze import Options, analyze_tables
from fuseprof.parse.trace_events import read_trace_tables
from tests import trace_rewrite
from tests.conftest import FIXTURES, FUZZ_RESULTS

TRAIN = FIXTURES / "truth" / "train_foreach.json.gz"  # H200, fp32 parameters, torch.optim AdamW (foreach), 3 steps
ADAMW = 3 + 2 * 2  # elements read and written per parameter element


def _numel(trace: dict[str, Any]) -> int:
    """Σ numel over every AccumulateGrad the raw trace records (one per parameter and backward pass)."""
    return sum(math.prod(e["args"]["Input Dims"][0]) for e in trace["traceEvents"]
               if e.get("name") == "torch::autograd::AccumulateGrad" and e.get("cat") == "cpu_op")


def _analysis(trace: dict[str, Any], tmp_path: Path, copy: CopyModel | None = None) -> Any:
    path = trace_rewrite.save(trace, tmp_path / "t.json.gz")
    return analyze_tables(read_trace_tables(path), Options(copy=copy))


def _optimizer_bytes(result: Any) -> float:
    rows = result.fusion[result.fusion["class"] == "optimizer step"]
    assert len(rows) == 1
    return float(rows["fused_bytes"].iloc[0])


def _retyped(trace: dict[str, Any], dtype: str) -> dict[str, Any]:
    """Every AccumulateGrad's gradient recorded as ``dtype`` (as FSDP2's unsharded bf16 parameters record it)."""
    for e in trace["traceEvents"]:
        if e.get("name") == "torch::autograd::AccumulateGrad" and e.get("cat") == "cpu_op":
            e["args"]["Input type"] = [dtype] * len(e["args"]["Input type"])
    return trace


def _kernels_as(trace: dict[str, Any], scalar: str, every: int = 1) -> dict[str, Any]:
    """The foreach kernels' functors built for ``scalar`` instead of float (every ``every``-th of them)."""
    foreach = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and "multi_tensor_apply" in e["name"]]
    for e in foreach[::every]:
        e["name"] = re.sub(r"Functor<float,", f"Functor<{scalar},", e["name"])
    return trace


def test_fp32_adamw_costs_4_bytes_an_element(tmp_path: Path) -> None:
    trace = trace_rewrite.load(TRAIN)
    assert _optimizer_bytes(_analysis(trace, tmp_path)) == _numel(trace) * 4 * ADAMW


def test_fsdp2_bf16_gradients_over_fp32_state_still_cost_4_bytes(tmp_path: Path) -> None:
    """The issue's FSDP2 case: gradients recorded bf16 (2 B), the step's kernels fp32: 4 B an element (the code
    before this read the gradients' 2 B, half the bytes, a fused step at twice the card's bandwidth)."""
    trace = _retyped(trace_rewrite.load(TRAIN), "c10::BFloat16")
    assert _optimizer_bytes(_analysis(trace, tmp_path)) == _numel(trace) * 4 * ADAMW


def test_a_bf16_step_costs_2_bytes_an_element(tmp_path: Path) -> None:
    trace = _kernels_as(trace_rewrite.load(TRAIN), "c10::BFloat16")
    assert _optimizer_bytes(_analysis(trace, tmp_path)) == _numel(trace) * 2 * ADAMW


def _implied_rates(result: Any) -> pd.Series:
    fusion = result.fusion.dropna(subset=["fused_bytes", "predicted_fused_ns"])
    return fusion["fused_bytes"] / fusion["predicted_fused_ns"] * 1e9


def test_no_prediction_implies_more_than_the_peak(tmp_path: Path) -> None:
    """A 10 TB/s copy model with a negative fixed cost on an H200 (4.8 TB/s): every fused time is at least its
    bytes over 4.8 TB/s, and a note says the model was bounded."""
    result = _analysis(trace_rewrite.load(TRAIN), tmp_path, CopyModel(10e12, -500.0, "a bench of another GPU"))
    assert len(_implied_rates(result)) > 5 and (_implied_rates(result) <= 4.8e12 * (1 + 1e-9)).all()
    note = next(n for n in result.notes if n.startswith("copy model (a bench of another GPU)"))
    assert "10.00 TB/s is above" in note and "4.80 TB/s" in note and "-500 ns is negative" in note


def _no_shapes(trace: dict[str, Any]) -> dict[str, Any]:
    for e in trace["traceEvents"]:
        if e.get("name") == "torch::autograd::AccumulateGrad" and e.get("cat") == "cpu_op":
            e["args"]["Input Dims"] = []
    return trace


HOSTILE = {
    # DTensor shards recorded without shapes: unknown bytes, no prediction, never a guess
    "parameters with no shapes": (lambda t: _no_shapes(t), "nan"),
    # kernels of two scalar types (a model mixing bf16 and fp32 groups): each parameter's recorded dtype
    "kernels of two scalar types": (lambda t: _kernels_as(t, "c10::BFloat16", 2), 4),
    # a scalar type the functors do not use for optimizers (fp8): the recorded dtype
    "fp8 functor": (lambda t: _kernels_as(t, "c10::Float8_e4m3fn"), 4),
    # a gradient dtype no table knows, fp32 kernels: the kernels decide
    "unknown gradient dtype": (lambda t: _retyped(t, "c10::ComplexHalf2"), 4),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_optimizer_records(case: str, tmp_path: Path) -> None:
    change, width = HOSTILE[case]
    trace = change(trace_rewrite.load(TRAIN))
    got = _optimizer_bytes(_analysis(trace, tmp_path))
    ok = math.isnan(got) if width == "nan" else got == _numel(trace_rewrite.load(TRAIN)) * width * ADAMW
    FUZZ_RESULTS["held" if ok else "silently wrong"] += 1
    assert ok, (case, got)


@pytest.mark.parametrize("copy", [CopyModel(-3e12, 100.0, "a negative slope"), CopyModel(float("nan"), 0.0, "nan"),
                                  CopyModel(0.0, 0.0, "zero")])
def test_a_copy_model_that_is_no_rate_is_the_peak(copy: CopyModel, tmp_path: Path) -> None:
    result = _analysis(trace_rewrite.load(TRAIN), tmp_path, copy)
    rates = _implied_rates(result)
    ok = len(rates) > 5 and bool(((rates > 0) & (rates <= 4.8e12 * (1 + 1e-9))).all()) and any(
        "is not a rate: priced at the peak, 4.80 TB/s" in n for n in result.notes)
    FUZZ_RESULTS["warning" if ok else "silently wrong"] += 1
    assert ok, (rates.describe(), result.notes)


FP8 = FIXTURES / "truth" / "fp8_gemm.json.gz"  # H200: torch._scaled_mm, e4m3 operands, per-tensor scales, bf16 out


def test_an_fp8_gemm_costs_its_operands_scales_and_bf16_output() -> None:
    """_scaled_mm's bytes from its recorded args: the two e4m3 operands at 1 B, the two fp32 scalar scales at 4 B,
    the output at out_dtype 15 (bf16, 2 B); 2·M·N·K FLOPs on the fp8 tensor pipe. Before: no cost model at all."""
    from fuseprof.analysis import analyze

    raw = next(e for e in trace_rewrite.load(FP8)["traceEvents"] if e.get("name") == "aten::_scaled_mm")
    (m, k), (_, n) = raw["args"]["Input Dims"][:2]
    assert raw["args"]["Concrete Inputs"][6] == "15"
    (result,) = analyze(FP8)
    row = result.op_roofline.set_index("op").loc["aten::_scaled_mm"]
    assert row["dram_bytes"] == m * k + k * n + 2 * 4 + m * n * 2
    assert row["flops"] == 2 * m * n * k and row["roof_pipe"] == "tensor_fp8"


def _estimate(op: str, dims: list[Any], types: list[Any], concrete: list[Any]) -> Any:
    from fuseprof.model.registry_data import DEFAULT

    return DEFAULT.estimate(op, dims, types, concrete)


def test_an_int8_weight_costs_one_byte_and_its_scales() -> None:
    """_weight_int8pack_mm(x: 32×1024 bf16, w: 1024×1024 int8, scales: 1024 bf16), as torch records it: x and the
    output at 2 B, the weight at 1 B, the scales at 2 B."""
    found = _estimate("aten::_weight_int8pack_mm", [[32, 1024], [1024, 1024], [1024]],
                      ["c10::BFloat16", "signed char", "c10::BFloat16"], ["", "", ""])
    assert found.bytes == (32 * 1024 + 32 * 1024) * 2 + 1024 * 1024 + 1024 * 2 and found.flops == 2 * 32 * 1024 * 1024


SCALED = (["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "", "", "Scalar", "Scalar"],
          [[64, 128], [128, 256], [], [], [], [], [], []])
HOSTILE_GEMMS = {
    # an out_dtype that is no ScalarType number: the operands' width, as ATen's default
    "out_dtype not a number": ("aten::_scaled_mm", SCALED[1], SCALED[0], ["", "", "", "", "", "", "banana", ""],
                               64 * 128 + 128 * 256 + 8 + 64 * 256),
    # no out_dtype recorded at all (a shorter argument list)
    "no out_dtype": ("aten::_scaled_mm", SCALED[1][:4], SCALED[0][:4], ["", "", "", ""], 64 * 128 + 128 * 256 + 8
                     + 64 * 256),
    # a batched (3-D) operand _scaled_mm does not take: no estimate rather than a wrong one
    "3-D operand": ("aten::_scaled_mm", [[2, 64, 128], [128, 256], [], []], SCALED[0][:4], ["", "", "", ""], None),
    # the int8 weight's scales unrecorded: no scale bytes, the rest as recorded
    "int8 weight without scales": ("aten::_weight_int8pack_mm", [[32, 1024], [1024, 1024], []],
                                   ["c10::BFloat16", "signed char", ""], ["", "", ""],
                                   (32 * 1024 + 32 * 1024) * 2 + 1024 * 1024),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_GEMMS))
def test_hostile_quantized_gemm_records(case: str) -> None:
    op, dims, types, concrete, expected = HOSTILE_GEMMS[case]
    found = _estimate(op, dims, types, concrete)
    ok = found is None if expected is None else found is not None and found.bytes == expected
    FUZZ_RESULTS["held" if ok else "silently wrong"] += 1
    assert ok, (case, found)


def test_a_gathers_indices_are_read_at_their_recorded_width() -> None:
    """embedding(weight 32000×2048 bf16, indices 4×128): int64 ids cost 8 B each, int32 positions 4 (before: 8
    whatever the trace recorded); the rows gathered and written are 2 × 512 × 2048 × 2 B either way."""
    rows = 2 * 4 * 128 * 2048 * 2
    for index_type, width in (("long int", 8), ("int", 4)):
        found = _estimate("aten::embedding", [[32000, 2048], [4, 128], [], [], []],
                          ["c10::BFloat16", index_type, "Scalar", "Scalar", "Scalar"], ["", "", "-1", "False", "False"])
        assert found.bytes == rows + 4 * 128 * width
