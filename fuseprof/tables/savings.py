"""What fusion saved, per case and shape: bytes, launches and time, and how much of the time the
bytes explain.

For each fused variant F against the unfused chain U of the same bundle and shape:
    bytes_saved_dram      = U.dram_bytes − F.dram_bytes            (ncu, one call each)
    launches_saved        = U.kernels_per_call − F.kernels_per_call
    gpu_time_saved_ns     = U.gpu_median_ns − F.gpu_median_ns      (CUDA-graph replay)
    as_called_saved_ns    = U.as_called_median_ns − F.as_called_median_ns
    time_for_bytes_ns     = bytes_saved_dram / dram_bytes_per_s    (the measured copy rate)
    share_explained_by_bytes = time_for_bytes_ns / gpu_time_saved_ns
The rest of the GPU time saved is launch gaps and the chain's slower kernels; the rest of the
as-called time saved is host dispatch.
"""

from __future__ import annotations

import pandas as pd

from fuseprof.tables.summary import sort_by_shape, summarize

KEYS = ["bundle", "case", "shape", "dtype"]


def fusion_savings(kernels: pd.DataFrame, timings: pd.DataFrame, dram_bytes_per_s: float,
                   unfused: str = "eager") -> pd.DataFrame:
    """One row per fused (or compiled, or library) variant against ``unfused``, per bundle and shape."""
    summary = summarize(kernels, timings).dropna(subset=["kernels_per_call", "gpu_median_ns"])
    base = summary[summary["variant"] == unfused].set_index(KEYS)
    others = summary[summary["variant"] != unfused].join(base, on=KEYS, rsuffix="_unfused", how="inner")
    out = others[KEYS + ["variant"]].copy()
    out["nominal_bytes"] = others["nominal_bytes"]
    out["unfused_dram_bytes"] = others["dram_bytes_unfused"]
    out["fused_dram_bytes"] = others["dram_bytes"]
    out["bytes_saved_dram"] = others["dram_bytes_unfused"] - others["dram_bytes"]
    out["launches_saved"] = others["kernels_per_call_unfused"] - others["kernels_per_call"]
    out["gpu_time_saved_ns"] = others["gpu_median_ns_unfused"] - others["gpu_median_ns"]
    out["as_called_saved_ns"] = others["as_called_median_ns_unfused"] - others["as_called_median_ns"]
    out["speedup_gpu"] = others["gpu_median_ns_unfused"] / others["gpu_median_ns"]
    out["speedup_as_called"] = others["as_called_median_ns_unfused"] / others["as_called_median_ns"]
    out["time_for_bytes_ns"] = out["bytes_saved_dram"] / dram_bytes_per_s * 1e9
    out["share_explained_by_bytes"] = out["time_for_bytes_ns"] / out["gpu_time_saved_ns"]
    return sort_by_shape(out, ["case", "bundle", "shape", "variant"])


def launch_overhead(timings: pd.DataFrame) -> pd.DataFrame:
    """As-called against GPU time per variant and shape: what CUDA-graph replay removes.

    graph_removes_ns = as_called_median_ns − gpu_median_ns (host dispatch and launch latency the
    GPU waited for); dispatch_share = that over as_called_median_ns.
    """
    rows = timings[~timings["variant"].str.startswith("copy")].copy()
    rows["m"] = rows["shape"].str.split("x").str[0].astype(int)
    rows["graph_removes_ns"] = rows["as_called_median_ns"] - rows["gpu_median_ns"]
    rows["dispatch_share"] = rows["graph_removes_ns"] / rows["as_called_median_ns"]
    columns = ["case", "shape", "m", "variant", "gpu_median_ns", "as_called_median_ns", "host_dispatch_ns",
               "graph_removes_ns", "dispatch_share"]
    return sort_by_shape(rows[columns], ["case", "variant", "shape"])


def register_sweep(kernels: pd.DataFrame, timings: pd.DataFrame) -> pd.DataFrame:
    """One row per sweep point: registers, spills, occupancy (ncu) beside GPU time (timings)."""
    ncu = kernels[kernels["source"] == "ncu"].set_index(["bundle", "variant", "shape"])
    cols = ["registers_per_thread", "spill_load_bytes", "spill_store_bytes", "theoretical_occupancy_pct",
            "achieved_occupancy_pct", "occupancy_limiter", "duration_ns", "dram_read_bytes", "threads_per_block"]
    table = timings.set_index(["bundle", "variant", "shape"])[["gpu_median_ns", "nominal_bytes"]].join(ncu[cols])
    table["effective_bandwidth_bytes_per_s"] = table["nominal_bytes"] / (table["gpu_median_ns"] * 1e-9)
    return table.reset_index().sort_values("registers_per_thread").reset_index(drop=True)
