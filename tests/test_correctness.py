"""The float64 check every variant passes before it is timed: a NaN or Inf anywhere — in the variant's output
or in the reference — is a failure with its count, never a pass (``max(x, nan)`` is ``x``)."""

from __future__ import annotations

import pytest
import torch

from fuseprof.capture.correctness import compare


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    ref = torch.linspace(0.5, 1.5, 64, dtype=torch.float64)
    return ref * 1.5, ref  # the variant is 50% off


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_reference_fails_any_variant(bad: float) -> None:
    out, ref = _pair()
    ref[[3, 9]] = bad
    check = compare(out, ref, 1e-2)
    assert not check["correct"] and "reference 0 holds 2 NaN or Inf value(s)" in check["problem"]
    assert not compare(ref.clone(), ref, 1e-2)["correct"]  # even the reference against itself


def test_a_non_finite_output_fails_with_its_count() -> None:
    _, ref = _pair()
    out = ref.to(torch.bfloat16)
    out[:5] = float("nan")
    check = compare(out, ref, 1e-2)
    assert not check["correct"] and "output 0 holds 5 NaN or Inf value(s)" in check["problem"]


def test_the_50_percent_variant_fails_and_a_close_one_passes() -> None:
    out, ref = _pair()
    assert not compare(out, ref, 1e-2)["correct"]
    assert compare(ref.to(torch.bfloat16), ref, 1e-2)["correct"]


def test_float8_outputs_are_checked_without_a_traceback() -> None:
    _, ref = _pair()
    out = ref.to(torch.float8_e4m3fn)
    assert compare(out, ref, 0.1)["correct"]
    assert compare(torch.full((4,), float("nan"), dtype=torch.float64).to(torch.float8_e4m3fn),
                   ref[:4], 0.1)["problem"].startswith("output 0 holds 4")


def test_a_variant_returning_none_is_a_failure_not_a_traceback() -> None:
    _, ref = _pair()
    check = compare(None, ref, 1e-2)
    assert not check["correct"] and "NoneType" in check["problem"]
