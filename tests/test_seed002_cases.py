"""Seed 002's exercises B (QKV: three GEMMs or one) and E (GEMM + bias + GELU: three kernels or cuBLASLt's
epilogue) as built-in cases: each variant equals the float64 reference on CPU, and the byte models are
the seed's arithmetic."""

from __future__ import annotations

import pytest
import torch

from fuseprof.case import load_case


def _inputs(case, shape):  # type: ignore[no-untyped-def]
    return case.make_inputs(shape, "bfloat16", "cpu", torch.Generator().manual_seed(0))


@pytest.mark.parametrize("name, shape", [("qkv_projection", (3, 4096)), ("gemm_bias_gelu", (5, 4096))])
def test_every_eager_variant_equals_the_float64_reference(name: str, shape: tuple[int, int]) -> None:
    case = load_case(name)
    inputs = _inputs(case, shape)
    expected = case.reference(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for variant in (v for v in case.variants if v.kind != "compiled"):
        got = variant.fn(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        assert [g.shape for g in got] == [e.shape for e in expected], variant.name
        for g, e in zip(got, expected):
            error = ((g.double() - e).abs().max() / e.abs().max()).item()
            assert error < case.tolerances["bfloat16"], (variant.name, error)


def test_the_fused_qkv_weight_is_the_three_weights_stacked() -> None:
    x, wq, wk, wv, wqkv = _inputs(load_case("qkv_projection"), (1, 4096))
    assert wqkv.shape == (6144, 4096) and torch.equal(wqkv, torch.cat([wq, wk, wv]))


def test_byte_models_follow_the_seed() -> None:
    qkv, gelu = load_case("qkv_projection"), load_case("gemm_bias_gelu")
    # batch 1: the 6144 x 4096 bf16 weights dominate: (4096 + 6144·4096 + 6144) · 2 bytes
    assert qkv.nominal_bytes((1, 4096), "bfloat16") == (4096 + 6144 * 4096 + 6144) * 2 == 50_352_128
    # 2048 tokens: x (2048·4096) + weights + q|k|v (2048·6144), bf16
    assert qkv.nominal_bytes((2048, 4096), "bfloat16") == (2048 * 4096 + 6144 * 4096 + 2048 * 6144) * 2
    # GELU epilogue: x, W (16384·4096), b, y (M·16384), bf16
    assert gelu.nominal_bytes((128, 4096), "bfloat16") == (128 * 4096 + 16384 * 4096 + 16384 + 128 * 16384) * 2
