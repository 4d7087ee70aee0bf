"""Roofline placement of each ncu-measured kernel.

Per kernel (ncu rows only: they carry measured bytes and FLOPs):
    flops                  = flops_fp16 + flops_fp32 + flops_fp64
    dram_bytes             = dram_read_bytes + dram_write_bytes
    arithmetic_intensity   = flops / dram_bytes                      (FLOP/byte)
    achieved_flops_per_s   = flops / (duration_ns · 1e-9)
    achieved_bytes_per_s   = dram_bytes / (duration_ns · 1e-9)
    attainable_flops_per_s = min(peak_flops, arithmetic_intensity · peak_bytes)
    bound                  = "memory" if arithmetic_intensity · peak_bytes < peak_flops else "compute"
    pct_of_roof            = 100 · achieved / attainable (for a kernel with no FLOPs: bytes/s over peak_bytes)
    l2_resident            = achieved_bytes_per_s > peak_bytes: the kernel moved more than DRAM can,
                             so its data came from L2; it is marked, not drawn above the roof.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fuseprof.bundle import find_bundles, read_manifest
from fuseprof.model.devices import DeviceSpec


@dataclass(frozen=True)
class Roof:
    """One device's roofs for the chart: a DRAM slope and one or more flat compute ceilings."""

    label: str
    dram_bytes_per_s: float
    compute: dict[str, float]
    origin: str  # "datasheet", "measured (fuseprof ceilings)" or "ncu peak"

    @property
    def fp32_flops_per_s(self) -> float:
        return self.compute.get("FP32", max(self.compute.values()))


def datasheet_roof(spec: DeviceSpec) -> Roof:
    return Roof(f"{spec.name} (datasheet)", spec.dram_bytes_per_s, spec.compute_roofs(), "datasheet")


def measured_roofs(traces: str | Path) -> dict[str, Roof]:
    """Roofs from ``fuseprof ceilings`` bundles, keyed by device name."""
    roofs: dict[str, Roof] = {}
    for bundle in find_bundles(Path(traces)):
        manifest = read_manifest(bundle)
        if manifest.get("kind") != "ceilings":
            continue
        c, name = manifest["ceilings"], manifest["device"]["name"]
        roofs[name] = Roof(f"{name} (measured)", c["dram_bytes_per_s"],
                           {"FP32": c["fp32_flops_per_s"], "FP16/BF16 tensor": c["bf16_tensor_flops_per_s"]},
                           "measured (fuseprof ceilings)")
    return roofs


def ncu_roof(kernels: pd.DataFrame, device: str) -> Roof | None:
    """The peaks ncu reported for the device (median over its kernels)."""
    rows = kernels[(kernels["source"] == "ncu") & (kernels["device"] == device)]
    rows = rows.dropna(subset=["peak_dram_bytes_per_s", "peak_flops_fp32_per_s"])
    if rows.empty:
        return None
    return Roof(f"{device} (ncu peaks)", float(rows["peak_dram_bytes_per_s"].median()),
                {"FP32": float(rows["peak_flops_fp32_per_s"].median())}, "ncu peak")


def place(kernels: pd.DataFrame, roof: Roof) -> pd.DataFrame:
    """ncu rows with the roofline columns of the module docstring, against ``roof``'s FP32 ceiling."""
    rows = kernels[kernels["source"] == "ncu"].copy()
    seconds = rows["duration_ns"].astype("Float64") * 1e-9
    rows["flops"] = rows["flops_fp16"] + rows["flops_fp32"] + rows["flops_fp64"]
    rows["dram_bytes"] = rows["dram_read_bytes"] + rows["dram_write_bytes"]
    rows["arithmetic_intensity"] = (rows["flops"] / rows["dram_bytes"]).replace([np.inf], pd.NA)
    rows["achieved_flops_per_s"] = rows["flops"] / seconds
    rows["achieved_bytes_per_s"] = rows["dram_bytes"] / seconds
    peak_flops, peak_bytes = roof.fp32_flops_per_s, roof.dram_bytes_per_s
    memory_roof = rows["arithmetic_intensity"] * peak_bytes
    rows["attainable_flops_per_s"] = memory_roof.clip(upper=peak_flops)
    rows["bound"] = np.where(memory_roof < peak_flops, "memory", "compute")
    by_flops = 100 * rows["achieved_flops_per_s"] / rows["attainable_flops_per_s"]
    by_bytes = 100 * rows["achieved_bytes_per_s"] / peak_bytes
    rows["pct_of_roof"] = by_flops.where(rows["flops"] > 0, by_bytes)
    rows["l2_resident"] = rows["achieved_bytes_per_s"] > peak_bytes
    rows["roof"] = roof.label
    return rows


def chain_points(placed: pd.DataFrame) -> pd.DataFrame:
    """One point per variant and shape: the whole chain of its kernels as one (total FLOPs over
    total DRAM bytes, over total time), to set an unfused chain beside the kernel replacing it."""
    keys = ["bundle", "case", "variant", "shape"]
    agg = placed.groupby(keys, dropna=False).agg(flops=("flops", "sum"), dram_bytes=("dram_bytes", "sum"),
                                                 duration_ns=("duration_ns", "sum"), kernels=("kernel", "size"))
    agg = agg.reset_index()
    seconds = agg["duration_ns"].astype("Float64") * 1e-9
    agg["arithmetic_intensity"] = agg["flops"] / agg["dram_bytes"]
    agg["achieved_flops_per_s"] = agg["flops"] / seconds
    agg["achieved_bytes_per_s"] = agg["dram_bytes"] / seconds
    return agg
