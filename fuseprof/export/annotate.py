"""``fuseprof export --perfetto``: analysed traces written back as one annotated trace (``fuseprof.export.chrome``
for the format, ``fuseprof.export.findings`` for what is drawn, ``fuseprof.export.pftrace`` for Perfetto's
protobuf), whole or not at all."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from fuseprof.bundle.files import replace_atomically
from fuseprof.errors import FuseprofError
from fuseprof.export.chrome import annotated, read_original, to_json_text
from fuseprof.export.findings import rank_waits, trace_findings
from fuseprof.output_paths import refuse_overwriting
from fuseprof.parse.store import default_store

if TYPE_CHECKING:
    from fuseprof.analysis.facts.result import TraceAnalysis

SUFFIXES = (".json", ".json.gz", ".pftrace")


@dataclass(frozen=True)
class Exported:
    """What was written: the file, its size, the original events and the findings per rank."""

    path: Path
    bytes: int
    original_events: int
    findings: dict[str, pd.DataFrame]
    note: str = ""


def check_output(out: Path, sources: Sequence[Path], force: bool) -> None:
    """Refuse an output that would lose something: an existing file without ``force``, a folder, an input
    trace, a name the formats do not cover."""
    if not out.name.endswith(SUFFIXES) or out.name in SUFFIXES:
        raise FuseprofError(f"--perfetto {out}: name it .json.gz (Chrome JSON, gzipped), .json or .pftrace "
                            "(Perfetto's protobuf)")
    if out.is_dir():
        raise FuseprofError(f"--perfetto {out}: is a folder; name the file to write")
    if not out.parent.is_dir():
        raise FuseprofError(f"--perfetto {out}: no such folder {out.parent}")
    refuse_overwriting("--perfetto", out, sources)
    if out.exists() and not force:
        raise FuseprofError(f"--perfetto {out}: exists; pass --force to replace it")


def label(result: TraceAnalysis) -> str:
    """How a trace is named in a merged file: its rank where it has one, else its name."""
    return f"rank {result.rank}" if result.rank is not None else result.name


def findings_per_trace(results: list[TraceAnalysis]) -> dict[str, pd.DataFrame]:
    """Each trace's findings (and, across several ranks, its waits), by label."""
    store = default_store()
    waits = rank_waits(results) if len(results) > 1 else {}
    out = {}
    for position, result in enumerate(results):
        if result.source is None:
            raise FuseprofError(f"{result.name}: analysed without its file; export reads the original events")
        own = trace_findings(result, store.tables(result.source)[0])
        extra = waits.get(position)
        out[label(result)] = pd.concat([own, extra], ignore_index=True) if extra is not None and not extra.empty \
            else own
    return out


def export_perfetto(results: list[TraceAnalysis], out: Path, force: bool = False) -> Exported:
    """Write ``results``' traces (one, or several ranks merged in rank order) with their findings to ``out``."""
    if not results:
        raise FuseprofError("export: no trace to write")
    results = sorted(results, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.name))
    labels = [label(r) for r in results]
    if len(set(labels)) != len(labels):
        twice = sorted(x for x in labels if labels.count(x) > 1)[0]
        files = ", ".join(str(r.source or r.name) for r, x in zip(results, labels) if x == twice)
        raise FuseprofError(f"export: {files} are all {twice!r}: the same rank twice, or the traces of several runs; "
                            "merge the traces of one run, one per rank")
    check_output(out, [r.source for r in results if r.source is not None], force)
    findings = findings_per_trace(results)
    originals = [read_original(r.source) for r in results if r.source is not None]
    if out.name.endswith(".pftrace"):
        from fuseprof.export.pftrace import pftrace_bytes

        payload, converted = pftrace_bytes(originals, [findings[x] for x in labels], labels)
        left = ", ".join(f"'{ph}' {n:,}" for ph, n in sorted(converted.left_out.items()))
        note = f"events with no TrackEvent form (by phase: {left}) are in the JSON export only" if left else ""
    else:
        note = ""
        trace = annotated(originals, [findings[x] for x in labels], labels)
        text = to_json_text(trace, sum(o.kept_numbers for o in originals)).encode("utf-8")
        payload = gzip.compress(text, compresslevel=6, mtime=0) if out.name.endswith(".gz") else text
    replace_atomically(out, lambda p: p.write_bytes(payload))
    return Exported(out, len(payload), sum(len(o.events) for o in originals), findings, note)
