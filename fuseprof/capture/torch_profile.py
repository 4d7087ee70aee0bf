"""Record measured calls under torch.profiler, each inside a fuseprof range, as a Chrome trace."""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


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


def export_gzipped_trace(prof: torch.profiler.profile, gz_path: Path) -> Path:
    """The profiler's Chrome trace as ``gz_path``: export writes plain JSON, gzipped beside and dropped."""
    plain = gz_path.with_suffix("")
    prof.export_chrome_trace(str(plain))
    with plain.open("rb") as src, gzip.open(gz_path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    return gz_path


def record_trace(calls: Sequence[Call], repeats: int, gz_path: Path, cuda: bool) -> None:
    """Run each call ``repeats`` times inside its range and write the gzipped Chrome trace.

    No L2 flush runs inside the profiled region, so every kernel in the trace belongs to a
    measured call; profiler durations are therefore warm-L2 figures (timings.parquet and
    ncu give the flushed ones). Input shapes are recorded: the per-op roofline and the modelled roofline
    of a capture whose counters were denied read them.
    """
    with torch.profiler.profile(activities=profiler_activities(cuda), record_shapes=True) as prof:
        for call in calls:
            with torch.profiler.record_function(call.label):
                for _ in range(repeats):
                    call.fn(*call.inputs)
                if cuda:
                    torch.cuda.synchronize()
    export_gzipped_trace(prof, gz_path)
