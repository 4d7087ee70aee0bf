"""GPU time by category (the op registry's: GEMM, attention, normalization, elementwise, …)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.integrity import DEPENDS
from fuseprof.analysis.facts.summaries import category_table
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    return {"categories": category_table(context.events)}


SECTION = Section(
    name="categories", order=50, build=_build,
    description="GPU events and time per category, by the op registry (the launching op first, then the kernel "
                "name): fuseprof/model/registry_data.py.",
    tables=(Table("categories", "Time by category", (
        Column("category", "category"), Column("count", "count", "int"), Column("time µs", "time_ns", "us"),
        Column("share %", "share_pct", "round:2")), figure="categories", rests_on=DEPENDS["categories"]),))
