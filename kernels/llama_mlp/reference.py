"""Llama-style MLP block (residual add + RMSNorm, gate/up projections, SiLU·mul, down projection).

Shapes are ``(M, hidden)``; the intermediate width is fixed at Llama-3-8B's 14,336. Inputs are the
activations, the residual, the norm weight and the three projection weights, so the weights are
part of the call's bytes exactly as in a real decoder layer.
"""

from __future__ import annotations

import torch
from fuseprof_kernels._inputs import activations, itemsize, norm_weight, projection_weight

EPS = 1e-6
INTERMEDIATE = 14336


def make_inputs(shape: tuple[int, ...], dtype: str, device: str,
                generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """x, residual (M, H); norm weight (H); w_gate, w_up (I, H); w_down (H, I)."""
    m, h = shape
    return (activations((m, h), dtype, device, generator), activations((m, h), dtype, device, generator),
            norm_weight(h, dtype, device, generator), projection_weight(INTERMEDIATE, h, dtype, device, generator),
            projection_weight(INTERMEDIATE, h, dtype, device, generator),
            projection_weight(h, INTERMEDIATE, dtype, device, generator))


def reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, w_gate: torch.Tensor,
              w_up: torch.Tensor, w_down: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 (out, h): h = x + residual; y = rmsnorm(h)·w; out = (SiLU(y·Wgᵀ)·(y·Wuᵀ))·Wdᵀ."""
    h = x.double() + residual.double()
    y = h * torch.rsqrt(h.square().mean(dim=-1, keepdim=True) + EPS) * weight.double()
    gate, up = y @ w_gate.double().T, y @ w_up.double().T
    return (torch.nn.functional.silu(gate) * up) @ w_down.double().T, h


def gemm_flops(shape: tuple[int, ...]) -> int:
    """Three projections of 2·M·H·I FLOPs each (an FMA is two)."""
    m, h = shape
    return 3 * 2 * m * h * INTERMEDIATE


def nominal_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """Each input read once, each output written once: x, residual, norm weight, three weight
    matrices, out and h. The (M, I) gate/up/activation intermediates are not counted: a fully
    fused block keeps them on chip."""
    m, h = shape
    return itemsize(dtype) * (2 * m * h + h + 3 * h * INTERMEDIATE + 2 * m * h)
