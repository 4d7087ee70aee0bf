"""Record measured calls under torch.profiler, each inside a fuseprof range, as a Chrome trace, with the
PyTorch execution trace beside it (which tensor each op took: the op graph's exact dataflow)."""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
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


def add_unprofiled(prof: torch.profiler.profile, step_ns: Sequence[int]) -> None:
    """Write into the trace the same steps timed without the profiler (CUDA events, ns each), and the torch that ran
    them: ``analyze`` then uses the measured step time instead of its estimate (``fuseprof.analysis.facts.unprofiled``).
    Call while the profiler runs (inside its ``with``; Kineto drops metadata added after it stops)."""
    prof.add_metadata_json(UNPROFILED_KEY, json.dumps({"step_ns": [int(t) for t in step_ns],
                                                       "torch": torch.__version__, "method": "CUDA events"}))


def record_trace(calls: Sequence[Call], repeats: int, gz_path: Path, cuda: bool) -> None:
    """Run each call ``repeats`` times inside its range and write the gzipped Chrome trace (and the execution
    trace beside it).

    No L2 flush runs inside the profiled region, so every kernel in the trace belongs to a
    measured call; profiler durations are therefore warm-L2 figures (timings.parquet and
    ncu give the flushed ones). Input shapes are recorded: the per-op roofline and the modelled roofline
    of a capture whose counters were denied read them.
    """
    with profiled(gz_path.parent, cuda, record_shapes=True) as prof:
        for call in calls:
            with torch.profiler.record_function(call.label):
                for _ in range(repeats):
                    call.fn(*call.inputs)
                if cuda:
                    torch.cuda.synchronize()
    export_gzipped_trace(prof, gz_path)
