"""Fusion opportunities of every class, ranked together by predicted saving."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.integrity import DEPENDS
from fuseprof.analysis.judgements.opportunities import opportunities
from fuseprof.analysis.paths.savings import step_savings
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    fusion = opportunities(context.events, context.built["timeline"], context.copy, context.roof,
                           context.registry, context.graph, context.units(), context.tables)
    # the one saving of a row (fuseprof.analysis.paths.savings): the step time it removes, the host's without the profiler
    return {"fusion": fusion.assign(step_saving_ns=step_savings(context.step_graphs(), fusion,
                                                               context.built["unprofiled"], context.tables,
                                                               context.registry))}


def _title(fusion: pd.DataFrame, _: object = None) -> str:
    if fusion.empty:
        return "Fusion opportunities"
    first = fusion.iloc[0]
    return (f"Fusion opportunities, every class ranked by predicted saving (memory-bound chains: fused bytes at "
            f"{first['copy_bytes_per_s'] / 1e12:.2f} TB/s + {first['fixed_ns'] / 1e3:.2f} µs, {first['rate_source']}; "
            "attention and GEMMs at the roof; unknown: an op of the chain has no cost model or no recorded shapes; "
            "fuseprof/analysis/judgements/opportunities.py)")


SECTION = Section(
    name="fusion", order=90, build=_build, needs=("timeline", "unprofiled"),
    description="Chains of memory-bound kernels between GEMM/attention/communication kernels (RoPE + KV-cache "
                "writes and sampling chains named), eager attention → SDPA, horizontal GEMMs and GEMM epilogues, each "
                "group with the bytes a fused kernel would move, its predicted time, the GPU saving as a share of busy "
                "time and span, the step saving (the step time it removes: the steps' period in their loop with the chains "
                "fused, the host's time without the profiler, fuseprof/analysis/paths/loop_period.py, "
                "fuseprof/analysis/facts/unprofiled.py and whatif.py: the saving every view quotes), and the kernel that already fuses it. Formulas: fuseprof/analysis/judgements/fusion.py and "
                "fusion_classes.py.",
    tables=(Table("fusion", _title, (
        Column("class", "class"), Column("ops in order", "signature"), Column("×", "count", "int"),
        Column("kernels", "kernels_per_chain", "int"), Column("measured µs", "measured_ns", "us"),
        Column("fused MB", "fused_bytes", "fixed:1e6:3", missing="unknown"),
        Column("predicted µs", "predicted_fused_ns", "us", missing="unknown"),
        Column("step saving µs", "step_saving_ns", "us", missing="unknown"),
        Column("GPU saving µs", "saving_ns", "us", missing="unknown"),
        Column("% busy", "share_of_busy_pct", "fixed:1:2", missing="unknown"),  # of the GPU saving, beside it
        Column("% span", "share_of_span_pct", "fixed:1:2", missing="unknown"),
        Column("fused by", "known_fusion")),
        rests_on=DEPENDS["fusion"], rows="top"),))
