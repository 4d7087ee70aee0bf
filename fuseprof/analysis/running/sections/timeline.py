"""The GPU timeline in integer ns: busy as the union of intervals, overall and per stream."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.integrity import DEPENDS
from fuseprof.analysis.facts.timeline import gpu_timeline
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    return {"timeline": gpu_timeline(context.events)}


SECTION = Section(
    name="timeline", order=30, build=_build,
    description="Span, busy (the union of intervals: overlapping kernels count once), idle, computation, memcpy, "
                "memset and communication time, overall and per stream, exact to the ns: fuseprof/analysis/facts/timeline.py.",
    tables=(Table("timeline", "GPU timeline (union of intervals: overlapping kernels count once)", (
        Column("stream", "stream"), Column("span µs", "span_ns", "us"), Column("busy µs", "busy_ns", "us"),
        Column("idle µs", "idle_ns", "us"), Column("busy %", "busy_pct", "round:2"),
        Column("compute µs", "computation_ns", "us"), Column("memcpy µs", "memcpy_ns", "us"),
        Column("memset µs", "memset_ns", "us"), Column("comm µs", "communication_ns", "us"),
        Column("exposed comm µs", "exposed_communication_ns", "us"), Column("events", "events", "int")),
        figure="timeline", rests_on=DEPENDS["timeline"]),))
