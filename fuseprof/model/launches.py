"""Launch analysis over torch.profiler rows: one call's kernels, and the gaps between them."""

from __future__ import annotations

import pandas as pd


def last_call(profiler_rows: pd.DataFrame, repeats: int) -> pd.DataFrame:
    """The kernels of the last of ``repeats`` identical calls in each range (the warmest one)."""
    parts = []
    for _, part in profiler_rows.groupby(["bundle", "variant", "shape"], sort=False):
        part = part.sort_values("start_ns")
        per_call = len(part) // max(repeats, 1)
        parts.append(part.iloc[len(part) - per_call:])
    return pd.concat(parts) if parts else profiler_rows.iloc[0:0]


def launch_gaps(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per variant and shape, for one call: kernels, GPU busy time, idle gaps between kernels, host
    launch time. gap_ns = next kernel's start − this kernel's end."""
    rows = []
    for (variant, shape), part in kernels.groupby(["variant", "shape"], sort=True):
        part = part.sort_values("start_ns")
        ends = part["start_ns"] + part["duration_ns"]
        gaps = (part["start_ns"].shift(-1) - ends).dropna()
        rows.append({"variant": variant, "shape": shape, "kernels": len(part),
                     "gpu_busy_ns": int(part["duration_ns"].sum()), "gap_ns": int(gaps.clip(lower=0).sum()),
                     "span_ns": int(ends.max() - part["start_ns"].min()),
                     "host_launch_ns": int(part["launch_api_ns"].fillna(0).sum())})
    return pd.DataFrame(rows)
