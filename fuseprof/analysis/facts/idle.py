"""Why the GPU was idle: each gap between GPU work split by what the next GPU work waited for, a verdict per
step, and the CPU ops that filled the host-bound parts.

A gap runs from the end of one stretch of GPU work to the start of the next (the union of every GPU
event's interval, so overlapping streams leave no gap). The next event was launched by a call on a host
thread by a call that started at L and returned at R. The gap splits at R (the call's own time is the host's:
it is work the host had to do before the GPU could start, not latency on the GPU's side):

- before R the GPU waited for the host to launch. What the launching thread was doing says why (the
  registry's ``HostCause`` rows, in order): the time it spent inside a DataLoader range is ``data
  loading``; inside one-time start-up, ``launch`` (its part ``startup``); inside a synchronising call, or
  after one that was in progress when the gap began, until the next launch call, ``sync``; inside allocator
  calls ``allocator``; the rest ``launch`` (host-bound: Python, dispatch, anything else);
- after R the work was launched and still did not start: ``event wait`` where the launching thread queued
  it behind an event (a ``StreamWaitEvent`` call between the gap's start and the launch), else ``other``
  (launch latency, another stream).

So a gap is "launch" only for the part until its work was launched, and a graph replay queued behind an
event while the host sits in a blocking copy is an event wait, not host-bound. A gap whose next work a graph
launch queued (``next_graph``), or that lies in, before or after a step holding a graph replay (a serving engine
prepares each replay's inputs with a few eager kernels), is host-bound all the same, but CUDA graphs are already in place:
``idle_launch_graph_ns`` keeps that part of the launch idle apart, so advice does not offer graphs to graphs.

A sync in progress when the gap began holds it until the next launch call starts (the host could not run ahead
of the GPU: whatever it did next, it did after waiting; the op around the call before it, a ``nonzero`` launching
its own kernel, is not the sync's), and each gap names the call (``sync_call``: ``item`` for ``.item()``'s ``_local_scalar_dense``,
``copy`` for a copy to the host, ``synchronize`` for a stream or device synchronisation, ``event`` for an event
synchronisation; ``sync_name`` the op or call), summed per step as ``idle_sync_<call>_ns``, with the number of
gaps a read-back (``.item()``, a copy) left idle (``sync_reads``). One-time CUDA
start-up (the registry's ``start-up`` calls: context and handle creation, module loading; and any runtime call of
a second or more that does not synchronise: a ``cudaFree(0)`` of seconds, a first launch loading its module, lazy
init) is part of the launch idle, kept apart as ``idle_startup_ns`` (as ``idle_launch_graph_ns`` is), never
``allocator``.

A step owns the whole gap between its start (its range's) and its first GPU work: the gap before it is split at
the step's start, the part after belongs to the step (``leading``), so a DataLoader wait at a step's start is the
step's data loading, not "between steps". Before the trace's first GPU work there is no gap: the GPU's timeline,
and the window's, begin there. Communication the GPU did not overlap with computation
(``comm_exposed_ns``: NCCL/RCCL kernels, ``fuseprof.analysis.facts.timeline``) is its own term beside the computation
(``busy_compute_ns``): a step whose busy time wins (the largest of busy and idle by cause, communication
counted busy) and is more exposed communication than computation is ``communication-bound``.

Each gap also holds the part a GPU fed back to back would leave too (``idle_queued_ns``,
``fuseprof.analysis.facts.queued``: the trace's queued latency, at most the gap): the bound without the profiler
counts it as busy, as the un-profiled truth measures busy; the causes above keep it. And the other idle after an
eager launch call returned, beyond what a graph's node leaves (``idle_graph_closes_ns``: the launch's submission
latency, at most 10 µs a gap), which CUDA graphs close with the launch idle: their advice saves both.

The verdict *as traced* (``verdict_as_traced``, the ``traced_<cause>_ns`` columns) reads each gap whole, as a
reader of the raw trace would and as the labelled traces state their rule: ``sync`` when a synchronising or
allocator call (``cudaFree`` synchronises the device) is in progress at the gap's start, on any thread;
``launch`` when the next work's launch call starts at or after it; else ``other``; per step, the largest of busy
(communication counted busy) and the three; a step's leading part lies outside the union of its GPU work and
counts only where a DataLoader range overlaps it (``data``: ``data-bound``). It describes the trace as recorded; the split above is what advice reads. Per step (``ProfilerStep#N``,
or the whole window): busy time and idle time by cause; the verdict names the largest. The CPU activity of
host-bound parts is every CPU op and ``record_function`` range on the launching thread that overlaps
[gap start, launch), ranked by the time it overlaps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.graphs import is_graph_launch
from fuseprof.analysis.facts.queued import graph_closes_ns, queued_ns
from fuseprof.model.intervals import covered_ns, merge, runs
from fuseprof.model.registry import Registry
from fuseprof.model.registry_data import SYNC_OPS
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import matching, rows_named

CAUSES = ("launch", "sync", "data", "alloc", "event", "other")  # the idle_<cause>_ns columns
_HOST_CAUSE = {"sync": "sync", "data loading": "data", "start-up": "startup", "allocator": "alloc",
               "event wait": "event"}
_STARTUP_NS = 1_000_000_000  # a runtime call this long that does not synchronise is one-time start-up
SYNC_CALLS = ("item", "copy", "synchronize", "event")  # which call synchronised: the idle_sync_<call>_ns columns
READ_BACKS = ("item", "copy")  # a value read back on the host: what a CUDA graph cannot hold (``sync_reads``)
_ITEM, _COPY = re.compile(SYNC_OPS["item"]), re.compile(SYNC_OPS["copy"])
VERDICTS = {"busy_ns": "GPU-bound", "idle_launch_ns": "host-bound", "idle_sync_ns": "sync-bound",
            "idle_data_ns": "data-bound", "idle_alloc_ns": "allocator", "idle_event_ns": "event wait",
            "idle_other_ns": "other idle"}
TERMS = (*VERDICTS, "comm_exposed_ns", "busy_compute_ns")  # what ``verdict_of`` reads
TRACED = ("launch", "sync", "other", "data")  # a gap's one cause as traced (the traced_<cause>_ns columns)
TRACED_VERDICTS = {"busy_ns": "GPU-bound", "traced_launch_ns": "host-bound", "traced_sync_ns": "sync-bound",
                   "traced_other_ns": "other idle", "traced_data_ns": "data-bound"}
_EMPTY = ["gap_start_ns", "gap_end_ns", "idle_ns", "cause", "cause_as_traced", "step", "prev_step", "leading",
          "launch_ns", "tid", "next_graph", "sync_call", "sync_name", *(f"idle_{c}_ns" for c in CAUSES),
          "idle_startup_ns", "idle_queued_ns", "idle_graph_closes_ns"]


def _of_thread(threads: pd.Series, tid: object) -> np.ndarray:
    """Which rows ran on thread ``tid``, as their text (``astype(str) == str(tid)``; a missing thread: none), each
    distinct thread compared once (``matching``), not every row turned into text: a few threads, thousands of rows."""
    return matching(threads, re.compile(rf"\A{re.escape(str(tid))}\Z"))


def _intervals(rows: pd.DataFrame, tid: object | None) -> tuple[np.ndarray, np.ndarray]:
    """The merged intervals of ``rows`` on one thread (all threads where ``tid`` is None)."""
    start = rows["start_ns"].to_numpy(np.int64)
    end = start + rows["dur_ns"].to_numpy(np.int64)
    if tid is not None:  # the thread's on the columns' arrays, not a filtered frame
        mine = _of_thread(rows["tid"], tid)
        start, end = start[mine], end[mine]
    return merge(start, end)


def idle_gaps(events: pd.DataFrame, tables: TraceTables, registry: Registry,
              steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per idle gap of the GPU (split at a step's start, ``steps``: the iterations' ``name`` and
    ``start_ns``): start, end, length, its time by cause (``idle_<cause>_ns``, ``idle_startup_ns`` a part of the
    launch idle), its largest cause, the next event's step, launch start and launching thread, whether a graph
    launch queued it (``next_graph``), whether it leads its step (``leading``) and the synchronising call before
    its launch (``sync_call``, ``sync_name``)."""
    order = np.argsort(events["start_ns"].to_numpy(np.int64), kind="stable")  # positions, not a sorted frame of
    start = events["start_ns"].to_numpy(np.int64)[order]  # forty columns: the four read are taken at those alone
    end = start + events["dur_ns"].to_numpy(np.int64)[order]
    firsts = runs(start, end)  # the stretches of work, as ``merge`` makes them, each one's events together
    if not firsts.size:
        return pd.DataFrame(columns=_EMPTY)
    s, e = start[firsts], np.maximum.reduceat(end, firsts)
    nxt = order[firsts[1:]]  # the first event of each stretch after a gap
    block = np.repeat(np.arange(firsts.size), np.diff(np.append(firsts, start.size)))  # each event's stretch
    ends_last = np.flatnonzero(end == e[block])  # the events that end each stretch
    last = ends_last[np.unique(block[ends_last], return_index=True)[1]]  # the first of them
    prev = order[last[:-1]]

    def at(column: str, rows: np.ndarray) -> pd.api.extensions.ExtensionArray | np.ndarray:
        values = events[column].iloc[rows]  # a time as stored: Int64's to_numpy is float where one is missing
        return values.array if column.endswith("_ns") else values.to_numpy()

    gaps = _at_step_starts(pd.DataFrame({
        "gap_start_ns": e[:-1], "gap_end_ns": s[1:], "step": at("profiler_step", nxt),
        "prev_step": at("profiler_step", prev), "launch_ns": at("launch_start_ns", nxt),
        "launch_dur_ns": at("launch_dur_ns", nxt), "tid": at("tid", nxt),
        "next_graph": is_graph_launch(events["launch_api"].iloc[nxt]).to_numpy(bool)}), steps)
    named = _named(tables, registry)
    loading = _loading(named[1])
    gaps = _first_lead(gaps, events.iloc[order[:1]], steps, loading)
    if gaps.empty:
        return pd.DataFrame(columns=_EMPTY)
    gs, ge = gaps["gap_start_ns"].to_numpy(np.int64), gaps["gap_end_ns"].to_numpy(np.int64)
    launch = gaps["launch_ns"].astype("Int64")  # integers: a clock of µs since the epoch is 1.7e18 ns
    # the host is busy until its launch call returns: the call's own time is the host's, not the GPU's latency
    returned = launch + gaps.pop("launch_dur_ns").astype("Int64").fillna(0)
    split = np.where(launch.isna().to_numpy(), gs, np.clip(returned.fillna(0).to_numpy(np.int64), gs, ge))
    called = np.clip(launch.fillna(0).to_numpy(np.int64), gs, split)  # where the launch call began, in the gap
    parts = {c: np.zeros(len(gaps), np.int64) for c in (*CAUSES, "startup")}
    sync_call, sync_name = np.full(len(gaps), "", object), np.full(len(gaps), "", object)
    for tid in pd.unique(gaps["tid"].astype(object)):
        mine = (gaps["tid"].astype(object) == tid).to_numpy() if tid is not None and not pd.isna(tid) else \
            gaps["tid"].isna().to_numpy()
        thread = None if tid is None or pd.isna(tid) else tid
        window = (gs[mine], ge[mine], split[mine], called[mine])
        sync_call[mine], sync_name[mine] = _split_gaps(parts, mine, window, named, tables, registry, thread)
    traced = _whole_gap_causes(gs, launch, tables, registry)
    data = covered_ns(loading, gs, ge) > 0 if loading is not None else np.zeros(len(gs), bool)
    return _labelled(gaps, parts, (sync_call, sync_name), traced, data)


