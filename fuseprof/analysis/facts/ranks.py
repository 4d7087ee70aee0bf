"""Several ranks of one distributed run (one torch.profiler trace per rank): communication per rank
and the skew of each collective across ranks.

Each rank's collectives come with its analysis (``fuseprof.analysis.facts.collectives``: communication kernels
with their bytes, matched across ranks by their number on their communicator, else by their kind, size and
end: ``fuseprof.analysis.facts.collective_match``). Traces of one host share its clock:
    skew_ns     = last rank's kernel start − first rank's kernel start (the last to arrive sets the time)
    transfer_ns = last end − last start (the collective's own time once everyone is there)
    wait_ns     = per rank, the last start − this rank's start (time spent waiting inside the kernel)
    late_ns     = the last rank's start − the median start of the others (how late the straggler came)
    grew        = per category, the last rank's computation since its previous collective − the others'
                  median: the largest names what grew on it (``late_arrivals``, ``stragglers``)
    host_late   = the last rank's launch of the collective − the others' median start
A communicator's first collective, where the window holds the job's start (``collective_match.holds_job_start``),
holds the ranks' start-up offset (traces started apart): it is left
out of the straggler and reported apart (the collectives table's ``phase``). A
straggler is a rank that holds most of the steady state's late time, whose lateness over every steady
collective stands above its own spread (not jitter) and made the others wait a stated share of the span;
its cause is named only where it explains at least half of the lateness (``stragglers``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.collective_match import aligned, holds_job_start
from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.errors import FuseprofWarning


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


Group = tuple[int, str, pd.DataFrame, int]
# What every across-ranks table reads of one rank set (its collectives grouped, and those matched) costs the rank
# set's size each time: inside ``one_rank_set`` it is worked out once. A context variable: each thread (and each
# task) its own; nothing is kept once the block ends.
_RANK_SET: ContextVar[dict[str, Any] | None] = ContextVar("fuseprof_rank_set", default=None)


@contextmanager
def one_rank_set(results: list[TraceAnalysis]) -> Iterator[None]:
    """Within the block, the across-ranks tables of ``results`` (unchanged meanwhile) share their groupings."""
    token = _RANK_SET.set({"results": tuple(results)})
    try:
        yield
    finally:
        _RANK_SET.reset(token)


def _once(results: list[TraceAnalysis], name: str, compute: Callable[[list[TraceAnalysis]], Iterable[Any]]
          ) -> list[Any]:
    scope = _RANK_SET.get()
    if scope is None or len(scope["results"]) != len(results) or \
            any(a is not b for a, b in zip(scope["results"], results)):
        return list(compute(results))
    if name not in scope:
        scope[name] = list(compute(results))
    return scope[name]  # type: ignore[no-any-return]


def _groups(results: list[TraceAnalysis]) -> list[Group]:
    """Each collective key (``match``) with its rows on every rank holding it, and the number of ranks."""
    return _once(results, "groups", _grouped)


def _grouped(results: list[TraceAnalysis]) -> Iterator[Group]:
    apart = set(ranks_apart(results))
    per_rank = [r.collectives for r in results if not r.collectives.empty and r.rank not in apart]
    if not per_rank:
        return
    both = aligned(pd.concat(per_rank, ignore_index=True))
    ranks = both["rank"].nunique()
    for position, (match, group) in enumerate(both.groupby("match", sort=False)):
        yield position, str(match), group, ranks


def ranks_apart(results: list[TraceAnalysis]) -> list[int]:
    """The ranks outside the job: ranks of one job meet in every collective, so their collectives' spans
    overlap, in a chain, from the first rank to the last. The ranks whose spans chain together are one job; the
    largest such group is the job given, and every other rank lies apart (another job's trace, three jobs' in
    one folder, a host clock that is not the others'): its waits would be the distance between the runs. They
    are left out of every comparison in time (``_groups``); every rank apart when no two overlap."""
    spans = sorted((int(r.collectives["start_ns"].min()), int(r.collectives["end_ns"].max()), int(r.rank))
                   for r in results if r.rank is not None and not r.collectives.empty)
    groups: list[list[int]] = []
    reach = None
    for start, end, rank in spans:
        if reach is None or start > reach:
            groups.append([])
            reach = end
        groups[-1].append(rank)
        reach = max(reach, end)
    job = max(groups, key=len, default=[])
    return sorted(rank for group in groups for rank in group if len(job) < 2 or group is not job)


def apart_sentence(apart: list[int], ranks: int) -> str:
    """What ``ranks_apart`` found, in words: a few ranks apart from the others, or no two that overlap."""
    where = "another job's trace, or a host clock that is not the others'"
    if len(apart) == ranks:
        return (f"no two ranks' collectives overlap in time ({where}): the skew, straggler and path tables compare "
                "nothing")
    return (f"rank {_spans(apart)}: {'its' if len(apart) == 1 else 'their'} collectives lie apart in time from the "
            f"job's ({where}); left out of the skew, straggler and path tables")


def _verdict(group: pd.DataFrame, ranks: int) -> str:
    """Whether one collective key pairs the same collective on every rank: ``matched``; ``not on every rank``
    (a rank's trace ended before it, or the rank set differs); ``refused`` where it was paired by order
    (no ``Seq``) and its kernels do not overlap — a collective finishes on no rank before the last rank
    arrives, so the last start must come before the first end, give or take one transfer (clocks of
    different hosts)."""
    if group["rank"].nunique() < ranks:
        return "not on every rank"
    if group["seq"].notna().all():
        return "matched"
    last_start, first_end = int(group["start_ns"].max()), int(group["end_ns"].min())
    transfer = int(group["end_ns"].max()) - last_start
    return "matched" if last_start - first_end <= transfer else "refused: no overlap"


def matched_collectives(results: list[TraceAnalysis]) -> list[tuple[int, str, pd.DataFrame, bool]]:
    """Each collective (its position among all matches, its ``match``, one row per rank, whether it is in
    the steady state) that every rank's trace holds and that pairs one collective (``_verdict``). A
    communicator's first collective is not steady where the window holds the job's start: its skew is then the
    ranks' start-up offset."""
    return _once(results, "matched", _matched)


def _matched(results: list[TraceAnalysis]) -> Iterator[tuple[int, str, pd.DataFrame, bool]]:
    seen: set[str] = set()
    for position, match, group, ranks in _groups(results):
        if _verdict(group, ranks) == "matched":
            communicator = str(group["communicator"].iloc[0]) if "communicator" in group else ""
            yield position, match, group, communicator in seen or not holds_job_start(group)
            seen.add(communicator)


def waits_for(results: list[TraceAnalysis], late: int) -> dict[int, dict[int, int]]:
    """Per rank (but ``late``), per its collective kernel's start: how long it waited for rank ``late`` beyond the
    last of the other ranks to arrive, over the steady-state collectives matched on every rank."""
    out: dict[int, dict[int, int]] = {}
    for _, _, group, steady in matched_collectives(results):
        if not steady or late not in set(group["rank"].astype(int)):
            continue
        others = group[group["rank"].astype(int) != late]
        beyond = int(group.loc[group["rank"].astype(int) == late, "start_ns"].max()) - int(others["start_ns"].max())
        if beyond <= 0:
            continue
        for row in others.itertuples(index=False):
            out.setdefault(int(row.rank), {})[int(row.start_ns)] = beyond
    return out


def rank_set(results: list[TraceAnalysis]) -> pd.DataFrame:
    """One row: the ranks given, of how many (``distributedInfo``'s world size; ``worlds``: every one the traces
    name, more than one when they are not of one job), which are missing, which lie ``apart`` in time
    (``ranks_apart``), where the ranks came from, and how the collectives matched (by ``Seq`` or by order; matched, not on every rank,
    refused)."""
    given = sorted(int(r.rank) for r in results if r.rank is not None)
    worlds = {r.world_size for r in results if r.world_size}
    world = max(worlds) if worlds else None
    missing = sorted(set(range(world)) - set(given)) if world else []
    groups = [(g, n) for _, _, g, n in _groups(results)]
    verdicts = pd.Series([_verdict(g, n) for g, n in groups], dtype="string")
    by_seq = sum(bool(g["seq"].notna().all()) for g, _ in groups)
    apart = ranks_apart(results)
    return pd.DataFrame([{
        "ranks": len(results), "world_size": world, "missing": _spans(missing) if missing else "",
        "apart": _spans(apart) if apart else None, "worlds": ", ".join(str(w) for w in sorted(worlds)),
        "ranks_from": results[0].rank_from if results else "",
        "collectives": len(verdicts), "by_seq": by_seq, "matched": int((verdicts == "matched").sum()),
        "not_on_every_rank": int((verdicts == "not on every rank").sum()),
        "refused": int(verdicts.str.startswith("refused").sum())}])


def _spans(numbers: list[int]) -> str:
    """'2–127' for a run of numbers, '0, 3, 5–7' for several."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


def collective_skew(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per collective (matched across ranks by ``match``: its number on its communicator): bytes, skew
    across ranks, the last rank to arrive, the transfer time once all are there, and each rank's wait."""
    rows = []
    for seq, match, group, steady in matched_collectives(results):
        phase = "steady" if steady else "start-up"
        last = group.loc[group["start_ns"].idxmax()]
        waits = {f"wait_ns_rank{int(r)}": int(last["start_ns"] - s)  # in rank order: 0, 1, 2, …, 10, not 0, 1, 10
                 for r, s in sorted(zip(group["rank"].astype(int), group["start_ns"]))}
        rows.append({"seq": seq, "match": match, "collective": group["collective"].iloc[0],
                     "bytes": group["bytes"].iloc[0], "skew_ns": int(group["start_ns"].max() - group["start_ns"].min()),
                     "last_rank": int(last["rank"]), "transfer_ns": int(group["end_ns"].max() - group["start_ns"].max()),
                     "phase": phase, **waits})
    return pd.DataFrame(rows)


STRAGGLER_SHARE = 50.0  # % of the steady state's late time a rank must hold to be named
SIGNIFICANCE = 3.0  # its mean lateness over every steady collective, in standard errors: above jitter
SPIKE = 10.0  # a collective it came later than this many times the set's median |lateness| to: not jitter
MIN_SPIKES = 2  # so many such collectives make a rank slowed now and then (a straggler too), not one hiccup
MIN_WAIT_PCT = 1.0  # % of the steady state's span the others must have waited for it: worth naming
EXPLAINS = 0.5  # a cause is named only when it explains this fraction of a collective's lateness


def late_arrivals(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per collective matched on every rank: the last rank, how late it came (its start − the median start
    of the others), whether it is in the steady state (``steady``: not a communicator's first collective,
    whose skew is the ranks' start-up offset), and what explains the lateness:

        grew_ns       the computation that grew on it since its previous collective (the category over the
                      other ranks' median the most: ``grew_category``)
        host_late_ns  how late its host launched the collective: its launch − the others' median start
                      (the kernel cannot start before its launch), at most the lateness
        cause         ``computation: CATEGORY`` or ``host launched late``, whichever explains more, when it
                      explains at least ``EXPLAINS`` of the lateness; else ``unexplained`` (network, jitter)

    The collectives are ordered by lateness."""
    if sum(not r.collectives.empty for r in results) < 2:
        return pd.DataFrame()
    rows = []
    for _, match, group, steady in matched_collectives(results):
        last = group["start_ns"].idxmax()
        others = group.drop(index=last)
        median = median_ns(others["start_ns"])
        late = int(group.loc[last, "start_ns"]) - median
        grown = _growth(group.loc[last, "compute_before_ns"], list(others["compute_before_ns"]))
        launch = group.loc[last, "launch_ns"] if "launch_ns" in group else None
        host = 0 if launch is None or pd.isna(launch) else int(min(late, max(0, int(launch) - median)))
        cause = "unexplained"
        if max(grown[1], host) >= EXPLAINS * late > 0:
            cause = "host launched late" if host > grown[1] else f"computation: {grown[0]}"
        rows.append({"match": match, "collective": group["collective"].iloc[0], "last_rank": int(group.loc[last, "rank"]),
                     "late_ns": late, "steady": steady, "grew_category": grown[0], "grew_ns": grown[1],
                     "host_late_ns": host, "cause": cause})
    return pd.DataFrame(rows).sort_values("late_ns", ascending=False, kind="stable").reset_index(drop=True) \
        if rows else pd.DataFrame()


def _growth(mine: dict[str, int], others: list[dict[str, int]]) -> tuple[str | None, int]:
    """The category of computation where ``mine`` exceeds the others' median the most (None if nowhere)."""
    categories = set(mine) | {c for o in others for c in o}
    excess = {c: mine.get(c, 0) - float(np.median([o.get(c, 0) for o in others])) for c in categories}
    if not excess or max(excess.values()) <= 0:
        return None, 0
    category = max(excess, key=lambda c: excess[c])
    return category, int(excess[category])


def median_ns(times: pd.Series | np.ndarray) -> int:
    """The median of absolute times in integer ns, taken relative to the earliest: a float holds a clock of
    µs since the epoch (1.7e18 ns) only to 256 ns."""
    values = np.asarray(times, dtype=np.int64)
    earliest = int(values.min())
    return earliest + int(round(float(np.median((values - earliest).astype(np.float64)))))


def others_medians(times: np.ndarray) -> list[int]:
    """Per time, ``median_ns`` of the others (every time but that one), to the ns: from one sort, the k-th of the
    others is the k-th of all before that time's place and the (k+1)-th from it on, their earliest the first
    or (for the earliest itself) the second — n medians of n − 1 times each, a collective of 1,000 ranks a
    million elements sorted, come at the cost of one sort."""
    values = np.asarray(times, dtype=np.int64)
    n = len(values)
    if n < 3:  # one other at most: as median_ns makes it (none: its error)
        return [median_ns(np.delete(values, i)) for i in range(n)]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    place = np.empty(n, np.int64)
    place[order] = np.arange(n)

    def kth(k: int) -> np.ndarray:  # per time, the k-th smallest of the others
        return np.where(k < place, ordered[k], ordered[k + 1])

    earliest = np.where(place == 0, ordered[1], ordered[0])
    middle = (n - 1) // 2
    if (n - 1) % 2:  # an odd count: the middle one; an even count: the mean of the middle two, as np.median
        median = (kth(middle) - earliest).astype(np.float64)
    else:
        median = ((kth(middle - 1) - earliest).astype(np.float64) + (kth(middle) - earliest).astype(np.float64)) / 2
    return [e + int(round(m)) for e, m in zip(earliest.tolist(), median.tolist())]


def arrival_lateness(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per steady-state collective and rank: how late the rank came (its start − the median start of the
    others; negative when early). A straggler's mean lateness stands above its spread; jitter's does not."""
    rows = []
    for _, match, group, steady in matched_collectives(results):
        if not steady:
            continue
        starts = group["start_ns"].to_numpy(np.int64)
        for rank, start, median in zip(group["rank"].tolist(), starts.tolist(), others_medians(starts)):
            rows.append({"match": match, "rank": int(rank), "lateness_ns": float(start - median), "start_ns": start})
    return pd.DataFrame(rows, columns=["match", "rank", "lateness_ns", "start_ns"])


def stragglers(late: pd.DataFrame, arrivals: pd.DataFrame | None = None) -> pd.DataFrame:
    """The straggler, from ``late_arrivals``'s steady state: a rank holding at least ``STRAGGLER_SHARE`` % of
    the time others waited, late by more than jitter — persistently (its mean lateness over every steady
    collective, ``arrival_lateness``, ``SIGNIFICANCE`` standard errors above zero) or now and then (at
    least ``MIN_SPIKES`` collectives it came ``SPIKE`` × the set's median |lateness| late to: a rank slowed
    in 4 of 12 steps) — the others' wait for it at least ``MIN_WAIT_PCT`` % of the steady span; with the
    cause that explains most of its waited-for time (its collectives' causes, weighted by lateness).
    Empty when no rank is one."""
    columns = ["last_rank", "cause", "grew_category", "collectives", "late_ns", "grew_ns", "host_late_ns",
               "mean_lateness_ns", "significance", "spikes", "share_of_late_pct"]
    steady = late[late["steady"] & (late["late_ns"] > 0)] if not late.empty else late
    if steady.empty or arrivals is None or arrivals.empty:
        return pd.DataFrame(columns=columns)
    span = float(arrivals["start_ns"].max() - arrivals["start_ns"].min())
    rows = []
    total = float(steady["late_ns"].sum())
    jitter = float(arrivals["lateness_ns"].abs().median())
    for rank, part in steady.groupby("last_rank", sort=False):
        share = 100 * float(part["late_ns"].sum()) / total
        mine = arrivals.loc[arrivals["rank"] == int(rank), "lateness_ns"]
        error = float(mine.std(ddof=1)) / len(mine) ** 0.5 if len(mine) > 1 else float("nan")
        significance = float(mine.mean()) / error if error and error == error else float("inf") if len(mine) > 1 \
            else float("nan")
        waited = 100 * float(part["late_ns"].sum()) / span if span else 0.0
        spikes = int((mine > SPIKE * jitter).sum())
        above_jitter = significance >= SIGNIFICANCE or spikes >= MIN_SPIKES
        if share < STRAGGLER_SHARE or not above_jitter or waited < MIN_WAIT_PCT:
            continue
        cause = part.groupby("cause")["late_ns"].sum().idxmax()
        explained = part[part["cause"] == cause]
        rows.append({"last_rank": int(rank), "cause": cause,
                     "grew_category": explained["grew_category"].mode().iloc[0] if cause.startswith("computation")
                     else None, "collectives": len(part), "late_ns": int(part["late_ns"].sum()),
                     "grew_ns": int(explained["grew_ns"].sum()), "host_late_ns": int(explained["host_late_ns"].sum()),
                     "mean_lateness_ns": float(mine.mean()), "significance": significance, "spikes": spikes,
                     "share_of_late_pct": share})
    return pd.DataFrame(rows, columns=columns).sort_values("late_ns", ascending=False).reset_index(drop=True)


def across_ranks(results: list[TraceAnalysis]) -> dict[str, pd.DataFrame]:
    """Every across-ranks table, by name: what the CLI, the JSON output and the report show."""
    results = numbered_ranks(results)
    apart = ranks_apart(results)
    if apart:
        warnings.warn(apart_sentence(apart, len(results)), FuseprofWarning, stacklevel=2)
    late = late_arrivals(results)
    return {"rank_set": rank_set(results), "ranks": rank_summary(results), "collectives": collective_skew(results),
            "late_arrivals": late, "stragglers": stragglers(late, arrival_lateness(results))}


_RANK_IN_NAME = re.compile(r"(?:rank|worker|gpu|device)[_-]?(\d+)(?!.*(?:rank|worker|gpu|device)[_-]?\d)", re.I)


def numbered_ranks(results: list[TraceAnalysis]) -> list[TraceAnalysis]:
    """The results with a rank each, distinct: ``distributedInfo``'s where every trace has one and they differ;
    else the number its file name gives (``…rank3…``, ``worker_3``, ``gpu-3``) where every name has a different
    one; else the order given. Set on the results (``rank``, their collectives' ``rank``, ``rank_from``)."""
    recorded = [r.rank for r in results]
    if None not in recorded and len(set(recorded)) == len(results):
        return results
    named = [_RANK_IN_NAME.search(r.name) for r in results]
    if all(named) and len({int(m.group(1)) for m in named if m}) == len(results):
        ranks, source = [int(m.group(1)) for m in named if m], "file names"
    else:
        ranks, source = list(range(len(results))), "the order given"
    twice = sorted({r for r in recorded if r is not None and recorded.count(r) > 1})
    if twice:
        source += f", as distributedInfo gives rank {', '.join(map(str, twice))} to more than one trace"
        warnings.warn(f"distributedInfo gives rank {', '.join(map(str, twice))} to more than one trace "
                      f"({', '.join(r.name for r in results if r.rank in twice)}): the ranks are numbered by "
                      f"{source.split(',')[0]}; are they of one job?", FuseprofWarning, stacklevel=2)
    for result, rank in zip(results, ranks):
        result.rank = rank
        result.rank_from = source
        if not result.collectives.empty:
            result.frames["collectives"] = result.collectives.assign(rank=rank)
    return results
