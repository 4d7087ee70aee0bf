"""Pure builders of ``ncu`` command lines, testable without a GPU.

``--clock-control none`` always: ncu's default locks the SM clock near base (1.44 GHz on the
H200, against a 1.98 GHz boost), which made the same kernel 148 µs instead of 118 µs here,
and fuseprof never changes the card's clocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ClockControl = Literal["none", "base"]
CacheControl = Literal["all", "none"]


@dataclass(frozen=True)
class NcuRequest:
    ncu: str
    report_path: Path
    range_labels: Sequence[str]
    metrics: Sequence[str]
    target_argv: Sequence[str]
    clock_control: ClockControl = "none"
    cache_control: CacheControl = "all"  # flush caches before each replayed kernel
    sections: Sequence[str] = ()  # --set names (e.g. "roofline") collected beside the metrics


def profile_argv(req: NcuRequest) -> list[str]:
    """ncu limited to the given NVTX push/pop ranges, exporting a report."""
    if not req.range_labels:
        raise ValueError("at least one NVTX range is needed, or ncu would profile warm-up and compile kernels")
    argv = [req.ncu, "--clock-control", req.clock_control, "--cache-control", req.cache_control, "--nvtx"]
    for label in req.range_labels:
        argv += ["--nvtx-include", f"{label}/"]
    for name in req.sections:
        argv += ["--set", name]
    argv += ["--metrics", ",".join(req.metrics), "--export", str(req.report_path), "--force-overwrite"]
    return argv + list(req.target_argv)


