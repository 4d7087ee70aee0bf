"""torch.profiler Chrome traces into kernel-frame rows, at nanosecond precision.

Times are parsed as exact decimals: the trace writes microseconds with three decimals on
a ~1e12 µs clock, more digits than a float64 keeps, and fused kernels here run 1-10 µs.
Kernels are joined to their launch call by ``correlation`` (Triton's ``cuLaunchKernelEx``
launches have no ``External id``), and the launch call to the enclosing CPU op and fuseprof
range by nesting on the launching thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from fuseprof.errors import TraceFormatError
from fuseprof.parse.textio import read_text
from fuseprof.ranges import parse_range_label
from fuseprof.schema import PROFILER_SOURCE

LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
_NESTED_CATEGORIES = ("cpu_op", "user_annotation", *LAUNCH_CATEGORIES)

Event = dict[str, Any]


def load_trace(path: Path) -> dict[str, Any]:
    """The trace as a dict, floats as Decimal; damage becomes TraceFormatError."""
    text = read_text(path)
    try:
        data = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(
            f"{path}: not valid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); truncated?"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceFormatError(f"{path}: no 'traceEvents' list; is this a torch.profiler Chrome trace?")
    return data


def to_ns(microseconds: Decimal | int) -> int:
    """Exact µs -> ns for the trace's 3-decimal microsecond values."""
    return int((Decimal(microseconds) * 1000).to_integral_value())


@dataclass
class _Node:
    event: Event
    parent: _Node | None


def _nest(events: list[Event]) -> dict[int, _Node]:
    """Parent links for complete events on each thread, keyed by id(event)."""
    by_thread: dict[tuple[Any, Any], list[Event]] = {}
    for ev in events:
        if ev.get("ph") == "X" and ev.get("cat") in _NESTED_CATEGORIES:
            by_thread.setdefault((ev.get("pid"), ev.get("tid")), []).append(ev)
    nodes: dict[int, _Node] = {}
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        stack: list[tuple[Decimal, _Node]] = []
        for ev in thread_events:
            start = Decimal(ev["ts"])
            while stack and stack[-1][0] <= start:
                stack.pop()
            node = _Node(ev, stack[-1][1] if stack else None)
            nodes[id(ev)] = node
            stack.append((start + Decimal(ev.get("dur", 0)), node))
    return nodes


def _enclosing(node: _Node | None) -> tuple[str | None, tuple[str, str] | None]:
    """Innermost cpu_op name and the fuseprof (variant, shape) range above a node."""
    cpu_op, found = None, None
    while node is not None:
        ev = node.event
        if cpu_op is None and ev.get("cat") == "cpu_op":
            cpu_op = ev.get("name")
        if found is None and ev.get("cat") == "user_annotation":
            found = parse_range_label(str(ev.get("name", "")))
        node = node.parent
    return cpu_op, found


def _dims(values: Any) -> tuple[str | None, int | None]:
    if not isinstance(values, list) or not values:
        return None, None
    product = 1
    for v in values:
        product *= int(v)
    return ",".join(str(int(v)) for v in values), product


def _device_names(trace: dict[str, Any]) -> dict[int, str]:
    props = trace.get("deviceProperties") or []
    return {int(p.get("id", i)): str(p.get("name")) for i, p in enumerate(props) if isinstance(p, dict)}


def _kernel_row(ev: Event, launch: _Node | None, devices: dict[int, str]) -> dict[str, Any]:
    args = ev.get("args", {})
    cpu_op, found = _enclosing(launch.parent if launch else None)
    grid, blocks = _dims(args.get("grid"))
    block, threads = _dims(args.get("block"))
    launch_ev = launch.event if launch else {}
    return {
        "kernel": ev.get("name"),
        "variant": found[0] if found else None,
        "shape": found[1] if found else None,
        "duration_ns": to_ns(ev.get("dur", 0)),
        "start_ns": to_ns(ev["ts"]),
        "grid": grid,
        "blocks": blocks,
        "block": block,
        "threads_per_block": threads,
        "registers_per_thread": args.get("registers per thread"),
        "shared_mem_bytes": args.get("shared memory"),
        "stream": args.get("stream"),
        "device": devices.get(int(args.get("device", 0))),
        "launch_api": launch_ev.get("name"),
        "launch_api_ns": to_ns(launch_ev["dur"]) if "dur" in launch_ev else None,
        "launch_start_ns": to_ns(launch_ev["ts"]) if "ts" in launch_ev else None,
        "cpu_op": cpu_op,
    }


def _cpu_op_rows(events: list[Event], nodes: dict[int, _Node]) -> list[dict[str, Any]]:
    """On a CPU-only capture there are no kernels: use the ops directly inside each fuseprof range."""
    rows = []
    for ev in events:
        node = nodes.get(id(ev))
        if ev.get("cat") != "cpu_op" or node is None or node.parent is None:
            continue
        found = parse_range_label(str(node.parent.event.get("name", "")))
        if found and node.parent.event.get("cat") == "user_annotation":
            rows.append({"kernel": ev.get("name"), "variant": found[0], "shape": found[1],
                         "duration_ns": to_ns(ev.get("dur", 0)), "start_ns": to_ns(ev["ts"]),
                         "cpu_op": ev.get("name"), "device": "cpu"})
    return rows


def kernel_rows(trace: dict[str, Any]) -> pd.DataFrame:
    """One row per GPU kernel in the trace (or per top-level CPU op if it has no kernels)."""
    events = [e for e in trace["traceEvents"] if isinstance(e, dict) and "ts" in e]
    nodes = _nest(events)
    launches = {
        e["args"]["correlation"]: nodes.get(id(e))
        for e in events
        if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})
    }
    devices = _device_names(trace)
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    rows = [_kernel_row(k, launches.get(k.get("args", {}).get("correlation")), devices) for k in kernels]
    if not rows:
        rows = _cpu_op_rows(events, nodes)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.sort_values("start_ns", kind="stable").reset_index(drop=True)
    frame["invocation"] = frame.groupby(["variant", "shape", "kernel"], dropna=False).cumcount()
    frame["source"] = PROFILER_SOURCE
    return frame


def read_chrome_trace(path: Path) -> pd.DataFrame:
    return kernel_rows(load_trace(path))
