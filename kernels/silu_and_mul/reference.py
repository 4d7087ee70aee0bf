"""Float64 reference for SiLU-and-mul, packed [gate | up] and two-tensor forms.

A case's shape is (M, d): the output's. The packed input is (M, 2d).
"""

from __future__ import annotations

import torch
from fuseprof_kernels._inputs import activations, itemsize


def reference_split(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    g = gate.double()
    return g * torch.sigmoid(g) * up.double()


def reference_packed(gate_up: torch.Tensor) -> torch.Tensor:
    d = gate_up.shape[-1] // 2
    return reference_split(gate_up[:, :d], gate_up[:, d:])


def nominal_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """Read gate and up, write the output: 3Md elements."""
    m, d = shape
    return itemsize(dtype) * 3 * m * d


def make_packed_inputs(shape: tuple[int, ...], dtype: str, device: str,
                       generator: torch.Generator) -> tuple[torch.Tensor]:
    m, d = shape
    return (activations((m, 2 * d), dtype, device, generator),)


def make_split_inputs(shape: tuple[int, ...], dtype: str, device: str,
                      generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return activations(shape, dtype, device, generator), activations(shape, dtype, device, generator)
