"""The integrity check: what the trace lets fuseprof see, before any headline number is believed."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts import torch_rules
from fuseprof.analysis.facts.completeness import classify, profiler_findings, step_findings, timestamp_findings
from fuseprof.analysis.facts.integrity import integrity, launch_calls, lost_launches
from fuseprof.analysis.running.sections import Column, Context, Section, Table
from fuseprof.model.devices import device_from_properties
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_notes import read_trace_notes


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    tables = context.tables
    known: dict[object, bool] = {}  # per device, once: the events name a few devices hundreds of times

    def named_device(d: object) -> bool:  # by name, or by the properties that say which GPU it is
        if d not in known:
            known[d] = tables.device_name(d) is not None or device_from_properties(tables.properties_of(d)) is not None
        return known[d]

    named = context.every["device"].map(named_device)
    processes = len(set(tables.launches["pid"].dropna()) | set(tables.host_ops["pid"].dropna()))
    calls = launch_calls(tables)  # the integrity rows, the step findings and the dropped records read them: once
    rows = integrity(context.every, context.mask, named, lost_launches(calls), context.window_asked,
                     processes, _host_span(tables), tables.memory)
    notes = tables.notes if tables.notes is not None else read_trace_notes(tables.path)
    found = [*timestamp_findings(context.every), *profiler_findings(notes, context.every),
             *step_findings(calls, context.every, context.iterations),
             *torch_rules.findings(tables, context.every, notes)]
    rows = pd.concat([rows, pd.DataFrame([f._asdict() for f in found])], ignore_index=True)
    return {"integrity": classify(rows, context.every, tables, calls)}


def _host_span(tables: TraceTables) -> tuple[int, int] | None:
    """The host's recording: its first timed event's start and its last one's end (ops, launch calls, ranges)."""
    frames = [f for f in (tables.ops, tables.launches, tables.annotations, tables.host_ops) if len(f)]
    if not frames:
        return None
    starts = [int(f["start_ns"].min()) for f in frames]
    ends = [int((f["start_ns"] + f["dur_ns"]).max()) for f in frames]
    return min(starts), max(ends)


SECTION = Section(
    name="integrity", order=10, build=_build,
    description="How much kernel time has a launching op, graph replays attributed, kernels whose launch is not in "
                "the trace and launches whose kernel is not, events outside the window, kernels overlapping on one "
                "stream, µs-rounded timestamps, missing shapes or modules; the completeness report: zero or repeated "
                "kernel timestamps, records the profiler said it lost, steps without GPU work, a trace ending "
                "mid-step and torch's own trace-validator rules, each failed check a kind (damage, setting, edge, "
                "window) with the share of GPU time it puts in doubt. A table that rests on a failed check says "
                "so. Checks: fuseprof/analysis/facts/integrity.py, completeness.py, torch_rules.py.",
    tables=(Table("integrity", "Integrity (fuseprof/analysis/facts/integrity.py)", (
        Column("check", "check"), Column("value", "value", "g4"), Column("ok", "ok", "okfail"),
        Column("kind", "kind"), Column("in doubt %", "doubt_pct", "g4"), Column("detail", "detail"))),))
