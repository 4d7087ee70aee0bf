"""Each variant against the float64 reference, before anything is timed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fuseprof.errors import CorrectnessError


def as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _non_finite(tensor: torch.Tensor) -> int:
    """How many elements are NaN or ±Inf (counted in float64: ``isfinite`` has no float8 kernel)."""
    if not (tensor.is_floating_point() or tensor.is_complex()):
        return 0
    wide = tensor.to(torch.complex128 if tensor.is_complex() else torch.float64)
    return int((~torch.isfinite(wide)).sum())


def compare(outputs: Any, references: Any, tolerance: float) -> dict[str, Any]:
    """max |out − ref| and ‖out − ref‖/‖ref‖ over all outputs; NaN or Inf fails outright."""
    outs, refs = as_tuple(outputs), as_tuple(references)
    if len(outs) != len(refs):
        return {"max_abs_err": float("nan"), "rel_err": float("nan"), "tolerance": tolerance, "correct": False,
                "problem": f"{len(outs)} outputs, reference has {len(refs)}"}
    max_abs, rel, problem = 0.0, 0.0, None
    for i, (out, ref) in enumerate(zip(outs, refs)):
        if not isinstance(out, torch.Tensor) or not isinstance(ref, torch.Tensor):
            problem = (f"output {i} is {type(out).__name__}, reference {type(ref).__name__}: tensors expected")
            break
        if out.shape != ref.shape:
            problem = f"output {i} has shape {tuple(out.shape)}, reference {tuple(ref.shape)}"
            break
        bad_ref = _non_finite(ref)
        if bad_ref:  # max(x, nan) is x: a NaN in the reference would pass anything
            problem = f"reference {i} holds {bad_ref:,} NaN or Inf value(s): it checks nothing"
            break
        bad = _non_finite(out)
        if bad:
            problem = f"output {i} holds {bad:,} NaN or Inf value(s) (unwritten or overflowed elements)"
            break
        if out.numel() == 0:
            continue
        diff = out.double() - ref.double()
        max_abs = max(max_abs, float(diff.abs().max()))
        rel = max(rel, float(diff.norm() / ref.double().norm().clamp_min(1e-300)))
    correct = problem is None and rel <= tolerance
    if problem is None and not correct:
        problem = f"rel_err {rel:.3g} > tolerance {tolerance:.3g}"
    if problem is not None and max_abs == 0.0 and rel == 0.0:
        max_abs = rel = float("nan")
    return {"max_abs_err": max_abs, "rel_err": rel, "tolerance": tolerance, "correct": correct, "problem": problem}


def raise_if_wrong(timings: pd.DataFrame, bundle: Path, keys: Sequence[str] = ("variant", "shape")) -> None:
    """Called once the bundle is written (the evidence is kept): one error naming every wrong row.
    Copy rows have no verdict (null), so they are never wrong."""
    wrong = timings[timings["correct"].eq(False)]
    if not wrong.empty:
        rows = ", ".join(" ".join(str(v) for v in row) for row in wrong[list(keys)].itertuples(index=False))
        raise CorrectnessError(f"wrong results from: {rows} (see rel_err in {bundle}/timings.parquet)")
