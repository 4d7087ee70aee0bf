"""The job's critical path across ranks: in a steady-state collective every rank waits for the last to arrive, so
the job's path runs, at each collective, into the rank that arrived last.

Each rank hands the parent one row per stretch of its own critical path between collectives (``path_legs``: a
"leg", the path from the previous collective's kernel to the next one, with that collective's kernel and the
largest work in the leg) — not the path's segments, so the parent holds a few rows per collective and step
whatever the number of ranks. Per step the parent walks back (``job_path``) from the end of the rank whose step
ended last, over that rank's legs; at the kernel of a steady-state collective matched on every rank
(``fuseprof.analysis.facts.ranks.matched_collectives``: a communicator's first collective is start-up skew, not a wait)
that another rank reached later, the kernel's time from that rank's arrival to its end is communication on the
job's path, and the walk goes on on the late rank, back from its kernel's start. Where that point falls inside a
leg, the leg's part before it is on the path with the leg's largest work. The rank that holds the most time on the
job's path set the step; its largest work there is what on it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.ranks import matched_collectives, ranks_apart
from fuseprof.parse.text_arrays import text_dtype

if TYPE_CHECKING:
    from fuseprof.analysis.facts.result import TraceAnalysis
    from fuseprof.analysis.paths.critical_path import StepGraph

LEG_COLUMNS = ["step", "start_ns", "comm_start_ns", "end_ns", "kernel_start_ns", "top_what", "top_op", "top_module",
               "top_ns"]
COLUMNS = ["step", "path_ns", "rank", "share_pct", "communication_ns", "top_what", "top_op", "top_module", "top_ns",
           "ranks"]
WAITING = ("communication", "queue", "launch latency", "event wait", "sync")  # not the rank's work


def _texts(column: pd.Series) -> list[str]:
    """Each value as text, a missing one as '': worked out once per distinct value (a path repeats a few hundred
    names over its tens of thousands of segments, and a text per row was a Python call each)."""
    codes, distinct = pd.factorize(column.to_numpy(object))
    return np.array([str(v) for v in distinct] + [""], dtype=object)[codes].tolist()  # type: ignore[no-any-return]


def _leg_numbers(graph: np.ndarray, item: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """Per segment (in step and time order), its leg's key: a new one at each collective kernel on the path
    (consecutive segments of one kernel are one cut) and after it, counted within the step."""
    same_graph = np.r_[False, graph[1:] == graph[:-1]]
    new = comm & ~(same_graph & np.r_[False, comm[:-1]] & (item == np.r_[-1, item[:-1]]))
    counted = np.cumsum(new)
    first = np.maximum.accumulate(np.where(~same_graph, np.arange(len(graph)), 0))  # each step's first segment
    number = counted - (counted - new)[first]
    return graph * (len(graph) + 2) + np.where(comm, number, number + 1)  # type: ignore[no-any-return]


def _tops(legs: list[int], names: list[str], ops: list[str], modules: list[str], durations: list[int]
          ) -> dict[int, tuple[str, str, str, int]]:
    """Per leg, its largest work by what, op and module (summed over its segments; ties: the first seen)."""
    summed: dict[tuple[int, str, str, str], int] = {}  # in the order each key is first seen
    for key, ns in zip(zip(legs, names, ops, modules), durations):
        summed[key] = summed.get(key, 0) + ns
    best: dict[int, tuple[str, str, str, int]] = {}
    for (leg, name, op, module), ns in summed.items():
        if leg not in best or ns > best[leg][3]:
            best[leg] = (name, op, module, ns)
    return best


def path_legs(graphs: Sequence[StepGraph], path: pd.DataFrame) -> pd.DataFrame:
    """Every step's legs (the module docstring) from its labelled path (``fuseprof.analysis.paths.path.step_paths``):
    the path cut at each collective kernel on it (consecutive segments of one kernel are one cut), and the tail
    after the last (``kernel_start_ns`` null). Time the step waited for the previous step is not a leg's.

    On lists and arrays: a rank's path is a few hundred segments, and the frame operations this took (grouping,
    joining, sorting) cost a pandas call each, about eighty a rank whatever its size."""
    category = path["category"].to_numpy(object)
    starts, graphs_of = path["start_ns"].to_numpy(np.int64), path["graph"].to_numpy(np.int64)
    kept = np.flatnonzero(category != "previous step")
    kept = kept[np.lexsort((starts[kept], graphs_of[kept]))]  # by step, then start
    if not len(kept):
        return pd.DataFrame({c: pd.Series(dtype="Int64" if c.endswith("_ns") else object) for c in LEG_COLUMNS})
    graph, item = graphs_of[kept], path["item"].to_numpy(np.int64)[kept]
    comm = (category[kept] == "communication") & (item >= 0)
    leg = _leg_numbers(graph, item, comm).tolist()
    work: dict[int, list[int]] = {}  # per leg: its step, first start, last end (the cut)
    cuts: dict[int, list[int]] = {}  # per leg ending at a collective: its step, the kernel's start, end, item
    for key, g, start, end, i, is_comm in zip(leg, graph.tolist(), starts[kept].tolist(),
                                              path["end_ns"].to_numpy(np.int64)[kept].tolist(), item.tolist(),
                                              comm.tolist()):
        into = cuts if is_comm else work
        found = into.get(key)
        if found is None:
            into[key] = [g, start, end, i]
        else:
            found[1], found[2] = min(found[1], start), max(found[2], end)
    own = [k for k, c in enumerate(comm.tolist()) if not c and category[kept[k]] not in WAITING]
    rows = kept[own]
    names, ops, modules = (_texts(path[c].iloc[rows]) for c in ("name", "op", "module"))
    tops = _tops([leg[k] for k in own], names, ops, modules, path["dur_ns"].to_numpy(np.int64)[rows].tolist())
    out = []
    for key in sorted(work.keys() | cuts.keys()):
        mine, cut = work.get(key), cuts.get(key)
        g = mine[0] if mine is not None else cut[0]  # type: ignore[index]
        comm_start = cut[1] if cut is not None else mine[2]  # type: ignore[index]
        top = tops.get(key, ("", "", "", 0))
        out.append((graphs[g].step, mine[1] if mine is not None else comm_start, comm_start,
                    cut[2] if cut is not None else comm_start, graphs[g].t0[cut[3]] if cut is not None else None,
                    *top, g))
    out.sort(key=lambda row: (row[-1], row[3]))  # by step, then end
    columns = list(zip(*out))
    text = text_dtype()
    return pd.DataFrame({
        "step": pd.Series(columns[0], dtype=text), **{c: pd.Series(columns[k], dtype=np.int64) for k, c in
                                                      ((1, "start_ns"), (2, "comm_start_ns"), (3, "end_ns"))},
        "kernel_start_ns": pd.array(columns[4], dtype="Int64"),
        **{c: pd.Series(columns[k], dtype=text) for k, c in ((5, "top_what"), (6, "top_op"), (7, "top_module"))},
        "top_ns": pd.Series(columns[8], dtype=np.int64)})


def clock_offsets(results: Sequence[TraceAnalysis]) -> dict[int, int]:
    """Per rank, how far its clock runs ahead of the job's (ns): the median, over the steady-state collectives
    matched on every rank, of its kernel's end less the median end of all ranks' kernels. A collective ends on
    every rank together — the last arrival starts the transfer for all — so its ends agree where the clocks do,
    while its starts differ by the very waits the path reads (issue 61, point 3: clocks aligned on collective
    ends). Without it, 40 µs between two hosts' clocks named the wrong rank late."""
    differences: dict[int, list[int]] = {}
    for _, _, group, steady in matched_collectives(list(results)):
        if not steady:
            continue
        ranks, ends = group["rank"].tolist(), group["end_ns"].tolist()
        middle = int(np.median(np.asarray(ends, dtype=np.int64) - ends[0])) + int(ends[0])  # exact on epoch ns
        for rank, end in zip(ranks, ends):
            differences.setdefault(int(rank), []).append(int(end) - middle)
    return {rank: int(np.median(d)) for rank, d in differences.items()}