def _labelled(gaps: pd.DataFrame, parts: dict[str, np.ndarray], syncs: tuple[np.ndarray, np.ndarray],
              traced: np.ndarray, data: np.ndarray) -> pd.DataFrame:
    """``gaps`` with their time by cause (``parts``), synchronising call (``syncs``: kind, name; kept where a sync
    took part of the gap), largest cause and cause as traced (``traced``: the whole gap's; a leading part outside
    the step's GPU work is ``data`` where a DataLoader range overlaps it, else not read at all), the eleven
    columns joined at once: one by one, each insert into the frame cost a third of a millisecond."""
    held = parts["sync"] > 0
    names = np.array([*CAUSES, "startup"])
    largest = np.vstack([parts[c] - (parts["startup"] if c == "launch" else 0) for c in names])
    added = {**{f"idle_{cause}_ns": values for cause, values in parts.items()},
             "sync_call": np.where(held, syncs[0], ""), "sync_name": np.where(held, syncs[1], ""),
             "cause": names[np.argmax(largest, axis=0)],
             **_queued(gaps["idle_ns"].to_numpy(np.int64), gaps["next_graph"].to_numpy(bool), parts["other"]),
             "cause_as_traced": np.where(gaps["leading"].to_numpy(bool), np.where(data, "data", "lead"), traced)}
    return pd.concat([gaps, pd.DataFrame(added, index=gaps.index)], axis=1)[_EMPTY]


