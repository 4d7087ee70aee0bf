"""The integrity check: what the trace lets fuseprof see, before any headline number is believed."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.integrity import integrity, lost_launches
from fuseprof.analysis.sections import Column, Context, Section, Table
from fuseprof.model.devices import device_from_properties


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    tables = context.tables
    named = context.every["device"].map(  # by name, or by the properties that say which GPU it is
        lambda d: tables.device_name(d) is not None or device_from_properties(tables.properties_of(d)) is not None)
    processes = len(set(tables.launches["pid"].dropna()) | set(tables.host_ops["pid"].dropna()))
    return {"integrity": integrity(context.every, context.mask, named, lost_launches(context.tables),
                                   context.window_asked, processes)}


SECTION = Section(
    name="integrity", order=10, build=_build,
    description="How much kernel time has a launching op, graph replays attributed, kernels whose launch is not in "
                "the trace and launches whose kernel is not, events outside the window, kernels overlapping on one "
                "stream, µs-rounded timestamps, missing shapes or modules. A table that rests on a failed check says "
                "so. Checks: fuseprof/analysis/integrity.py.",
    tables=(Table("integrity", "Integrity (fuseprof/analysis/integrity.py)", (
        Column("check", "check"), Column("value", "value", "g4"), Column("ok", "ok", "okfail"),
        Column("detail", "detail"))),))
