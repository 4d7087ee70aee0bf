"""Roofline fidelity against Nsight Compute itself, on real H200 captures.

``fixtures/roofline_raw.csv.gz``: 13 kernels (a GEMM per tensor precision, an FFMA GEMM, fp32,
fp16 and bf16 elementwise kernels) captured once with ``ncu --set roofline`` plus fuseprof's
metrics (``scripts/roofline_fixture.py --capture``). The expected values are computed here from
the raw CSV with ncu's own section formulas (``SpeedOfLight_Hierarchical*RooflineChart.section``
in ncu 2025.3.1): per-cycle instruction rates times the elapsed-cycle rate, and ncu's own
``*.per_second`` rates; fuseprof computes from counts over ``gpu__time_duration``. The two paths
share nothing but the raw file.
"""

from __future__ import annotations

import csv
import gzip

import pytest

import fuseprof
from fuseprof.model.derived import derive
from fuseprof.model.roofline import measured_roofs, place
from fuseprof.parse.ncu_csv import read_ncu_csv
from tests.conftest import FIXTURES, TRACES

ROOFLINE_CSV = FIXTURES / "roofline_raw.csv.gz"
MLP_BUNDLE = TRACES / "llama_mlp-bfloat16-h200-20261129t150856z"
HIDDEN, INTERMEDIATE = 4096, 14336


def _raw_rows() -> list[dict[str, float]]:
    with gzip.open(ROOFLINE_CSV, "rt") as fh:
        header, _units, *body = list(csv.reader(fh))
    out = []
    for row in body:
        values = {}
        for name, cell in zip(header, row):
            try:
                values[name] = float(cell.replace(",", ""))
            except ValueError:
                values[name] = cell  # type: ignore[assignment]
        out.append(values)
    return out


