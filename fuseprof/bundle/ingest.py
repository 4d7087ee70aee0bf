"""``fuseprof ingest``: a bundle from traces a user already has, on any machine.

Each file is parsed completely before anything is written; a malformed file stops the whole
ingest with one line naming it, and no partial bundle is left behind.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fuseprof.bundle.files import BundleWriter
from fuseprof.bundle.provenance import command_line, now_utc
from fuseprof.console import Log, log_to_stderr
from fuseprof.errors import TraceFormatError
from fuseprof.parse.dispatch import require_artifact_kind


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ingest(files: Sequence[Path], out_dir: Path, name: str | None = None,
           log: Log = log_to_stderr) -> Path:
    """Parse every file, then write one bundle holding their kernels and the raw copies."""
    if not files:
        raise TraceFormatError("give at least one trace file to ingest")
    parsed = []
    seen: dict[str, Path] = {}
    for path in files:
        if path.is_dir():
            raise TraceFormatError(f"{path}: is a directory; give trace files (a bundle needs no ingest)")
        if not path.is_file():
            raise TraceFormatError(f"{path}: no such file")
        digest = _sha256(path)
        if digest in seen:  # every row would be counted twice
            raise TraceFormatError(f"{path}: the same content as {seen[digest]}, given twice")
        seen[digest] = path
        reader, kind, raw_name = require_artifact_kind(path)
        frame = reader(path)
        if frame.empty:
            raise TraceFormatError(f"{path}: the {kind} holds no kernel")
        kinds = frame["kind"].value_counts().to_dict() if "kind" in frame else {"kernel": len(frame)}
        log(f"  {path}: {kind}, " + ", ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in kinds.items()))
        parsed.append((path, kind, raw_name, frame, digest))
    kernels = pd.concat([f for *_, f, _ in parsed], ignore_index=True)
    devices = sorted(set(kernels["device"].dropna())) if "device" in kernels else []
    manifest = {
        "kind": "ingest", "case": None, "created_utc": now_utc(), "command_line": command_line(),
        "device": {"name": devices[0] if len(devices) == 1 else ", ".join(devices) or None},
        "sources": [{"file": str(p), "kind": k, "sha256": d, "raw": f"raw/{i}-{r}", "kernels": len(f)}
                    for i, (p, k, r, f, d) in enumerate(parsed)],
    }
    with BundleWriter(out_dir, name or f"ingest-{parsed[0][0].name.split('.')[0]}-{now_utc()}") as writer:
        for i, (path, _, raw_name, _, _) in enumerate(parsed):
            shutil.copyfile(path, writer.raw(f"{i}-{raw_name}"))
        writer.write_kernels(kernels)
        writer.write_manifest(manifest)
        return writer.commit()
