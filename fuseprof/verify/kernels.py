"""fuseprof's own fused kernels as a third variant of a replayed chain, where one computes the chain.

The registry's ``KernelMatch`` rows say which chains a kernel computes (a regex over the whole op
sequence, ' → '-joined, as the fusion table names it), which built-in case and variant to call, and how
the replay's tensors map onto the kernel's arguments (by the program's steps, not by input order) and its
results onto the chain's output. A user adds rows to a registry for their own kernels.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch

from fuseprof.case import Variant, builtin_case
from fuseprof.model.registry import KernelArgument, KernelMatch, Registry
from fuseprof.verify.replay import Program


def _rows(x: torch.Tensor) -> torch.Tensor:
    """(…, N) as (M, N): fuseprof's row kernels take 2-D tensors."""
    return x.reshape(-1, x.shape[-1])


def _argument(program: Program, inputs: tuple[torch.Tensor, ...], spec: KernelArgument) -> torch.Tensor:
    """The external input a ``KernelArgument`` names: an argument of a step, or the step's external input."""
    step = program.steps[0 if spec.step == "first" else -1 if spec.step == "last" else spec.step]
    ref = next(a for a in step.args if a.kind == "input") if spec.argument == "input" else step.args[spec.argument]
    if ref.kind != "input":
        raise ValueError(f"expected an external input, got {ref.kind}")
    return _rows(inputs[ref.index]) if spec.rows else inputs[ref.index]


def arguments(row: KernelMatch, program: Program, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The kernel's arguments for one call of the replay."""
    return tuple(_argument(program, inputs, spec) for spec in row.arguments)


def output(row: KernelMatch, result: Any) -> torch.Tensor:
    """The chain's output among the kernel's results."""
    return result if row.output is None else result[row.output]  # type: ignore[no-any-return]


def kernel_variant(signature: str, program: Program, device_type: str, registry: Registry) -> Variant | None:
    """The fuseprof kernel that computes this chain, as a variant of its replay (None when no row of the
    registry matches, or the kernel cannot run here)."""
    for row in registry.kernel_matches:
        if not re.fullmatch(row.pattern, signature):
            continue
        kernel = builtin_case(row.case, f"kernel match {row.pattern!r}").variant(row.variant)
        if kernel.unavailable_reason(device_type) is not None:
            return None

        def call(*inputs: torch.Tensor, row: KernelMatch = row, fn: Callable[..., Any] = kernel.fn) -> Any:
            shape = inputs[program.steps[0].args[0].index].shape  # the chain's first input: its output's shape
            return (output(row, fn(*arguments(row, program, inputs))).reshape(shape),)

        return Variant("fuseprof", call, "fused", f"{row.case}:{row.variant} — {kernel.description}",
                       devices=kernel.devices, requires=kernel.requires)
    return None
