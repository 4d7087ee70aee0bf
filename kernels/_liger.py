"""Liger-Kernel's Triton ops as baselines, imported only when a variant runs."""

from __future__ import annotations

import torch


def rmsnorm_then_silu_mul(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Liger has no single kernel for seed 000: its RMSNorm, then its SiLU-mul (two launches)."""
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    return LigerSiLUMulFunction.apply(gate, LigerRMSNormFunction.apply(x, weight, eps))


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction

    return LigerFusedAddRMSNormFunction.apply(x, residual, weight, eps)


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction

    return LigerFusedGateUpSiLUMulFunction.apply(gate_up)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    return LigerSiLUMulFunction.apply(gate, up)
