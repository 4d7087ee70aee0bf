"""Why the GPU was idle: idle time by cause with a verdict per step, and the CPU work in host-bound gaps."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.idle import host_activity, idle_by_step, idle_gaps
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    gaps = idle_gaps(context.events, context.tables, context.registry, context.iterations.ranges)
    return {"idle": idle_by_step(context.events, gaps), "idle_host": host_activity(gaps, context.tables, context.iterations.ranges)}


SECTION = Section(
    name="idle", order=40, build=_build,
    description="Each gap between GPU work split by what the next work waited for (before its launch: the host — "
                "a sync, the DataLoader, the allocator, or anything else: launch; after it: an event wait, or other), "
                "a verdict per step, and the CPU ops that filled the host-bound parts: fuseprof/analysis/facts/idle.py.",
    tables=(
        Table("idle", "Idle time by cause (launch: host-bound, one-time start-up a part of it; sync: the host waited on "
                      "the GPU, by call in the JSON's idle_sync_<call>_ns; event: queued behind an event; a step owns "
                      "the wait before its first GPU work; fuseprof/analysis/facts/idle.py)", (
            Column("step", "step"), Column("span µs", "span_ns", "us"), Column("busy µs", "busy_ns", "us"),
            Column("of it exposed comm µs", "comm_exposed_ns", "us"),
            Column("idle: launch µs", "idle_launch_ns", "us"), Column("of it start-up µs", "idle_startup_ns", "us"),
            Column("idle: sync µs", "idle_sync_ns", "us"),
            Column("idle: data µs", "idle_data_ns", "us"), Column("idle: alloc µs", "idle_alloc_ns", "us"),
            Column("idle: event µs", "idle_event_ns", "us"), Column("idle: other µs", "idle_other_ns", "us"),
            Column("verdict", "verdict"), Column("as traced", "verdict_as_traced"))),
        Table("idle_host", "CPU activity in the host-bound gaps", (
            Column("name", "name", "text:60"), Column("kind", "kind"), Column("overlap µs", "overlap_ns", "us"),
            Column("% of host-bound idle", "share_of_host_idle_pct", "round:1")), hide_empty=True),
    ))
