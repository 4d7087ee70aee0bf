"""The conformance generator: a real trace rewritten into the forms other PyTorch, ROCm and profiler
generations write, each changing how a value is written, never what it says, so the decoded trace must be
the same (its times shifted by a known offset where the form moves the clock).

    epoch_fraction  µs since the Unix epoch with three decimals, written as JSON text (no float can hold it)
    epoch_integer   µs since the Unix epoch as integers (PyTorch <= 2.0): the trace first rounded to whole µs
                    (``whole_us``, the form's original), then moved
    old_writer      ids and sizes as strings, a launch's stream in hex (ROCm's "0x0"), a CPU op's grid as a
                    string (a Triton launch), Kineto's pre-1.9 category names (Operator, Runtime, Memcpy)
    shuffled        events in another order (merged or streamed writers)
    old_ids         ``external id`` in lower case (PyTorch 1.8's Kineto)
    display_ns      ``displayTimeUnit: "ns"`` (a viewer's setting: ts stays µs, as the Trace Event Format says)
    several_devices ``deviceProperties`` for eight devices where the trace ran on fewer (a node's every GPU)
    no_devices      no ``deviceProperties`` at all (older writers, CPU-side exporters): only the names go
    begin_end       every complete event that nests on its thread as a begin/end pair ('B' then 'E', the end with no
                    name, category or args), in the order a streaming writer emits them on each thread (the Trace
                    Event Format's other form of a duration event; the two mix in one trace)
    string_times    ``ts`` and ``dur`` written as strings ("ts": "1234.567")
    metadata_at_zero  ``epoch_fraction`` with a metadata event ('M', a process name) at ts 0, as writers that give
                    metadata no time do

and, apart (the decoded ids differ, the analysis must not): ``ids_by_correlation``, a writer whose GPU
events and launch calls carry their correlation id as External id (no op has it, or another op does), and
``launches_without_ids``, launch calls with no External id (writers that put it on ops and kernels only).

``FORMS`` maps each name to (rewrite, offset in ns); ``load`` reads a trace keeping each number's text, and ``write``
writes a rewritten trace as JSON text with the exact timestamps the form chose or the trace held.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

EPOCH_US = 1_682_725_898_236_567  # a real trace's first timestamp (PyTorch 1.13, integer µs since the epoch)
_OLD_NAMES = {"cpu_op": "Operator", "cuda_runtime": "Runtime", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset",
              "kernel": "Kernel"}

Trace = dict[str, Any]


class Written(float):
    """A JSON number kept as written beside its float: µs since the epoch with ns decimals (1.7e15 µs) is beyond a
    float's precision (spacing 0.25 µs), and a form rewritten through the float would move its times."""

    text: str

    def __new__(cls, text: str | float) -> Written:
        number = super().__new__(cls, text)
        number.text = str(text)
        return number


def load(path: Path) -> Trace:
    """A gzipped trace's JSON, each fraction a ``Written`` (its text kept)."""
    return json.loads(gzip.decompress(path.read_bytes()), parse_float=Written)  # type: ignore[no-any-return]


