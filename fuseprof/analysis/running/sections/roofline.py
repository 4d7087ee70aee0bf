"""The per-op roofline from recorded shapes: analytic FLOPs and bytes per call against the trace's own GPU."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.integrity import DEPENDS
from fuseprof.analysis.facts.summaries import op_roofline
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    return {"op_roofline": op_roofline(context.events, context.roof, context.registry)}


def _title(roofline: pd.DataFrame, result: object) -> str:
    roof = getattr(getattr(result, "roof", None), "label", None)
    return f"Per-op roofline from recorded shapes{f', against {roof}' if roof else ''}"


SECTION = Section(
    name="roofline", order=80, build=_build,
    description="Per op signature with a cost model: analytic FLOPs and DRAM bytes per call from the recorded "
                "shapes (every input read once, every output written once), the measured GPU time per call, and "
                "the roofline judgement against the trace's GPU (or --device, --ceilings); ncu's measured FLOPs and "
                "bytes beside them where a capture has them. Models: fuseprof/model/op_models.py.",
    tables=(Table("op_roofline", _title, (
        Column("op and input shapes", "signature"), Column("pipe", "roof_pipe"), Column("calls", "calls", "int"),
        Column("GFLOP/call", "flops", "scale:1e9:4"), Column("MB/call", "dram_bytes", "scale:1e6:3"),
        Column("µs/call", "duration_ns", "us"), Column("TFLOP/s", "achieved_flops_per_s", "scale:1e12:2"),
        Column("TB/s", "achieved_bytes_per_s", "scale:1e12:3"), Column("% roof", "pct_of_roof", "round:1"),
        Column("bound", "bound"), Column("ncu GFLOP", "ncu_flops", "scale:1e9:4", optional=True),
        Column("ncu MB", "ncu_dram_bytes", "scale:1e6:3", optional=True)),
        figure="roofline", rests_on=DEPENDS["op_roofline"], rows="top"),))
