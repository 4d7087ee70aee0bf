"""Launch statistics per launch API: calls, kernels per call, host time and launch-to-start latency."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.summaries import launch_stats
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    return {"launches": launch_stats(context.events)}


SECTION = Section(
    name="launches", order=70, build=_build,
    description="Per launch API: calls (a graph launch is one call however many kernels it replays), kernels per "
                "call, host time per call and launch-to-start latency, median and 90th percentile: "
                "fuseprof/analysis/facts/summaries.py.",
    tables=(Table("launches", "Launches (a graph launch is one call; host time per call; launch-to-start = first GPU "
                              "start − launch call start)", (
        Column("api", "launch_api"), Column("launches", "launches", "int"),
        Column("kernels/launch", "kernels_per_launch", "round:1"), Column("host median µs", "host_median_ns", "us"),
        Column("host p90 µs", "host_p90_ns", "us"), Column("to start median µs", "latency_median_ns", "us"),
        Column("to start p90 µs", "latency_p90_ns", "us"))),))
