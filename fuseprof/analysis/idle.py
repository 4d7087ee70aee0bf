"""Why the GPU was idle: each gap between GPU work attributed to a cause, a verdict per step, and the
CPU ops that filled the host-bound gaps.

A gap runs from the end of one stretch of GPU work to the start of the next (the union of every
GPU event's interval, so overlapping streams leave no gap). Its cause, in this order:

    sync    a synchronising call (``*Synchronize``, a blocking ``cudaMemcpy``/``hipMemcpy``/
            ``hipMemcpyWithStream``: what ``.item()`` and ``.cpu()`` do) was in progress when the GPU
            went idle: the host waited for the GPU, then had to launch again
    launch  the launch call of the next GPU event began after the gap began: the GPU waited for the
            host (host-bound: Python, dispatch, or anything else the host did in between)
    other   the next event had been launched before the gap began and still started late (a wait on
            another stream or event, or launch latency)

Per step (``ProfilerStep#N``, or the whole window): busy time and idle time by cause; the verdict
names the largest of busy (GPU-bound), launch (host-bound), sync (sync-bound) and other. The CPU
activity of host-bound gaps is every CPU op and ``record_function`` range on the launching thread
that overlaps [gap start, next launch), ranked by the time it overlaps.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from fuseprof.model.intervals import covered_ns, merge
from fuseprof.parse.trace_events import TraceTables

SYNC_CALL = re.compile(r"Synchronize|^(?:cuda|hip)Memcpy(?:WithStream)?$|^cuMemcpy[DH]to[DH](?:_v2)?$")
CAUSES = ("launch", "sync", "other")
VERDICTS = {"busy_ns": "GPU-bound", "idle_launch_ns": "host-bound", "idle_sync_ns": "sync-bound",
            "idle_other_ns": "other idle"}


def idle_gaps(events: pd.DataFrame, tables: TraceTables) -> pd.DataFrame:
    """One row per idle gap of the GPU: start, end, length, cause, the next event's step, launch
    start and launching thread."""
    ordered = events.sort_values("start_ns", kind="stable")
    start = ordered["start_ns"].to_numpy(np.int64)
    end = (ordered["start_ns"] + ordered["dur_ns"]).to_numpy(np.int64)
    s, e = merge(start, end)
    if s.size < 2:
        return pd.DataFrame(columns=["gap_start_ns", "gap_end_ns", "idle_ns", "cause", "step", "prev_step",
                                     "launch_ns", "tid"])
    nxt = ordered.iloc[np.searchsorted(start, s[1:], side="left")]
    block = np.searchsorted(s, start, side="right") - 1  # the stretch of work each event belongs to
    last = pd.Series(end).groupby(block).idxmax().to_numpy()  # the event that ends each stretch
    prev = ordered.iloc[last[:-1]]
    gaps = pd.DataFrame({"gap_start_ns": e[:-1], "gap_end_ns": s[1:], "idle_ns": s[1:] - e[:-1],
                         "step": nxt["profiler_step"].to_numpy(), "prev_step": prev["profiler_step"].to_numpy(),
                         "launch_ns": nxt["launch_start_ns"].to_numpy(), "tid": nxt["tid"].to_numpy()})
    syncs = tables.launches[tables.launches["name"].str.contains(SYNC_CALL.pattern, regex=True)]
    sync_start = syncs["start_ns"].to_numpy(np.int64)
    sync_end = sync_start + syncs["dur_ns"].to_numpy(np.int64)
    in_sync = covered_ns(merge(sync_start, sync_end + 1), gaps["gap_start_ns"].to_numpy(np.int64),
                         gaps["gap_start_ns"].to_numpy(np.int64) + 1) > 0  # start ≤ gap start ≤ end
    launched_late = pd.to_numeric(gaps["launch_ns"], errors="coerce").to_numpy() >= gaps["gap_start_ns"].to_numpy()
    gaps["cause"] = np.where(in_sync, "sync", np.where(launched_late, "launch", "other"))
    return gaps


def idle_by_step(events: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """Per profiler step (or the whole window, 'all'): busy, idle by cause and the verdict."""
    from fuseprof.analysis.timeline import breakdown

    has_steps = events["profiler_step"].notna().any()
    groups = events.groupby("profiler_step", sort=False) if has_steps else [("all", events)]
    # a step's gaps lie inside its span: both ends are its own work
    inside = (gaps["step"].astype(object) == gaps["prev_step"].astype(object)) if has_steps else \
        pd.Series(True, index=gaps.index)
    idle = gaps[inside].groupby([gaps.loc[inside, "step"].astype(object) if has_steps else
                                 pd.Series("all", index=gaps.index[inside]), "cause"])["idle_ns"].sum().to_dict()
    rows = []
    for step, part in groups:
        totals = breakdown(part)
        rows.append(_verdict({"step": step, "span_ns": totals["span_ns"], "busy_ns": totals["busy_ns"]},
                             {cause: idle.get((step, cause), 0) for cause in CAUSES}))
    between = gaps[~inside]
    if not between.empty:
        rows.append(_verdict({"step": "(between steps)", "span_ns": int(between["idle_ns"].sum()), "busy_ns": 0},
                             between.groupby("cause")["idle_ns"].sum().to_dict()))
    return pd.DataFrame(rows)


def _verdict(row: dict[str, object], idle: dict[str, int]) -> dict[str, object]:
    for cause in CAUSES:
        row[f"idle_{cause}_ns"] = int(idle.get(cause, 0))
    row["verdict"] = VERDICTS[max(VERDICTS, key=lambda k: int(row[k]))]  # type: ignore[call-overload]
    return row


def host_activity(gaps: pd.DataFrame, tables: TraceTables, top: int = 10) -> pd.DataFrame:
    """CPU ops and ``record_function`` ranges overlapping the host-bound gaps, by overlapped time."""
    host = gaps[(gaps["cause"] == "launch") & gaps["tid"].notna()]
    if host.empty:
        return pd.DataFrame(columns=["name", "kind", "overlap_ns", "share_of_host_idle_pct"])
    spans = pd.concat([tables.ops.assign(kind="op"), tables.annotations.assign(kind="range")], ignore_index=True)
    spans = spans[~spans["name"].str.startswith("ProfilerStep#")]
    parts = []
    for tid, part in host.groupby("tid"):
        mine = spans[spans["tid"] == str(tid)]
        start = mine["start_ns"].to_numpy(np.int64)
        gaps_of_tid = merge(part["gap_start_ns"].to_numpy(np.int64),
                            pd.to_numeric(part["launch_ns"]).astype(np.int64).to_numpy())
        parts.append(mine[["name", "kind"]].assign(
            overlap_ns=covered_ns(gaps_of_tid, start, start + mine["dur_ns"].to_numpy(np.int64))))
    overlaps = pd.concat(parts, ignore_index=True)
    overlaps = overlaps[overlaps["overlap_ns"] > 0]
    total = int((pd.to_numeric(host["launch_ns"]) - host["gap_start_ns"]).clip(lower=0).sum())
    out = overlaps.groupby(["name", "kind"], sort=False)["overlap_ns"].sum().astype(np.int64).reset_index()
    out["share_of_host_idle_pct"] = 100 * out["overlap_ns"] / total if total else np.nan
    return out.sort_values("overlap_ns", ascending=False).head(top).reset_index(drop=True)
