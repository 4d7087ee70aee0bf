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

from fuseprof.model.intervals import apart, covered_ns, group_sums, merge


def breakdown(gpu: pd.DataFrame) -> dict[str, int]:
    """span, busy, idle and busy by kind of one set of GPU events (the module docstring's formulas)."""
    start = gpu["start_ns"].to_numpy(np.int64)
    codes = np.zeros(start.size, np.int64)
    if not start.size:
        return {"span_ns": 0, "busy_ns": 0, "idle_ns": 0, **dict.fromkeys(_BY_KIND, 0), "events": 0}
    return _totals(codes, start, start + gpu["dur_ns"].to_numpy(np.int64), gpu["kind"].to_numpy(object), 1)[0]


def breakdowns(gpu: pd.DataFrame, key: pd.Series | str) -> list[tuple[object, dict[str, int]]]:
    """``breakdown`` of each group of ``gpu`` by ``key`` (as ``groupby(key, sort=False)`` makes them: a missing
    key is no group), in the groups' order, every group at once on arrays (``intervals.apart``): a trace of many
    steps pays numpy's cost once, not once per step."""
    groups = list(gpu.groupby(key, sort=False).indices.items())
    codes = np.full(len(gpu), -1, np.int64)
    for k, (_, rows) in enumerate(groups):
        codes[rows] = k
    kept = codes >= 0
    start = gpu["start_ns"].to_numpy(np.int64)
    end, kind = start + gpu["dur_ns"].to_numpy(np.int64), gpu["kind"].to_numpy(object)
    totals = _totals(codes[kept], start[kept], end[kept], kind[kept], len(groups))
    return [(group, totals[k]) for k, (group, _) in enumerate(groups)]


_BY_KIND = ("computation_ns", "communication_ns", "exposed_communication_ns", "memcpy_ns", "exposed_memcpy_ns",
            "memset_ns")


def _totals(codes: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray, groups: int
            ) -> list[dict[str, int]]:
    """The module docstring's formulas for each of ``groups`` non-empty groups (``codes``: each event's)."""
    moved = apart(codes, start, end, groups) if groups > 1 else (start, end, 0)
    if moved is None:  # beyond int64 on one line: group by group
        return [_totals(np.zeros(int(m.sum()), np.int64), start[m], end[m], kind[m], 1)[0]
                for m in (codes == k for k in range(groups))]
    s, e, width = moved

    def group_of(points: np.ndarray) -> np.ndarray:
        return points // width if width else np.zeros(points.size, np.int64)

    def merged(mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        return merge(s, e) if mask is None else merge(s[mask], e[mask])

    def total(m: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return group_sums(group_of(m[0]), m[1] - m[0], groups)

    def exposed(m: tuple[np.ndarray, np.ndarray], under: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return total(m) - group_sums(group_of(m[0]), covered_ns(under, m[0], m[1]), groups)

    compute, comm = merged(kind == "kernel"), merged(kind == "communication")
    memcpy, memset = merged(kind == "memcpy"), merged(kind == "memset")
    last, first = np.full(groups, np.iinfo(np.int64).min), np.full(groups, np.iinfo(np.int64).max)
    np.maximum.at(last, codes, end)
    np.minimum.at(first, codes, start)
    span, busy = last - first, total(merged())
    columns = {"span_ns": span, "busy_ns": busy, "idle_ns": span - busy,
               "computation_ns": total(compute), "communication_ns": total(comm),
               "exposed_communication_ns": exposed(comm, compute),
               "memcpy_ns": total(memcpy), "exposed_memcpy_ns": exposed(memcpy, compute),
               "memset_ns": total(memset), "events": np.bincount(codes, minlength=groups)}
    lists = {name: values.tolist() for name, values in columns.items()}
    return [{name: values[k] for name, values in lists.items()} for k in range(groups)]


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


ALL_WINDOW = "all"  # the whole trace as one window, where it has no steps


def timeline_windows(events: pd.DataFrame) -> list[str]:
    """The windows a kernel timeline can show, in time order: each step the analysis found (``step``), or
    the whole trace where it found none. One step, not the trace, is what a timeline draws by default: a
    serving trace's 100k kernels are too many bars for a browser, one step's hundreds are not."""
    if "step" not in events or not events["step"].notna().any():
        return [ALL_WINDOW]
    first = events.dropna(subset=["step"]).groupby("step", sort=False)["start_ns"].min().sort_values()
    return [str(step) for step in first.index]


def window_events(events: pd.DataFrame, window: str, limit: int) -> tuple[pd.DataFrame, int]:
    """The GPU events of ``window`` (a step of ``timeline_windows``, or ``ALL_WINDOW``), the first ``limit`` of
    them by start, each with its stream's label (``lane``), and the number the window holds (more than the rows
    returned when cut)."""
    rows = events if window == ALL_WINDOW else events[events["step"].astype(object) == window]
    rows = rows.sort_values("start_ns", kind="stable")
    shown = rows.head(limit)
    return shown.assign(lane="stream " + stream_labels(shown)), len(rows)
