"""fuseprof's own fused kernels as a third variant of a replayed chain, where one computes the chain.

A row says which chains a kernel computes (a regex over the whole op sequence, ' → '-joined, as the
fusion table names it), which built-in case and variant to call, and how the replay's tensors map onto
the kernel's arguments and its results onto the chain's outputs (by the program's steps, not by input
order). A user appends rows for their own kernels.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fuseprof.case import Variant, load_case
from fuseprof.verify.replay import Program, Ref


@dataclass(frozen=True)
class KernelMatch:
    pattern: str
    case: str
    variant: str
    arguments: Callable[[Program, tuple[torch.Tensor, ...]], tuple[Any, ...]]
    output: Callable[[Any], torch.Tensor]  # the chain's output among the kernel's results


def _input(inputs: tuple[torch.Tensor, ...], ref: Ref) -> torch.Tensor:
    if ref.kind != "input":
        raise ValueError(f"expected an external input, got {ref.kind}")
    return inputs[ref.index]


def _rows(x: torch.Tensor) -> torch.Tensor:
    """(…, N) as (M, N): fuseprof's row kernels take 2-D tensors."""
    return x.reshape(-1, x.shape[-1])


def _add_rms_norm_arguments(program: Program, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """x and residual: the first add's two inputs; the weight: the last mul's external input."""
    add, last = program.steps[0], program.steps[-1]
    weight = next(a for a in last.args if a.kind == "input")
    return _rows(_input(inputs, add.args[0])), _rows(_input(inputs, add.args[1])), _input(inputs, weight)


def _silu_mul_arguments(program: Program, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """gate: silu's input; up: the mul's external input."""
    silu, mul = program.steps
    up = next(a for a in mul.args if a.kind == "input")
    return _rows(_input(inputs, silu.args[0])), _rows(_input(inputs, up))


# Checked in order; the regex must match the chain's whole op sequence.
KERNEL_MATCHES: list[KernelMatch] = [
    KernelMatch(r"aten::add → aten::copy_ → aten::pow → aten::mean → aten::add → aten::rsqrt → aten::mul → "
                r"aten::copy_ → aten::mul", "add_rms_norm", "fused_cuda", _add_rms_norm_arguments,
                lambda result: result[0]),  # (y, h): the chain's y
    KernelMatch(r"aten::silu → aten::mul", "silu_mul", "fused_cuda", _silu_mul_arguments, lambda result: result),
]


def kernel_variant(signature: str, program: Program, device_type: str) -> Variant | None:
    """The fuseprof kernel that computes this chain, as a variant of its replay (None when no row matches,
    or the kernel cannot run here)."""
    for row in KERNEL_MATCHES:
        if not re.fullmatch(row.pattern, signature):
            continue
        kernel = load_case(row.case).variant(row.variant)
        if kernel.unavailable_reason(device_type) is not None:
            return None

        def call(*inputs: torch.Tensor, row: KernelMatch = row, fn: Callable[..., Any] = kernel.fn) -> Any:
            shape = _input(inputs, program.steps[0].args[0]).shape  # the chain's first input: its output's shape
            return (row.output(fn(*row.arguments(program, inputs))).reshape(shape),)

        return Variant("fuseprof", call, "fused", f"{row.case}:{row.variant} — {kernel.description}",
                       devices=kernel.devices, requires=kernel.requires)
    return None
