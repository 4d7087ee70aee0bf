"""Register-pressure sweep (seed 002, exercise D): the fused Triton kernel for seed 000 with the
whole row of N = 8192 held by fewer and fewer warps. At 16 warps each thread keeps 16 elements of
x, g and w; at 2 warps, 128 of each: registers per thread rise until the compiler spills.

``fuseprof profile fuseprof_kernels.rmsnorm_swiglu.sweep:CASE`` captures it.
"""

from __future__ import annotations

import functools

from fuseprof_kernels.rmsnorm_swiglu.reference import make_inputs, nominal_bytes, reference

from fuseprof.case import Case, Variant, lazy

WARPS = (32, 16, 8, 4, 2)


def _at_width(warps: int) -> Variant:
    kernel = lazy("fuseprof_kernels.rmsnorm_swiglu.fused_triton", "rmsnorm_swiglu_triton")
    return Variant(f"warps{warps:02d}", functools.partial(kernel, num_warps=warps), "fused",
                   f"Triton, one program of {warps} warps per row: {8192 // (32 * warps)} elements of x, g, w "
                   "per thread at N = 8192", devices=("cuda",), requires=("triton",))


CASE = Case(
    name="rmsnorm_swiglu_register_sweep",
    description="seed 000's fused Triton kernel at 32..2 warps per row (registers per thread rise)",
    variants=tuple(_at_width(w) for w in WARPS),
    make_inputs=make_inputs,
    reference=reference,
    nominal_bytes=nominal_bytes,
    default_shapes=((4096, 8192),),
    dtypes=("float16",),
)
