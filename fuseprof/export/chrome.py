"""An annotated trace in Chrome's JSON format, which Perfetto and ``chrome://tracing`` open: the original events
exactly as the trace wrote them, then fuseprof's findings (``fuseprof.export.findings``) on tracks of their own.

Exact: every number of the original is written back as its original text (a float is kept as text while the
file is read, so ``1682725898236567.123`` µs keeps its last digit; a round trip through a float keeps 256 ns),
and a finding's times are written as exact decimals of its integer ns (``ns // 1000 "." ns % 1000``).

Lanes: a trace viewer draws one slice at a time on a track; slices that overlap (two horizontal-GEMM pairs
interleaved, two profiler steps whose GPU work overlaps) are spread over lanes — the track's threads
``TRACK``, ``TRACK · lane 2``, … — greedily, the first lane free at each slice's start, so none is hidden.

Several ranks merge into one file: each rank's processes get new pids (no pid of one rank can collide with
another's), their names prefixed ``rank R · `` and an order by rank, its flow and async ids are made its own (an integer id plus
``FLOW_ID_STRIDE`` × the rank's position, a string id prefixed ``rR:``) and its findings a process
``fuseprof · rank R``. The file's ``fuseprof`` key records each rank's mapping, so every original event can be
read back (tests/test_export.py does)."""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fuseprof.errors import TraceFormatError
from fuseprof.parse.textio import read_text

KEPT_MARK = "\x00#"  # marks a number kept as its text while the trace is held in memory
_TOKEN_JSON = re.compile(r'"\\u0000#([^"]*)"')
FLOW_ID_STRIDE = 1 << 40  # rank i's integer flow/async ids + i × this: apart from every other rank's
_IDS_OF = {"s", "t", "f", "b", "e", "n", "S", "T", "F", "p"}  # flow and async phases, whose ids pair events
FINDINGS_CATEGORY = "fuseprof"


@dataclass
class Original:
    """A trace as read: its events and its other top-level keys, numbers that are floats kept as text, and
    how many such numbers it holds (checked when the file is written)."""

    events: list[dict[str, Any]]
    other: dict[str, Any]
    kept_numbers: int


def read_original(path: Path) -> Original:
    """The trace's JSON with every float kept as its text (``KEPT_MARK`` + text), to be written back unchanged."""
    count = 0

    def keep(text: str) -> str:
        nonlocal count
        count += 1
        return KEPT_MARK + text

    try:
        data = json.loads(read_text(path), parse_float=keep)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, list):
        return Original([e for e in data if isinstance(e, dict)], {}, count)
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceFormatError(f"{path}: no 'traceEvents' list; not a torch.profiler trace")
    events = data.pop("traceEvents")
    return Original([e for e in events if isinstance(e, dict)], data, count)


def exact_us(ns: int) -> str:
    """Integer ns as the exact decimal µs a Chrome trace's ``ts`` and ``dur`` hold."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def lanes(starts: Iterable[int], ends: Iterable[int]) -> list[int]:
    """Each interval's lane (0, 1, …): the lowest lane whose last interval ended at or before its start, in
    start order; no two intervals of one lane overlap, and as few lanes are used as the deepest overlap."""
    items = sorted(enumerate(zip(starts, ends)), key=lambda x: (x[1][0], x[1][1]))
    lane_of = [0] * len(items)
    busy: list[tuple[int, int]] = []  # (end, lane) of every lane in use
    free: list[int] = []
    for index, (start, end) in items:
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else len(busy) + len(free)
        lane_of[index] = lane
        heapq.heappush(busy, (end, lane))
    return lane_of


def _slice_events(findings: pd.DataFrame, pid: int, first_tid: int) -> tuple[list[dict[str, Any]], int]:
    """The findings' slices as complete ('X') events on ``pid``, one thread per track and lane, with the
    threads' names and order; the next free tid."""
    out: list[dict[str, Any]] = []
    tid = first_tid
    for order, (track, part) in enumerate(findings.groupby("track", sort=False)):
        # each endpoint rounded once, the duration their difference: a slice ending where the next begins
        # shares that one integer with it (a start and a duration rounded apart overlapped by 1 ns)
        starts, ends = [round(v) for v in part["start_ns"]], [round(v) for v in part["end_ns"]]
        lane = lanes(starts, ends)
        for k in range(max(lane) + 1):
            label = track if k == 0 else f"{track} · lane {k + 1}"
            out += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid + k, "args": {"name": label}},
                    {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid + k,
                     "args": {"sort_index": order * 1000 + k}}]
        for row, k, start, end in zip(part.itertuples(index=False), lane, starts, ends):
            out.append({"ph": "X", "cat": FINDINGS_CATEGORY, "name": row.name, "pid": pid, "tid": tid + k,
                        "ts": KEPT_MARK + exact_us(start), "dur": KEPT_MARK + exact_us(end - start), "args": row.args})
        tid += max(lane) + 1
    return out, tid