def _queued(length: np.ndarray, graph: np.ndarray, other: np.ndarray) -> dict[str, np.ndarray]:
    """A gap's part a GPU fed back to back leaves too, and its other idle a CUDA graph closes
    (``fuseprof.analysis.facts.queued``)."""
    return {"idle_queued_ns": queued_ns(length, graph, other), "idle_graph_closes_ns": graph_closes_ns(length, graph, other)}


def _at_step_starts(gaps: pd.DataFrame, steps: pd.DataFrame | None) -> pd.DataFrame:
    """The gaps before a step's first GPU work split at the step's start: the part after it is the step's
    (``leading``, ``prev_step`` the step itself), the part before stays between steps."""
    gaps["leading"] = False
    gaps["idle_ns"] = gaps["gap_end_ns"] - gaps["gap_start_ns"]
    if steps is None or steps.empty or not gaps["step"].notna().any():
        return gaps
    begins = _begins(steps)  # a map's missing keys would make its integers floats, 256 ns apart on an epoch clock
    found = [begins.get(s) for s in gaps["step"].astype(object)]
    at = np.array([0 if b is None else b for b in found], np.int64)
    gs, ge = gaps["gap_start_ns"].to_numpy(np.int64), gaps["gap_end_ns"].to_numpy(np.int64)
    crossing = (gaps["step"].astype(object) != gaps["prev_step"].astype(object)).to_numpy(bool) & \
        np.array([b is not None for b in found], bool) & (at < ge)
    if not crossing.any():
        return gaps
    cut = crossing & ~(at <= gs)  # the step began inside the gap: the part before its start stays between steps
    return _split_at(gaps, cut, crossing, at)


