"""Every derived kernel metric, each formula in exactly one place.

Summary, roofline, figures, notebooks and the dashboard call ``derive`` (device-free columns)
and ``fuseprof.model.roofline.place`` (columns that need a roof); ``DERIVED_COLUMNS`` is what
``fuseprof columns`` prints for them. Null FLOP columns (a counter the capture did not collect)
are skipped in the sums, so a pre-tensor-counter bundle still adds up its SIMT FLOPs; a row with
every FLOP column null has null ``flops``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.bundle.schema import Column
from fuseprof.model.devices import PIPES
from fuseprof.parse.ncu_metrics import TENSOR_PRECISIONS

# pipe key (fuseprof.model.devices.PIPES) -> kernel-frame FLOP column
FLOP_COLUMNS: dict[str, str] = {
    **{f"tensor_{p}": f"flops_tensor_{p}" for p in TENSOR_PRECISIONS},
    "fp16": "flops_fp16", "fp32": "flops_fp32", "fp64": "flops_fp64",
}
assert set(FLOP_COLUMNS) == set(PIPES), "every pipe needs its FLOP column"

DERIVED_COLUMNS: tuple[Column, ...] = (
    Column("flops", "Float64", "Σ of flops_fp16, flops_fp32, flops_fp64 and every flops_tensor_* (nulls skipped)"),
    Column("dram_bytes", "Float64", "dram_read_bytes + dram_write_bytes"),
    Column("l2_bytes", "Float64", "l2_read_bytes + l2_write_bytes"),
    Column("arithmetic_intensity", "Float64", "flops / dram_bytes (FLOP/byte); null when dram_bytes = 0"),
    Column("achieved_flops_per_s", "Float64", "flops / (duration_ns · 1e-9)"),
    Column("achieved_bytes_per_s", "Float64", "dram_bytes / (duration_ns · 1e-9)"),
    Column("roof_pipe", "string",
           "pipe and precision with the most FLOPs: argmax over the FLOP columns (tensor_bf16, tensor_fp16, "
           "tensor_tf32, tensor_fp8, tensor_fp64, tensor_int8, fp16, fp32, fp64); 'memory' when flops is 0 or null"),
    Column("peak_flops_per_s", "Float64", "roof's ceiling for roof_pipe (datasheet, measured or ncu peak)"),
    Column("attainable_flops_per_s", "Float64", "min(peak_flops_per_s, arithmetic_intensity · roof DRAM bytes/s)"),
    Column("bound", "string",
           "'memory' when arithmetic_intensity · roof DRAM bytes/s < peak_flops_per_s (or no FLOPs), else 'compute'"),
    Column("pct_of_roof", "Float64",
           "100 · achieved_flops_per_s / attainable_flops_per_s; without FLOPs (or without a peak for roof_pipe "
           "in this roof), 100 · achieved_bytes_per_s / roof DRAM bytes/s; at most 100 where achieved_bytes_per_s "
           "exceeds the roof's DRAM bytes/s (the L2 served the rest: l2_resident)"),
    Column("l2_resident", "boolean",
           "achieved_bytes_per_s > the capture device's DRAM limit (the larger of its datasheet and measured copy "
           "bytes/s; for ops placed from their shapes, the roof's DRAM bytes/s): data came from L2 (drawn on the roof)"),
    Column("roof", "string", "label of the roof the row is measured against"),
)


def _sum_skipna(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    present = [c for c in columns if c in frame]
    if not present:
        return pd.Series(pd.NA, index=frame.index, dtype="Float64")
    return frame[present].astype("Float64").sum(axis=1, min_count=1)


def dominant_pipe(frame: pd.DataFrame) -> pd.Series:
    """The pipe with the most FLOPs per row ('memory' for rows without FLOPs)."""
    pipes = [p for p, c in FLOP_COLUMNS.items() if c in frame]
    if not pipes or frame.empty:
        return pd.Series("memory", index=frame.index, dtype="string")
    values = frame[[FLOP_COLUMNS[p] for p in pipes]].astype("float64").fillna(0.0).to_numpy()
    best = np.array(pipes, dtype=object)[values.argmax(axis=1)]
    return pd.Series(np.where(values.max(axis=1) > 0, best, "memory"), index=frame.index, dtype="string")


def derive(kernels: pd.DataFrame) -> pd.DataFrame:
    """The device-free derived columns of ``DERIVED_COLUMNS`` added to a copy of ``kernels``."""
    rows = kernels.copy()
    rows["flops"] = _sum_skipna(rows, list(FLOP_COLUMNS.values()))
    rows["dram_bytes"] = rows["dram_read_bytes"].astype("Float64") + rows["dram_write_bytes"].astype("Float64")
    rows["l2_bytes"] = rows["l2_read_bytes"].astype("Float64") + rows["l2_write_bytes"].astype("Float64")
    rows["roof_pipe"] = dominant_pipe(rows)
    return add_rates(rows)


def add_rates(rows: pd.DataFrame) -> pd.DataFrame:
    """``arithmetic_intensity``, ``achieved_flops_per_s`` and ``achieved_bytes_per_s`` from ``flops``,
    ``dram_bytes`` and ``duration_ns``: the same formulas for kernel rows (ncu's counts) and op rows
    (analytic counts per call), in place."""
    seconds = rows["duration_ns"].astype("Float64") * 1e-9
    flops, nbytes = rows["flops"].astype("Float64"), rows["dram_bytes"].astype("Float64")
    rows["arithmetic_intensity"] = flops / nbytes.where(nbytes > 0)
    rows["achieved_flops_per_s"] = flops / seconds
    rows["achieved_bytes_per_s"] = nbytes / seconds
    return rows
