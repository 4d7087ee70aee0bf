"""fuseprof's findings as time slices: what the exported trace draws on its own tracks beside the original
events (``fuseprof.export.chrome``). One row per slice: the track it belongs on, its name, its start and end
(integer ns on the trace's clock, the same clock as the original events: ``ts`` µs × 1000) and its args.

The tracks, each from one analysis table or function (no finding is computed here, only placed in time):
    fusion · CLASS   one slice per chain (instance) of every fusion row of that class, over its kernels
                     (first kernel's start to last kernel's end); args: the row, its class and ops, the instance's
                     measured time and its share of the row's saving (the step time it removes without the
                     profiler, ``fuseprof.analysis.paths.savings``; the GPU saving beside it)
    GPU idle         one slice per idle gap of the GPU, named by its largest cause, with its time by cause
                     (``fuseprof.analysis.facts.idle.idle_gaps``)
    profiler steps   one slice per profiler step over the GPU work it launched (``profiler_step`` of the events)
    phases           in a training step, one slice per step and phase (forward, backward, recomputation, optimizer,
                     communication, other) over the GPU work of that phase (``fuseprof.analysis.facts.phases``)
    waits · rank R   across ranks: per collective matched on every rank, the time this rank's kernel waited for
                     the last rank to arrive (its start to the last start; ``fuseprof.analysis.facts.ranks``)
    critical path    one slice per segment of each step's critical path (a kernel, a call, the host's work, a
                     lag), named by its kind of time and what it was (``fuseprof.analysis.paths.path``)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.idle import CAUSES, idle_gaps
from fuseprof.analysis.facts.ranks import matched_collectives
from fuseprof.analysis.paths.savings import saving as saving_of

if TYPE_CHECKING:
    from fuseprof.analysis.facts.result import TraceAnalysis
    from fuseprof.parse.trace_events import TraceTables

COLUMNS = ["track", "name", "start_ns", "end_ns", "args"]


def _number(value: Any) -> Any:
    """A table value as JSON takes it: NaN is null, NumPy scalars are Python numbers."""
    if value is None or (not isinstance(value, (str, list, dict)) and pd.isna(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _instances(members: list[Any], count: int) -> list[list[Any]]:
    """A fusion row's members cut into its ``count`` chains (they are listed chain after chain); a row whose
    members do not divide evenly is drawn one slice per member."""
    if count > 0 and len(members) % count == 0:
        size = len(members) // count
        return [members[i:i + size] for i in range(0, len(members), size)]
    return [[m] for m in members]


def fusion_slices(result: TraceAnalysis) -> pd.DataFrame:
    """One slice per chain of every fusion row, on the track of the row's class."""
    events, rows = result.events, []
    start, end = events["start_ns"], events["end_ns"]
    one = saving_of(result.fusion).tolist()  # the row's one saving: the step time it removes without the profiler
    for position, row in enumerate(result.fusion.to_dict("records")):
        chains = _instances(list(row["members"]), int(row["count"]))
        saving = _number(one[position])
        for chain in chains:
            rows.append({"track": f"fusion · {row['class']}", "name": str(row["signature"]),
                         "start_ns": int(start.loc[chain].min()), "end_ns": int(end.loc[chain].max()),
                         "args": {"fusion_row": position, "signature": str(row["signature"]), "kernels": len(chain),
                                  "measured_ns": int((end.loc[chain] - start.loc[chain]).sum()),
                                  "row_saving_ns": saving, "row_gpu_saving_ns": _number(row.get("saving_ns")),
                                  "chains_in_row": len(chains),
                                  "saving_share_ns": saving / len(chains) if saving is not None else None,
                                  "known_fusion": _number(row.get("known_fusion")), "module": _number(row.get("module"))}})
    return pd.DataFrame(rows, columns=COLUMNS)


def idle_slices(result: TraceAnalysis, tables: TraceTables) -> pd.DataFrame:
    """One slice per idle gap of the GPU, named by its largest cause."""
    gaps = idle_gaps(result.events, tables, result.registry)
    if gaps.empty:
        return pd.DataFrame(columns=COLUMNS)
    causes = [f"idle_{c}_ns" for c in CAUSES]
    args = [{"idle_ns": int(g["idle_ns"]), **{c: int(g[c]) for c in causes if g[c]},
             "next_step": _number(g["step"])} for g in gaps.to_dict("records")]
    return pd.DataFrame({"track": "GPU idle", "name": "idle: " + gaps["cause"].astype(str),
                         "start_ns": gaps["gap_start_ns"].astype(np.int64), "end_ns": gaps["gap_end_ns"].astype(np.int64),
                         "args": args}, columns=COLUMNS)


