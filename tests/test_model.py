"""Roofline and occupancy models on the committed H200 captures, with hand-checked numbers."""

from __future__ import annotations

import pytest

import fuseprof
from fuseprof.model.devices import DEVICES, spec_for_device_name
from fuseprof.model.occupancy import block_size_curve, occupancy, occupancy_curve, occupancy_table
from fuseprof.model.roofline import chain_points, datasheet_roof, measured_roofs, ncu_roof, place
from tests.conftest import SEED_BUNDLE, TRACES


@pytest.fixture(scope="module")
def kernels():
    return fuseprof.load(TRACES)


def test_computed_occupancy_matches_ncu_on_every_committed_kernel(kernels) -> None:
    table = occupancy_table(kernels)
    assert len(table) >= 277
    assert (table["computed_occupancy_pct"] - table["theoretical_occupancy_pct"]).abs().max() < 1e-9
    assert (table["computed_limiter"] == table["occupancy_limiter"]).all()


@pytest.mark.parametrize(
    ("threads", "registers", "shared", "pct", "limiter"),
    [
        (256, 32, 0, 100.0, "registers+warps"),  # 8 blocks by either
        (1024, 64, 0, 50.0, "registers"),  # 64 x 1024 registers fill the 64K file
        (128, 255, 0, 12.5, "registers"),  # 255 rounds to 256 per thread: 2 warps per scheduler
        (96, 32, 0, 98.4375, "registers+warps"),  # 21 blocks x 3 warps = 63 of 64 warps
        (512, 32, 100_000, 50.0, "shared_mem"),  # (100000 + 1 KB reserved) x 2 fits in 228 KB, x 3 does not
    ],
)
def test_occupancy_calculator_cases(threads: int, registers: int, shared: int, pct: float, limiter: str) -> None:
    result = occupancy(threads, registers, shared)
    assert result.theoretical_pct == pytest.approx(pct)
    assert result.limiter == limiter


def test_occupancy_curves_fall_as_registers_rise() -> None:
    by_regs = occupancy_curve(256, 0)
    assert by_regs["theoretical_occupancy_pct"].is_monotonic_decreasing
    assert by_regs.set_index("registers_per_thread").loc[32, "theoretical_occupancy_pct"] == 100.0
    assert by_regs.set_index("registers_per_thread").loc[128, "theoretical_occupancy_pct"] == 25.0
    by_block = block_size_curve(64, 0)
    assert by_block["theoretical_occupancy_pct"].max() == 50.0


def test_roofline_placement_of_the_fused_seed_kernel() -> None:
    placed = place(fuseprof.load(SEED_BUNDLE), datasheet_roof(DEVICES["H100 SXM"]))
    row = placed[(placed["variant"] == "compiled") & (placed["shape"] == "1024x8192")].iloc[0]
    # raw: dram__bytes_read.sum 33,584,128 + dram__bytes_write.sum 2,129,408 in gpu__time_duration.sum 15,008 ns
    assert row["dram_bytes"] == 35_713_536 and row["duration_ns"] == 15_008
    # fp32: fadd 21,495,808 + fmul 50,855,936 + 2 x ffma 8,388,608 = 89,128,960
    # fp16 (packed, ncu's half roofline): 2 x hadd 33,554,432 + 2 x hmul 0 + 4 x hfma 524,288 = 69,206,016
    assert row["flops"] == 89_128_960 + 69_206_016
    assert row["arithmetic_intensity"] == pytest.approx(158_334_976 / 35_713_536)
    assert row["achieved_bytes_per_s"] == pytest.approx(35_713_536 / 15_008e-9)
    assert row["bound"] == "memory"
    assert row["pct_of_roof"] == pytest.approx(100 * 35_713_536 / 15_008e-9 / 3.35e12)  # 71.0 %


def test_l2_resident_is_judged_against_the_capture_gpus_dram(kernels) -> None:
    relabelled = kernels.assign(device="NVIDIA A100-SXM4-80GB")  # as if captured on a 2.039 TB/s A100
    placed = place(relabelled, datasheet_roof(DEVICES["H200"]))  # drawn against the H200 all the same
    resident = placed[placed["l2_resident"]]
    assert len(resident) > 0
    assert (resident["achieved_bytes_per_s"] > 2.039e12).all()
    assert not placed[~placed["l2_resident"]]["achieved_bytes_per_s"].gt(2.039e12).any()


def test_chain_points_sum_an_unfused_chain() -> None:
    placed = place(fuseprof.load(SEED_BUNDLE), datasheet_roof(DEVICES["H200"]))
    chains = chain_points(placed).set_index(["variant", "shape"])
    eager = chains.loc[("eager", "1024x4096")]
    assert eager["kernels"] == 13 and eager["dram_bytes"] == 192_691_712


def test_roofs_from_datasheet_measurement_and_ncu(kernels) -> None:
    assert spec_for_device_name("NVIDIA H200") is DEVICES["H200"]
    assert spec_for_device_name("NVIDIA H100 PCIe") is DEVICES["H100 PCIe"]
    assert spec_for_device_name("NVIDIA B200") is DEVICES["B200"]
    assert spec_for_device_name("NVIDIA GeForce GTX 1050") is None  # not in the table
    measured = measured_roofs(TRACES)["NVIDIA H200"]
    assert 4.0e12 < measured.dram_bytes_per_s < 4.5e12  # a 2 GiB copy on the H200: ~4.25 TB/s
    assert 55e12 < measured.compute["fp32"] < 67e12
    assert 690e12 < measured.compute["tensor_bf16"] < 800e12  # 8192^3 bf16 matmul
    assert measured.compute["tensor_fp8"] == DEVICES["H200"].dense["tensor_fp8"]  # not measured: datasheet
    from_ncu = ncu_roof(kernels, "NVIDIA H200")
    assert from_ncu is not None and 4.7e12 < from_ncu.dram_bytes_per_s < 4.85e12  # 1504 B/cycle x ~3.2 GHz
