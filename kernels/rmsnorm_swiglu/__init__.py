"""Seed 000: fused RMSNorm + SwiGLU-style gate, y = x·w·SiLU(g)·rsqrt(mean(x²)+1e-6)."""

from __future__ import annotations

import torch
from fuseprof_kernels._cuda import cuda_op
from fuseprof_kernels.rmsnorm_swiglu.eager import eager
from fuseprof_kernels.rmsnorm_swiglu.reference import EPS, make_inputs, nominal_bytes, reference

from fuseprof.case import Case, Variant, compile_static, lazy

_RMSNORM_SWIGLU = cuda_op("rmsnorm_swiglu")


def fused_cuda(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _RMSNORM_SWIGLU(x, gate, weight, EPS)


def liger(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    from fuseprof_kernels._liger import rmsnorm_then_silu_mul

    return rmsnorm_then_silu_mul(x, gate, weight, EPS)


CASE = Case(
    name="rmsnorm_swiglu",
    description="y = x·w·SiLU(g)·rsqrt(mean(x²)+1e-6); x, g (M, N), w (N); fp32 math inside",
    variants=(
        Variant("eager", eager, "unfused", "PyTorch eager chain in fp32, as seed 000's baseline"),
        Variant("compiled", compile_static(eager), "compiled", "torch.compile(eager, dynamic=False)"),
        Variant("fused_cuda", fused_cuda, "fused", "one CUDA kernel, a block per row (kernels/rmsnorm_swiglu)",
                devices=("cuda",)),
        Variant("fused_triton", lazy("fuseprof_kernels.rmsnorm_swiglu.fused_triton", "rmsnorm_swiglu_triton"),
                "fused", "one Triton kernel, a program per row", devices=("cuda",), requires=("triton",)),
        Variant("liger", liger, "library", "Liger-Kernel RMSNorm then SiLU-mul (two kernels)", devices=("cuda",),
                requires=("liger_kernel",)),
    ),
    make_inputs=make_inputs,
    reference=reference,
    nominal_bytes=nominal_bytes,
    default_shapes=((128, 4096), (512, 4096), (1024, 4096), (1024, 8192)),
    dtypes=("float16", "bfloat16"),
)