def _ncu_flops_per_s(r: dict[str, float]) -> float:
    """ncu's achieved FLOP/s, summed over its four roofline charts."""
    rate = r["smsp__cycles_elapsed.avg.per_second"]

    def per_cycle(op: str) -> float:
        return r[f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"]

    single = per_cycle("fadd") + per_cycle("fmul") + 2 * per_cycle("ffma")
    double = per_cycle("dadd") + per_cycle("dmul") + 2 * per_cycle("dfma")
    half = 2 * per_cycle("hadd") + 2 * per_cycle("hmul") + 4 * per_cycle("hfma")  # packed HADD2/HMUL2/HFMA2
    # ncu reports no rate for the fp8 total; its dense part (sparsity_off) is the whole of a dense GEMM
    tensor = sum(r[f"sm__ops_path_tensor_src_{p}.sum.per_second"]
                 for p in ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp8_sparsity_off", "fp64", "int8"))
    return (single + double + half) * rate + tensor


@pytest.fixture(scope="module")
def fixture_rows():
    parsed = derive(read_ncu_csv(ROOFLINE_CSV))
    return parsed, _raw_rows()


def test_fixture_holds_every_precision(fixture_rows) -> None:
    parsed, raw = fixture_rows
    assert len(parsed) == len(raw) == 13
    assert set(parsed["roof_pipe"]) >= {"tensor_bf16", "tensor_fp16", "tensor_tf32", "tensor_fp8", "tensor_fp64",
                                        "tensor_int8", "fp32", "fp16"}


def test_achieved_flops_intensity_and_bandwidth_equal_ncus_own(fixture_rows) -> None:
    parsed, raw = fixture_rows
    for (_, row), r in zip(parsed.iterrows(), raw):
        ncu_flops, ncu_bw = _ncu_flops_per_s(r), r["dram__bytes.sum.per_second"]
        assert row["achieved_bytes_per_s"] == pytest.approx(ncu_bw, rel=0.01), row["kernel"]
        assert row["achieved_flops_per_s"] == pytest.approx(ncu_flops, rel=0.01, abs=1e6), row["kernel"]
        if ncu_flops > 0:
            assert row["arithmetic_intensity"] == pytest.approx(ncu_flops / ncu_bw, rel=0.01), row["kernel"]


def test_each_gemm_counts_two_m_n_k_in_its_precision(fixture_rows) -> None:
    parsed, _ = fixture_rows
    by_pipe = parsed.set_index("roof_pipe")
    assert by_pipe.loc["tensor_bf16", "flops"] == 2 * 2048 * 4096 * 14336  # F.linear(2048x4096, 14336x4096)
    for pipe in ("tensor_fp16", "tensor_tf32", "tensor_fp8", "tensor_int8"):
        assert by_pipe.loc[pipe, f"flops_{pipe}"] == 2 * 2048**3, pipe
    assert by_pipe.loc["tensor_fp64", "flops_tensor_fp64"] == 2 * 1024**3  # DMMA
    ffma_gemm = parsed[parsed["kernel"].str.contains("f32f32_f32f32")].iloc[0]
    assert ffma_gemm["flops_fp32"] == pytest.approx(2 * 1024**3, rel=1e-3)  # fp32 without TF32: FFMA


def test_packed_half_counts_two_operations_per_instruction(fixture_rows) -> None:
    parsed, raw = fixture_rows
    triton = [i for i, r in enumerate(raw) if r["Kernel Name"] == "kernel"][0]  # the fp16 x·y+z Triton kernel
    r = raw[triton]
    assert parsed.iloc[triton]["flops_fp16"] == 4 * r["sm__sass_thread_inst_executed_op_hfma_pred_on.sum"] + 2 * (
        r["sm__sass_thread_inst_executed_op_hadd_pred_on.sum"] + r["sm__sass_thread_inst_executed_op_hmul_pred_on.sum"])
    assert parsed.iloc[triton]["flops_fp16"] == pytest.approx(2 * 64 * 1024 * 1024, rel=0.01)  # one FMA per element


@pytest.fixture(scope="module")
def mlp():
    return place(fuseprof.load(MLP_BUNDLE), measured=measured_roofs(TRACES))


def test_every_mlp_gemm_counts_exactly_two_m_n_k(mlp) -> None:
    gemms = mlp[mlp["roof_pipe"] == "tensor_bf16"]
    assert len(gemms) == 3 * 3 * 2  # three projections, three variants, two shapes
    m = gemms["shape"].str.split("x").str[0].astype(int)
    # gate and up: (M, 4096) x (4096, 14336); down: (M, 14336) x (14336, 4096): 2·M·4096·14336 each
    assert (gemms["flops_tensor_bf16"] == 2 * m * HIDDEN * INTERMEDIATE).all()
    assert (gemms["flops"] == gemms["flops_tensor_bf16"]).all()  # no SIMT FLOPs in cuBLAS's nvjet kernels


def test_large_m_gemms_are_compute_bound_near_the_h200_roof(mlp) -> None:
    gemms = mlp[(mlp["roof_pipe"] == "tensor_bf16") & (mlp["shape"] == "2048x4096")]
    assert (gemms["bound"] == "compute").all()
    assert (gemms["roof"] == "NVIDIA H200 (measured)").all()  # the capture GPU's roof, not the H100's
    assert (gemms["pct_of_roof"] >= 80).all()
    small = mlp[(mlp["roof_pipe"] == "tensor_bf16") & (mlp["shape"] == "128x4096")]
    assert (small["bound"] == "memory").all()  # 117 MB of weights for 15 GFLOP: AI ≈ 124 < ridge ≈ 177


@pytest.mark.parametrize("variant", ["compiled", "fused_cuda"])
def test_mlp_block_flops_equal_the_analytic_count(mlp, variant: str) -> None:
    for shape, part in mlp[mlp["variant"] == variant].groupby("shape"):
        m = int(shape.split("x")[0])
        # three GEMMs; add + RMSNorm ≈ 5 FLOPs per (M, H) element, SiLU·mul ≈ 5 per (M, I) element
        analytic = 6 * m * HIDDEN * INTERMEDIATE + 5 * m * HIDDEN + 5 * m * INTERMEDIATE
        assert part["flops"].sum() == pytest.approx(analytic, rel=1e-3), shape


def test_no_committed_h200_kernel_is_l2_resident_against_its_own_dram() -> None:
    placed = place(fuseprof.load(TRACES), measured=measured_roofs(TRACES))
    # against the H100's 3.35 TB/s, 12 kernels reading 84-339 MB were wrongly called L2-resident
    assert not placed["l2_resident"].any()
    from fuseprof.model.devices import DEVICES
    from fuseprof.model.roofline import datasheet_roof

    against_h100 = place(fuseprof.load(TRACES), datasheet_roof(DEVICES["H100 SXM"]), measured_roofs(TRACES))
    assert not against_h100["l2_resident"].any()  # drawn against the H100, judged against the H200's DRAM


def test_a_capture_collects_the_tensor_counter_of_its_dtype() -> None:
    from fuseprof.parse.ncu_metrics import (
        BASE_METRICS,
        EXECUTION_METRICS,
        NCU_METRICS,
        TENSOR_METRICS,
        capture_metrics,
        tensor_precisions_for,
    )

    bf16 = capture_metrics(tensor_precisions_for("bfloat16"))
    # measured on the H200 (scripts/ncu_passes.py): base 3 passes, + execution metrics still 3, the
    # bf16 capture default 4, all six tensor counters 8
    assert bf16 == [*BASE_METRICS, *EXECUTION_METRICS.values(), "sm__ops_path_tensor_src_bf16_dst_fp32.sum"]
    assert capture_metrics(tensor_precisions_for("float32"))[-1] == "sm__ops_path_tensor_src_tf32_dst_fp32.sum"
    assert capture_metrics(tuple(TENSOR_METRICS)) == list(NCU_METRICS)
    with pytest.raises(ValueError, match="fp4"):
        capture_metrics(("fp4",))


def test_roofline_command_prints_each_gemm_on_its_roof(capsys) -> None:
    from fuseprof.cli import main

    assert main(["roofline", str(TRACES), "--case", "llama_mlp", "--wide"]) == 0  # one line a kernel
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if "tensor_bf16" in line]
    assert len(rows) == 18
    assert sum(r[-1] == "compute" for r in rows) == 9  # the M = 2048 GEMMs
    assert out.rstrip().endswith("roof: NVIDIA H200 (measured)")
    assert main(["roofline", str(TRACES), "--roof", "H300"]) == 2
    assert "--roof 'H300'" in capsys.readouterr().err
