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

from fuseprof.model.intervals import merge, overlap_ns, union_ns


def breakdown(gpu: pd.DataFrame) -> dict[str, int]:
    """span, busy, idle and busy by kind of one set of GPU events (the module docstring's formulas)."""
    start = gpu["start_ns"].to_numpy(np.int64)
    return _breakdown(start, start + gpu["dur_ns"].to_numpy(np.int64), gpu["kind"].to_numpy(object))


def breakdowns(gpu: pd.DataFrame, key: pd.Series | str) -> list[tuple[object, dict[str, int]]]:
    """``breakdown`` of each group of ``gpu`` by ``key`` (as ``groupby(key, sort=False)`` makes them: a missing
    key is no group), in the groups' order: the columns read once, each group its slice of them (a trace of
    many steps pays numpy's cost per step, not pandas's)."""
    start = gpu["start_ns"].to_numpy(np.int64)
    end, kind = start + gpu["dur_ns"].to_numpy(np.int64), gpu["kind"].to_numpy(object)
    grouped = gpu.groupby(key, sort=False)
    return [(group, _breakdown(start[rows], end[rows], kind[rows])) for group, rows in grouped.indices.items()]


def _breakdown(start: np.ndarray, end: np.ndarray, kind: np.ndarray) -> dict[str, int]:
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


def stream_labels(gpu: pd.DataFrame) -> pd.Series:
    """Each event's stream as a label: its number, or 'DEVICE:STREAM' where the trace's events ran on more than
    one GPU — each GPU numbers its streams from the same few ids (one process driving two GPUs has stream 7 on
    both), and a stream is one queue of one GPU."""
    devices = gpu["device"].dropna().unique() if "device" in gpu else []
    return _text(gpu["stream"]) if len(devices) < 2 else device_streams(gpu)


def device_streams(gpu: pd.DataFrame) -> pd.Series:
    """Each event's queue as 'DEVICE:STREAM', always text: a device or stream the trace left out (or gave as
    something else than a number) reads '?', so its events share a queue of their own instead of having none."""
    return _text(gpu["device"]) + ":" + _text(gpu["stream"])


def _text(values: pd.Series) -> pd.Series:
    """Values as text with '?' for a missing one (pandas' text of a missing value stays missing)."""
    return values.astype("string").fillna("?")


def gpu_timeline(gpu: pd.DataFrame) -> pd.DataFrame:
    """One row for the whole trace (``stream`` = 'all') and one per stream; ``*_pct`` of span."""
    rows = [{"stream": "all", **breakdown(gpu)}]
    for stream, part in gpu.groupby(stream_labels(gpu), sort=True):
        rows.append({"stream": str(stream), **breakdown(part)})
    frame = pd.DataFrame(rows)
    for column in ("busy_ns", "idle_ns", "computation_ns", "communication_ns", "memcpy_ns", "memset_ns"):
        frame[column.replace("_ns", "_pct")] = 100 * frame[column] / frame["span_ns"].where(frame["span_ns"] > 0)
    return frame
