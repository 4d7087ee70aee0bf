"""The unfused chain as seed 002 writes it: add, square-mean, rsqrt, two multiplies, in the input dtype.

Each line is a kernel and a full read or write of the (M, N) tensor: 6-8 traversals in all.
"""

from __future__ import annotations

import torch
from fuseprof_kernels.add_rms_norm.reference import EPS


def eager(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
          eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual
    var = h.pow(2).mean(-1, keepdim=True)
    normed = h * torch.rsqrt(var + eps)
    return normed * weight, h
