"""Llama-style MLP block, bf16, hidden 4096, intermediate 14336: GEMMs and the kernels between them.

The one built-in case with tensor-core work: three GEMMs of 2·M·4096·14336 FLOPs each beside the
memory-bound add + RMSNorm and SiLU·mul that fuseprof's kernels fuse.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from fuseprof_kernels.add_rms_norm import fused_cuda as add_rms_norm_cuda
from fuseprof_kernels.llama_mlp.eager import eager
from fuseprof_kernels.llama_mlp.reference import make_inputs, nominal_bytes, reference
from fuseprof_kernels.silu_and_mul import fused_cuda_split as silu_mul_cuda

from fuseprof.case import Case, Variant, compile_static


def fused_cuda(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, w_gate: torch.Tensor,
               w_up: torch.Tensor, w_down: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y, h = add_rms_norm_cuda(x, residual, weight)
    return F.linear(silu_mul_cuda(F.linear(y, w_gate), F.linear(y, w_up)), w_down), h


CASE = Case(
    name="llama_mlp",
    description="h = x + r; y = rmsnorm(h)·w; out = (SiLU(y·Wgᵀ)·(y·Wuᵀ))·Wdᵀ; shape (M, 4096), I = 14336",
    variants=(
        Variant("eager", eager, "unfused", "PyTorch eager: cuBLAS GEMMs, one kernel per elementwise op"),
        Variant("compiled", compile_static(eager), "compiled", "torch.compile(eager, dynamic=False)"),
        Variant("fused_cuda", fused_cuda, "fused",
                "eager GEMMs with fuseprof's fused add_rms_norm and silu_mul CUDA kernels", devices=("cuda",)),
    ),
    make_inputs=make_inputs,
    reference=reference,
    nominal_bytes=nominal_bytes,
    default_shapes=((128, 4096), (2048, 4096)),
    dtypes=("bfloat16",),
    # bf16 rounds four intermediates (y, gate, up, SiLU·up) before a K = 14336 product: 5-8e-3 on
    # random data on the CPU, against 1e-2 for a single rounded elementwise op.
    tolerances={"bfloat16": 1.5e-2},
)
