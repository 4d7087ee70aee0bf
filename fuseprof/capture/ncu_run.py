"""Run ``ncu`` as a subprocess: stream its progress, keep its log, name its failures."""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fuseprof.errors import (
    NcuFailedError,
    NcuNoKernelsError,
    NcuNotFoundError,
    NcuPermissionError,
    NcuTimeoutError,
)

_PROFILING_RE = re.compile(r'==PROF== Profiling "(?P<kernel>.+?)".*?(?P<passes>\d+) pass(es)?')
_UNKNOWN_METRIC_RE = re.compile(r"Failed to find metric (?:regex:)?\^?(?P<metric>[\w.]+?)\$?(?:\s|$)")
_SEARCH_DIRS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda-*/bin/ncu")


def find_ncu() -> str:
    """Path of the ncu executable: PATH first, then the usual CUDA and Nsight install folders."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in _SEARCH_DIRS:
        matches = sorted(glob.glob(pattern))
        if matches:
            return matches[-1]
    raise NcuNotFoundError(
        "Nsight Compute (ncu) was not found on PATH or under /usr/local/cuda or /opt/nvidia; install it "
        "or put it on PATH, or run with --no-ncu (the torch.profiler part is still captured)"
    )


class UnknownMetricsError(NcuFailedError):
    """ncu rejected metric names; the caller may retry without them."""

    def __init__(self, metrics: list[str]) -> None:
        super().__init__(f"this ncu does not know the metrics: {', '.join(metrics)}")
        self.metrics = metrics


@dataclass
class NcuRun:
    log: str
    wall_s: float
    passes: list[tuple[str, int]] = field(default_factory=list)  # (kernel, replay passes), in order


def _classify(log: str, returncode: int) -> None:
    if "ERR_NVGPUCTRPERM" in log:
        raise NcuPermissionError(
            "the driver refused access to GPU performance counters (ERR_NVGPUCTRPERM); run as root or set "
            "NVreg_RestrictProfilingToAdminUsers=0 (see NVIDIA's ERR_NVGPUCTRPERM page), or run with --no-ncu"
        )
    unknown = sorted(set(m.group("metric") for m in _UNKNOWN_METRIC_RE.finditer(log)))
    if unknown:
        raise UnknownMetricsError(unknown)
    errors = [line for line in log.splitlines() if line.startswith("==ERROR==")]
    if returncode != 0:
        detail = "; ".join(errors[-3:]) or log.strip().splitlines()[-1:] or ["no output"]
        raise NcuFailedError(f"ncu exited with status {returncode}: {detail}")
    if "No kernels were profiled" in log:
        raise NcuNoKernelsError(
            "ncu ran but profiled no kernel inside the fuseprof NVTX ranges; does every variant launch a "
            "CUDA kernel on this device?"
        )


def run_ncu(
    argv: Sequence[str],
    timeout_s: float,
    on_kernel: Callable[[int, str, int], None] | None = None,
    env: dict[str, str] | None = None,
) -> NcuRun:
    """Run ncu, calling ``on_kernel(index, name, passes)`` as each kernel finishes its replays."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env
    )
    lines: list[str] = []
    run = NcuRun(log="", wall_s=0.0)

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            match = _PROFILING_RE.search(line)
            if match:
                run.passes.append((match.group("kernel"), int(match.group("passes"))))
                if on_kernel:
                    on_kernel(len(run.passes), match.group("kernel"), int(match.group("passes")))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        returncode = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join(timeout=5)
        raise NcuTimeoutError(
            f"ncu ran past {timeout_s:.0f} s and was stopped after {len(run.passes)} kernels; "
            "profile fewer shapes or variants, or raise --ncu-timeout"
        ) from None
    reader.join(timeout=30)
    run.log, run.wall_s = "".join(lines), time.monotonic() - start
    _classify(run.log, returncode)
    return run


def run_ncu_known_metrics(
    build_argv: Callable[[list[str]], list[str]],
    metrics: Sequence[str],
    timeout_s: float,
    log: Callable[[str], None],
    attempts: int = 3,
) -> tuple[NcuRun, list[str], list[str], list[str]]:
    """Run ncu with ``build_argv(metrics)``, dropping metrics this ncu does not know and retrying.

    Returns the run, the argv that succeeded, the metrics kept and the metrics dropped (the
    caller records both: a column that is null because ncu lacked its counter must say so).
    """
    kept, dropped = list(metrics), list[str]()
    for _attempt in range(attempts):
        argv = build_argv(kept)
        try:
            run = run_ncu(argv, timeout_s, lambda i, name, passes: log(f"  ncu: kernel {i}: {name[:70]} ({passes} passes)"))
            return run, argv, kept, dropped
        except UnknownMetricsError as exc:
            log(f"  ncu: {exc}; retrying without them")
            dropped += exc.metrics
            kept = [m for m in kept if m not in exc.metrics]
    raise NcuFailedError(f"ncu kept rejecting metrics after {attempts} attempts; see raw/ncu.log")