def _split_at(gaps: pd.DataFrame, cut: np.ndarray, crossing: np.ndarray, at: np.ndarray) -> pd.DataFrame:
    """``_at_step_starts``' split on positions: the ``cut`` gaps' parts before their step's start (``at``; their next
    work is the step's: the host had launched nothing by its end) beside every gap, the ``crossing`` ones from the
    step's start on and the step's own, in order of start and end (a stable sort); taken once from the frame and
    given their columns, not filtered, copied, set by mask, joined and sorted as frames (a few ms a rank)."""
    n = int(cut.sum())
    gs, ge = gaps["gap_start_ns"].to_numpy(np.int64), gaps["gap_end_ns"].to_numpy(np.int64)
    rows = np.concatenate([np.flatnonzero(cut), np.arange(len(gaps))])
    start, end = np.concatenate([gs[cut], np.where(cut, at, gs)]), np.concatenate([at[cut], ge])
    order = np.lexsort((end, start))
    before = (np.arange(rows.size) < n)[order]
    after = np.concatenate([np.zeros(n, bool), crossing])[order]
    out = gaps.take(rows[order]).reset_index(drop=True)
    launch, took = (out[c].astype("Int64") for c in ("launch_ns", "launch_dur_ns"))
    out["gap_start_ns"], out["gap_end_ns"] = start[order], end[order]
    out["prev_step"] = out["step"].where(after, out["prev_step"])
    out["leading"] = after
    out["launch_ns"] = pd.arrays.IntegerArray(np.where(before, end[order], launch.fillna(0).to_numpy(np.int64)),
                                              launch.isna().to_numpy() & ~before)
    out["launch_dur_ns"] = pd.arrays.IntegerArray(np.where(before, 0, took.fillna(0).to_numpy(np.int64)),
                                                  took.isna().to_numpy() & ~before)
    out["idle_ns"] = out["gap_end_ns"] - out["gap_start_ns"]
    return out


