"""Kernel short names across demanglers; case loading and shape parsing."""

from __future__ import annotations

import pytest

from fuseprof.case import load_case, parse_shapes
from fuseprof.errors import CaseNotFoundError, InvalidArgumentError
from fuseprof.parse.names import short_kernel_name


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(at::native::ReduceOp<float>)",
         "reduce_kernel"),
        ("void at::reduce_kernel<512, 1, at::ReduceOp<float>>(T3)", "reduce_kernel"),
        ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4>(long)",
         "distribution_elementwise_grid_stride_kernel"),
        ("void at::<unnamed>::distribution_elementwise_grid_stride_kernel<float, 4>(long)",
         "distribution_elementwise_grid_stride_kernel"),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_sigmoid_0",
         "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_sigmoid_0"),
    ],
)
def test_short_kernel_name(name: str, short: str) -> None:
    assert short_kernel_name(name) == short


def test_committed_capture_short_names_agree_between_tools() -> None:
    import fuseprof
    from tests.conftest import SEED_BUNDLE

    frame = fuseprof.load(SEED_BUNDLE)
    per_tool = frame.groupby("source")["kernel_short"].apply(set)
    assert per_tool["ncu"] == per_tool["torch.profiler"]


def test_parse_shapes() -> None:
    assert parse_shapes("128x4096, 1x768") == ((128, 4096), (1, 768))
    for bad in ("", "0x8", "8*8", "axb"):
        with pytest.raises(InvalidArgumentError):
            parse_shapes(bad)


def test_load_case_errors_name_the_way_out() -> None:
    with pytest.raises(CaseNotFoundError, match="module:attribute"):
        load_case("nope")
    with pytest.raises(CaseNotFoundError, match="is not a fuseprof.case.Case"):
        load_case("fuseprof.case:parse_shape")


def test_cases_listing_reads_sources_and_equals_the_loaded_cases() -> None:
    import subprocess
    import sys

    from fuseprof.case import builtin_case_summaries, load_case

    for row in builtin_case_summaries():
        case = load_case(row["case"])
        assert row["variants"].split(",") == case.variant_names and row["description"] == case.description
    # listing imports no torch and sets no global: a subprocess, to see its own sys.modules
    code = "import sys; from fuseprof.cli import main; main(['cases']); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")
