"""Unfused SiLU-and-mul: SiLU writes an (M, d) intermediate that the multiply reads back (3 passes → 1)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def eager_split(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


def eager_packed(gate_up: torch.Tensor) -> torch.Tensor:
    d = gate_up.shape[-1] // 2
    return F.silu(gate_up[:, :d]) * gate_up[:, d:]
