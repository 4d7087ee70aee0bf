"""Which parser reads which artifact, by file name (else by content); and all of a bundle's raw artifacts at once.

``fuseprof profile``, ``ingest`` and ``reparse`` all build the kernel frame through
``parse_raw_dir``, so a bundle re-parsed by a newer fuseprof gives what a fresh capture would.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from fuseprof.errors import TraceFormatError
from fuseprof.parse.chrome_trace import read_chrome_trace
from fuseprof.parse.execution_trace import is_execution_trace
from fuseprof.parse.foreign import holds_trace
from fuseprof.parse.ncu_csv import read_ncu_csv
from fuseprof.parse.ncu_rep import read_ncu_rep

Reader = Callable[[Path], pd.DataFrame]

# suffix, reader, what it is, name of its raw copy in a bundle
ARTIFACT_KINDS: tuple[tuple[str, Reader, str, str], ...] = (
    (".json.gz", read_chrome_trace, "torch.profiler trace", "profiler_trace.json.gz"),
    (".json", read_chrome_trace, "torch.profiler trace", "profiler_trace.json"),
    (".csv.gz", read_ncu_csv, "ncu raw CSV", "ncu_raw.csv.gz"),
    (".csv", read_ncu_csv, "ncu raw CSV", "ncu_raw.csv"),
    (".ncu-rep", read_ncu_rep, "Nsight Compute report", "report.ncu-rep"),
)


def artifact_kind(path: Path) -> tuple[Reader, str, str] | None:
    """The reader of a file by its name, else by its content: a trace named otherwise (``x.pftrace`` holding JSON,
    gzip without ``.gz``, ``.txt``) is still a trace, kept in a bundle under the name its bytes call for."""
    for suffix, reader, kind, raw_name in ARTIFACT_KINDS:
        if path.name.endswith(suffix):
            return reader, kind, raw_name
    if holds_trace(path):
        with path.open("rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
        return read_chrome_trace, "torch.profiler trace", "profiler_trace.json.gz" if gzipped else "profiler_trace.json"
    return None


def require_artifact_kind(path: Path) -> tuple[Reader, str, str]:
    found = artifact_kind(path)
    if found is None:
        known = ", ".join(s for s, *_ in ARTIFACT_KINDS)
        raise TraceFormatError(f"{path}: unknown kind of file; fuseprof reads {known}")
    return found


def inside(path: Path, folder: Path) -> Path:
    """``path``, refused when it is a link or leads out of ``folder`` (a bundle's ``raw/``): a bundle from
    someone else must not make fuseprof read files elsewhere on the machine."""
    if path.is_symlink() or not path.resolve().is_relative_to(folder.resolve()):
        raise TraceFormatError(f"{path}: a link out of its bundle; raw artifacts must be files inside the bundle")
    return path


def parse_raw_dir(raw_dir: Path) -> pd.DataFrame:
    """Kernel rows from every recognised artifact in a bundle's ``raw/`` folder, in name order; a
    sharded capture (``profile --gpus N``) keeps each rank's artifacts in ``raw/rank<r>/``, whose
    rows get ``rank`` r."""
    ranks = sorted((inside(p, raw_dir) for p in raw_dir.iterdir() if p.is_dir() and re.fullmatch(r"rank\d+", p.name)),
                   key=lambda p: int(p.name[4:]))
    if ranks:
        parts = [parse_raw_dir(p).assign(rank=int(p.name[4:])) for p in ranks]
        parts = [f for f in parts if len(f.columns) > 1]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    frames = []
    for path in sorted(raw_dir.iterdir()):
        found = artifact_kind(inside(path, raw_dir)) if not is_execution_trace(path) else None  # read by the op graph
        if found is not None:
            frames.append(found[0](path))
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
