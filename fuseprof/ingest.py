"""``fuseprof ingest``: a bundle from traces a user already has, on any machine.

Each file is parsed completely before anything is written; a malformed file stops the whole
ingest with one line naming it, and no partial bundle is left behind.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from fuseprof.bundle import BundleWriter
from fuseprof.capture.provenance import command_line, now_utc
from fuseprof.errors import TraceFormatError
from fuseprof.parse.chrome_trace import read_chrome_trace
from fuseprof.parse.ncu_csv import read_ncu_csv
from fuseprof.parse.ncu_rep import read_ncu_rep

Reader = Callable[[Path], pd.DataFrame]

# suffix -> (reader, kind, name of the raw copy kept in the bundle)
_KINDS: tuple[tuple[str, Reader, str, str], ...] = (
    (".json.gz", read_chrome_trace, "torch.profiler trace", "profiler_trace.json.gz"),
    (".json", read_chrome_trace, "torch.profiler trace", "profiler_trace.json"),
    (".csv.gz", read_ncu_csv, "ncu raw CSV", "ncu_raw.csv.gz"),
    (".csv", read_ncu_csv, "ncu raw CSV", "ncu_raw.csv"),
    (".ncu-rep", read_ncu_rep, "Nsight Compute report", "report.ncu-rep"),
)


def _kind_of(path: Path) -> tuple[Reader, str, str]:
    for suffix, reader, kind, raw_name in _KINDS:
        if path.name.endswith(suffix):
            return reader, kind, raw_name
    known = ", ".join(s for s, *_ in _KINDS)
    raise TraceFormatError(f"{path}: unknown kind of file; fuseprof ingests {known}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ingest(files: Sequence[Path], out_dir: Path, name: str | None = None,
           log: Callable[[str], None] = print) -> Path:
    """Parse every file, then write one bundle holding their kernels and the raw copies."""
    if not files:
        raise TraceFormatError("give at least one trace file to ingest")
    parsed = []
    for path in files:
        if not path.is_file():
            raise TraceFormatError(f"{path}: no such file")
        reader, kind, raw_name = _kind_of(path)
        frame = reader(path)
        if frame.empty:
            raise TraceFormatError(f"{path}: the {kind} holds no kernel")
        log(f"  {path}: {kind}, {len(frame)} kernels")
        parsed.append((path, kind, raw_name, frame))
    kernels = pd.concat([f for *_, f in parsed], ignore_index=True)
    devices = sorted(set(kernels["device"].dropna())) if "device" in kernels else []
    manifest = {
        "kind": "ingest", "case": None, "created_utc": now_utc(), "command_line": command_line(),
        "device": {"name": devices[0] if len(devices) == 1 else ", ".join(devices) or None},
        "sources": [{"file": str(p), "kind": k, "sha256": _sha256(p), "raw": f"raw/{i}-{r}", "kernels": len(f)}
                    for i, (p, k, r, f) in enumerate(parsed)],
    }
    with BundleWriter(out_dir, name or f"ingest-{parsed[0][0].name.split('.')[0]}-{now_utc()}") as writer:
        for i, (path, _, raw_name, _) in enumerate(parsed):
            shutil.copyfile(path, writer.raw(f"{i}-{raw_name}"))
        writer.write_kernels(kernels)
        writer.write_manifest(manifest)
        return writer.commit()