def _loading(ranges: dict[str, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray] | None:
    """The DataLoader's ranges on any thread, merged (None where the trace has none)."""
    data = ranges.get("data loading")
    return _intervals(data, None) if data is not None and len(data) else None


def _first_lead(gaps: pd.DataFrame, first: pd.DataFrame, steps: pd.DataFrame | None,
                loading: tuple[np.ndarray, np.ndarray] | None) -> pd.DataFrame:
    """``gaps`` with the first step's leading part before them: from its start (its range's) to the trace's first GPU
    work (``first``, that work's event), where that work is the step's and the DataLoader (``loading``: its merged
    ranges) ran in it. A DataLoader wait at the start of the first profiled step is that step's data loading, as
    at every other step's start (there is no GPU work before it, so no gap would hold it). Without one the part
    is left out: there the host's time is mostly the profiler opening its window (on the H100 captures of
    tests/fixtures/truth_unprofiled/h100 the first step's lead was 1.1-6x the later steps'), and in a loop whose host
    runs ahead the GPU would not have waited at all."""
    step = first["profiler_step"].iloc[0] if len(first) else None
    begins = _begins(steps)
    if step is None or pd.isna(step) or step not in begins or begins[step] >= int(first["start_ns"].iloc[0]):
        return gaps
    lo, hi = np.array([begins[step]], np.int64), first["start_ns"].to_numpy(np.int64)[:1]
    if loading is None or not covered_ns(loading, lo, hi)[0]:
        return gaps
    lead = pd.DataFrame({
        "gap_start_ns": [begins[step]], "gap_end_ns": [int(first["start_ns"].iloc[0])], "step": [step],
        "prev_step": [step], "launch_ns": first["launch_start_ns"].to_numpy(), "launch_dur_ns":
        first["launch_dur_ns"].to_numpy(), "tid": first["tid"].to_numpy(), "next_graph":
        is_graph_launch(first["launch_api"]).to_numpy(bool), "leading": [True]})
    lead["idle_ns"] = lead["gap_end_ns"] - lead["gap_start_ns"]
    return pd.concat([lead, gaps], ignore_index=True) if len(gaps) else lead


def _begins(steps: pd.DataFrame | None) -> dict[object, int]:
    """Each step's start (its range's), by name."""
    if steps is None or steps.empty:
        return {}
    begins: dict[object, int] = {}
    for name, start in zip(steps["name"].tolist(), steps["start_ns"].tolist()):  # a grouping's min, on lists
        if not pd.isna(name) and not pd.isna(start):
            begins[name] = min(begins.get(name, int(start)), int(start))
    return begins


def _named(tables: TraceTables, registry: Registry) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Each host cause's launch calls and ranges; start-up's calls with every call of ``_STARTUP_NS`` or more
    that does not synchronise (no runtime call takes a second in a steady loop unless it waits for the GPU)."""
    calls: dict[str, pd.DataFrame] = {c.cause: rows_named(tables.launches, c.calls)
                                      for c in registry.host_causes if c.calls}
    ranges: dict[str, pd.DataFrame] = {c.cause: rows_named(tables.annotations, c.ranges)
                                       for c in registry.host_causes if c.ranges}
    if "start-up" in calls:
        waits = calls["sync"].index if "sync" in calls else tables.launches.index[:0]
        long = tables.launches.index[(tables.launches["dur_ns"].to_numpy(np.int64) >= _STARTUP_NS)].difference(waits)
        calls["start-up"] = tables.launches.loc[calls["start-up"].index.union(long)]
    return calls, ranges


def _whole_gap_causes(gs: np.ndarray, launch: pd.Series, tables: TraceTables, registry: Registry) -> np.ndarray:
    """Each gap's one cause as traced (the module docstring): sync, launch or other."""
    patterns = [c.calls for c in registry.host_causes if c.cause in ("sync", "allocator") and c.calls]
    start, end = _intervals(rows_named(tables.launches, *patterns), None) if patterns else (np.zeros(0, np.int64),) * 2
    at = np.searchsorted(start, gs, side="right") - 1  # the merged interval that starts last at or before the gap
    syncing = (at >= 0) & (end[np.maximum(at, 0)] > gs) if start.size else np.zeros(len(gs), bool)
    launched_after = (launch.fillna(np.iinfo(np.int64).min).to_numpy(np.int64) >= gs)
    return np.where(syncing, "sync", np.where(launched_after, "launch", "other"))


def _split_gaps(parts: dict[str, np.ndarray], mine: np.ndarray, window: tuple[np.ndarray, ...],
                named: tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]], tables: TraceTables,
                registry: Registry, tid: object | None) -> tuple[np.ndarray, np.ndarray]:
    """The causes of the gaps whose next work one thread launched (the module docstring), into ``parts``;
    ``window``: the gaps' starts, ends, launch returns and launch starts; ``named``: each host cause's launch calls
    and ranges (``_named``). Each cause takes its part of [start, launch return) in the registry's order, none
    what an earlier one took. Returns each gap's synchronising call (kind, name)."""
    g0, g1, at, called = window
    calls = {cause: _intervals(rows, tid) for cause, rows in named[0].items()}
    ranges = {cause: _intervals(rows, tid) for cause, rows in named[1].items()}
    kinds, names = np.full(g0.size, "", object), np.full(g0.size, "", object)
    if "sync" in calls:
        kinds, names = _which_sync(_sync_calls(named[0]["sync"], tables.ops, tid), g0, at)
        spans = calls["sync"]
        # a sync in progress when the GPU fell idle holds the host until the next launch call begins
        waited = np.searchsorted(spans[0], g0, side="right") - 1
        held = (waited >= 0) & (spans[1][np.maximum(waited, 0)] > g0) if spans[0].size else np.zeros(g0.size, bool)
        calls["sync"] = merge(np.concatenate([spans[0], g0[held]]), np.concatenate([spans[1], called[held]]))
    taken = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    for host in registry.host_causes:
        cause = _HOST_CAUSE[host.cause]
        found = [x for x in (calls.get(host.cause), ranges.get(host.cause)) if x is not None]
        if cause == "event" or not found:
            continue
        joined = merge(np.concatenate([taken[0], *(x[0] for x in found)]),
                       np.concatenate([taken[1], *(x[1] for x in found)]))
        part = covered_ns(joined, g0, at) - covered_ns(taken, g0, at)
        parts["launch" if cause == "startup" else cause][mine] += part  # start-up: a part of the launch idle
        parts[cause][mine] += part if cause == "startup" else 0
        taken = joined
    parts["launch"][mine] += (at - g0) - covered_ns(taken, g0, at)
    waits = calls.get("event wait")
    after = g1 - at
    if waits is not None and waits[0].size:
        queued = np.searchsorted(waits[0], at, side="right") - np.searchsorted(waits[0], g0, side="left") > 0
    else:
        queued = np.zeros(len(g0), bool)
    parts["event"][mine] += np.where(queued, after, 0)
    parts["other"][mine] += np.where(queued, 0, after)
    return kinds, names


