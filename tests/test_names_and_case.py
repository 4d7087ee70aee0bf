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


def test_decoder_layer_case_checks_against_float64_and_refuses_shapes_it_does_not_model() -> None:
    import torch

    from fuseprof.capture.correctness import compare
    from fuseprof.errors import InvalidArgumentError

    case = load_case("decoder_layer")
    assert case.variant_names == ["eager", "fused_cuda", "eager_graph", "compiled", "compiled_graphs"]
    assert [v.own_graph for v in case.variants] == [False, False, True, False, True]
    for shape in ((1, 4, 16), (2, 2048), (1, 0, 16)):  # prefill into a part-full cache; 2-D; no tokens
        with pytest.raises(InvalidArgumentError):
            case.nominal_bytes(shape, "bfloat16")
    # prefill (causal over 16 new tokens) and decode (one token over 16 cached slots), on the CPU
    for shape in ((1, 16, 16), (2, 1, 16)):
        inputs = case.make_inputs(shape, "bfloat16", "cpu", torch.Generator().manual_seed(1))
        expected = case.reference(*inputs)
        before = inputs[0].k_cache.clone()
        result = compare(case.variant("eager").fn(*inputs), expected, case.tolerances["bfloat16"])
        assert result["correct"] and result["rel_err"] > 1e-4, result  # bf16 rounding, not a copy of the reference
        # the call writes its new keys at their slots and nothing else
        changed = (inputs[0].k_cache != before).any(dim=(0, 1, 3))
        assert changed.nonzero().flatten().tolist() == list(range(16 - shape[1], 16))


@pytest.mark.parametrize("pattern", ["GraphLaunch", r"Launch\w*Kernel|LaunchKernelEx|LaunchCooperativeKernel",
                                     r"Synchronize|Memcpy\w*Async", "StreamBeginCapture", "^cuda"])
def test_matching_is_a_search_of_every_row(pattern: str) -> None:
    """``matching`` searches each distinct name once; the answer is a search of every row (a missing name: no) on
    the runtime calls of a graph capture and of its replays."""
    import re

    import pandas as pd

    from fuseprof.parse.trace_events import read_trace_tables
    from fuseprof.parse.trace_link import matching
    from tests.conftest import FIXTURES

    names = pd.concat([read_trace_tables(FIXTURES / "h200-graphs" / f"graph-{which}.json.gz").launches["name"]
                       for which in ("capture", "replay")], ignore_index=True)
    names = pd.concat([names, pd.Series([None, float("nan")], dtype=object)], ignore_index=True)
    expected = [isinstance(n, str) and re.search(pattern, n) is not None for n in names.tolist()]
    assert matching(names, pattern).tolist() == expected
    assert matching(names.iloc[:0], pattern).tolist() == []
