"""Why the GPU was idle: each gap between GPU work split by what the next GPU work waited for, a verdict per
step, and the CPU ops that filled the host-bound parts.

A gap runs from the end of one stretch of GPU work to the start of the next (the union of every GPU
event's interval, so overlapping streams leave no gap). The next event was launched by a call on a host
thread by a call that started at L and returned at R. The gap splits at R (the call's own time is the host's:
it is work the host had to do before the GPU could start, not latency on the GPU's side):

- before R the GPU waited for the host to launch. What the launching thread was doing says why (the
  registry's ``HostCause`` rows, in order): the time it spent inside a DataLoader range is ``data
  loading``; inside a synchronising call, or the op that made it (``.item()``'s ``_local_scalar_dense``,
  ``.cpu()``'s copy: the host time a synchronisation costs), ``sync``; inside allocator calls
  ``allocator``; the rest ``launch`` (host-bound: Python, dispatch, anything else);
- after R the work was launched and still did not start: ``event wait`` where the launching thread queued
  it behind an event (a ``StreamWaitEvent`` call between the gap's start and the launch), else ``other``
  (launch latency, another stream).

So a gap is "launch" only for the part until its work was launched, and a graph replay queued behind an
event while the host sits in a blocking copy is an event wait, not host-bound. A gap whose next work a graph
launch queued (``next_graph``), or that lies in, before or after a step holding a graph replay (a serving engine
prepares each replay's inputs with a few eager kernels), is host-bound all the same, but CUDA graphs are already in place:
``idle_launch_graph_ns`` keeps that part of the launch idle apart, so advice does not offer graphs to graphs.

The verdict *as traced* (``verdict_as_traced``, the ``traced_<cause>_ns`` columns) reads each gap whole, as a
reader of the raw trace would and as the labelled traces state their rule: ``sync`` when a synchronising or
allocator call (``cudaFree`` synchronises the device) is in progress at the gap's start, on any thread;
``launch`` when the next work's launch call starts at or after it; else ``other``; per step, the largest of busy
and the three. It describes the trace as recorded; the split above is what advice reads. Per step (``ProfilerStep#N``,
or the whole window): busy time and idle time by cause; the verdict names the largest. The CPU activity of
host-bound parts is every CPU op and ``record_function`` range on the launching thread that overlaps
[gap start, launch), ranked by the time it overlaps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.graphs import is_graph_launch
from fuseprof.model.intervals import covered_ns, merge, runs
from fuseprof.model.registry import Registry
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import rows_named

CAUSES = ("launch", "sync", "data", "alloc", "event", "other")  # the idle_<cause>_ns columns
_HOST_CAUSE = {"sync": "sync", "data loading": "data", "allocator": "alloc", "event wait": "event"}
VERDICTS = {"busy_ns": "GPU-bound", "idle_launch_ns": "host-bound", "idle_sync_ns": "sync-bound",
            "idle_data_ns": "data loading", "idle_alloc_ns": "allocator", "idle_event_ns": "event wait",
            "idle_other_ns": "other idle"}
TRACED = ("launch", "sync", "other")  # a gap's one cause as traced (the traced_<cause>_ns columns)
TRACED_VERDICTS = {"busy_ns": "GPU-bound", "traced_launch_ns": "host-bound", "traced_sync_ns": "sync-bound",
                   "traced_other_ns": "other idle"}
_EMPTY = ["gap_start_ns", "gap_end_ns", "idle_ns", "cause", "cause_as_traced", "step", "prev_step", "launch_ns", "tid",
          "next_graph",
          *(f"idle_{c}_ns" for c in CAUSES)]


def _intervals(rows: pd.DataFrame, tid: object | None) -> tuple[np.ndarray, np.ndarray]:
    """The merged intervals of ``rows`` on one thread (all threads where ``tid`` is None)."""
    if tid is not None:
        rows = rows[rows["tid"].astype(str) == str(tid)]
    start = rows["start_ns"].to_numpy(np.int64)
    return merge(start, start + rows["dur_ns"].to_numpy(np.int64))


def idle_gaps(events: pd.DataFrame, tables: TraceTables, registry: Registry) -> pd.DataFrame:
    """One row per idle gap of the GPU: start, end, length, its time by cause (``idle_<cause>_ns``), its
    largest cause, the next event's step, launch start and launching thread, and whether a graph launch queued
    it (``next_graph``)."""
    order = np.argsort(events["start_ns"].to_numpy(np.int64), kind="stable")  # positions, not a sorted frame of
    start = events["start_ns"].to_numpy(np.int64)[order]  # forty columns: the four read are taken at those alone
    end = start + events["dur_ns"].to_numpy(np.int64)[order]
    firsts = runs(start, end)  # the stretches of work, as ``merge`` makes them, each one's events together
    if firsts.size < 2:
        return pd.DataFrame(columns=_EMPTY)
    s, e = start[firsts], np.maximum.reduceat(end, firsts)
    nxt = order[firsts[1:]]  # the first event of each stretch after a gap
    block = np.repeat(np.arange(firsts.size), np.diff(np.append(firsts, start.size)))  # each event's stretch
    ends_last = np.flatnonzero(end == e[block])  # the events that end each stretch
    last = ends_last[np.unique(block[ends_last], return_index=True)[1]]  # the first of them
    prev = order[last[:-1]]

    def at(column: str, rows: np.ndarray) -> np.ndarray:
        return events[column].iloc[rows].to_numpy()

    gaps = pd.DataFrame({"gap_start_ns": e[:-1], "gap_end_ns": s[1:], "idle_ns": s[1:] - e[:-1],
                         "step": at("profiler_step", nxt), "prev_step": at("profiler_step", prev),
                         "launch_ns": at("launch_start_ns", nxt), "tid": at("tid", nxt),
                         "next_graph": is_graph_launch(events["launch_api"].iloc[nxt]).to_numpy(bool)})
    gs, ge = gaps["gap_start_ns"].to_numpy(np.int64), gaps["gap_end_ns"].to_numpy(np.int64)
    launch = gaps["launch_ns"].astype("Int64")  # integers: a clock of µs since the epoch is 1.7e18 ns
    # the host is busy until its launch call returns: the call's own time is the host's, not the GPU's latency
    returned = launch + pd.array(at("launch_dur_ns", nxt), dtype="Int64").fillna(0)
    split = np.where(launch.isna().to_numpy(), gs, np.clip(returned.fillna(0).to_numpy(np.int64), gs, ge))
    parts = {c: np.zeros(len(gaps), np.int64) for c in CAUSES}
    calls: dict[str, pd.DataFrame] = {c.cause: rows_named(tables.launches, c.calls)
                                      for c in registry.host_causes if c.calls}
    ranges: dict[str, pd.DataFrame] = {c.cause: rows_named(tables.annotations, c.ranges)
                                       for c in registry.host_causes if c.ranges}
    named = (calls, ranges)
    for tid in pd.unique(gaps["tid"].astype(object)):
        mine = (gaps["tid"].astype(object) == tid).to_numpy() if tid is not None and not pd.isna(tid) else \
            gaps["tid"].isna().to_numpy()
        thread = None if tid is None or pd.isna(tid) else tid
        _split_gaps(parts, mine, gs, ge, split, named, tables, registry, thread)
    for cause, values in parts.items():
        gaps[f"idle_{cause}_ns"] = values
    gaps["cause"] = np.array(CAUSES)[np.argmax(np.vstack([parts[c] for c in CAUSES]), axis=0)]
    gaps["cause_as_traced"] = _whole_gap_causes(gs, launch, tables, registry)
    return gaps


def _whole_gap_causes(gs: np.ndarray, launch: pd.Series, tables: TraceTables, registry: Registry) -> np.ndarray:
    """Each gap's one cause as traced (the module docstring): sync, launch or other."""
    patterns = [c.calls for c in registry.host_causes if c.cause in ("sync", "allocator") and c.calls]
    start, end = _intervals(rows_named(tables.launches, *patterns), None) if patterns else (np.zeros(0, np.int64),) * 2
    at = np.searchsorted(start, gs, side="right") - 1  # the merged interval that starts last at or before the gap
    syncing = (at >= 0) & (end[np.maximum(at, 0)] > gs) if start.size else np.zeros(len(gs), bool)
    launched_after = (launch.fillna(np.iinfo(np.int64).min).to_numpy(np.int64) >= gs)
    return np.where(syncing, "sync", np.where(launched_after, "launch", "other"))


