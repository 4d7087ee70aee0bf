"""GEMM epilogue fusion (seed 002, exercise E): y = GELU(x·Wᵀ + b) as a GEMM, a bias add and a GELU in three
kernels, against cuBLASLt's GELU+bias epilogue (``torch._addmm_activation``), which applies both to the
GEMM's tile in registers before it is written.

Shapes are ``(M, 4096)``: M tokens of hidden 4096 projected to 16,384 (a GPT-style MLP's up projection).
GELU is the tanh approximation, the one cuBLASLt's epilogue computes. Unfused, the (M, 16384) product is
written, read and written by the add, read and written again by the GELU: four extra passes over it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from fuseprof_kernels._inputs import activations, itemsize, projection_weight

from fuseprof.case import Case, Variant, compile_static

OUT = 16384


def make_inputs(shape: tuple[int, ...], dtype: str, device: str,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x (M, K); W (16384, K); b (16384)."""
    m, k = shape
    bias = 0.1 * torch.randn((OUT,), generator=generator, device=device, dtype=torch.float32)
    return activations((m, k), dtype, device, generator), projection_weight(OUT, k, dtype, device, generator), \
        bias.to(getattr(torch, dtype))


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 GELU_tanh(x·Wᵀ + b)."""
    return F.gelu(x.double() @ w.double().T + b.double(), approximate="tanh")


def separate(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(torch.mm(x, w.T) + b, approximate="tanh")


def epilogue(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch._addmm_activation(b, x, w.T, use_gelu=True)


def nominal_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """The fused call's traffic: x, W and b read once, y written once (the separate kernels move the
    (M, 16384) product four times more: written, read and written by the add, read by the GELU)."""
    m, k = shape
    return itemsize(dtype) * (m * k + OUT * k + OUT + m * OUT)


CASE = Case(
    name="gemm_bias_gelu",
    description="y = GELU_tanh(x·Wᵀ + b), (M, 4096) → (M, 16384): GEMM, add, GELU kernels or one epilogue-fused GEMM",
    variants=(
        Variant("separate", separate, "unfused", "PyTorch eager: cuBLAS GEMM, then a bias-add and a GELU kernel"),
        Variant("compiled", compile_static(separate), "compiled", "torch.compile(separate, dynamic=False)"),
        Variant("epilogue", epilogue, "fused", "torch._addmm_activation: cuBLASLt's GELU+bias epilogue"),
    ),
    make_inputs=make_inputs,
    reference=reference,
    nominal_bytes=nominal_bytes,
    default_shapes=((128, 4096), (2048, 4096)),
    dtypes=("bfloat16",),
    # K = 4096 products rounded to bf16 before the GELU (separate) or inside it (epilogue)
    tolerances={"bfloat16": 1.5e-2},
)
