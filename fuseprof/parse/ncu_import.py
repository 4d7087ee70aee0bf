"""``ncu --import REPORT --csv --page raw``: how a ``.ncu-rep`` becomes CSV through Nsight Compute itself, where
NVIDIA's Python reader is not installed. Here in the parse layer, since reading a report is parsing; the capture
builds on it (``fuseprof.capture.ncu_capture`` exports its own reports the same way)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from fuseprof.errors import NcuFailedError, NcuTimeoutError


def import_csv_argv(ncu: str, report_path: Path) -> list[str]:
    """Raw page of an exported report as CSV, in base units (no auto-scaling)."""
    return [ncu, "--import", str(report_path), "--csv", "--page", "raw", "--print-units", "base"]


def run_capture_output(argv: Sequence[str], timeout_s: float = 600) -> str:
    """Run a short ncu command (``--import``, ``--version``) and return its stdout."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise NcuTimeoutError(f"{Path(argv[0]).name} {' '.join(argv[1:3])} ran past {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise NcuFailedError(f"{' '.join(argv[:3])} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return done.stdout
