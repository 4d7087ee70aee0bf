"""Variants side by side per case and shape: time, bandwidth, and the distance to a same-bytes copy.

Formulas (all from timings.parquet): ``effective GB/s = nominal_bytes / gpu_median_ns``;
``time_over_copy = gpu_median_ns / the faster same-bytes copy's gpu_median_ns`` (variants
``copy`` and ``copy_sm``; 1.0 is the physical limit of a memory-bound op); ``pct_of_copy_bandwidth = 100 / time_over_copy``;
``speedup_vs_<variant> = that variant's gpu_median_ns / this one's``.
"""

from __future__ import annotations

import pandas as pd

from fuseprof.tables.summary import sort_by_shape

COPY_PREFIX = "copy"
KEYS = ["bundle", "case", "shape", "dtype"]


def is_copy(timings: pd.DataFrame) -> pd.Series:
    """The same-bytes copy rows (``copy``, ``copy_sm``) beside a bench's or a capture's variants."""
    return timings["variant"].str.startswith(COPY_PREFIX)


def fastest_copy_ns(timings: pd.DataFrame) -> pd.Series:
    """Per bundle, case, shape and dtype: the faster same-bytes copy's GPU time, the call's memory floor."""
    return timings[is_copy(timings)].groupby(KEYS)["gpu_median_ns"].min().rename("copy_gpu_ns")


def compare_variants(timings: pd.DataFrame, baseline: str = "compiled") -> pd.DataFrame:
    """One row per variant, case and shape, with the same shape's copy and ``baseline`` beside it."""
    frame = timings.copy()
    copies = fastest_copy_ns(frame)
    base = frame[frame["variant"] == baseline].set_index(KEYS)["gpu_median_ns"].rename("baseline_gpu_ns")
    rows = frame[~is_copy(frame)].join(copies, on=KEYS).join(base, on=KEYS)
    out = pd.DataFrame({
        "case": rows["case"], "shape": rows["shape"], "dtype": rows["dtype"], "variant": rows["variant"],
        "correct": rows["correct"],
        "gpu_us": rows["gpu_median_ns"] / 1e3,
        "as_called_us": rows["as_called_median_ns"] / 1e3,
        "effective_gb_per_s": rows["nominal_bytes"] / rows["gpu_median_ns"],
        "copy_us": rows["copy_gpu_ns"] / 1e3,
        "time_over_copy": rows["gpu_median_ns"] / rows["copy_gpu_ns"],
        "pct_of_copy_bandwidth": 100 * rows["copy_gpu_ns"] / rows["gpu_median_ns"],
        f"speedup_vs_{baseline}": rows["baseline_gpu_ns"] / rows["gpu_median_ns"],
        "bundle": rows["bundle"],
    })
    return sort_by_shape(out, ["case", "dtype", "shape", "variant"])
