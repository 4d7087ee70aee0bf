"""Fused RMSNorm + SwiGLU-style gate in Triton: one program per row, fp32 math inside.

Rows up to 16384 elements are held in registers (x and g read once); wider rows take a second
pass over x, g and w after the reduction.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from fuseprof_kernels._triton import row_block
from fuseprof_kernels.rmsnorm_swiglu.reference import EPS


@triton.jit
def _rmsnorm_swiglu_kernel(x_ptr, g_ptr, w_ptr, y_ptr, x_stride, g_stride, y_stride, n, eps,
                           BLOCK: tl.constexpr, SINGLE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, g_row, y_row = x_ptr + row * x_stride, g_ptr + row * g_stride, y_ptr + row * y_stride
    if SINGLE_PASS:
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        inv_rms = tl.rsqrt(tl.sum(x * x, axis=0) / n + eps)
        g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = x * w * (g * tl.sigmoid(g)) * inv_rms
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < n, other=0.0).to(tl.float32)
            acc += x * x
        inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / n + eps)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + cols, (x * w * (g * tl.sigmoid(g)) * inv_rms).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_swiglu_triton(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float = EPS,
                          out: torch.Tensor | None = None, num_warps: int | None = None) -> torch.Tensor:
    """``num_warps`` overrides the launch width: fewer warps hold more of the row per thread (the
    register-pressure sweep in ``sweep.py`` turns this knob)."""
    if x.dim() != 2 or x.stride(1) != 1 or gate.stride(1) != 1 or gate.shape != x.shape:
        raise ValueError(f"x and gate must be 2-D with contiguous rows and equal shapes; got {tuple(x.shape)}, "
                         f"{tuple(gate.shape)}")
    out = torch.empty_like(x) if out is None else out
    m, n = x.shape
    block, single, warps = row_block(n)
    _rmsnorm_swiglu_kernel[(m,)](x, gate, weight, out, x.stride(0), gate.stride(0), out.stride(0), n, eps,
                                 BLOCK=block, SINGLE_PASS=single, num_warps=num_warps or warps)
    return out