def _remapped(events: list[dict[str, Any]], position: int, label: str, next_pid: int
              ) -> tuple[list[dict[str, Any]], dict[str, int], int]:
    """A rank's events with pids of their own (``next_pid`` on), flow/async ids made the rank's and its process
    names prefixed ``label · ``; the pid mapping (original pid as JSON text → new pid) and the next free pid."""
    pids: dict[str, int] = {}
    out = []
    for event in events:
        key = json.dumps(event.get("pid"))
        if key not in pids:
            pids[key] = next_pid
            next_pid += 1
        moved = dict(event, pid=pids[key])
        if event.get("ph") in _IDS_OF and "id" in event:
            ident = event["id"]
            moved["id"] = ident + position * FLOW_ID_STRIDE if isinstance(ident, int) else f"r{position}:{ident}"
        elif event.get("ph") == "M" and event.get("name") == "process_name" and isinstance(event.get("args"), dict):
            moved["args"] = dict(event["args"], name=f"{label} · {event['args'].get('name', '')}")
        out.append(moved)
    named = {json.dumps(e.get("pid")) for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    for order, (key, pid) in enumerate(pids.items()):  # a viewer keeps a process's first name: none is added twice
        if key not in named:
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                        "args": {"name": f"{label} · pid {json.loads(key)}"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                    "args": {"sort_index": position * 1000 + order + 1}})
    return out, pids, next_pid


def annotated(originals: list[Original], findings: list[pd.DataFrame], labels: list[str]) -> dict[str, Any]:
    """One trace: the originals' events (one rank: untouched; several: remapped as the module says) and each
    rank's findings on a process of their own."""
    merged = len(originals) > 1
    events: list[dict[str, Any]] = []
    ranks: list[dict[str, Any]] = []
    used = [e.get("pid") for o in originals for e in o.events]
    next_pid = 1 if merged else max([p for p in used if isinstance(p, int)] + [0]) + 1
    for position, (original, label) in enumerate(zip(originals, labels)):
        if merged:
            mine, pids, next_pid = _remapped(original.events, position, label, next_pid)
            ranks.append({"label": label, "pids": pids, "flow_id_offset": position * FLOW_ID_STRIDE,
                          "process_name_prefix": f"{label} · ", "added_after": len(mine) - len(original.events),
                          "trace_keys": original.other})
        else:
            mine = original.events
        events += mine
    tracks = []
    for position, (label, found) in enumerate(zip(labels, findings)):
        pid, next_pid = next_pid, next_pid + 1
        slices, _ = _slice_events(found, pid, 1)
        events += [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"fuseprof · {label}"}},
                   {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                    "args": {"sort_index": position * 1000 if merged else -1}}, *slices]
        tracks.append({"label": label, "pid": pid, "slices": len(found), "tracks": sorted(found["track"].unique())})
    top = {} if merged else dict(originals[0].other)
    return {**top, "traceEvents": events,
            "fuseprof": {"findings": tracks, **({"ranks": ranks} if merged else {}),
                         "original_events": [len(o.events) for o in originals]}}


def to_json_text(trace: dict[str, Any], kept: int) -> str:
    """The trace as JSON text, every kept number and finding time written as its exact text; ``kept`` is how
    many numbers the originals held as text (a string of the original that looked like one is an error)."""
    text = json.dumps(trace, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    written, count = _TOKEN_JSON.subn(r"\1", text)
    added = sum(1 for e in trace["traceEvents"] if e.get("cat") == FINDINGS_CATEGORY and e.get("ph") == "X") * 2
    if count != kept + added:
        raise TraceFormatError(f"a string of the trace looks like fuseprof's own number mark ({count} marks for "
                               f"{kept + added} numbers): the trace cannot be written back exactly")
    return written
