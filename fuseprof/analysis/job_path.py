"""The job's critical path across ranks: in each steady-state collective a rank waits for the last rank to arrive,
so the job's path runs, at each collective, into the rank that arrived last.

Per step the ranks all hold: from the end of the path of the rank whose step ended last, walking back over the
current rank's path segments (``path_segments`` of its ``path`` section); at the kernel of a steady-state
collective matched on every rank (``fuseprof.analysis.ranks.matched_collectives``: a communicator's first
collective is start-up skew, not a wait) that another rank reached later, the kernel's time from that rank's
arrival to its end is communication on the path, and the walk goes on on that rank, back from its own kernel's
start. Time the step waited for the previous step's work ends the walk (it is the previous step's). The rank that
holds the most time on the job's path set the step; its largest work there is what on it did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from fuseprof.analysis.ranks import matched_collectives

if TYPE_CHECKING:
    from fuseprof.analysis.analyze import TraceAnalysis

COLUMNS = ["step", "rank", "time_ns", "share_pct", "communication_ns", "top_what", "top_op", "top_module",
           "top_ns", "set_step"]
_WAITING = ("communication", "queue", "launch latency", "event wait", "sync")  # not work: what the rank waited in
Walked = list[tuple[int, str, str, str, str, int]]  # (rank, category, what, op, module, ns on the path)


def _arrivals(results: list[TraceAnalysis]) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, its kernel's start) → (the last rank to arrive, that rank's kernel start), per steady-state
    collective matched on every rank."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for _, _, group, steady in matched_collectives(results):
        if not steady:
            continue
        last = group.loc[group["start_ns"].idxmax()]
        for row in group.itertuples(index=False):
            out[(int(row.rank), int(row.start_ns))] = (int(last["rank"]), int(last["start_ns"]))
    return out


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


def _text(value: object) -> str:
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)  # type: ignore[arg-type]


def _walk(segments: dict[int, pd.DataFrame], arrivals: dict[tuple[int, int], tuple[int, int]], rank: int) -> Walked:
    """The job's path of one step (the module docstring), latest first."""
    until: int | None = None
    out: Walked = []
    while True:
        mine = segments[rank]
        if until is not None:
            mine = mine[mine["start_ns"] < until]
        jumped = False
        for seg in mine.iloc[::-1].itertuples(index=False):
            if seg.category == "previous step":
                return out
            end = int(seg.end_ns) if until is None else min(int(seg.end_ns), until)
            start = None if pd.isna(seg.item_start_ns) else int(seg.item_start_ns)
            later = arrivals.get((rank, start)) if seg.category == "communication" and start is not None else None
            if later is not None and later[0] != rank and later[1] > start:  # type: ignore[operator]
                arrived = start + (later[1] - start)  # type: ignore[operator]
                out.append((rank, "communication", _text(seg.name), _text(seg.op), _text(seg.module),
                            max(0, end - max(int(seg.start_ns), arrived))))
                rank, until, jumped = later[0], later[1], True
                break
            out.append((rank, str(seg.category), _text(seg.name), _text(seg.op), _text(seg.module),
                        end - int(seg.start_ns)))
        if not jumped:
            return out


def job_path(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per step and rank: its time on the job's path, its communication there, its largest work on it; the rank
    with the most time set the step (``set_step``)."""
    ranked = [r for r in results if r.rank is not None and "path_segments" in r.frames]
    if len(ranked) < 2:
        return pd.DataFrame(columns=COLUMNS)
    arrivals = _arrivals(ranked)
    by_rank = {int(r.rank): r.frames["path_segments"] for r in ranked}  # type: ignore[arg-type]
    steps = set.intersection(*(set(f["step"].astype(str)) for f in by_rank.values()))
    rows = []
    for step in sorted(steps):
        segments = {k: f[f["step"].astype(str) == step].sort_values("start_ns") for k, f in by_rank.items()}
        last = max(segments, key=lambda k: int(segments[k]["end_ns"].max()) if len(segments[k]) else -1)
        walked = pd.DataFrame(_walk(segments, arrivals, last), columns=["rank", "category", "what", "op", "module",
                                                                        "time_ns"])
        total = max(int(walked["time_ns"].sum()), 1)
        for rank, part in walked.groupby("rank"):
            work = part[~part["category"].isin(_WAITING)]
            top = work.groupby(["what", "op", "module"])["time_ns"].sum().sort_values(ascending=False)
            what, op, module = top.index[0] if len(top) else ("", "", "")
            rows.append({"step": step, "rank": int(rank), "time_ns": int(part["time_ns"].sum()),
                         "share_pct": 100.0 * int(part["time_ns"].sum()) / total,
                         "communication_ns": int(part.loc[part["category"] == "communication", "time_ns"].sum()),
                         "top_what": what, "top_op": op, "top_module": module,
                         "top_ns": int(top.iloc[0]) if len(top) else 0})
    out = pd.DataFrame(rows, columns=COLUMNS[:-1])
    out["set_step"] = out["time_ns"] == out.groupby("step")["time_ns"].transform("max")
    return out[COLUMNS]