def _split_gaps(parts: dict[str, np.ndarray], mine: np.ndarray, gs: np.ndarray, ge: np.ndarray, split: np.ndarray,
                named: tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]], tables: TraceTables,
                registry: Registry, tid: object | None) -> None:
    """The causes of the gaps whose next work one thread launched (the module docstring), into ``parts``;
    ``named``: each host cause's launch calls and ranges (``_named``)."""
    g0, g1, at = gs[mine], ge[mine], split[mine]
    before = at - g0
    calls = {cause: _intervals(rows, tid) for cause, rows in named[0].items()}
    ranges = {cause: _intervals(rows, tid) for cause, rows in named[1].items()}
    if "sync" in calls:  # the op that synchronised (.item(), .cpu()), not only its call: the host time it costs
        calls["sync"] = _with_enclosing_ops(calls["sync"], tables.ops, tid)
    remaining = before
    for host in registry.host_causes:
        cause = _HOST_CAUSE[host.cause]
        if cause == "event":
            continue
        spans = [x for x in (calls.get(host.cause), ranges.get(host.cause)) if x is not None]
        if not spans:
            continue
        joined = merge(np.concatenate([x[0] for x in spans]), np.concatenate([x[1] for x in spans]))
        taken = np.minimum(covered_ns(joined, g0, at), remaining)
        parts[cause][mine] += taken
        remaining = remaining - taken
    parts["launch"][mine] += remaining
    waits = calls.get("event wait")
    after = g1 - at
    if waits is not None and waits[0].size:
        queued = np.searchsorted(waits[0], at, side="right") - np.searchsorted(waits[0], g0, side="left") > 0
    else:
        queued = np.zeros(len(g0), bool)
    parts["event"][mine] += np.where(queued, after, 0)
    parts["other"][mine] += np.where(queued, 0, after)


