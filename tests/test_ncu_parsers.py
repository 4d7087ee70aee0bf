"""ncu CSV and .ncu-rep parsers on real H200 captures; the two readers must agree."""

from __future__ import annotations

import pytest

from fuseprof.parse.ncu_csv import read_ncu_csv
from fuseprof.parse.ncu_rep import read_ncu_rep
from tests.conftest import FIXTURES, SEED_BUNDLE

TRITON = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_sigmoid_0"


@pytest.fixture(scope="module")
def bundle_csv():
    return read_ncu_csv(SEED_BUNDLE / "raw" / "ncu_raw.csv.gz")


def test_base_unit_csv_has_every_profiled_kernel_with_its_range(bundle_csv) -> None:
    assert len(bundle_csv) == 56
    per_range = bundle_csv.groupby(["variant", "shape"]).size()
    assert per_range.loc["eager"].tolist() == [13] * 4
    assert per_range.loc["compiled"].tolist() == [1] * 4


def test_hand_checked_values_of_the_fused_kernel(bundle_csv) -> None:
    row = bundle_csv[(bundle_csv["variant"] == "compiled") & (bundle_csv["shape"] == "1024x8192")].iloc[0]
    assert row["kernel"] == TRITON
    assert row["duration_ns"] == 15_008  # "15,008" in the CSV
    assert row["dram_read_bytes"] == 33_584_128  # x and g: 2 x 16 MiB, plus w
    # the output is 16 MiB, but only 2.1 MB of it had left the 60 MB L2 when the kernel ended
    assert row["dram_write_bytes"] == 2_129_408
    assert row["registers_per_thread"] == 36
    assert (row["grid"], row["block"]) == ("1024,1,1", "512,1,1")


def test_roofline_peaks_come_from_the_report(bundle_csv) -> None:
    # 1504 B/cycle x ~3.18 GHz and 16896 FMA lanes/cycle x 2 x ~1.96 GHz on the H200
    assert bundle_csv["peak_dram_bytes_per_s"].between(4.6e12, 4.9e12).all()
    assert bundle_csv["peak_flops_fp32_per_s"].between(6.3e13, 6.8e13).all()


def test_flops_are_add_plus_mul_plus_two_fma() -> None:
    row = read_ncu_rep(FIXTURES / "compiled_128x4096.ncu-rep").iloc[0]
    assert row["flops_fp32"] == 5_898_240
    # packed half instructions do two operations (ncu's half roofline: 2·hadd + 2·hmul + 4·hfma);
    # this kernel's raw hadd + hmul + 2·hfma was 2,228,224, so with every term doubled:
    assert row["flops_fp16"] == 2 * 2_228_224
    assert row["flops_fp64"] == 0


def test_rep_reader_and_auto_unit_csv_agree() -> None:
    rep = read_ncu_rep(FIXTURES / "compiled_128x4096.ncu-rep").iloc[0]
    csv = read_ncu_csv(FIXTURES / "compiled_128x4096_auto_units.csv").iloc[0]
    assert (rep["variant"], rep["shape"], rep["kernel"]) == ("compiled", "128x4096", TRITON)
    assert (csv["variant"], csv["shape"], csv["kernel"]) == ("compiled", "128x4096", TRITON)
    assert rep["duration_ns"] == 4_032
    # auto-scaled units print 3 significant digits ("4.03 us"): same value, less precision
    assert csv["duration_ns"] == pytest.approx(rep["duration_ns"], rel=2e-3)
    for column in ("dram_read_bytes", "l2_read_bytes", "l2_write_bytes", "achieved_occupancy_pct",
                   "theoretical_occupancy_pct", "registers_per_thread", "shared_mem_bytes"):
        assert csv[column] == pytest.approx(rep[column], rel=1e-3), column
    assert rep["occupancy_limiter"] == csv["occupancy_limiter"] == "registers+warps"


def test_plain_stdout_csv_skips_prof_lines_and_leaves_unranged_kernels_unlabelled() -> None:
    rows = read_ncu_csv(FIXTURES / "plain_stdout.csv")
    assert len(rows) == 12  # --launch-count 12, including input generation before any range
    labelled = rows.dropna(subset=["variant"])
    assert labelled[["variant", "shape"]].values.tolist() == [["compiled", "128x4096"]]
    assert rows["kernel"].str.contains("distribution_elementwise_grid_stride_kernel").sum() == 3


def test_nvtx_label_found_inside_ncu_cell() -> None:
    from fuseprof.ranges import search_range_label

    cell = '888  "<default domain>:fuseprof:eager:128x4096:none:none:none:none:none:none" '
    assert search_range_label(cell) == ("eager", "128x4096")