def _ns(value: float) -> int:
    """A written µs value (three decimals) as integer ns: exact from its text where it was kept, else from the float
    (exact below 2**43 µs)."""
    if isinstance(value, Written):
        return int(Decimal(value.text) * 1000)
    whole = int(value // 1)
    return whole * 1000 + round((value - whole) * 1000)


def _text_ts(trace: Trace, offset_us: int) -> Trace:
    """Each timed event's ts as the exact text of ts + offset (kept under ``_ts_text`` for ``write``)."""
    for e in trace["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            ns = _ns(e["ts"]) + offset_us * 1000
            e["_ts_text"] = _ts_text_of(ns)
    return trace


def whole_us(trace: Trace) -> Trace:
    """The trace with every ts and dur rounded down to whole µs (what an integer-µs writer records)."""
    out = copy.deepcopy(trace)
    for e in out["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(e.get(key), float):
                e[key] = int(Decimal(e[key].text) // 1) if isinstance(e[key], Written) else int(e[key] // 1)
    return out


def epoch_fraction(trace: Trace) -> Trace:
    return _text_ts(copy.deepcopy(trace), EPOCH_US)


def epoch_integer(trace: Trace) -> Trace:
    return _text_ts(whole_us(trace), EPOCH_US)


def old_writer(trace: Trace) -> Trace:
    out = copy.deepcopy(trace)
    for e in out["traceEvents"]:
        args = e.get("args")
        cat = e.get("cat")
        if isinstance(args, dict):
            for key in ("correlation", "External id", "bytes", "Sequence number"):
                if isinstance(args.get(key), int) and not isinstance(args.get(key), bool):
                    args[key] = str(args[key])
            if cat == "cuda_runtime" and isinstance(args.get("stream"), int):
                args["stream"] = hex(args["stream"])
            if cat == "cpu_op":
                args["grid"] = "(1, 2, 3)"
        if cat in _OLD_NAMES:
            e["cat"] = _OLD_NAMES[cat]
    return out


def shuffled(trace: Trace) -> Trace:
    out = copy.deepcopy(trace)
    random.Random(0).shuffle(out["traceEvents"])
    return out


def ids_by_correlation(trace: Trace) -> Trace:
    out = copy.deepcopy(trace)
    for e in out["traceEvents"]:
        args = e.get("args")
        if isinstance(args, dict) and e.get("cat") in (*_OLD_NAMES, "cuda_driver") and e.get("cat") != "cpu_op" \
                and "correlation" in args:
            args["External id"] = args["correlation"]
    return out


def old_ids(trace: Trace) -> Trace:
    out = copy.deepcopy(trace)
    for e in out["traceEvents"]:
        args = e.get("args")
        if isinstance(args, dict) and "External id" in args:
            args["external id"] = args.pop("External id")
    return out


def display_ns(trace: Trace) -> Trace:
    return {**trace, "displayTimeUnit": "ns"}


def several_devices(trace: Trace) -> Trace:
    known = trace.get("deviceProperties") or [{"id": 0, "name": ""}]
    template = known[0]
    ids = {d.get("id") for d in known}
    extra = [{**template, "id": i} for i in range(8) if i not in ids]
    return {**trace, "deviceProperties": [*known, *extra]}


def no_devices(trace: Trace) -> Trace:
    return {k: v for k, v in trace.items() if k != "deviceProperties"}


def launches_without_ids(trace: Trace) -> Trace:
    out = copy.deepcopy(trace)
    for e in out["traceEvents"]:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and isinstance(e.get("args"), dict):
            e["args"].pop("External id", None)
    return out


def _ts_text_of(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}" if ns % 1000 else str(ns // 1000)


def _pair_order(e: dict[str, Any]) -> tuple[Any, ...]:
    """Where a streaming writer puts a begin or end on its thread: by time; at one time, ends of spans that began
    earlier first, then begins (the longer first), then ends of spans of no duration (the last begun first)."""
    span, position = e["_span"]
    if e["ph"] == "B":
        return (span[0], 1, span[0] - span[1], position)
    return (span[1], 2 if span[1] == span[0] else 0, -span[0], -position)


def _nesting(spans: list[tuple[tuple[int, int], int]]) -> set[int]:
    """The positions of one thread's spans that nest (each inside the last open one, or after it): those a pair
    can write. A span that crosses the end of one open around its start (kernels overlapping on one stream, a
    range that ends inside an op) has no begin/end form and stays complete."""
    nested, open_ends = set(), []  # type: ignore[var-annotated]
    for (start, end), position in sorted(spans, key=lambda s: (s[0][0], s[0][0] - s[0][1], s[1])):
        while open_ends and open_ends[-1] <= start and not (open_ends[-1] == start == end):
            open_ends.pop()
        if not open_ends or end <= open_ends[-1]:
            nested.add(position)
            open_ends.append(end)
    return nested


def begin_end(trace: Trace) -> Trace:
    out = copy.deepcopy(trace)
    spans: dict[tuple[str, str], list[tuple[tuple[int, int], int]]] = {}
    for position, e in enumerate(out["traceEvents"]):
        if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)):
            start = _ns(e["ts"])
            spans.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append(((start, start + _ns(e["dur"])),
                                                                                  position))
    paired = set().union(*(_nesting(s) for s in spans.values()))
    kept, pairs = [], []
    for position, e in enumerate(out["traceEvents"]):
        if position not in paired:
            kept.append(e)
            continue
        start, end = _ns(e["ts"]), _ns(e["ts"]) + _ns(e.pop("dur"))
        span = ((start, end), position)
        pairs += [{**e, "ph": "B", "_span": span},
                  {"ph": "E", "pid": e.get("pid"), "tid": e.get("tid"), "ts": 0, "_ts_text": _ts_text_of(end),
                   "_span": span}]
    pairs.sort(key=lambda e: (str(e.get("pid")), str(e.get("tid")), _pair_order(e)))
    for e in pairs:
        del e["_span"]
    out["traceEvents"] = kept + pairs
    return out


def string_times(trace: Trace) -> Trace:
    out = copy.deepcopy(trace)
    for e in out["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(e.get(key), (int, float)) and not isinstance(e.get(key), bool):
                e[key] = e[key].text if isinstance(e[key], Written) else repr(e[key])
    return out


def metadata_at_zero(trace: Trace) -> Trace:
    out = epoch_fraction(trace)
    out["traceEvents"].insert(0, {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "ts": 0,
                                  "args": {"name": "python3"}})
    return out


FORMS: dict[str, tuple[Callable[[Trace], Trace], int]] = {
    "epoch_fraction": (epoch_fraction, EPOCH_US * 1000),
    "epoch_integer": (epoch_integer, EPOCH_US * 1000),
    "old_writer": (old_writer, 0),
    "shuffled": (shuffled, 0),
    "old_ids": (old_ids, 0),
    "display_ns": (display_ns, 0),
    "several_devices": (several_devices, 0),
    "no_devices": (no_devices, 0),
    "begin_end": (begin_end, 0),
    "string_times": (string_times, 0),
    "metadata_at_zero": (metadata_at_zero, EPOCH_US * 1000),
}
REORDERED = {"shuffled", "begin_end"}  # the events in another order than the file's: the tables compared sorted
DEVICES_CHANGED = {"several_devices", "no_devices"}  # the device table differs; the events the trace ran must not


def original_of(form: str, trace: Trace) -> Trace:
    """What a form's output must decode like (shifted by its offset): the trace, or its whole-µs rounding."""
    return whole_us(trace) if form == "epoch_integer" else trace


def write(trace: Trace, path: Path) -> Path:
    """The trace as JSON text, each ``_ts_text`` and ``Written`` time written as the number it is (never through a
    float); the trace itself is left as it was (forms share events with it)."""
    texts: list[str] = []
    events = []
    for e in trace["traceEvents"]:
        if "_ts_text" in e or any(isinstance(e.get(key), Written) for key in ("ts", "dur")):
            e = {k: v for k, v in e.items() if k != "_ts_text"} | ({"ts": Written(e["_ts_text"])} if "_ts_text" in e
                                                                   else {})
            for key in ("ts", "dur"):
                if isinstance(e.get(key), Written):
                    texts.append(e[key].text)
                    e[key] = f"\x00{len(texts) - 1}\x00"
        events.append(e)
    text = json.dumps({**trace, "traceEvents": events})
    path.write_text(re.sub(r'"\\u0000(\d+)\\u0000"', lambda m: texts[int(m[1])], text))
    return path
