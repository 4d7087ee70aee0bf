"""Across ranks: the job's critical path through the collectives, and the rank and work that set each step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd

from fuseprof.analysis.paths.job_path import job_path_line
from fuseprof.analysis.running.sections import Column, Section, Table

if TYPE_CHECKING:
    from fuseprof.analysis.facts.result import TraceAnalysis


def _build(results: list[TraceAnalysis]) -> Mapping[str, pd.DataFrame]:
    from fuseprof.analysis.paths.job_path import job_path

    return {"job_path": job_path(results)}


SECTION = Section(
    name="job_path", order=210, scope="ranks", build_ranks=_build,
    description="The job's critical path per step across ranks: the critical path of the rank that ended last, "
                "followed at every steady-state collective into the rank that arrived last; the rank holding the "
                "most of it set the step, with its largest work there. Formulas: fuseprof/analysis/paths/job_path.py.",
    tables=(Table("job_path", "The job's path across ranks: which rank, and what on it, set each step "
                              "(fuseprof/analysis/paths/job_path.py)", (
        Column("step", "step"), Column("path µs", "path_ns", "us"), Column("set by rank", "rank", "int"),
        Column("% of path", "share_pct", "round:1"), Column("communication µs", "communication_ns", "us"),
        Column("its largest work: op", "top_op", "text:30"), Column("module", "top_module", "text:30"),
        Column("its µs", "top_ns", "us"), Column("what", "top_what", "text:48"),
        Column("ranks on the path", "ranks", "text:40")), hide_empty=True, summary=job_path_line),))