def step_slices(result: TraceAnalysis) -> pd.DataFrame:
    """One slice per profiler step over the GPU work launched in it."""
    events = result.events[result.events["profiler_step"].notna()]
    if events.empty:
        return pd.DataFrame(columns=COLUMNS)
    spans = events.groupby(events["profiler_step"].astype(str), sort=False).agg(
        start_ns=("start_ns", "min"), end_ns=("end_ns", "max"), kernels=("start_ns", "size"))
    return pd.DataFrame({"track": "profiler steps", "name": spans.index + " (GPU)",
                         "start_ns": spans["start_ns"].astype(np.int64), "end_ns": spans["end_ns"].astype(np.int64),
                         "args": [{"gpu_events": int(k)} for k in spans["kernels"]]}, columns=COLUMNS).reset_index(
        drop=True)


def phase_slices(result: TraceAnalysis) -> pd.DataFrame:
    """In a training step (the phases table is not empty), one slice per step and phase over its GPU work."""
    if result.frames.get("phases", pd.DataFrame()).empty or "phase" not in result.events:
        return pd.DataFrame(columns=COLUMNS)
    events = result.events
    step = events["profiler_step"].astype(object).where(events["profiler_step"].notna(), "all")
    spans = events.groupby([step, events["phase"]], sort=False).agg(
        start_ns=("start_ns", "min"), end_ns=("end_ns", "max"), gpu_ns=("dur_ns", "sum"), events=("dur_ns", "size"))
    return pd.DataFrame({"track": "phases", "name": [f"{p} ({s})" for s, p in spans.index],
                         "start_ns": spans["start_ns"].astype(np.int64).to_numpy(),
                         "end_ns": spans["end_ns"].astype(np.int64).to_numpy(),
                         "args": [{"gpu_ns": int(g), "gpu_events": int(n)} for g, n in zip(spans["gpu_ns"],
                                                                                          spans["events"])]},
                        columns=COLUMNS)


def path_slices(result: TraceAnalysis, tables: TraceTables) -> pd.DataFrame:
    """One slice per segment of each step's critical path (``fuseprof.analysis.paths.path.step_paths``), named by its
    kind of time and what it was: contiguous from the step's start to its end."""
    from fuseprof.analysis.paths.path import result_graphs, step_paths

    path = step_paths(result_graphs(result, tables), result.events, tables, result.registry)
    path = path[path["dur_ns"] > 0]
    if path.empty:
        return pd.DataFrame(columns=COLUMNS)
    names = [f"{c}: {n}" if n and n != c else str(c) for c, n in zip(path["category"], path["name"].astype(str))]
    args = [{"step": str(s), "bound": str(b), "op": _number(o), "module": _number(m), "range": _number(r) or None}
            for s, b, o, m, r in zip(path["step"], path["bound"], path["op"], path["module"], path["ranges"])]
    return pd.DataFrame({"track": "critical path", "name": names, "start_ns": path["start_ns"].astype(np.int64),
                         "end_ns": path["end_ns"].astype(np.int64), "args": args}, columns=COLUMNS)


def trace_findings(result: TraceAnalysis, tables: TraceTables) -> pd.DataFrame:
    """Every slice of one trace's own findings (fusion, idle, steps, phases, the critical path)."""
    parts = [p for p in (fusion_slices(result), idle_slices(result, tables), step_slices(result),
                         phase_slices(result), path_slices(result, tables)) if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def rank_waits(results: list[TraceAnalysis]) -> dict[int, pd.DataFrame]:
    """Per rank (its position in ``results``), one slice per matched collective it waited in for the last rank
    to arrive: from its kernel's start to the last rank's start."""
    by_rank = {r.rank: i for i, r in enumerate(results) if r.rank is not None}
    rows: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(results))}
    for _, match, group, steady in matched_collectives(results):
        last = group.loc[group["start_ns"].idxmax()]
        for row in group.itertuples(index=False):
            wait = int(last["start_ns"]) - int(row.start_ns)
            if wait <= 0 or row.rank not in by_rank:
                continue
            rows[by_rank[row.rank]].append({
                "track": "waits for the last rank", "name": f"waits for rank {int(last['rank'])}: {row.collective}",
                "start_ns": int(row.start_ns), "end_ns": int(last["start_ns"]),
                "args": {"match": match, "wait_ns": wait, "last_rank": int(last["rank"]),
                         "phase": "steady" if steady else "start-up"}})
    return {i: pd.DataFrame(r, columns=COLUMNS) for i, r in rows.items()}
