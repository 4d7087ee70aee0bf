"""Device memory from the trace itself: the allocator's records (``profile_memory=True``: the decoder's
``memory`` table, one instant per allocation or free with its address, signed bytes and the totals allocated
and reserved after it) read as a timeline, peaks per step, and what held the memory at each peak.

    peak_allocated_bytes   per device and profiler step: the largest ``Total Allocated`` among the step's records
                           (by time: the iteration — ``ProfilerStep#N`` … — around each record, on any thread)
    peak_reserved_bytes    the same of ``Total Reserved`` (the caching allocator's segments)
    live at the peak       the allocations made before the peak's record, on its device, whose free (the next
                           record of the same address, with the negative of its bytes) comes after it or never
    holder                 an allocation is charged to the CPU op it was made for — the op around the allocating op
                           (``aten::empty_strided``) on its thread, the decoder's ``caller`` — and to the module of
                           its phase (``fuseprof.analysis.facts.phases``): the ``nn.Module`` around it, or in backward the
                           module of the forward op the backward node differentiates, in the optimizer its range
                           (``Optimizer.step#AdamW.step``); what the peak holds that was
                           allocated before the trace began (weights, optimizer state) is one row of its own
    activations_bytes      allocated in the forward phase and freed in the backward phase (what backward kept alive)
    allocator calls        the runtime's own allocation calls (the registry's ``allocator`` host cause: cudaMalloc,
                           hipFree, …): their count and host time per step

Device types are c10::DeviceType's numbers (c10/core/DeviceType.h): 1 CUDA, 6 HIP; the CPU's (0) are left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.iterations import Iterations, step_at
from fuseprof.analysis.facts.phases import point_phases
from fuseprof.analysis.facts.steps import OUTSIDE
from fuseprof.model.registry import Registry
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import enclosing, rows_named

GPU_DEVICE_TYPES = {1: "cuda", 6: "hip"}
TOP_HOLDERS = 10
_STEPS = ["device", "step", "peak_allocated_bytes", "peak_reserved_bytes", "peak_start_ns", "allocations", "frees",
          "allocated_bytes", "activations_bytes", "allocator_calls", "allocator_ns"]
_HOLDERS = ["device", "step", "op", "module", "phase", "allocations", "bytes", "share_of_peak_pct", "freed_in"]


_NEEDED = ["bytes", "total_allocated", "total_reserved", "device_id"]


def device_records(tables: TraceTables, registry: Registry, iterations: Iterations) -> pd.DataFrame:
    """The GPU devices' records in time order, with ``device`` ('cuda:0'), ``step``, ``phase``, ``module`` (the
    holder's, as the module docstring says) and ``freed_ns``/``freed_phase`` of each allocation."""
    memory = tables.memory
    # a record without its size, the allocator's totals or its device says nothing of memory (a trace's
    # unreadable value is counted when it is decoded)
    records = memory[memory["device_type"].isin(list(GPU_DEVICE_TYPES))].dropna(subset=_NEEDED)
    if records.empty:
        return records
    records["device"] = records["device_type"].map(GPU_DEVICE_TYPES) + ":" + records["device_id"].astype(str)
    records = records.sort_values("start_ns", kind="stable").reset_index(drop=True)
    records["step"] = step_at(iterations, records["start_ns"])
    points = records[["start_ns", "tid"]].assign(tid=records["tid"].astype(str))
    phases = point_phases(points, tables, registry)
    modules = tables.modules.assign(name=tables.modules["name"].str.removeprefix("nn.Module: "))
    own = enclosing(modules, points, " / ")
    records["phase"] = phases["phase"].to_numpy()
    records["module"] = own.fillna(phases["forward_module"]).fillna(phases["phase_range"]).to_numpy()
    nxt = records.groupby(["device", "addr"], sort=False).shift(-1)  # the same address's next record: its free
    is_free = (nxt["bytes"] == -records["bytes"]) & (records["bytes"] > 0)
    records["freed_ns"] = nxt["start_ns"].where(is_free.fillna(False)).astype("Int64")
    records["freed_phase"] = nxt["phase"].where(is_free.fillna(False))
    return records


def impossible_records(memory: pd.DataFrame) -> tuple[int, str]:
    """How many of a trace's GPU allocator records (the decoder's ``memory`` table) no allocator writes, and the first
    one's fault: a negative total, more allocated than reserved (the caching allocator allocates inside its
    reserved segments), a ``Total Allocated`` that is not the one before it plus this record's ``Bytes`` (each
    record is one allocation or free, its totals taken after it: true of every record in the 14 committed and
    shared traces that hold them, 54,000 records), or a free of an address whose last record was a free. A free
    of an address never allocated in the trace is not one: it was allocated before the profiler started."""
    if memory.empty:  # no allocator records (no profile_memory): nothing to filter
        return 0, ""
    records = memory[memory["device_type"].isin(list(GPU_DEVICE_TYPES))].dropna(subset=_NEEDED)
    if records.empty:
        return 0, ""
    records = records.sort_values("start_ns", kind="stable")
    total, reserved, size = (records[c].astype("int64") for c in ("total_allocated", "total_reserved", "bytes"))
    by_device = records["device_id"]
    previous_total = total.groupby(by_device, sort=False).shift(1)
    previous_size = size.groupby([by_device, records["addr"]], sort=False).shift(1)
    faults = {
        "a negative total": (total < 0) | (reserved < 0),
        "more allocated than reserved": total > reserved,
        "a Total Allocated that is not the previous one plus its Bytes":
            previous_total.notna() & (previous_total + size != total),
        "a free of an address already freed": (size < 0) & (previous_size < 0),
    }
    bad = pd.concat(faults, axis=1).fillna(False).astype(bool)
    rows = bad.any(axis=1)
    if not rows.any():
        return 0, ""
    first = bad[rows].iloc[0]
    return int(rows.sum()), f"{next(k for k, v in first.items() if v)} (at ts {records.loc[first.name, 'start_ns'] / 1e3:,.3f} µs)"


