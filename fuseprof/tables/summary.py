"""Per variant and shape: launches, measured bytes and time beside the nominal byte model.

Every column is a sum or a copy of kernel-frame / timing columns, named so a reader can
recompute it: ``dram_bytes``, ``l2_bytes`` and ``flops`` are sums of the per-kernel columns of
``fuseprof.model.derived`` over the ncu rows of one call, ``ncu_time_ns = Σ duration_ns`` over
the same rows.
"""

from __future__ import annotations

import pandas as pd

from fuseprof.model.derived import derive
from fuseprof.parse.sources import NCU_SOURCE, PROFILER_SOURCE

KEYS = ["bundle", "case", "variant", "shape", "dtype"]


def _ncu_per_call(kernels: pd.DataFrame) -> pd.DataFrame:
    ncu = derive(kernels[kernels["source"] == NCU_SOURCE])
    return ncu.groupby(KEYS, dropna=False).agg(
        kernels_per_call=("kernel", "size"),
        ncu_time_ns=("duration_ns", "sum"),
        dram_bytes=("dram_bytes", "sum"),
        l2_bytes=("l2_bytes", "sum"),
        flops=("flops", "sum"),
        max_registers=("registers_per_thread", "max"),
        spill_bytes=("spill_store_bytes", "sum"),
    )


def _profiler_per_range(kernels: pd.DataFrame) -> pd.DataFrame:
    prof = kernels[kernels["source"] == PROFILER_SOURCE]
    return prof.groupby(KEYS, dropna=False).agg(
        profiler_kernels=("kernel", "size"), profiler_time_ns=("duration_ns", "sum"),
    )


def summarize(kernels: pd.DataFrame, timings: pd.DataFrame) -> pd.DataFrame:
    """One row per bundle, variant and shape; ncu columns are null where ncu did not run."""
    parts = [_ncu_per_call(kernels), _profiler_per_range(kernels)]
    merged = parts[0].join(parts[1], how="outer").reset_index()
    if not timings.empty:
        cols = KEYS + ["nominal_bytes", "correct", "rel_err", "gpu_median_ns", "as_called_median_ns"]
        merged = merged.merge(timings[cols], on=KEYS, how="outer")
    else:
        for col in ("nominal_bytes", "gpu_median_ns", "as_called_median_ns"):
            merged[col] = pd.NA
    merged["dram_bytes_over_nominal"] = merged["dram_bytes"] / merged["nominal_bytes"]
    return sort_by_shape(merged, KEYS)


def _shape_key(shape: object) -> str:
    """'1024x4096' -> '000000001024x000000004096': text that sorts 128x4096 before 1024x4096
    (a region's shape, 'region', sorts after every number)."""
    if not isinstance(shape, str):
        return ""
    return "x".join(f"{int(p):012d}" if p.isdigit() else f"~{p}" for p in shape.split("x"))


def sort_by_shape(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sort on ``keys`` with the ``shape`` column compared numerically."""
    return frame.sort_values(keys, key=lambda col: col.astype(object).map(_shape_key) if col.name == "shape" else col,
                             kind="stable").reset_index(drop=True)
