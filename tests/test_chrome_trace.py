"""The torch.profiler parser on the committed H200 capture of seed 000."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from fuseprof.errors import TraceFormatError
from fuseprof.parse.chrome_trace import kernel_rows, read_chrome_trace
from fuseprof.parse.trace_events import ns_from_us, read_trace_tables
from tests.conftest import SEED_BUNDLE


@pytest.fixture(scope="module")
def trace_path() -> Path:
    return SEED_BUNDLE / "raw" / "profiler_trace.json.gz"


@pytest.fixture(scope="module")
def rows(trace_path: Path):
    return read_chrome_trace(trace_path)


def test_kernel_time_total_matches_the_trace_to_the_nanosecond(trace_path: Path, rows) -> None:
    raw = json.loads(gzip.decompress(trace_path.read_bytes()), parse_float=Decimal)
    durations = [e["dur"] for e in raw["traceEvents"] if e.get("cat") == "kernel"]
    assert len(rows) == len(durations) == 168
    assert rows["duration_ns"].sum() == int(sum(durations) * 1000) == 1_387_523


def test_microsecond_floats_give_back_the_written_nanoseconds(trace_path: Path) -> None:
    # every ts and dur of the trace, read as exact decimals, against the float path
    raw = json.loads(gzip.decompress(trace_path.read_bytes()), parse_float=Decimal)
    written = [v for e in raw["traceEvents"] for k, v in e.items() if k in ("ts", "dur") and isinstance(v, Decimal)]
    exact = np.array([int(v * 1000) for v in written], dtype=np.int64)
    assert len(written) > 1000
    assert (ns_from_us(np.array([float(v) for v in written]), trace_path, "ts") == exact).all()
    assert ns_from_us(np.array([5084948946814.126, 2.4]), trace_path, "ts").tolist() == [5_084_948_946_814_126, 2400]
    # past 2**43 µs a float's spacing exceeds 1 ns: refused, not rounded
    with pytest.raises(TraceFormatError, match="too large"):
        ns_from_us(np.array([2.0**44]), trace_path, "ts")


def test_every_kernel_maps_to_its_variant_and_shape(rows) -> None:
    per_range = rows.groupby(["variant", "shape"]).size()
    # 3 profiled calls per range; the eager chain launches 13 kernels a call, Inductor one
    assert per_range.loc["eager"].tolist() == [39, 39, 39, 39]
    assert per_range.loc["compiled"].tolist() == [3, 3, 3, 3]


def test_triton_launch_joined_by_correlation(rows) -> None:
    triton = rows[rows["variant"] == "compiled"].iloc[0]
    assert triton["kernel"] == "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_sigmoid_0"
    assert triton["launch_api"] == "cuLaunchKernel"
    assert triton["launch_api_ns"] == 17_687  # the driver call's dur, 17.687 µs
    assert triton["duration_ns"] == 2_400
    assert (triton["grid"], triton["block"], triton["registers_per_thread"]) == ("128,1,1", "512,1,1", 27)
    assert triton["shared_mem_bytes"] == 64


def test_eager_launch_records_the_aten_op_that_issued_it(rows) -> None:
    eager = rows[(rows["variant"] == "eager") & (rows["shape"] == "128x4096")]
    reduce = eager[eager["kernel"].str.contains("reduce_kernel")].iloc[0]
    assert reduce["cpu_op"] == "aten::mean"
    assert reduce["launch_api"] == "cudaLaunchKernel"
    assert (reduce["grid"], reduce["block"]) == ("8,1,1", "32,16,1")
    assert reduce["duration_ns"] == 9_056
    assert set(eager["cpu_op"]) == {"aten::copy_", "aten::pow", "aten::mean", "aten::add", "aten::rsqrt",
                                    "aten::sigmoid", "aten::mul"}


def test_invocation_counts_launches_of_one_kernel_within_a_range(rows) -> None:
    eager = rows[(rows["variant"] == "eager") & (rows["shape"] == "128x4096")]
    copies = eager[eager["kernel"].str.startswith("void at::native::unrolled_elementwise_kernel")]
    assert copies["invocation"].tolist() == list(range(9))  # 3 casts to fp32 per call, 3 calls


def test_device_name_from_device_properties(rows) -> None:
    assert set(rows["device"]) == {"NVIDIA H200"}


def test_trace_without_kernels_or_ranges_gives_no_rows(trace_path: Path) -> None:
    tables = read_trace_tables(trace_path)
    tables.gpu, tables.annotations = tables.gpu.iloc[:0], tables.annotations.iloc[:0]
    assert kernel_rows(tables).empty
