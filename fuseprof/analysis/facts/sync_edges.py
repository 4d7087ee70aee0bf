"""The dependencies CUPTI's synchronisation records state (the trace's ``syncs`` table, Kineto's ``cuda_sync``
events), read as edges for the step graphs (``fuseprof.analysis.paths.critical_path``).

    Stream Wait Event   stream S waits for the event recorded on stream W (``wait_on_stream``): the work on S
                        launched after the wait call starts after the work on W launched before the event's
                        record call (``wait_on_cuda_event_record_corr_id``, torch ≥ 2.1's Kineto) ends. Where the
                        record is not named (older Kineto; -1, Kineto's "unknown") or named after the wait (damage:
                        an event is recorded before it is waited on), the wait call itself bounds it: the event was recorded
                        before it was waited on, so the work on W launched before the wait — the latest the
                        record can have seen. A GPU→GPU edge from that work on W to the first work on S after it.
    Stream Sync         the host waits for stream S: the call waits for the last work on that stream launched
                        before it, never for another stream's
    Event Sync          the host waits for the event recorded on W: the last work on W launched before the record
    Context Sync        the host waits for the whole device: every stream (no lane to name)

Correlation ids order the calls of one process (CUPTI numbers every runtime and driver call as it is made), so
"launched before" is a smaller id, whatever the threads. A record whose call, stream or the work around it is not
in the trace gives no edge: a wait on a stream that ran nothing is satisfied at once.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.timeline import device_streams

STREAM_WAIT, STREAM_SYNC, EVENT_SYNC = "Stream Wait Event", "Stream Sync", "Event Sync"


@dataclass
class SyncEdges:
    """``gpu``: per GPU event (its index in the events), the events on other streams it waited for (Stream Wait
    Event); ``host``: per synchronising call on one stream or event (its correlation id), the event it waited for
    (None: none the trace holds, so it returned at once) (Stream Sync, Event Sync); ``waits``: whether the trace
    records its stream waits at all (then they replace the guess from the wait calls)."""

    gpu: dict[object, list[object]] = field(default_factory=dict)
    host: dict[int, object | None] = field(default_factory=dict)
    waits: bool = False


class _Lanes:
    """Per lane, its events' correlation ids in order, each with the event's index: the last launched before an
    id and the first launched after one, by a search."""

    def __init__(self, events: pd.DataFrame) -> None:
        known = events[events["correlation"].notna()]
        lanes = device_streams(known).to_numpy()
        self.by_lane: dict[str, tuple[list[int], list[object]]] = {}
        order = np.lexsort((known["start_ns"].to_numpy(np.int64), known["correlation"].to_numpy(np.int64)))
        correlation, index = known["correlation"].to_numpy(np.int64)[order], known.index.to_numpy()[order]
        for lane, c, i in zip(lanes[order].tolist(), correlation.tolist(), index.tolist()):
            ids, rows = self.by_lane.setdefault(str(lane), ([], []))
            ids.append(c)
            rows.append(i)

    def before(self, lane: str, limit: int) -> object | None:
        """The event of ``lane`` launched last before call ``limit`` (of equals, the last to start)."""
        ids, rows = self.by_lane.get(lane, ([], []))
        k = bisect.bisect_left(ids, limit)
        return rows[k - 1] if k else None

    def after(self, lane: str, limit: int) -> object | None:
        """The event of ``lane`` launched first after call ``limit`` (of equals, the first to start)."""
        ids, rows = self.by_lane.get(lane, ([], []))
        k = bisect.bisect_right(ids, limit)
        return rows[k] if k < len(ids) else None


def sync_edges(syncs: pd.DataFrame, events: pd.DataFrame) -> SyncEdges:
    """The edges of the module docstring, between the GPU ``events`` (the analysis' frame: its index names an
    event) as the ``syncs`` records state them."""
    if syncs.empty or events.empty:
        return SyncEdges()
    lanes = _Lanes(events)
    edges = SyncEdges(waits=bool(syncs["name"].eq(STREAM_WAIT).any()))
    device = syncs["device"].astype("string").fillna("?").tolist()
    records = syncs["wait_record"].where(syncs["wait_record"].fillna(-1) >= 0)  # -1: the record is not known
    for name, call, stream, on, record, dev in zip(
            syncs["name"].tolist(), syncs["correlation"].tolist(), syncs["stream"].tolist(),
            syncs["wait_stream"].tolist(), records.tolist(), device):
        if pd.isna(call):
            continue
        if name == STREAM_WAIT and not pd.isna(stream) and not pd.isna(on):
            src = lanes.before(f"{dev}:{on}", int(call if pd.isna(record) else min(record, call)))
            dst = lanes.after(f"{dev}:{stream}", int(call))
            if src is not None and dst is not None:
                edges.gpu.setdefault(dst, []).append(src)
        elif name == STREAM_SYNC and not pd.isna(stream):
            edges.host[int(call)] = lanes.before(f"{dev}:{stream}", int(call))
        elif name == EVENT_SYNC and not pd.isna(on):
            edges.host[int(call)] = lanes.before(f"{dev}:{on}", int(call if pd.isna(record) else record))
    return edges