def _sync_calls(rows: pd.DataFrame, ops: pd.DataFrame, tid: object | None) -> dict[str, np.ndarray]:
    """The thread's synchronising calls by start: their own spans (``start``, ``end``), those joined with the
    outermost op around each (``lo``, ``hi``: ``.item()``'s, ``.cpu()``'s: the host time a sync costs), which
    call each is (``kind``, ``SYNC_CALLS``) and its op's or its own ``name``."""
    if tid is not None:
        rows = rows[_of_thread(rows["tid"], tid)]
    rows = rows.sort_values("start_ns", kind="stable")
    start = rows["start_ns"].to_numpy(np.int64)
    end = start + rows["dur_ns"].to_numpy(np.int64)
    top_start, top_end, top_name = _outermost(ops, tid)
    k = np.maximum(np.searchsorted(top_start, start, side="right") - 1, 0)
    inside = (np.searchsorted(top_start, start, side="right") > 0) & (top_end[k] >= end) if top_start.size else \
        np.zeros(start.size, bool)
    op = np.where(inside, top_name[k], "") if top_start.size else np.full(start.size, "", object)
    own = rows["name"].astype(str).to_numpy(object)
    return {"start": start, "end": end, "lo": np.where(inside, top_start[k], start) if top_start.size else start,
            "hi": np.where(inside, top_end[k], end) if top_start.size else end, "name": np.where(inside, op, own),
            "kind": np.array([_call_kind(o, c) for o, c in zip(op.tolist(), own.tolist())], dtype=object)}


def _which_sync(found: dict[str, np.ndarray], g0: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per gap, the synchronising call of its host part: the last that began before its launch and ended after
    its start (``kind``, ``name``; empty where none)."""
    if not found["start"].size:
        return np.full(g0.size, "", object), np.full(g0.size, "", object)
    last = np.searchsorted(found["start"], at, side="left") - 1
    pick = np.maximum(last, 0)
    hit = (last >= 0) & (found["end"][pick] > g0)
    return np.where(hit, found["kind"][pick], ""), np.where(hit, found["name"][pick], "")


def _call_kind(op: str, call: str) -> str:
    """Which call synchronised (``SYNC_CALLS``): by the op around it where that says (.item(), a copy to the
    host), else by the call."""
    if _ITEM.search(op):
        return "item"
    if _COPY.search(op) or (not op and _COPY.search(call)):
        return "copy"
    return "event" if "Event" in call else "copy" if _COPY.search(call) else "synchronize"


def _outermost(ops: pd.DataFrame, tid: object | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The thread's outermost CPU ops (none around them): starts (sorted), ends, names."""
    mine = ops if tid is None else ops[_of_thread(ops["tid"], tid)]
    order = np.argsort(mine["start_ns"].to_numpy(np.int64), kind="stable")
    start = mine["start_ns"].to_numpy(np.int64)[order]
    end = (mine["start_ns"] + mine["dur_ns"]).to_numpy(np.int64)[order]
    name = mine["name"].astype(str).to_numpy(object)[order]
    if not start.size:
        return start, end, name
    top = start >= np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]])
    return start[top], end[top], name[top]


