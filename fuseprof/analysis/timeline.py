"""GPU timeline of one trace: span, busy and idle time, busy split by kind, overall and per stream.

Exact to the nanosecond (integer ns from ``fuseprof.parse.trace_events``). Busy time is the union
of intervals, so kernels that overlap (on several streams) are counted once:
    span_ns            = last GPU end − first GPU start
    busy_ns            = |∪ all GPU intervals|
    computation_ns     = |∪ kernel intervals that are not communication|
    communication_ns   = |∪ NCCL kernel intervals|;  exposed: minus its overlap with computation
    memcpy_ns/memset_ns= |∪ gpu_memcpy| / |∪ gpu_memset|;  exposed memcpy: minus its overlap with computation
    idle_ns            = span_ns − busy_ns
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as sorted, disjoint intervals."""
    if start.size == 0:
        return start.astype(np.int64), end.astype(np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new))


def union_ns(start: np.ndarray, end: np.ndarray) -> int:
    s, e = merge(start, end)
    return int((e - s).sum())


def overlap_ns(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Length of (∪a) ∩ (∪b) for two merged interval sets."""
    (as_, ae), (bs, be) = a, b
    total, i, j = 0, 0, 0
    while i < as_.size and j < bs.size:
        lo, hi = max(as_[i], bs[j]), min(ae[i], be[j])
        if hi > lo:
            total += int(hi - lo)
        if ae[i] < be[j]:
            i += 1
        else:
            j += 1
    return total


def _breakdown(gpu: pd.DataFrame) -> dict[str, int]:
    start = gpu["start_ns"].to_numpy(np.int64)
    end = start + gpu["dur_ns"].to_numpy(np.int64)
    kind = gpu["kind"].to_numpy(object)

    def merged(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return merge(start[mask], end[mask])

    compute = merged(kind == "kernel")
    comm = merged(kind == "communication")
    memcpy = merged(kind == "memcpy")
    memset = merged(kind == "memset")

    def total(m: tuple[np.ndarray, np.ndarray]) -> int:
        return int((m[1] - m[0]).sum())

    span = int(end.max() - start.min()) if start.size else 0
    busy = union_ns(start, end)
    return {
        "span_ns": span, "busy_ns": busy, "idle_ns": span - busy,
        "computation_ns": total(compute), "communication_ns": total(comm),
        "exposed_communication_ns": total(comm) - overlap_ns(comm, compute),
        "memcpy_ns": total(memcpy), "exposed_memcpy_ns": total(memcpy) - overlap_ns(memcpy, compute),
        "memset_ns": total(memset), "events": int(start.size),
    }


def gpu_timeline(gpu: pd.DataFrame) -> pd.DataFrame:
    """One row for the whole trace (``stream`` = 'all') and one per stream; ``*_pct`` of span."""
    rows = [{"stream": "all", **_breakdown(gpu)}]
    for stream, part in gpu.groupby(gpu["stream"].astype("string").fillna("?"), sort=True):
        rows.append({"stream": str(stream), **_breakdown(part)})
    frame = pd.DataFrame(rows)
    for column in ("busy_ns", "idle_ns", "computation_ns", "communication_ns", "memcpy_ns", "memset_ns"):
        frame[column.replace("_ns", "_pct")] = 100 * frame[column] / frame["span_ns"].where(frame["span_ns"] > 0)
    return frame
