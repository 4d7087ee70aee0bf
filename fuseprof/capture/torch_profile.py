"""Record measured calls under torch.profiler, each inside a fuseprof range, as a Chrome trace, with the
PyTorch execution trace beside it (which tensor each op took: the op graph's exact dataflow)."""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fuseprof.parse.execution_trace import EXECUTION_TRACE


@dataclass(frozen=True)
class Call:
    """One measured call: its range label (``fuseprof.ranges.range_label``), function and inputs."""

    label: str
    fn: Callable[..., Any]
    inputs: Sequence[Any]


def profiler_activities(cuda: bool) -> list[torch.profiler.ProfilerActivity]:
    """CPU, and CUDA when kernels should be traced."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return activities


def _gzip(plain: Path, gz_path: Path) -> Path:
    with plain.open("rb") as src, gzip.open(gz_path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    return gz_path


def export_gzipped_trace(prof: torch.profiler.profile, gz_path: Path) -> Path:
    """The profiler's Chrome trace as ``gz_path``: export writes plain JSON, gzipped beside and dropped."""
    plain = gz_path.with_suffix("")
    prof.export_chrome_trace(str(plain))
    return _gzip(plain, gz_path)


@contextlib.contextmanager
def profiled(raw: Path, cuda: bool, **options: Any) -> Iterator[torch.profiler.profile]:
    """torch.profiler over the block (``options``: ``record_shapes``, ``with_modules``, …) with an
    ``ExecutionTraceObserver`` beside it, whose trace is written gzipped as ``raw/EXECUTION_TRACE`` when the
    block ends; the caller exports the Chrome trace."""
    plain = raw / EXECUTION_TRACE.removesuffix(".gz")
    observer = torch.profiler.ExecutionTraceObserver()
    observer.register_callback(str(plain))
    try:
        with torch.profiler.profile(activities=profiler_activities(cuda), execution_trace_observer=observer,
                                    **options) as prof:
            yield prof
    finally:
        observer.unregister_callback()
    if plain.exists():
        _gzip(plain, raw / EXECUTION_TRACE)


UNPROFILED_KEY = "fuseprof_unprofiled"  # read by fuseprof.parse.trace_events.capture_facts


def add_unprofiled(prof: torch.profiler.profile, step_ns: Sequence[int], method: str = "CUDA events") -> None:
    """Write into the trace the same steps timed without the profiler (ns each, timed by ``method``), and the torch
    that ran them: ``analyze`` then uses the measured step time instead of its estimate (``fuseprof.analysis.facts.unprofiled``).
    Call while the profiler runs (inside its ``with``; Kineto drops metadata added after it stops)."""
    prof.add_metadata_json(UNPROFILED_KEY, json.dumps({"step_ns": [int(t) for t in step_ns],
                                                       "torch": torch.__version__, "method": method}))


UNPROFILED_ROUNDS = 5  # the window's un-profiled runs: the median of five steadies a host that drifts


def _run_calls(calls: Sequence[Call], repeats: int, cuda: bool) -> None:
    """Each call ``repeats`` times inside its range, the GPU drained after each: the window a trace records."""
    for call in calls:
        with torch.profiler.record_function(call.label):
            for _ in range(repeats):
                call.fn(*call.inputs)
            if cuda:
                torch.cuda.synchronize()


def timing_method(cuda: bool) -> str:
    """The words ``add_unprofiled`` writes for how the steps were timed (``analyze`` repeats only these)."""
    return "CUDA events" if cuda else "host clock"


def clock_mark(cuda: bool) -> Any:
    """A point on the step clock, taken without synchronising: a CUDA event recorded on the current stream (a GPU's
    steps end when their last kernel does), else the host's clock in ns."""
    if not cuda:
        return time.perf_counter_ns()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def between_ns(marks: Sequence[Any], cuda: bool) -> list[int]:
    """The ns between consecutive ``clock_mark``s (on a GPU, after the last one has been reached)."""
    if not cuda:
        return [b - a for a, b in zip(marks, marks[1:])]
    marks[-1].synchronize()
    return [round(a.elapsed_time(b) * 1e6) for a, b in zip(marks, marks[1:])]


def time_unprofiled(window: Callable[[], None], cuda: bool, rounds: int = UNPROFILED_ROUNDS) -> list[int]:
    """``window`` run ``rounds`` times with no profiler on, each timed whole (ns): CUDA events around it on a GPU
    (the window ends by draining the GPU, so its end event marks its last kernel), the host's clock on a CPU. These
    are the steps ``add_unprofiled`` writes into the trace, so that ``analyze`` need not estimate the profiler's
    host cost on fuseprof's own captures (issue 59)."""
    window()  # once untimed: a first run pays what a loop's first step does (on a CPU capture 40x the rest)
    times = []
    for _ in range(rounds):
        if cuda:
            torch.cuda.synchronize()
        began = clock_mark(cuda)
        window()
        times += between_ns([began, clock_mark(cuda)], cuda)
    return times


def record_trace(calls: Sequence[Call], repeats: int, gz_path: Path, cuda: bool) -> list[int]:
    """Run each call ``repeats`` times inside its range and write the gzipped Chrome trace (and the execution
    trace beside it); return the same window's un-profiled times (ns), which the trace carries too.

    The window runs ``UNPROFILED_ROUNDS`` times without the profiler first (``time_unprofiled``): the trace has no
    steps, so its one window is the step ``analyze`` reads, and the measured window replaces its estimate of the
    profiler's host cost. No L2 flush runs inside the profiled region, so every kernel in the trace belongs to a
    measured call; profiler durations are therefore warm-L2 figures (timings.parquet and
    ncu give the flushed ones). Input shapes are recorded: the per-op roofline and the modelled roofline
    of a capture whose counters were denied read them.
    """
    unprofiled = time_unprofiled(lambda: _run_calls(calls, repeats, cuda), cuda)
    with profiled(gz_path.parent, cuda, record_shapes=True) as prof:
        add_unprofiled(prof, unprofiled, timing_method(cuda))
        _run_calls(calls, repeats, cuda)
    export_gzipped_trace(prof, gz_path)
    return unprofiled