def _allocator_calls(tables: TraceTables, registry: Registry, iterations: Iterations) -> pd.DataFrame:
    calls = rows_named(tables.launches, *(c.calls for c in registry.host_causes if c.cause == "allocator"))
    return calls.assign(step=step_at(iterations, calls["start_ns"]))


def memory_by_step(records: pd.DataFrame, tables: TraceTables, registry: Registry, iterations: Iterations
                   ) -> pd.DataFrame:
    """Per device and step (the whole trace where it has none): the peaks and what made them."""
    if records.empty:
        return pd.DataFrame(columns=_STEPS)
    calls = _allocator_calls(tables, registry, iterations)
    step = records["step"].astype(object).where(records["step"].notna(), OUTSIDE)
    if records["step"].isna().all():
        step = pd.Series("all", index=records.index)
    rows = []
    for (device, name), part in records.groupby([records["device"], step], sort=False):
        peak = part.loc[part["total_allocated"].astype("int64").idxmax()]
        allocated = part[part["bytes"] > 0]
        activations = allocated[(allocated["phase"] == "forward") & (allocated["freed_phase"] == "backward")]
        mine = calls[calls["step"].astype(object) == name] if name != "all" else calls
        rows.append({"device": device, "step": name, "peak_allocated_bytes": int(peak["total_allocated"]),
                     "peak_reserved_bytes": int(part["total_reserved"].max()), "peak_start_ns": int(peak["start_ns"]),
                     "allocations": len(allocated), "frees": int((part["bytes"] < 0).sum()),
                     "allocated_bytes": int(allocated["bytes"].sum()),
                     "activations_bytes": int(activations["bytes"].sum()),
                     "allocator_calls": len(mine), "allocator_ns": int(mine["dur_ns"].sum())})
    return pd.DataFrame(rows, columns=_STEPS)


def holders_at_peak(records: pd.DataFrame, steps: pd.DataFrame, top: int = TOP_HOLDERS) -> pd.DataFrame:
    """At the highest peak of each device: the live allocations grouped by op, module and phase, largest
    first (``top`` rows per device), with the share of the peak they hold and the phase that freed them."""
    if records.empty or steps.empty:
        return pd.DataFrame(columns=_HOLDERS)
    out = []
    for device, part in steps.groupby("device", sort=False):
        peak = part.loc[part["peak_allocated_bytes"].idxmax()]
        mine = records[records["device"] == device]
        at = int(peak["peak_start_ns"])
        live = mine[(mine["bytes"] > 0) & (mine["start_ns"] <= at)
                    & (mine["freed_ns"].isna() | (mine["freed_ns"] > at)).to_numpy(bool)]
        freed = live["freed_phase"].fillna("not freed in the trace")
        grouped = live.assign(freed_in=freed, op=live["caller"].fillna(live["op"]).fillna("(no op)"),
                              module=live["module"].fillna("")).groupby(
            ["op", "module", "phase", "freed_in"], sort=False)["bytes"].agg(["size", "sum"]).reset_index()
        grouped = grouped.rename(columns={"size": "allocations", "sum": "bytes"}).sort_values("bytes", ascending=False)
        before = int(peak["peak_allocated_bytes"]) - int(live["bytes"].sum())
        earlier = pd.DataFrame([{"op": "(allocated before the trace began)", "module": "", "phase": "",
                                 "freed_in": "", "allocations": np.nan, "bytes": before}]) if before > 0 else None
        grouped = pd.concat([grouped, earlier]).sort_values("bytes", ascending=False) if earlier is not None \
            else grouped
        grouped["share_of_peak_pct"] = 100 * grouped["bytes"] / float(peak["peak_allocated_bytes"])
        out.append(grouped.head(top).assign(device=device, step=peak["step"]))
    frame = pd.concat(out, ignore_index=True)
    frame[["module", "phase", "freed_in"]] = frame[["module", "phase", "freed_in"]].replace("", np.nan)
    return frame[_HOLDERS]


def memory_timeline(records: pd.DataFrame, points: int = 4000) -> pd.DataFrame:
    """Allocated and reserved over time per device, at most ``points`` records each (every peak kept): what the
    memory chart draws."""
    if records.empty:
        return pd.DataFrame(columns=["device", "start_ns", "total_allocated", "total_reserved"])
    parts = []
    for _, part in records.groupby("device", sort=False):
        stride = max(1, len(part) // points)
        keep = np.zeros(len(part), bool)
        keep[::stride] = True
        keep[np.argmax(part["total_allocated"].to_numpy(np.int64))] = True
        parts.append(part[keep])
    return pd.concat(parts)[["device", "start_ns", "total_allocated", "total_reserved"]].reset_index(drop=True)
