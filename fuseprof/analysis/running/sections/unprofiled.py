"""Each step without the profiler: the host time torch.profiler added, taken off (fuseprof/analysis/facts/unprofiled.py)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.unprofiled import unprofiled
from fuseprof.analysis.paths.sync_saving import with_sync_saving
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    idle = context.built["idle"]
    estimate = unprofiled(idle, context.tables, context.iterations, context.registry)
    syncing = "idle_sync_ns" in idle and bool((idle["idle_sync_ns"] > 0).any())
    return {"unprofiled": with_sync_saving(estimate, idle, context.step_graphs() if syncing else [])}


def _title(frame: pd.DataFrame, _: object = None) -> str:
    said = f": {frame['source'].iloc[0]}; setting {frame['setting'].iloc[0]}" if len(frame) else ""
    return f"Steps without the profiler (fuseprof/analysis/facts/unprofiled.py{said})"


SECTION = Section(
    name="unprofiled", order=45, build=_build, needs=("idle",),
    description="Per step, the events torch.profiler recorded (ops, launches, graph launches, syncs, ranges, modules, "
                "Python frames), the host time they cost by the calibration table (docs/profiler-cost.md), the launch "
                "idle and the step time once that time is taken off (the GPU's work unchanged), with its range, and "
                "the verdict then beside the verdict as traced: fuseprof/analysis/facts/unprofiled.py.",
    tables=(Table("unprofiled", _title, (
        Column("step", "step"), Column("span µs", "span_ns", "us"), Column("ops", "ops", "int"),
        Column("launches", "launches", "int"), Column("ranges", "ranges", "int"), Column("modules", "modules", "int"),
        Column("frames", "frames", "int"), Column("host removed µs", "host_removed_ns", "us"),
        Column("idle: launch µs", "idle_launch_ns", "us"),
        Column("idle: launch without profiler µs", "idle_launch_unprofiled_ns", "us"),
        Column("step without profiler µs", "step_unprofiled_ns", "us"),
        Column("low µs", "step_unprofiled_low_ns", "us"), Column("high µs", "step_unprofiled_high_ns", "us"),
        Column("verdict", "verdict"), Column("as traced", "verdict_as_traced"))),),
)
