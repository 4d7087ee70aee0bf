"""Duration events written as begin/end pairs (``ph`` 'B' and 'E') made complete events ('X'), as the Trace Event
Format defines them: on one thread (pid and tid), an 'E' ends the most recent 'B' still open; the 'E' may omit the
name and category, and its args are merged into the begin's.

Why here, before any table is built: every reader of the decoder (ops, launch calls, kernels, modules, ranges) takes
'X' events; a writer that writes pairs (Chrome's own tracing, hand-made or converted traces, custom exporters) lost
every such event to them, silently (a trace whose ops were pairs read with 0% of its kernels attributed).

Pairs are matched in time order per thread, not file order (a merged or streamed writer may interleave threads and
put an end before its begin in the file); events at one time keep their file order. A begin left open at the end,
an end with nothing open and a begin or end without a time are left out, counted in one warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from fuseprof.errors import FuseprofWarning

PAIRED = frozenset("BE")
_EMPTY = (b"null", b"{}")


def _ns(us: float) -> int:
    """A time in µs with ns decimals as integer ns, as the decoder rounds it (``trace_events.ns_from_us``)."""
    whole = math.floor(us)
    return int(whole) * 1000 + round((us - whole) * 1000)


def _merged(begin: msgspec.Raw, end: msgspec.Raw) -> msgspec.Raw:
    """The begin's args with the end's merged in (the end's value wins where both have a key)."""
    if bytes(end).strip() in _EMPTY:
        return begin
    try:
        first, last = msgspec.json.decode(begin), msgspec.json.decode(end)
    except msgspec.DecodeError:
        return begin
    if not isinstance(first, dict) or not isinstance(last, dict):
        return begin if isinstance(first, dict) else end
    return msgspec.Raw(msgspec.json.encode({**first, **last}))


def _complete(begin: Any, end: Any) -> Any:
    dur = (_ns(end.ts) - _ns(begin.ts)) / 1000
    return msgspec.structs.replace(begin, ph="X", dur=dur, name=begin.name or end.name, cat=begin.cat or end.cat,
                                   args=_merged(begin.args, end.args))


def complete_events(events: list[Any], path: Path | None) -> list[Any]:
    """``events`` (the decoder's structs) with each matched 'B'/'E' pair as one 'X' event in the begin's place, the
    ends removed; the same list when it holds no pair. What is left out is warned of, naming ``path`` (None: not)."""
    paired = [i for i, e in enumerate(events) if e.ph in PAIRED]
    if not paired:
        return events
    by_thread: dict[tuple[Any, Any], list[int]] = {}
    timeless = 0
    for i in paired:
        e = events[i]
        if e.ts is None or not math.isfinite(e.ts):
            timeless += 1
            continue
        by_thread.setdefault((e.pid, e.tid), []).append(i)
    done: dict[int, Any] = {}
    open_left = ends_alone = 0
    for indices in by_thread.values():
        indices.sort(key=lambda i: events[i].ts)  # stable: file order at one time
        stack: list[int] = []
        for i in indices:
            if events[i].ph == "B":
                stack.append(i)
            elif stack:
                begin = stack.pop()
                done[begin] = _complete(events[begin], events[i])
            else:
                ends_alone += 1
        open_left += len(stack)
    if path is not None:
        _warn(path, open_left, ends_alone, timeless)
    return [done.get(i, e) for i, e in enumerate(events) if e.ph not in PAIRED or i in done]


def _warn(path: Path, open_left: int, ends_alone: int, timeless: int) -> None:
    said = [f"{n:,} {what}" for n, what in ((open_left, "begin (ph 'B') event(s) never ended"),
                                           (ends_alone, "end (ph 'E') event(s) with no begin open on their thread"),
                                           (timeless, "begin or end event(s) without a time")) if n]
    if said:
        warnings.warn(f"{path}: {', '.join(said)}: left out (a duration written as a pair needs both, on one "
                      "thread)", FuseprofWarning, stacklevel=3)


def launch_durations(events: Sequence[Any], launch: Any) -> list[float]:
    """The durations of the events ``launch(event)`` picks, whether written complete or as pairs (in the trace's
    own unit): what ``fuseprof.parse.time_unit`` reads a trace's unit from."""
    return [e.dur for e in complete_events(list(events), None) if e.ph == "X" and e.dur is not None and launch(e)]