def _arrivals(results: Sequence[TraceAnalysis], offsets: dict[int, int]) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, its kernel's start on the job's clock) → (the last rank to arrive, that rank's kernel start on the
    job's clock), per steady-state collective matched on every rank."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for _, _, group, steady in matched_collectives(list(results)):
        if not steady:
            continue
        ranks = [int(r) for r in group["rank"].tolist()]  # lists: a frame's rows cost µs each
        starts = [int(start) - offsets.get(rank, 0) for rank, start in zip(ranks, group["start_ns"].tolist())]
        k = max(range(len(starts)), key=starts.__getitem__)  # the first of the latest, as idxmax
        last = (ranks[k], starts[k])
        for rank, start in zip(ranks, starts):
            out[(rank, start)] = last
    return out


def _on_job_clock(legs: pd.DataFrame, offset: int) -> pd.DataFrame:
    """A rank's legs with their times moved onto the job's clock (``clock_offsets``)."""
    if not offset:
        return legs
    return legs.assign(**{c: legs[c] - offset for c in ("start_ns", "comm_start_ns", "end_ns", "kernel_start_ns")})


class Part(NamedTuple):
    """A stretch of the job's path: on which rank, communication or work, and the leg's largest work."""
    rank: int
    communication: bool
    time_ns: int
    top: tuple[str, str, str, int]


def _walk(legs: dict[int, list[Any]], arrivals: dict[tuple[int, int], tuple[int, int]], rank: int) -> list[Part]:
    """The job's path of one step (the module docstring; ``legs``: each rank's, as rows in end order), latest
    first. Every hand-over moves the walk to an earlier time, so it ends."""
    until: int | None = None
    out: list[Part] = []
    while True:
        jumped = False
        for leg in reversed(legs[rank]):
            if until is not None and leg.start_ns >= until:
                continue
            top = (leg.top_what, leg.top_op, leg.top_module, int(leg.top_ns))
            cut, end = int(leg.comm_start_ns), int(leg.end_ns) if until is None else min(int(leg.end_ns), until)
            if not pd.isna(leg.kernel_start_ns) and end > cut:
                later = arrivals.get((rank, int(leg.kernel_start_ns)))
                # a hand-over goes back in time (the late rank's arrival lies before where the walk is), so the
                # walk ends whatever the ranks' collectives' order on several communicators
                if later is not None and later[0] != rank and int(leg.kernel_start_ns) < later[1] < end:
                    out.append(Part(rank, True, max(0, end - max(cut, later[1])), top))
                    rank, until, jumped = later[0], later[1], True
                    break
                out.append(Part(rank, True, end - cut, top))
            out.append(Part(rank, False, min(cut, end) - int(leg.start_ns), top))
        if not jumped:
            return out


def _step_row(step: str, walked: list[Part]) -> dict[str, object]:
    """One step's job path: its length, its communication, the rank with the most time on it (it set the step)
    with its largest work there, and every rank's share."""
    total = sum(p.time_ns for p in walked)
    held = {rank: sum(p.time_ns for p in walked if p.rank == rank) for rank in sorted({p.rank for p in walked})}
    setter = max(held, key=held.__getitem__)
    work: dict[tuple[str, str, str], int] = {}
    for p in walked:
        if p.rank == setter and not p.communication and p.top[3]:
            work[p.top[:3]] = work.get(p.top[:3], 0) + min(p.top[3], p.time_ns)
    what, op, module = max(work, key=work.__getitem__) if work else ("", "", "")
    shares = sorted(held.items(), key=lambda kv: -kv[1])
    return {"step": step, "path_ns": total, "rank": setter, "share_pct": 100.0 * held[setter] / max(total, 1),
            "communication_ns": sum(p.time_ns for p in walked if p.communication), "top_what": what, "top_op": op,
            "top_module": module, "top_ns": work.get((what, op, module), 0),
            "ranks": "; ".join(f"{k}: {100.0 * v / max(total, 1):.0f}%" for k, v in shares)}


def _legs_by_step(legs: pd.DataFrame) -> dict[str, list[Any]]:
    """One rank's legs per step (in the steps' order), each step's as rows in end order: one sort of the
    table, not one per step (a job of many ranks and steps)."""
    out: dict[str, list[Any]] = {str(s): [] for s in legs["step"].tolist() if pd.notna(s)}
    for leg in legs.sort_values("end_ns", kind="stable").itertuples(index=False):
        if pd.notna(leg.step):
            out[str(leg.step)].append(leg)
    return out


def job_path(results: Sequence[TraceAnalysis]) -> pd.DataFrame:
    """Per step: the job's path length, the rank that set the step (the most time on the path) and its largest
    work there, the communication on the path, and each rank's share of it."""
    apart = set(ranks_apart(list(results)))  # another job's rank: its steps are not this job's
    ranked = [r for r in results if r.rank is not None and "path_legs" in r.frames and r.rank not in apart]
    if len(ranked) < 2:
        return pd.DataFrame(columns=COLUMNS)
    offsets = clock_offsets(ranked)
    arrivals = _arrivals(ranked, offsets)
    by_rank = {int(r.rank): _on_job_clock(r.frames["path_legs"], offsets.get(int(r.rank), 0))  # type: ignore[arg-type]
               for r in ranked}
    per_step = {k: _legs_by_step(f) for k, f in by_rank.items()}
    steps = set.intersection(*(set(p) for p in per_step.values()))
    rows = []
    for step in (s for s in per_step[min(per_step)] if s in steps):  # in step order
        legs = {k: p[step] for k, p in per_step.items()}
        last = max(legs, key=lambda k: max(int(leg.end_ns) for leg in legs[k]))
        rows.append(_step_row(step, _walk(legs, arrivals, last)))
    return pd.DataFrame(rows, columns=COLUMNS)


def job_path_line(table: pd.DataFrame, _: object = None) -> str:
    """Which rank set the steps, in one sentence."""
    if table.empty:
        return ""
    counts = table["rank"].astype(int).value_counts()
    rank = int(counts.index[0])
    mine = table[table["rank"].astype(int) == rank]
    top = mine["top_what"].astype(str).value_counts()
    largest = f", its largest work there {top.index[0]}" if len(top) and top.index[0] else ""
    return (f"Job's path: rank {rank} set {int(counts.iloc[0])} of {len(table)} step(s), holding a median "
            f"{mine['share_pct'].median():.0f}% of the path{largest}.")