def sync_spans(tables: TraceTables, registry: Registry, tid: object) -> tuple[np.ndarray, np.ndarray]:
    """The host time synchronisations cost on one thread: the registry's sync calls, each joined with the
    outermost CPU op around it (``.item()``'s, ``.cpu()``'s), as merged intervals."""
    patterns = [c.calls for c in registry.host_causes if c.cause == "sync" and c.calls]
    found = _sync_calls(rows_named(tables.launches, *patterns), tables.ops, tid)
    return merge(found["lo"], found["hi"])


def idle_by_step(events: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """Per profiler step (or the whole window, 'all'): its span (its leading part included), busy, computation
    and exposed communication, idle by cause, by synchronising call and the parts of the launch idle that are no
    verdict's cause (``idle_launch_graph_ns`` before graph replays, ``idle_startup_ns``), and the verdicts."""
    from fuseprof.analysis.facts.timeline import breakdown, breakdowns

    has_steps = events["profiler_step"].notna().any()
    groups = breakdowns(events, "profiler_step") if has_steps else [("all", breakdown(events))]
    # a step's gaps lie inside its span (both ends its own work) or lead it (after its start)
    inside = (gaps["step"].astype(object) == gaps["prev_step"].astype(object)).to_numpy(bool) if has_steps else \
        np.ones(len(gaps), bool)
    # summed per step as lists (a step's few gaps; a frame's filter and grouping cost a millisecond each)
    idle = {c: gaps[f"idle_{c}_ns"].to_numpy(np.int64) for c in (*CAUSES, "startup", "queued")}
    graphed = _graphed(events, gaps, has_steps)
    idle["launch_graph"] = np.where(graphed, idle["launch"] - idle["startup"], 0)
    idle["graph_closes"] = np.where(graphed, 0, gaps["idle_graph_closes_ns"].to_numpy(np.int64))
    calls = gaps["sync_call"].to_numpy(object)
    for call in SYNC_CALLS:
        idle[f"sync_{call}"] = np.where(calls == call, idle["sync"], 0)
    idle["reads"] = (np.isin(calls, READ_BACKS) & (idle["sync"] > 0)).astype(np.int64)
    whole = gaps["cause_as_traced"].to_numpy(object)
    for cause in TRACED:
        idle[f"traced_{cause}"] = np.where(whole == cause, gaps["idle_ns"].to_numpy(np.int64), 0)
    idle["leading"] = np.where(gaps["leading"].to_numpy(bool), gaps["idle_ns"].to_numpy(np.int64), 0)
    keys = gaps["step"].astype(object).to_numpy() if has_steps else np.full(len(gaps), "all", dtype=object)
    by_step = _step_totals(idle, keys, inside)
    rows = []
    for step, totals in groups:
        mine = by_step.get(step, {})
        rows.append(_verdict({"step": step, "span_ns": totals["span_ns"] + mine.get("leading", 0),
                              "busy_ns": totals["busy_ns"], "comm_exposed_ns": totals["exposed_communication_ns"]},
                             mine))
    between = ~inside
    if between.any():
        rows.append(_verdict({"step": "(between steps)", "span_ns": int(gaps["idle_ns"].to_numpy(np.int64)[between].sum()),
                              "busy_ns": 0, "comm_exposed_ns": 0},
                             {c: int(values[between].sum()) for c, values in idle.items()}))
    return pd.DataFrame(rows)


def _step_totals(idle: dict[str, np.ndarray], keys: np.ndarray, inside: np.ndarray) -> dict[object, dict[str, int]]:
    """Each step's sums of the ``idle`` columns over its gaps (``inside``: the gaps that are a step's; ``keys``:
    each gap's step), as integers on arrays: a per-gap, per-column loop was most of ``idle_by_step``'s time."""
    kept = inside & ~pd.isna(keys)  # a missing step is no group, as a grouping leaves it out
    codes, steps = pd.factorize(keys[kept])
    sums = {}
    for cause, values in idle.items():
        total = np.zeros(len(steps), np.int64)
        np.add.at(total, codes, values[kept].astype(np.int64))
        sums[cause] = total.tolist()
    return {step: {cause: sums[cause][k] for cause in idle} for k, step in enumerate(steps)}


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
    row["busy_compute_ns"] = int(row["busy_ns"]) - int(row["comm_exposed_ns"])  # type: ignore[call-overload]
    for cause in (*CAUSES, "launch_graph", "startup", "queued", "graph_closes", *(f"sync_{c}" for c in SYNC_CALLS)):
        row[f"idle_{cause}_ns"] = int(idle.get(cause, 0))
    row["sync_reads"] = int(idle.get("reads", 0))
    row["verdict"] = verdict_of(row)
    for cause in TRACED:
        row[f"traced_{cause}_ns"] = int(idle.get(f"traced_{cause}", 0))
    row["verdict_as_traced"] = TRACED_VERDICTS[max(TRACED_VERDICTS, key=lambda k: int(row[k]))]  # type: ignore[call-overload]
    return row


def verdict_of(row: Mapping[str, object]) -> str:
    """The verdict of a step, a window or a sum of them (``TERMS``; one the row lacks is 0): the largest of busy
    and idle by cause (``VERDICTS``), busy named ``communication-bound`` where the communication the GPU did not
    overlap is more of it than the computation."""
    values = {k: float(row.get(k, 0) or 0) for k in TERMS}  # type: ignore[arg-type]
    verdict = VERDICTS[max(VERDICTS, key=lambda k: values[k])]
    communication = verdict == "GPU-bound" and values["comm_exposed_ns"] > values["busy_compute_ns"]
    return "communication-bound" if communication else verdict


def verdict_terms(rows: pd.DataFrame) -> list[dict[str, object]]:
    """Per row, the columns ``verdict_of`` reads (``TERMS``, those the frame has): its verdict as of the
    whole row, without boxing the row's other columns (``to_dict`` per step: 3 ms of a rank's 90 steps)."""
    present = [k for k in TERMS if k in rows]
    if not present:
        return [{} for _ in range(len(rows))]
    return [dict(zip(present, values)) for values in zip(*(rows[k].tolist() for k in present))]


def host_activity(gaps: pd.DataFrame, tables: TraceTables, iterations: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """CPU ops and ``record_function`` ranges (not the ``iterations``' own) overlapping the host-bound parts of
    gaps, by overlapped time."""
    host = gaps[(gaps["idle_launch_ns"] > 0) & gaps["tid"].notna()] if "idle_launch_ns" in gaps else gaps.iloc[:0]
    if host.empty:
        return _activity({})
    own = set(zip(iterations["start_ns"].tolist(), iterations["dur_ns"].tolist()))
    overlaps: dict[tuple[str, str], int] = {}  # per (name, kind), in the order first seen, as a grouping keeps them
    for tid, part in host.groupby("tid"):
        gaps_of_tid = merge(part["gap_start_ns"].to_numpy(np.int64), part["launch_ns"].astype("Int64").to_numpy(np.int64))
        for kind, table in (("op", tables.ops), ("range", tables.annotations)):
            mine = np.flatnonzero(_of_thread(table["tid"], tid))  # rows, not a filtered frame
            start, dur = table["start_ns"].to_numpy(np.int64)[mine], table["dur_ns"].to_numpy(np.int64)[mine]
            overlap = covered_ns(gaps_of_tid, start, start + dur)
            # the iterations' own ranges left out, among the few spans that overlap (not every op of the trace)
            kept = [i for i in np.flatnonzero(overlap > 0).tolist() if (int(start[i]), int(dur[i])) not in own]
            for name, ns in zip(table["name"].iloc[mine[kept]].tolist(), overlap[kept].tolist()):
                if not pd.isna(name):  # a missing name is no group
                    overlaps[(name, kind)] = overlaps.get((name, kind), 0) + ns
    total = int((host["launch_ns"].astype("Int64") - host["gap_start_ns"]).clip(lower=0).sum())
    return _activity(overlaps, total).sort_values("overlap_ns", ascending=False).head(top).reset_index(drop=True)


def _activity(overlaps: dict[tuple[str, str], int], total: int = 0) -> pd.DataFrame:
    """``host_activity``'s table from its sums per (name, kind): text, text, int64 and float64 columns whether or
    not anything overlapped (columns made from empty lists would be float64)."""
    out = pd.DataFrame({"name": pd.Series([k[0] for k in overlaps], dtype=str),
                        "kind": pd.Series([k[1] for k in overlaps], dtype=str),
                        "overlap_ns": np.array(list(overlaps.values()), np.int64)})
    out["share_of_host_idle_pct"] = 100 * out["overlap_ns"] / total if total else np.nan
    return out
