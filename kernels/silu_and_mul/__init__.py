"""SiLU-and-mul (seed 002): out = SiLU(gate)·up, from one (M, 2d) tensor as serving engines pass it.

``CASE`` is the packed form; ``SPLIT_CASE`` (also the built-in case ``silu_mul``) takes two tensors.
"""

from __future__ import annotations

import torch
from fuseprof_kernels._cuda import cuda_op
from fuseprof_kernels.silu_and_mul.eager import eager_packed, eager_split
from fuseprof_kernels.silu_and_mul.reference import (
    make_packed_inputs,
    make_split_inputs,
    nominal_bytes,
    reference_packed,
    reference_split,
)

from fuseprof.case import Case, Variant, compile_static, lazy

_TRITON = "fuseprof_kernels.silu_and_mul.fused_triton"
_SHAPES = ((1, 14336), (128, 14336), (4096, 14336), (1024, 8192))


_SILU_AND_MUL = cuda_op("silu_and_mul")
_SILU_MUL = cuda_op("silu_mul")


def fused_cuda_packed(gate_up: torch.Tensor) -> torch.Tensor:
    return _SILU_AND_MUL(gate_up)


def fused_cuda_split(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return _SILU_MUL(gate, up)


def liger_packed(gate_up: torch.Tensor) -> torch.Tensor:
    from fuseprof_kernels._liger import silu_and_mul

    return silu_and_mul(gate_up)


def liger_split(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    from fuseprof_kernels._liger import silu_mul

    return silu_mul(gate, up)


def _variants(eager, cuda, triton_attr, liger) -> tuple[Variant, ...]:  # type: ignore[no-untyped-def]
    return (
        Variant("eager", eager, "unfused", "F.silu(gate) * up: two kernels, one (M, d) intermediate"),
        Variant("compiled", compile_static(eager), "compiled", "torch.compile(eager, dynamic=False)"),
        Variant("fused_cuda", cuda, "fused", "one CUDA kernel, 16-byte accesses, grid-stride",
                devices=("cuda",)),
        Variant("fused_triton", lazy(_TRITON, triton_attr), "fused", "one Triton kernel", devices=("cuda",),
                requires=("triton",)),
        Variant("liger", liger, "library", "Liger-Kernel SiLU-mul", devices=("cuda",), requires=("liger_kernel",)),
    )


CASE = Case(
    name="silu_and_mul",
    description="out = SiLU(gate)·up from one (M, 2d) tensor [gate | up]; shape is (M, d)",
    variants=_variants(eager_packed, fused_cuda_packed, "silu_and_mul_triton", liger_packed),
    make_inputs=make_packed_inputs, reference=reference_packed, nominal_bytes=nominal_bytes,
    default_shapes=_SHAPES, dtypes=("bfloat16", "float16"),
)

SPLIT_CASE = Case(
    name="silu_mul",
    description="out = SiLU(gate)·up from two (M, d) tensors",
    variants=_variants(eager_split, fused_cuda_split, "silu_mul_triton", liger_split),
    make_inputs=make_split_inputs, reference=reference_split, nominal_bytes=nominal_bytes,
    default_shapes=_SHAPES, dtypes=("bfloat16", "float16"),
)