def sync_spans(tables: TraceTables, registry: Registry, tid: object) -> tuple[np.ndarray, np.ndarray]:
    """The host time synchronisations cost on one thread: the registry's sync calls, each joined with the
    outermost CPU op around it (``.item()``'s, ``.cpu()``'s), as merged intervals."""
    patterns = [c.calls for c in registry.host_causes if c.cause == "sync" and c.calls]
    return _with_enclosing_ops(_intervals(rows_named(tables.launches, *patterns), tid), tables.ops, tid)


def _with_enclosing_ops(spans: tuple[np.ndarray, np.ndarray], ops: pd.DataFrame, tid: object | None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The calls' intervals joined with those of the outermost CPU op around each (on the thread)."""
    mine = ops if tid is None else ops[ops["tid"].astype(str) == str(tid)]
    start = np.sort(mine["start_ns"].to_numpy(np.int64))
    end = (mine["start_ns"] + mine["dur_ns"]).to_numpy(np.int64)[np.argsort(mine["start_ns"].to_numpy(np.int64),
                                                                              kind="stable")]
    if not start.size or not spans[0].size:
        return spans
    top = start >= np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]])  # outermost ops
    top_start, top_end = start[top], end[top]
    at = np.searchsorted(top_start, spans[0], side="right") - 1
    inside = (at >= 0) & (top_end[np.maximum(at, 0)] >= spans[1])
    return merge(np.concatenate([spans[0], top_start[at[inside]]]), np.concatenate([spans[1], top_end[at[inside]]]))


