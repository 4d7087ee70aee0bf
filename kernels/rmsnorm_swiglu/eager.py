"""The unfused chain as seed 000's baseline writes it: cast to fp32, one op at a time, cast back.

Each line is at least one kernel launch and one round trip of an (M, N) fp32 intermediate
through memory; that traffic is what the fused kernel removes.
"""

from __future__ import annotations

import torch
from fuseprof_kernels.rmsnorm_swiglu.reference import EPS


def eager(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    xf, gf, wf = x.float(), gate.float(), weight.float()
    inv_rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    gated = gf * torch.sigmoid(gf)
    return (xf * wf * gated * inv_rms).to(x.dtype)
