"""Device memory from the allocator's records (profile_memory=True): peaks per step and what held them."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.integrity import DEPENDS
from fuseprof.analysis.facts.memory import device_records, holders_at_peak, memory_by_step, memory_timeline
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    records = device_records(context.tables, context.registry, context.iterations)
    steps = memory_by_step(records, context.tables, context.registry, context.iterations)
    return {"memory": steps, "memory_holders": holders_at_peak(records, steps),
            "memory_timeline": memory_timeline(records)}


SECTION = Section(
    name="memory", order=45, build=_build,
    description="Allocated and reserved device memory per step from the allocator's own records in the trace "
                "(profile_memory=True), the live allocations at each device's peak charged to the op and module "
                "that allocated them, activations (allocated in forward, freed in backward) and the allocator's "
                "calls: fuseprof/analysis/facts/memory.py. Shown for traces with memory records.",
    tables=(
        Table("memory", "Device memory per step (the allocator's records; fuseprof/analysis/facts/memory.py)", (
            Column("device", "device"), Column("step", "step"),
            Column("peak allocated MB", "peak_allocated_bytes", "fixed:1e6:1"),
            Column("peak reserved MB", "peak_reserved_bytes", "fixed:1e6:1"),
            Column("allocs", "allocations", "int"), Column("frees", "frees", "int"),
            Column("activations MB", "activations_bytes", "fixed:1e6:1"),
            Column("allocator calls", "allocator_calls", "int"), Column("allocator µs", "allocator_ns", "us")),
            figure="memory", hide_empty=True, rests_on=DEPENDS["memory"]),
        Table("memory_holders", "What held the memory at the peak (live allocations by op and module)", (
            Column("device", "device"), Column("step", "step"), Column("op", "op", "text:50"),
            Column("module", "module", "text:50"), Column("phase", "phase"), Column("allocs", "allocations", "int"),
            Column("MB", "bytes", "fixed:1e6:1"), Column("% of peak", "share_of_peak_pct", "round:1"),
            Column("freed in", "freed_in")), hide_empty=True, rests_on=DEPENDS["memory"]),
        Table("memory_timeline", "Allocated and reserved over time", shown=False),
    ))
