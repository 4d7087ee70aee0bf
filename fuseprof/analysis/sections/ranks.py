"""Across ranks: communication per rank, each collective's skew, and the straggler named with its cause."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd

from fuseprof.analysis.sections import Column, Section, Table

if TYPE_CHECKING:
    from fuseprof.analysis.analyze import TraceAnalysis


def _build(results: list[TraceAnalysis]) -> Mapping[str, pd.DataFrame]:
    from fuseprof.analysis.ranks import across_ranks

    return across_ranks(results)


def straggler_line(culprits: pd.DataFrame) -> str:
    """The straggler in one sentence: the rank, what grew on it, how long the others waited."""
    if culprits.empty:
        return ""
    top = culprits.iloc[0]
    cause = (f"{top['grew_category']} grew by {top['grew_ns'] / 1e3:,.3f} µs" if top["grew_ns"] > 0
             else "no computation grew on it (a host-side or network delay)")
    return (f"Straggler: rank {int(top['last_rank'])}, last to {int(top['collectives'])} collective(s): {cause}; the "
            f"others waited {top['late_ns'] / 1e3:,.3f} µs for it ({top['share_of_late_pct']:.0f}% of all late time)")


def _skew_title(skew: pd.DataFrame, _: object = None) -> str:
    more = " (the 15 of most skew)" if len(skew) > 15 else ""
    return f"Collectives: the last rank to arrive sets the time{more}"


SECTION = Section(
    name="ranks", order=200, scope="ranks", build_ranks=_build,
    description="Several ranks of one run: communication per rank (exposed: not overlapped by computation), each "
                "collective's skew across ranks with every rank's wait, and the stragglers — the rank that came last "
                "and the category of computation that grew on it: fuseprof/analysis/ranks.py.",
    tables=(
        Table("ranks", "Communication per rank (exposed: not overlapped by computation)", (
            Column("rank", "rank", "int"), Column("busy µs", "busy_ns", "us"),
            Column("compute µs", "computation_ns", "us"), Column("comm µs", "communication_ns", "us"),
            Column("exposed comm µs", "exposed_communication_ns", "us"),
            Column("comm % of busy", "communication_share_pct", "round:1"))),
        Table("collectives", _skew_title, (
            Column("#", "seq", "int"), Column("collective", "collective"), Column("MB", "bytes", "scale:1e6:2"),
            Column("skew µs", "skew_ns", "us"), Column("last rank", "last_rank", "int"),
            Column("transfer µs", "transfer_ns", "us")), hide_empty=True),
        Table("late_arrivals", "Late arrivals", shown=False),
        Table("stragglers", "Stragglers: who came last, because what grew on it (vs the other ranks' median since "
                            "the last collective)", (
            Column("last rank", "last_rank", "int"), Column("grew", "grew_category"),
            Column("collectives", "collectives", "int"), Column("others waited µs", "late_ns", "us"),
            Column("grew by µs", "grew_ns", "us"), Column("% of late time", "share_of_late_pct", "round:1")),
            hide_empty=True, summary=straggler_line),
    ))
