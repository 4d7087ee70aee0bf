"""Residual add + RMSNorm (seeds 001, 002): h = x + residual, y = rmsnorm(h)·w; returns (y, h)."""

from __future__ import annotations

import torch
from fuseprof_kernels._cuda import cuda_op
from fuseprof_kernels.add_rms_norm.eager import eager
from fuseprof_kernels.add_rms_norm.reference import EPS, make_inputs, nominal_bytes, reference

from fuseprof.case import Case, Variant, compile_static, lazy

_ADD_RMS_NORM = cuda_op("add_rms_norm")


def fused_cuda(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _ADD_RMS_NORM(x, residual, weight, EPS)


def liger(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    from fuseprof_kernels._liger import fused_add_rms_norm

    return fused_add_rms_norm(x, residual, weight, EPS)


CASE = Case(
    name="add_rms_norm",
    description="h = x + residual; y = h·rsqrt(mean(h²)+1e-6)·w; returns (y, h)",
    variants=(
        Variant("eager", eager, "unfused", "PyTorch eager chain as seed 002 writes it"),
        Variant("compiled", compile_static(eager), "compiled", "torch.compile(eager, dynamic=False)"),
        Variant("fused_cuda", fused_cuda, "fused", "one CUDA kernel, a block per row (kernels/add_rms_norm)",
                devices=("cuda",)),
        Variant("fused_triton", lazy("fuseprof_kernels.add_rms_norm.fused_triton", "add_rms_norm_triton"),
                "fused", "one Triton kernel, a program per row", devices=("cuda",), requires=("triton",)),
        Variant("liger", liger, "library", "Liger-Kernel fused add + RMSNorm", devices=("cuda",),
                requires=("liger_kernel",)),
    ),
    make_inputs=make_inputs,
    reference=reference,
    nominal_bytes=nominal_bytes,
    default_shapes=((1, 4096), (128, 4096), (4096, 4096), (64, 8192)),
    dtypes=("bfloat16", "float16"),
)
