"""Fused residual add + RMSNorm in Triton: one program per row; returns (y, h)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from fuseprof_kernels._triton import row_block
from fuseprof_kernels.add_rms_norm.reference import EPS


@triton.jit
def _add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, x_stride, r_stride, y_stride, h_stride, n, eps,
                         BLOCK: tl.constexpr, SINGLE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, r_row = x_ptr + row * x_stride, r_ptr + row * r_stride
    y_row, h_row = y_ptr + row * y_stride, h_ptr + row * h_stride
    if SINGLE_PASS:
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        h = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(h_row + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
        inv_rms = tl.rsqrt(tl.sum(h * h, axis=0) / n + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (h * inv_rms * w).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            h = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) + \
                tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(h_row + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
            acc += h * h
        inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / n + eps)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            h = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) + \
                tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + cols, (h * inv_rms * w).to(y_ptr.dtype.element_ty), mask=mask)


def add_rms_norm_triton(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = EPS,
                        out: torch.Tensor | None = None,
                        residual_out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    if x.dim() != 2 or x.stride(1) != 1 or residual.stride(1) != 1 or residual.shape != x.shape:
        raise ValueError(f"x and residual must be 2-D with contiguous rows and equal shapes; got "
                         f"{tuple(x.shape)}, {tuple(residual.shape)}")
    out = torch.empty_like(x) if out is None else out
    residual_out = torch.empty_like(x) if residual_out is None else residual_out
    m, n = x.shape
    block, single, warps = row_block(n)
    _add_rms_norm_kernel[(m,)](x, residual, weight, out, residual_out, x.stride(0), residual.stride(0),
                               out.stride(0), residual_out.stride(0), n, eps,
                               BLOCK=block, SINGLE_PASS=single, num_warps=warps)
    return out, residual_out
