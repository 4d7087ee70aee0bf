"""Horizontal GEMM fusion (seed 002, exercise B): the Q, K and V projections of Llama-3-8B as three GEMMs
against one GEMM over the concatenated weights, at batch 1 (decode) and 2048 tokens (prefill).

Shapes are ``(M, 4096)``: M tokens of hidden 4096; Q is 32 heads × 128 = 4096 wide, K and V 8 heads ×
128 = 1024 each (grouped-query attention). The concatenated weight is made once with the inputs, as an
engine stores it, so the fused call is one GEMM and three views of its output.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from fuseprof_kernels._inputs import activations, itemsize, projection_weight

from fuseprof.case import Case, Variant, compile_static

HIDDEN, Q_WIDTH, KV_WIDTH = 4096, 4096, 1024


def make_inputs(shape: tuple[int, ...], dtype: str, device: str,
                generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """x (M, 4096); Wq (4096, 4096), Wk and Wv (1024, 4096); Wqkv (6144, 4096), their concatenation."""
    m, h = shape
    wq, wk, wv = (projection_weight(n, h, dtype, device, generator) for n in (Q_WIDTH, KV_WIDTH, KV_WIDTH))
    return activations((m, h), dtype, device, generator), wq, wk, wv, torch.cat([wq, wk, wv]).contiguous()


def reference(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
              wqkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float64 q, k, v = x·Wqᵀ, x·Wkᵀ, x·Wvᵀ."""
    x64 = x.double()
    return x64 @ wq.double().T, x64 @ wk.double().T, x64 @ wv.double().T


def three_gemms(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
                wqkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return F.linear(x, wq), F.linear(x, wk), F.linear(x, wv)


def one_gemm(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
             wqkv: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(F.linear(x, wqkv).split([Q_WIDTH, KV_WIDTH, KV_WIDTH], dim=-1))


def nominal_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """The fused call's traffic: x read once, the 6144 × 4096 weights, q, k and v written once (the three
    GEMMs read x three times: 2·M·4096 elements more)."""
    m, h = shape
    return itemsize(dtype) * (m * h + (Q_WIDTH + 2 * KV_WIDTH) * h + m * (Q_WIDTH + 2 * KV_WIDTH))


CASE = Case(
    name="qkv_projection",
    description="q, k, v = x·Wqᵀ, x·Wkᵀ, x·Wvᵀ (Llama-3-8B: 4096 → 4096 + 1024 + 1024): three GEMMs or one",
    variants=(
        Variant("three_gemms", three_gemms, "unfused", "PyTorch eager: one cuBLAS GEMM per projection"),
        Variant("compiled", compile_static(three_gemms), "compiled", "torch.compile(three_gemms, dynamic=False)"),
        Variant("one_gemm", one_gemm, "fused", "one cuBLAS GEMM over the concatenated Wqkv, split into views"),
    ),
    make_inputs=make_inputs,
    reference=reference,
    nominal_bytes=nominal_bytes,
    default_shapes=((1, 4096), (2048, 4096)),
    dtypes=("bfloat16",),
)
