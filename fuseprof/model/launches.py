"""Launch analysis over torch.profiler rows: one call's kernels, and the gaps between them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.model.intervals import union_ns


def last_call(profiler_rows: pd.DataFrame, repeats: int) -> pd.DataFrame:
    """The kernels of the last of ``repeats`` identical calls in each range (the warmest one)."""
    parts = []
    for _, part in profiler_rows.groupby(["bundle", "variant", "shape"], sort=False):
        part = part.sort_values("start_ns")
        per_call = len(part) // max(repeats, 1)
        parts.append(part.iloc[len(part) - per_call:])
    return pd.concat(parts) if parts else profiler_rows.iloc[0:0]


def lanes(kernels: pd.DataFrame) -> list[str]:
    """How rows group into lanes: by variant and shape for fuseprof's own captures, by profiler step
    and stream for a trace without variants (a whole model someone else captured)."""
    return ["variant", "shape"] if kernels["variant"].notna().any() else ["step", "stream"]


def launch_gaps(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per lane (``lanes``), for one call or step: kernels, GPU busy time, idle gaps between kernels,
    host launch time. gpu_busy_ns = |∪ kernel intervals| (overlaps once); gap_ns = span_ns − gpu_busy_ns,
    the time no kernel of the lane ran."""
    rows = []
    keys = lanes(kernels)
    for key, part in kernels.groupby(keys, sort=True, dropna=False):
        part = part.sort_values("start_ns")
        ends = part["start_ns"] + part["duration_ns"]
        busy = union_ns(part["start_ns"].to_numpy(np.int64), ends.to_numpy(np.int64))
        span = int(ends.max() - part["start_ns"].min())
        rows.append({**dict(zip(keys, key)), "kernels": len(part),
                     "gpu_busy_ns": busy, "gap_ns": span - busy, "span_ns": span,
                     "host_launch_ns": int(part["launch_api_ns"].fillna(0).sum())})
    return pd.DataFrame(rows)
