"""Across ranks: communication per rank, each collective's skew, and the straggler named with its cause."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd

from fuseprof.analysis.running.sections import Column, Section, Table

if TYPE_CHECKING:
    from fuseprof.analysis.facts.result import TraceAnalysis


def _build(results: list[TraceAnalysis]) -> Mapping[str, pd.DataFrame]:
    from fuseprof.analysis.facts.ranks import across_ranks

    return across_ranks(results)


def straggler_line(culprits: pd.DataFrame) -> str:
    """The straggler in one sentence: the rank, the cause that explains its lateness, how long the others waited."""
    if culprits.empty:
        return ""
    top = culprits.iloc[0]
    explained = top["grew_ns"] if str(top["cause"]).startswith("computation") else top["host_late_ns"]
    cause = (f"{top['cause']} (explains {explained / 1e3:,.3f} µs of it)" if top["cause"] != "unexplained"
             else "unexplained: neither its computation nor its host's launches account for half of its lateness "
                  "(network, clocks)")
    return (f"Straggler: rank {int(top['last_rank'])}, last to {int(top['collectives'])} steady-state collective(s), "
            f"the others waited {top['late_ns'] / 1e3:,.3f} µs for it ({top['share_of_late_pct']:.0f}% of all late "
            f"time): {cause}")


def _numbers(spans: str) -> list[int]:
    """'0, 3, 5–7' → [0, 3, 5, 6, 7] (``ranks._spans`` read back)."""
    out: list[int] = []
    for part in spans.split(", "):
        first, _, last = part.partition("–")
        out += list(range(int(first), int(last or first) + 1))
    return out


def rank_set_line(found: pd.DataFrame) -> str:
    """The rank set in one sentence: how many of how many, where their numbers came from, how collectives
    matched; a partial set says that skew and stragglers are among the given ranks only."""
    from fuseprof.analysis.facts.ranks import apart_sentence

    if found.empty:
        return ""
    row = found.iloc[0]
    world = row["world_size"]
    of = f" of {int(world)}" if world == world and world is not None else ""
    partial = (f"; only these ranks are compared (missing: {row['missing']}), so the last to arrive is the last of "
               "these") if row["missing"] else ""
    unmatched = [f"{int(row[k])} {what}" for k, what in (("not_on_every_rank", "not on every rank"),
                                                         ("refused", "paired by order but not overlapping: "
                                                                     "refused")) if row[k]]
    apart = f"; {apart_sentence(_numbers(row['apart']), int(row['ranks']))}" if row.get("apart") else ""
    worlds = (f"; the traces name world sizes {row['worlds']}: not one job?" if "," in str(row.get("worlds", ""))
              else "; more traces than the world has ranks: more than one job?" if of and row["ranks"] > world else "")
    return (f"Ranks: {int(row['ranks'])}{of} (numbers from {row['ranks_from']}){partial}{apart}{worlds}. Collectives: "
            f"{int(row['matched'])} of {int(row['collectives'])} matched ({int(row['by_seq'])} by Seq, the rest by "
            f"kind, size and end on their communicator){'; ' + ', '.join(unmatched) if unmatched else ''}.")


def _skew_title(skew: pd.DataFrame, _: object = None) -> str:
    more = " (the 15 of most skew)" if len(skew) > 15 else ""
    return f"Collectives: the last rank to arrive sets the time{more}"


SECTION = Section(
    name="ranks", order=200, scope="ranks", build_ranks=_build,
    description="Several ranks of one run: communication per rank (exposed: not overlapped by computation), each "
                "collective's skew across ranks with every rank's wait (a communicator's first collective, where the "
                "window holds the job's start, is the ranks' start-up offset, apart), and the straggler in the steady state — the rank holding most of the "
                "late time, late by more than jitter — with the cause that explains it (computation that grew, its "
                "host's late launches) or unexplained: fuseprof/analysis/facts/ranks.py.",
    tables=(
        Table("rank_set", "The rank set", (
            Column("ranks", "ranks", "int"), Column("world size", "world_size", "int"), Column("missing", "missing"),
            Column("apart in time", "apart", optional=True), Column("ranks from", "ranks_from"), Column("collectives", "collectives", "int"),
            Column("by Seq", "by_seq", "int"), Column("matched", "matched", "int"),
            Column("not on every rank", "not_on_every_rank", "int"), Column("refused", "refused", "int")),
            summary=rank_set_line),
        Table("ranks", "Communication per rank (exposed: not overlapped by computation)", (
            Column("rank", "rank", "int"), Column("busy µs", "busy_ns", "us"),
            Column("compute µs", "computation_ns", "us"), Column("comm µs", "communication_ns", "us"),
            Column("exposed comm µs", "exposed_communication_ns", "us"),
            Column("comm % of busy", "communication_share_pct", "round:1"))),
        Table("collectives", _skew_title, (
            Column("#", "seq", "int"), Column("collective", "collective"), Column("MB", "bytes", "scale:1e6:2"),
            Column("skew µs", "skew_ns", "us"), Column("last rank", "last_rank", "int"),
            Column("transfer µs", "transfer_ns", "us"), Column("phase", "phase")), hide_empty=True),
        Table("late_arrivals", "Late arrivals", shown=False),
        Table("stragglers", "Straggler: the rank holding most of the steady state's late time, late by more than "
                            "jitter, and what explains it (fuseprof/analysis/facts/ranks.py)", (
            Column("last rank", "last_rank", "int"), Column("cause", "cause"),
            Column("collectives", "collectives", "int"), Column("others waited µs", "late_ns", "us"),
            Column("computation grew µs", "grew_ns", "us"), Column("host late µs", "host_late_ns", "us"),
            Column("% of late time", "share_of_late_pct", "round:1"),
            Column("late ≫ jitter", "spikes", "int")),
            hide_empty=True, summary=straggler_line),
    ))
