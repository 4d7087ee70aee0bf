"""Build and load the fused CUDA kernels (one torch extension, ops under ``torch.ops.fuseprof``).

Built on first use with torch's C++/CUDA extension tooling for the current GPU's architecture
(sm_90 on the H100/H200) and cached by torch. ``python -m fuseprof_kernels._cuda`` builds
verbosely, which prints ptxas's resource report (registers, spills) for every kernel.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
# Distinct file names: torch's ninja build names each object after its source file.
SOURCES = (
    _HERE.parent / "rmsnorm_swiglu" / "fused_rmsnorm_swiglu.cu",
    _HERE.parent / "add_rms_norm" / "fused_add_rms_norm.cu",
    _HERE.parent / "silu_and_mul" / "fused_silu_and_mul.cu",
    _HERE / "bindings.cpp",
)


def _register_fakes() -> None:
    """Shape-only versions of the functional ops, so torch.compile can trace through them."""
    import torch

    @torch.library.register_fake("fuseprof::rmsnorm_swiglu")
    def _(x, gate, weight, eps=1e-6):  # type: ignore[no-untyped-def]
        return torch.empty_like(x)

    @torch.library.register_fake("fuseprof::add_rms_norm")
    def _(x, residual, weight, eps=1e-6):  # type: ignore[no-untyped-def]
        return torch.empty_like(x), torch.empty_like(x)

    @torch.library.register_fake("fuseprof::silu_and_mul")
    def _(gate_up):  # type: ignore[no-untyped-def]
        return gate_up.new_empty((gate_up.shape[0], gate_up.shape[1] // 2))

    @torch.library.register_fake("fuseprof::silu_mul")
    def _(gate, up):  # type: ignore[no-untyped-def]
        return torch.empty_like(gate)


@functools.cache
def cuda_ops(verbose: bool = False) -> Any:
    """``torch.ops.fuseprof`` after building (or loading the cached build of) the extension."""
    import torch
    from torch.utils.cpp_extension import load

    load(
        name="fuseprof_cuda_ops",
        sources=[str(s) for s in SOURCES],
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3", "-lineinfo", "-Xptxas=-v"],
        is_python_module=False,
        verbose=verbose,
    )
    _register_fakes()
    return torch.ops.fuseprof


def cuda_op(name: str) -> Any:
    """A callable for ``torch.ops.fuseprof.<name>.default`` that builds the extension on first use.

    Calling the resolved OpOverload directly skips the per-call namespace and overload lookup of
    ``torch.ops.fuseprof.<name>(...)``: host dispatch is what small-M calls are made of.
    """
    resolved: list[Any] = []

    def call(*args: Any) -> Any:
        if not resolved:
            resolved.append(getattr(cuda_ops(), name).default)
        return resolved[0](*args)

    call.__name__ = call.__qualname__ = name
    return call
