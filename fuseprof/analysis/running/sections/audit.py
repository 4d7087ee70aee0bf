"""The catalogue audit: for each fusion of the registry's catalogue, is it done in this trace?"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.integrity import DEPENDS
from fuseprof.analysis.judgements.audit import audit
from fuseprof.analysis.judgements.optimizer import CLASS as OPTIMIZER
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    fusion = context.built["fusion"]
    steps = fusion[fusion["class"] == OPTIMIZER]["saving_ns"].dropna() if "class" in fusion else pd.Series([])
    known = {"optimizer": float(steps.sum())} if len(steps) else {}
    return {"audit": audit(context.events, context.graph, context.roof, context.copy, context.registry,
                           context.units(), known, fusion)}


SECTION = Section(
    name="audit", order=110, build=_build, needs=("fusion",),
    description="For each fusion of the catalogue (add+RMSNorm, SiLU·mul, QKV, gate/up, GEMM epilogue, RoPE + "
                "KV-cache write, flash attention, dequant + GEMM, sampling, optimizer step, and a user's own), found "
                "by its dataflow pattern in the op graph: fused (the unit that does it), not fused (the time now and "
                "its saving: the step time the opportunity rows holding its instances remove without the profiler, their GPU time beside, fuseprof/analysis/paths/savings.py), partly fused, or not present, with the evidence: fuseprof/analysis/judgements/audit.py, "
                "fuseprof/analysis/judgements/patterns.py.",
    tables=(Table("audit", "Fusion audit: is each fusion of the catalogue done here? (fuseprof/analysis/judgements/audit.py)", (
        Column("fusion", "fusion"), Column("verdict", "verdict"), Column("time µs", "time_ns", "us"),
        Column("saving µs", "saving_ns", "us", missing="unknown", only_if=("verdict", "not fused|partly")),
        Column("GPU time µs", "gpu_saving_ns", "us", missing="unknown", only_if=("verdict", "not fused|partly")),
        Column("evidence", "evidence", "text:160")), rests_on=DEPENDS["fusion"]),))
