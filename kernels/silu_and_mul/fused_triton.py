"""SiLU-and-mul in Triton: one program per BLOCK-wide tile of a row, tiles numbered along the row
first (programs in flight read neighbouring addresses, as in the CUDA kernel); packed or
two-tensor input."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _silu_mul_kernel(g_ptr, u_ptr, o_ptr, g_stride, u_stride, o_stride, d, tiles_per_row, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // tiles_per_row).to(tl.int64)
    cols = (pid % tiles_per_row) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    g = tl.load(g_ptr + row * g_stride + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * u_stride + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(o_ptr + row * o_stride + cols, (g * tl.sigmoid(g) * u).to(o_ptr.dtype.element_ty), mask=mask)


def silu_mul_triton(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    if gate.dim() != 2 or gate.stride(1) != 1 or up.stride(1) != 1 or up.shape != gate.shape:
        raise ValueError(f"gate and up must be 2-D with contiguous rows and equal shapes; got "
                         f"{tuple(gate.shape)}, {tuple(up.shape)}")
    m, d = gate.shape
    out = torch.empty((m, d), dtype=gate.dtype, device=gate.device) if out is None else out
    tiles = triton.cdiv(d, BLOCK)
    if m * tiles > 2**31 - 1:  # grid axis 0's limit
        raise ValueError(f"{m} rows of {d} elements need more than 2^31 - 1 programs")
    _silu_mul_kernel[(m * tiles,)](gate, up, out, gate.stride(0), up.stride(0), out.stride(0), d, tiles,
                                   BLOCK=BLOCK, num_warps=8)
    return out


def silu_and_mul_triton(gate_up: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    d = gate_up.shape[-1] // 2
    return silu_mul_triton(gate_up[:, :d], gate_up[:, d:], out)
