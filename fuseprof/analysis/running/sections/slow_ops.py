"""Slow ops: op signatures far below their roof that no fusion row holds (a kernel to tune, not to fuse)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.judgements.opportunities import slow_ops
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    built = context.built
    return {"slow_ops": slow_ops(built["op_roofline"], built["fusion"], float(built["timeline"]["busy_ns"].iloc[0]))}


SECTION = Section(
    name="slow_ops", order=100, build=_build, needs=("op_roofline", "fusion", "timeline"),
    description="Op signatures below 30% of their roof holding at least 1% of busy time, in no fusion row: "
                "fuseprof/analysis/judgements/opportunities.py.",
    tables=(Table("slow_ops", "Slow ops: far below their roof, in no fusion row (tune the kernel; "
                              "fuseprof/analysis/judgements/opportunities.py)", (
        Column("op and input shapes", "signature"), Column("calls", "calls", "int"), Column("time µs", "time_ns", "us"),
        Column("% busy", "share_of_busy_pct", "round:2"), Column("% roof", "pct_of_roof", "round:1"),
        Column("bound", "bound")), hide_empty=True),))
