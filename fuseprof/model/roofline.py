"""Roofline placement of each ncu-measured kernel, against the roof of its own pipe and precision.

A kernel is measured against the ceiling of the pipe that did most of its FLOPs (``roof_pipe``:
BF16 tensor for a bf16 GEMM, FP32 SIMT for an elementwise kernel computing in float), and the DRAM
slope, which is the same for all. By default each kernel is judged against the roof of the GPU
that ran it (measured by ``fuseprof ceilings`` when a ceilings bundle for that GPU exists, else its
datasheet); the H100 SXM roof is drawn beside it as the reference. A GPU the table does not know gets no
judgement (``pct_of_roof``, ``bound``, ``attainable_flops_per_s`` empty, the roof's label says "unknown GPU"),
never another GPU's roof. Whether a kernel is L2-resident
is decided against its capture device's DRAM roof only, whichever roof it is drawn against.
The formulas are listed in ``fuseprof.model.derived.DERIVED_COLUMNS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from fuseprof.bundle.files import find_bundles, read_manifest
from fuseprof.model.derived import derive
from fuseprof.model.devices import DEVICES, PIPES, REFERENCE_DEVICE, DeviceSpec, identify, spec_for_device_name

# rows that carry FLOPs and DRAM bytes: ncu's kernels, and the modelled calls of a capture whose counters
# were denied (fuseprof/capture/modelled.py)
PLACED_SOURCES = ("ncu", "model")


@dataclass(frozen=True)
class Roof:
    """One device's roofs: a DRAM slope and a flat ceiling per pipe (keys of ``PIPES``)."""

    label: str
    dram_bytes_per_s: float
    compute: dict[str, float]
    origin: str  # "datasheet", "measured (fuseprof ceilings)", "ncu peak" or "unknown GPU"
    judged: bool = True  # False: an unknown GPU's stand-in, whose rates only price predictions, never judge a row

    def peak(self, pipe: str) -> float:
        """Ceiling of ``pipe``; NaN where the source gives none (e.g. FP8 on an A100)."""
        return self.compute.get(pipe, float("nan"))


def datasheet_roof(spec: DeviceSpec) -> Roof:
    return Roof(f"{spec.name} (datasheet)", spec.dram_bytes_per_s, spec.compute_roofs(), "datasheet")


def measured_roofs(traces: str | Path) -> dict[str, Roof]:
    """Roofs from ``fuseprof ceilings`` bundles, keyed by device name: the measured copy rate,
    FP32 FMA rate and BF16 matmul rate, over the datasheet's other pipes where the device is known."""
    roofs: dict[str, Roof] = {}
    for bundle in find_bundles(Path(traces)):
        manifest = read_manifest(bundle)
        if manifest.get("kind") != "ceilings":
            continue
        c, name = manifest["ceilings"], manifest["device"]["name"]
        spec = spec_for_device_name(name)
        compute = {**(spec.compute_roofs() if spec else {}), "fp32": c["fp32_flops_per_s"],
                   "tensor_bf16": c["bf16_tensor_flops_per_s"]}
        roofs[name] = Roof(f"{name} (measured)", c["dram_bytes_per_s"], compute, "measured (fuseprof ceilings)")
    return roofs


def ncu_roof(kernels: pd.DataFrame, device: str) -> Roof | None:
    """The DRAM and FP32 peaks ncu reported for the device (median over its kernels), over the
    datasheet's other pipes where the device is known."""
    rows = kernels[(kernels["source"] == "ncu") & (kernels["device"] == device)]
    rows = rows.dropna(subset=["peak_dram_bytes_per_s", "peak_flops_fp32_per_s"])
    if rows.empty:
        return None
    spec = spec_for_device_name(device)
    compute = {**(spec.compute_roofs() if spec else {}), "fp32": float(rows["peak_flops_fp32_per_s"].median())}
    return Roof(f"{device} (ncu peaks)", float(rows["peak_dram_bytes_per_s"].median()), compute, "ncu peak")


def capture_roof(device: str | None, measured: dict[str, Roof] | None = None,
                 properties: Mapping[str, int] | None = None) -> Roof:
    """The roof a kernel captured on ``device`` (with its ``deviceProperties``, which decide before its name:
    ``devices.identify``) is judged against: measured, else datasheet. An unknown GPU gets none: a stand-in
    with the reference device's rates for predictions (fused times, the copy model), ``judged`` False, labelled
    "unknown GPU '...': pass --device NAME"."""
    if device and measured and device in measured:
        return measured[device]
    found = identify(device, properties)
    if found.spec is not None:
        return datasheet_roof(found.spec)
    reference = datasheet_roof(DEVICES[REFERENCE_DEVICE])
    return replace(reference, label=f"{found.why} (predictions priced at the {REFERENCE_DEVICE} reference)",
                   origin="unknown GPU", judged=False)


def dram_limit(device: str | None, measured: dict[str, Roof] | None = None) -> float:
    """The DRAM bytes/s above which a kernel's traffic cannot have come from DRAM: the larger of the
    device's datasheet rate and its measured copy rate (NaN for an unknown GPU: no row is L2-resident by
    another's rate). The copy (half reads, half writes) is not the ceiling of read-heavy traffic: silu_mul,
    two reads per write, moved 4.30 TB/s on an H200 whose copy measured 4.25."""
    spec = spec_for_device_name(device)
    own = capture_roof(device, measured)
    if not own.judged:
        return float("nan")
    return max(own.dram_bytes_per_s, datasheet_roof(spec).dram_bytes_per_s) if spec is not None else own.dram_bytes_per_s


