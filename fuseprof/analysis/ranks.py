"""Several ranks of one distributed run (one torch.profiler trace per rank): communication per rank
and the skew of each collective across ranks.

Each rank's collectives come with its analysis (``fuseprof.analysis.collectives``: communication kernels
with their bytes, matched across ranks by their number on their communicator, else by their order on
it). Traces of one host share its clock:
    skew_ns     = last rank's kernel start − first rank's kernel start (the last to arrive sets the time)
    transfer_ns = last end − last start (the collective's own time once everyone is there)
    wait_ns     = per rank, the last start − this rank's start (time spent waiting inside the kernel)
    late_ns     = the last rank's start − the median start of the others (how late the straggler came)
    grew        = per category, the last rank's computation since its previous collective − the others'
                  median: the largest names what grew on it (``late_arrivals``, ``stragglers``)
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from fuseprof.analysis.analyze import TraceAnalysis


def rank_summary(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per rank: span, busy, computation, communication and its exposed part (not overlapped by
    computation), and communication's share of busy time."""
    rows = []
    for r in results:
        t = r.timeline.set_index("stream").loc["all"]
        rows.append({"rank": r.rank, "trace": r.name, "span_ns": t["span_ns"], "busy_ns": t["busy_ns"],
                     "computation_ns": t["computation_ns"], "communication_ns": t["communication_ns"],
                     "exposed_communication_ns": t["exposed_communication_ns"],
                     "communication_share_pct": 100 * t["communication_ns"] / t["busy_ns"] if t["busy_ns"] else 0.0})
    return pd.DataFrame(rows).sort_values("rank").reset_index(drop=True)


def _matched(results: list[TraceAnalysis]) -> Iterator[tuple[int, str, pd.DataFrame]]:
    """Each collective (its position among all matches, its ``match``, one row per rank) that every rank's
    trace holds; one a rank's trace ended before is left out."""
    per_rank = [r.collectives for r in results if not r.collectives.empty]
    if not per_rank:
        return
    both = pd.concat(per_rank, ignore_index=True)
    ranks = both["rank"].nunique()
    for position, (match, group) in enumerate(both.groupby("match", sort=False)):
        if len(group) >= ranks:
            yield position, str(match), group


def collective_skew(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per collective (matched across ranks by ``match``: its number on its communicator): bytes, skew
    across ranks, the last rank to arrive, the transfer time once all are there, and each rank's wait."""
    rows = []
    for seq, match, group in _matched(results):
        last = group.loc[group["start_ns"].idxmax()]
        waits = {f"wait_ns_rank{int(r)}": int(last["start_ns"] - s)  # in rank order: 0, 1, 2, …, 10, not 0, 1, 10
                 for r, s in sorted(zip(group["rank"].astype(int), group["start_ns"]))}
        rows.append({"seq": seq, "match": match, "collective": group["collective"].iloc[0],
                     "bytes": group["bytes"].iloc[0], "skew_ns": int(group["start_ns"].max() - group["start_ns"].min()),
                     "last_rank": int(last["rank"]), "transfer_ns": int(group["end_ns"].max() - group["start_ns"].max()),
                     **waits})
    return pd.DataFrame(rows)


def late_arrivals(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per collective matched on every rank: the last rank, how late it came (its start − the median
    start of the others), and what grew on it since the previous collective: the category whose
    computation time (``compute_before_ns``) exceeds the other ranks' median by the most, and by how
    much. The collectives are ordered by lateness."""
    if sum(not r.collectives.empty for r in results) < 2:
        return pd.DataFrame()
    rows = []
    for _, match, group in _matched(results):
        last = group["start_ns"].idxmax()
        others = group.drop(index=last)
        grown = _growth(group.loc[last, "compute_before_ns"], list(others["compute_before_ns"]))
        rows.append({"match": match, "collective": group["collective"].iloc[0], "last_rank": int(group.loc[last, "rank"]),
                     "late_ns": int(group.loc[last, "start_ns"] - others["start_ns"].median()),
                     "grew_category": grown[0], "grew_ns": grown[1]})
    return pd.DataFrame(rows).sort_values("late_ns", ascending=False, kind="stable").reset_index(drop=True) \
        if rows else pd.DataFrame()


def _growth(mine: dict[str, int], others: list[dict[str, int]]) -> tuple[str | None, int]:
    """The category of computation where ``mine`` exceeds the others' median the most (None if nowhere)."""
    categories = set(mine) | {c for o in others for c in o}
    excess = {c: mine.get(c, 0) - float(pd.Series([o.get(c, 0) for o in others]).median()) for c in categories}
    if not excess or max(excess.values()) <= 0:
        return None, 0
    category = max(excess, key=lambda c: excess[c])
    return category, int(excess[category])


def stragglers(late: pd.DataFrame) -> pd.DataFrame:
    """The culprits, from ``late_arrivals``: per (last rank, grown category), the collectives it arrived
    last to because that category grew, and the time the others waited for it (Σ late_ns), most first. A
    rank that is last by chance (jitter) spreads over many small rows; a straggler heads the table."""
    if late.empty:
        return late
    late = late[late["late_ns"] > 0].assign(grew_category=lambda f: f["grew_category"].fillna("(nothing grew)"))
    table = late.groupby(["last_rank", "grew_category"], sort=False).agg(
        collectives=("match", "size"), late_ns=("late_ns", "sum"), grew_ns=("grew_ns", "sum")).reset_index()
    table["share_of_late_pct"] = 100 * table["late_ns"] / late["late_ns"].sum()
    return table.sort_values("late_ns", ascending=False, kind="stable").reset_index(drop=True)


def across_ranks(results: list[TraceAnalysis]) -> dict[str, pd.DataFrame]:
    """Every across-ranks table, by name: what the CLI, the JSON output and the report show."""
    late = late_arrivals(results)
    return {"ranks": rank_summary(results), "collectives": collective_skew(results), "late_arrivals": late,
            "stragglers": stragglers(late)}
