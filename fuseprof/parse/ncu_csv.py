"""Nsight Compute raw CSV (``--csv --page raw``) into kernel-frame rows.

The format's traps, all handled here: ``==PROF==`` lines before the header when no
``--log-file`` was given; a units row under the header; thousands separators ("8,192");
"n/a" and "no data" cells; auto-scaled units unless ``--print-units base``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from fuseprof.errors import TraceFormatError
from fuseprof.parse.ncu_metrics import columns_from_metrics
from fuseprof.parse.textio import read_text
from fuseprof.parse.units import scale_to_base
from fuseprof.ranges import search_range_label
from fuseprof.schema import NCU_SOURCE

_MISSING = {"", "n/a", "no data", "N/A"}


def _cell_value(cell: str, factor: float) -> float | str | None:
    cell = cell.strip()
    if cell in _MISSING:
        return None
    try:
        return float(cell.replace(",", "")) * factor
    except ValueError:
        return cell


def _dims(cell: str | None) -> str | None:
    """'(256, 1, 1)' -> '256,1,1'."""
    if not cell:
        return None
    return ",".join(p.strip() for p in cell.strip("() ").split(","))


def _range_of(record: dict[str, str], nvtx_columns: list[str]) -> tuple[str, str] | None:
    for col in nvtx_columns:
        found = search_range_label(record.get(col, ""))
        if found:
            return found
    return None


def _split_header(path: Path, text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise TraceFormatError(
            f"{path}: no ncu header row (a line starting with \"ID\"); write the CSV with "
            "`ncu --csv --page raw` or `ncu --import X.ncu-rep --csv --page raw`"
        )
    try:
        return list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    except csv.Error as exc:
        raise TraceFormatError(f"{path}: malformed CSV ({exc})") from None


def read_ncu_csv(path: Path) -> pd.DataFrame:
    """One row per profiled kernel, columns named as in ``fuseprof.schema``."""
    rows = _split_header(path, read_text(path))
    header, body = rows[0], rows[1:]
    units = [""] * len(header)
    if body and body[0] and body[0][0] == "":
        units, body = body[0], body[1:]
    if not body:
        raise TraceFormatError(f"{path}: ncu CSV has a header but no kernel rows")
    if "Kernel Name" not in header:
        raise TraceFormatError(f"{path}: no 'Kernel Name' column; is this `--page raw` output?")
    # e.g. "thread Domain:Push/Pop_Range:PL_Type:..." when ncu ran with --nvtx
    nvtx_columns = [h for h in header if "push/pop" in h.lower() or "nvtx" in h.lower()]
    factors = [scale_to_base(u) for u in units]
    out = []
    for line_no, row in enumerate(body, start=3):
        if len(row) != len(header):
            raise TraceFormatError(
                f"{path}: line {line_no} has {len(row)} fields, the header has {len(header)} (truncated?)"
            )
        record = dict(zip(header, row))
        metrics = {h: _cell_value(c, f) for h, c, f in zip(header, row, factors)}
        cols = columns_from_metrics(metrics)
        cols["kernel"] = record["Kernel Name"]
        cols["grid"] = cols["grid"] or _dims(record.get("Grid Size"))
        cols["block"] = cols["block"] or _dims(record.get("Block Size"))
        found = _range_of(record, nvtx_columns)
        cols["variant"], cols["shape"] = found if found else (None, None)
        cols["source"], cols["kind"] = NCU_SOURCE, "kernel"
        out.append(cols)
    return pd.DataFrame(out)