def idle_by_step(events: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """Per profiler step (or the whole window, 'all'): busy, idle by cause, the verdict, and the part of the
    launch idle before graph replays (``idle_launch_graph_ns``: not a verdict's cause, a share of ``launch``)."""
    from fuseprof.analysis.timeline import breakdown, breakdowns

    has_steps = events["profiler_step"].notna().any()
    groups = breakdowns(events, "profiler_step") if has_steps else [("all", breakdown(events))]
    # a step's gaps lie inside its span: both ends are its own work
    inside = (gaps["step"].astype(object) == gaps["prev_step"].astype(object)).to_numpy(bool) if has_steps else \
        np.ones(len(gaps), bool)
    # summed per step as lists (a step's few gaps; a frame's filter and grouping cost a millisecond each)
    idle = {c: gaps[f"idle_{c}_ns"].to_numpy(np.int64) for c in CAUSES}
    idle["launch_graph"] = np.where(_graphed(events, gaps, has_steps), idle["launch"], 0)
    whole = gaps["cause_as_traced"].to_numpy(object)
    for cause in TRACED:
        idle[f"traced_{cause}"] = np.where(whole == cause, gaps["idle_ns"].to_numpy(np.int64), 0)
    keys = gaps["step"].astype(object).to_numpy() if has_steps else np.full(len(gaps), "all", dtype=object)
    by_step: dict[object, dict[str, int]] = {}
    for position in np.flatnonzero(inside).tolist():
        if not pd.isna(keys[position]):  # a missing step is no group, as a grouping leaves it out
            totals = by_step.setdefault(keys[position], dict.fromkeys(idle, 0))
            for cause, values in idle.items():
                totals[cause] += int(values[position])
    rows = []
    for step, totals in groups:
        rows.append(_verdict({"step": step, "span_ns": totals["span_ns"], "busy_ns": totals["busy_ns"]},
                             by_step.get(step, {})))
    between = ~inside
    if between.any():
        rows.append(_verdict({"step": "(between steps)", "span_ns": int(gaps["idle_ns"].to_numpy(np.int64)[between].sum()),
                              "busy_ns": 0}, {c: int(values[between].sum()) for c, values in idle.items()}))
    return pd.DataFrame(rows)


def _graphed(events: pd.DataFrame, gaps: pd.DataFrame, has_steps: bool) -> np.ndarray:
    """Per gap: whether CUDA graphs are already in place around it — a graph launch queued its next work, or it
    lies in, before or after a step that replays a graph, or every step of the window replays one."""
    out = gaps["next_graph"].to_numpy(bool)
    if not has_steps:
        return out
    graphed = set(pd.unique(events.loc[is_graph_launch(events["launch_api"]).to_numpy(bool), "profiler_step"].dropna()))
    if graphed and graphed >= set(pd.unique(events["profiler_step"].dropna())):
        return np.ones(len(gaps), bool)
    return out | (gaps["step"].isin(graphed) | gaps["prev_step"].isin(graphed)).to_numpy(bool)


def _verdict(row: dict[str, object], idle: dict[str, int]) -> dict[str, object]:
    for cause in (*CAUSES, "launch_graph"):
        row[f"idle_{cause}_ns"] = int(idle.get(cause, 0))
    row["verdict"] = VERDICTS[max(VERDICTS, key=lambda k: int(row[k]))]  # type: ignore[call-overload]
    for cause in TRACED:
        row[f"traced_{cause}_ns"] = int(idle.get(f"traced_{cause}", 0))
    row["verdict_as_traced"] = TRACED_VERDICTS[max(TRACED_VERDICTS, key=lambda k: int(row[k]))]  # type: ignore[call-overload]
    return row


def host_activity(gaps: pd.DataFrame, tables: TraceTables, iterations: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """CPU ops and ``record_function`` ranges (not the ``iterations``' own) overlapping the host-bound parts of
    gaps, by overlapped time."""
    host = gaps[(gaps["idle_launch_ns"] > 0) & gaps["tid"].notna()] if "idle_launch_ns" in gaps else gaps.iloc[:0]
    if host.empty:
        return pd.DataFrame(columns=["name", "kind", "overlap_ns", "share_of_host_idle_pct"])
    own = set(zip(iterations["start_ns"].tolist(), iterations["dur_ns"].tolist()))
    parts = []
    for tid, part in host.groupby("tid"):
        gaps_of_tid = merge(part["gap_start_ns"].to_numpy(np.int64), part["launch_ns"].astype("Int64").to_numpy(np.int64))
        for kind, table in (("op", tables.ops), ("range", tables.annotations)):
            mine = table[(table["tid"] == str(tid)).to_numpy(bool)]
            start, dur = mine["start_ns"].to_numpy(np.int64), mine["dur_ns"].to_numpy(np.int64)
            overlap = covered_ns(gaps_of_tid, start, start + dur)
            # the iterations' own ranges left out, among the few spans that overlap (not every op of the trace)
            kept = [i for i in np.flatnonzero(overlap > 0).tolist() if (int(start[i]), int(dur[i])) not in own]
            parts.append(mine[["name"]].iloc[kept].assign(kind=kind, overlap_ns=overlap[kept]))
    overlaps = pd.concat(parts, ignore_index=True)
    total = int((host["launch_ns"].astype("Int64") - host["gap_start_ns"]).clip(lower=0).sum())
    out = overlaps.groupby(["name", "kind"], sort=False)["overlap_ns"].sum().astype(np.int64).reset_index()
    out["share_of_host_idle_pct"] = 100 * out["overlap_ns"] / total if total else np.nan
    return out.sort_values("overlap_ns", ascending=False).head(top).reset_index(drop=True)