def judge(rows: pd.DataFrame, roof: Roof) -> pd.DataFrame:
    """The roofline judgement, the one place it is made for every row type (ncu kernels, ops from
    their shapes): from ``roof_pipe``, ``flops``, ``arithmetic_intensity`` and the achieved rates
    (``fuseprof.model.derived.add_rates``) it adds ``peak_flops_per_s``, ``attainable_flops_per_s``,
    ``bound``, ``pct_of_roof``, ``l2_resident`` and ``roof`` (formulas in ``DERIVED_COLUMNS``), in place.

    A row whose bytes moved faster than the roof's DRAM rate had some of them served by the L2 (its bytes
    are what it must move, not what DRAM moved): it is at the roof, so its ``pct_of_roof`` is 100, never
    more, and ``l2_resident`` says why."""
    peak_bytes = roof.dram_bytes_per_s
    pipes = rows["roof_pipe"].astype(object)
    rows["peak_flops_per_s"] = pd.array([roof.peak(p) if p in PIPES else np.nan for p in pipes], dtype="Float64")
    memory_roof = rows["arithmetic_intensity"].astype("Float64") * peak_bytes
    rows["attainable_flops_per_s"] = np.minimum(memory_roof, rows["peak_flops_per_s"])
    has_flops = rows["flops"].astype("Float64").fillna(0) > 0
    compute_bound = has_flops & (memory_roof >= rows["peak_flops_per_s"]).fillna(False)
    rows["bound"] = pd.array(np.where(compute_bound, "compute", "memory"), dtype="string")
    by_flops = 100 * rows["achieved_flops_per_s"] / rows["attainable_flops_per_s"]
    by_bytes = 100 * rows["achieved_bytes_per_s"] / peak_bytes
    pct = by_flops.where(has_flops & rows["peak_flops_per_s"].notna(), by_bytes)
    above_dram = (rows["achieved_bytes_per_s"].astype("Float64") > peak_bytes).fillna(False)
    rows["pct_of_roof"] = pct.where(~above_dram, np.minimum(pct, 100.0))
    rows["l2_resident"] = above_dram.astype("boolean")
    rows["roof"] = roof.label
    if not roof.judged:
        for column in ("peak_flops_per_s", "attainable_flops_per_s", "pct_of_roof"):
            rows[column] = pd.array([pd.NA] * len(rows), dtype="Float64")
        rows["bound"] = pd.array([pd.NA] * len(rows), dtype="string")
        rows["l2_resident"] = pd.array([pd.NA] * len(rows), dtype="boolean")
    return rows


def _place_against(rows: pd.DataFrame, roof: Roof, capture_dram_bytes_per_s: float) -> pd.DataFrame:
    judge(rows, roof)
    if roof.judged and capture_dram_bytes_per_s == capture_dram_bytes_per_s:  # not NaN: the capture GPU is known
        rows["l2_resident"] = (rows["achieved_bytes_per_s"] > capture_dram_bytes_per_s).astype("boolean")
    return rows


def place(kernels: pd.DataFrame, roof: Roof | None = None, measured: dict[str, Roof] | None = None) -> pd.DataFrame:
    """ncu rows (and modelled rows, ``source = "model"``) with every column of ``DERIVED_COLUMNS``.

    ``roof=None`` judges each kernel against its capture device's roof (``capture_roof``, with the
    ``measured`` roofs preferred); a given ``roof`` judges all of them against that one. Either way
    ``l2_resident`` compares with the capture device's own DRAM limit (``dram_limit``).
    """
    rows = derive(kernels[kernels["source"].isin(PLACED_SOURCES)])
    if rows.empty:
        for column in ("peak_flops_per_s", "attainable_flops_per_s", "bound", "pct_of_roof", "l2_resident", "roof"):
            rows[column] = pd.Series(dtype="object")
        return rows
    parts = []
    for device, part in rows.groupby(rows["device"].astype(object).fillna(""), sort=False):
        own = capture_roof(str(device) or None, measured)
        parts.append(_place_against(part.copy(), roof or own, dram_limit(str(device) or None, measured)))
    return pd.concat(parts).loc[rows.index]


def chain_points(placed: pd.DataFrame, measured: dict[str, Roof] | None = None) -> pd.DataFrame:
    """One point per variant and shape: the whole chain of its kernels as one (total FLOPs over
    total DRAM bytes, over total time), to set an unfused chain beside the kernel replacing it.
    Derived like a kernel; L2-resident against its capture device's DRAM rate, like a kernel."""
    keys = ["bundle", "case", "variant", "shape"]
    summed = ["dram_read_bytes", "dram_write_bytes", "l2_read_bytes", "l2_write_bytes", "duration_ns",
              *(c for c in placed.columns if c.startswith("flops_"))]
    agg = placed.groupby(keys, dropna=False).agg(**{c: (c, "sum") for c in summed}, kernels=("kernel", "size"),
                                                 device=("device", "first"))
    agg = derive(agg.reset_index())
    capture_rate = agg["device"].astype(object).map(lambda d: dram_limit(d, measured))
    agg["l2_resident"] = (agg["achieved_bytes_per_s"] > capture_rate.astype(float)).astype("boolean")
    return agg
