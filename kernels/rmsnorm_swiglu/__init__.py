"""Seed 000: fused RMSNorm + SwiGLU-style gate, y = x·w·SiLU(g)·rsqrt(mean(x²)+1e-6)."""

from __future__ import annotations

from fuseprof.case import Case, Variant, compile_static
from fuseprof_kernels.rmsnorm_swiglu.eager import eager
from fuseprof_kernels.rmsnorm_swiglu.reference import make_inputs, nominal_bytes, reference

CASE = Case(
    name="rmsnorm_swiglu",
    description="y = x·w·SiLU(g)·rsqrt(mean(x²)+1e-6); x, g (M, N), w (N); fp32 math inside",
    variants=(
        Variant("eager", eager, "unfused", "PyTorch eager chain in fp32, as seed 000's baseline"),
        Variant("compiled", compile_static(eager), "compiled", "torch.compile(eager, dynamic=False)"),
    ),
    make_inputs=make_inputs,
    reference=reference,
    nominal_bytes=nominal_bytes,
    default_shapes=((128, 4096), (512, 4096), (1024, 4096), (1024, 8192)),
    dtypes=("float16", "bfloat16"),
)
