"""Rewrites of real torch.profiler traces into the shapes a test needs: a profiled step repeated, GPU work
made slower, records lost, steps removed. Each works on the trace's JSON (a dict) and changes only what it
says, so a test knows the true answer by arithmetic on the original."""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

GPU = ("kernel", "gpu_memcpy", "gpu_memset")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)  # type: ignore[no-any-return]


def save(trace: dict[str, Any], path: Path) -> Path:
    data = json.dumps(trace).encode()
    path.write_bytes(gzip.compress(data, 1) if path.name.endswith(".gz") else data)
    return path


def _timed(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and "ts" in e]


def span_us(trace: dict[str, Any]) -> float:
    events = _timed(trace)
    return max(e["ts"] + e.get("dur", 0) for e in events) - min(e["ts"] for e in events)


def repeat_steps(trace: dict[str, Any], times: int) -> dict[str, Any]:
    """The whole trace ``times`` times in a row, each copy shifted past the one before (twice the span
    apart) with its correlation and External ids and its ProfilerStep numbers made its own: a trace of
    one profiled step becomes one of ``times`` steps, each the same work."""
    events = [e for e in trace["traceEvents"]]
    shift = 2 * span_us(trace)
    ids = [v for e in events for k, v in (e.get("args") or {}).items()
           if k in ("correlation", "External id", "external id") and isinstance(v, int)]
    stride = max(ids, default=0) + 1
    out = []
    for i in range(times):
        for e in events:
            e = copy.deepcopy(e)
            if "ts" in e and e.get("ph") != "M":
                e["ts"] = e["ts"] + i * shift
            args = e.get("args")
            if isinstance(args, dict):
                for key in ("correlation", "External id", "external id"):
                    if isinstance(args.get(key), int) and args[key] > 0:
                        args[key] += i * stride
            if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
                e["id"] += i * stride
            match = STEP.match(str(e.get("name", "")))
            if match:
                e["name"] = f"ProfilerStep#{int(match.group(1)) + i}"
            if i and e.get("ph") == "M":
                continue
            out.append(e)
    return {**trace, "traceEvents": out}


def _step_of_gpu(trace: dict[str, Any]) -> dict[int, int]:
    """Copy number of each GPU event in a ``repeat_steps`` trace, by its start."""
    shift_starts = sorted(e["ts"] for e in _timed(trace)
                          if e.get("cat") == "user_annotation" and STEP.match(str(e.get("name", ""))))
    out = {}
    for k, e in enumerate(trace["traceEvents"]):
        if e.get("cat") in GPU:
            out[k] = sum(1 for s in shift_starts if s <= e["ts"]) - 1
    return out


def stretch_gpu(trace: dict[str, Any], factor: float, copies: set[int] | None = None) -> dict[str, Any]:
    """Every GPU event (of the given ``repeat_steps`` copies: their index, 0 first) ``factor`` times as
    long, its start moved as far from the first GPU event of its step: the GPU work of those steps made
    uniformly slower, order and overlaps kept."""
    out = copy.deepcopy(trace)
    steps = _step_of_gpu(out)
    starts: dict[int, float] = {}
    for k, e in enumerate(out["traceEvents"]):
        if k in steps:
            starts[steps[k]] = min(starts.get(steps[k], e["ts"]), e["ts"])
    for k, e in enumerate(out["traceEvents"]):
        if k in steps and (copies is None or steps[k] in copies):
            first = starts[steps[k]]
            e["ts"] = round(first + (e["ts"] - first) * factor, 3)
            e["dur"] = round(e["dur"] * factor, 3)
    return out


def drop_gpu(trace: dict[str, Any], share: float, seed: int = 0) -> dict[str, Any]:
    """``share`` of the kernel events removed at random (what a profiler's full buffer loses)."""
    out = copy.deepcopy(trace)
    kernels = [k for k, e in enumerate(out["traceEvents"]) if e.get("cat") == "kernel"]
    lost = set(random.Random(seed).sample(kernels, int(share * len(kernels))))
    out["traceEvents"] = [e for k, e in enumerate(out["traceEvents"]) if k not in lost]
    return out


def drop_steps(trace: dict[str, Any]) -> dict[str, Any]:
    """The ProfilerStep#N ranges removed (CPU and GPU annotations): the same work, no steps."""
    out = copy.deepcopy(trace)
    out["traceEvents"] = [e for e in out["traceEvents"] if not STEP.match(str(e.get("name", "")))]
    return out
