"""Random inputs shared by the cases: normal activations, norm weights near 1, never zeros."""

from __future__ import annotations

import torch


def itemsize(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def activations(shape: tuple[int, ...], dtype: str, device: str, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator, device=device, dtype=torch.float32).to(getattr(torch, dtype))


def norm_weight(n: int, dtype: str, device: str, generator: torch.Generator) -> torch.Tensor:
    w = 1.0 + 0.1 * torch.randn((n,), generator=generator, device=device, dtype=torch.float32)
    return w.to(getattr(torch, dtype))


def projection_weight(rows: int, cols: int, dtype: str, device: str, generator: torch.Generator) -> torch.Tensor:
    """A (rows, cols) weight scaled by 1/sqrt(fan-in), as an initialiser would: outputs stay O(1)."""
    w = torch.randn((rows, cols), generator=generator, device=device, dtype=torch.float32) / cols**0.5
    return w.to(getattr(torch, dtype))


def row_norm_inputs(shape: tuple[int, ...], dtype: str, device: str,
                    generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two (M, N) activations and a norm weight of N: the inputs of both row-norm cases."""
    m, n = shape
    return (activations((m, n), dtype, device, generator), activations((m, n), dtype, device, generator),
            norm_weight(n, dtype, device, generator))

