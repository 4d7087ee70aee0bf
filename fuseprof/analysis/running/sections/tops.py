"""The top kernels and the top ops (by the GPU time of their kernels), with the op and module that launched them."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.integrity import DEPENDS
from fuseprof.analysis.facts.summaries import top_kernels, top_ops
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    return {"top_kernels": top_kernels(context.events, context.top), "top_ops": top_ops(context.events, context.top)}


SECTION = Section(
    name="tops", order=60, build=_build,
    description="Kernels and ops (by name and input shapes) by total GPU time, with the op and nn.Module that "
                "launched them most often: fuseprof/analysis/facts/summaries.py.",
    tables=(
        Table("top_kernels", "Top kernels", (
            Column("kernel", "name", "text:72"), Column("category", "category"), Column("count", "count", "int"),
            Column("time µs", "time_ns", "us"), Column("share %", "share_pct", "round:2"),
            Column("op", "op", "text:28"), Column("module", "module", "text:72"))),
        Table("top_ops", "Top ops (by the GPU time of their kernels)", (
            Column("op and input shapes", "signature"), Column("category", "category"), Column("calls", "calls", "int"),
            Column("kernels/call", "kernels_per_call", "round:2"), Column("time µs", "time_ns", "us"),
            Column("share %", "share_pct", "round:2"), Column("module", "module", "text:72")),
            rests_on=DEPENDS["top_ops"]),
    ))
