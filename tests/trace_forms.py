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

and, apart (the decoded ids differ, the analysis must not): ``ids_by_correlation``, a writer whose GPU
events and launch calls carry their correlation id as External id (no op has it, or another op does), and
``launches_without_ids``, launch calls with no External id (writers that put it on ops and kernels only).

``FORMS`` maps each name to (rewrite, offset in ns); ``write`` writes a rewritten trace as JSON text, with
the exact timestamps the form chose.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

EPOCH_US = 1_682_725_898_236_567  # a real trace's first timestamp (PyTorch 1.13, integer µs since the epoch)
_OLD_NAMES = {"cpu_op": "Operator", "cuda_runtime": "Runtime", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset",
              "kernel": "Kernel"}

Trace = dict[str, Any]


def _ns(value: float) -> int:
    """A written µs value (three decimals) as integer ns."""
    return round(value * 1000)


def _text_ts(trace: Trace, offset_us: int) -> Trace:
    """Each timed event's ts as the exact text of ts + offset (kept under ``_ts_text`` for ``write``)."""
    for e in trace["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            ns = _ns(e["ts"]) + offset_us * 1000
            e["_ts_text"] = f"{ns // 1000}.{ns % 1000:03d}" if ns % 1000 else str(ns // 1000)
    return trace


def whole_us(trace: Trace) -> Trace:
    """The trace with every ts and dur rounded down to whole µs (what an integer-µs writer records)."""
    out = copy.deepcopy(trace)
    for e in out["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(e.get(key), float):
                e[key] = int(e[key] // 1)
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


FORMS: dict[str, tuple[Callable[[Trace], Trace], int]] = {
    "epoch_fraction": (epoch_fraction, EPOCH_US * 1000),
    "epoch_integer": (epoch_integer, EPOCH_US * 1000),
    "old_writer": (old_writer, 0),
    "shuffled": (shuffled, 0),
    "old_ids": (old_ids, 0),
    "display_ns": (display_ns, 0),
    "several_devices": (several_devices, 0),
    "no_devices": (no_devices, 0),
}
DEVICES_CHANGED = {"several_devices", "no_devices"}  # the device table differs; the events the trace ran must not


def original_of(form: str, trace: Trace) -> Trace:
    """What a form's output must decode like (shifted by its offset): the trace, or its whole-µs rounding."""
    return whole_us(trace) if form == "epoch_integer" else trace


def write(trace: Trace, path: Path) -> Path:
    """The trace as JSON text, each ``_ts_text`` written as the number it is (never through a float)."""
    texts: list[str] = []
    for e in trace["traceEvents"]:
        if "_ts_text" in e:
            texts.append(e.pop("_ts_text"))
            e["ts"] = f"\x00{len(texts) - 1}\x00"
    text = json.dumps(trace)
    path.write_text(re.sub(r'"\\u0000(\d+)\\u0000"', lambda m: texts[int(m[1])], text))
    return path
