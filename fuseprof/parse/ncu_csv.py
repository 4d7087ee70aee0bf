"""Nsight Compute raw CSV (``--csv --page raw``) into kernel-frame rows.

The format's traps, all handled here: ``==PROF==`` lines before the header when no
``--log-file`` was given; a units row under the header; thousands separators ("8,192");
"n/a" and "no data" cells; auto-scaled units unless ``--print-units base``.
"""

from __future__ import annotations

import csv
import io
import re
import warnings
from pathlib import Path

import pandas as pd

from fuseprof.errors import FuseprofWarning, TraceFormatError
from fuseprof.parse.ncu_metrics import BASE_METRICS, NCU_METRICS, columns_from_metrics, physical_problem
from fuseprof.parse.sources import NCU_SOURCE
from fuseprof.parse.textio import read_text
from fuseprof.parse.units import UnknownUnitError, scale_to_base
from fuseprof.ranges import search_range_label

_MISSING = {"", "n/a", "no data", "N/A"}


_THOUSANDS = re.compile(r"-?\d{1,3}(,\d{3})+(\.\d*)?([eE][-+]?\d+)?")


def _cell_value(cell: str, factor: float) -> float | str | None:
    """A number in base units; a comma is a thousands separator only between groups of three digits
    ("8,192"): "4,032000" from a decimal-comma locale stays text, which the caller refuses."""
    cell = cell.strip()
    if cell in _MISSING:
        return None
    if "," in cell and not _THOUSANDS.fullmatch(cell):
        return cell
    try:
        return float(cell.replace(",", "")) * factor
    except ValueError:
        return cell


# the columns fuseprof reads must hold numbers (a string there would silently become a null)
_NUMERIC = {m for m in NCU_METRICS if m != "device__attribute_display_name"}


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
    # ncu quotes every field; a CSV re-saved with minimal quoting starts its header with a bare ID
    start = next((i for i, line in enumerate(lines) if line.startswith(('"ID"', "ID,"))), None)
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
    """One row per profiled kernel, columns named as in ``fuseprof.bundle.schema``. The units row is
    required (without it durations and bytes could be off by 10³–10⁶); metrics fuseprof reads that
    are absent give a warning naming them; a non-number in one of them is an error."""
    return ncu_csv_frame(path, read_text(path))


def ncu_csv_frame(path: Path, text: str) -> pd.DataFrame:
    """``read_ncu_csv`` of CSV text already read (``path`` names it in messages): ``ncu --import``'s output too."""
    rows = _split_header(path, text.lstrip("\ufeff"))
    header, body = rows[0], rows[1:]
    if not body or not body[0] or body[0][0] != "":
        raise TraceFormatError(f"{path}: no units row under the header; values cannot be scaled safely. Export "
                               "with `ncu --import X.ncu-rep --csv --page raw --print-units base`")
    units, body = body[0], body[1:]
    if not body:
        raise TraceFormatError(f"{path}: ncu CSV has a header but no kernel rows")
    if "Kernel Name" not in header:
        raise TraceFormatError(f"{path}: no 'Kernel Name' column; is this `--page raw` output?")
    # e.g. "thread Domain:Push/Pop_Range:PL_Type:..." when ncu ran with --nvtx
    nvtx_columns = [h for h in header if "push/pop" in h.lower() or "nvtx" in h.lower()]
    try:
        factors = [scale_to_base(u) for u in units]
    except UnknownUnitError as exc:
        column = header[[i for i, u in enumerate(units) if str(exc) in u][0]]
        raise TraceFormatError(f"{path}: unknown unit {str(exc)!r} in column {column!r}; fuseprof will not guess "
                               "its scale (export with --print-units base)") from None
    absent = sorted(set(BASE_METRICS) - set(header))
    if absent:
        warnings.warn(FuseprofWarning(f"{path}: {len(absent)} metric(s) fuseprof reads are absent, their columns "
                                      f"stay null: {', '.join(absent[:6])}{' …' if len(absent) > 6 else ''}"),
                      stacklevel=2)
    numeric = [i for i, h in enumerate(header) if h in _NUMERIC]
    out = []
    for line_no, row in enumerate(body, start=3):
        if len(row) != len(header):
            raise TraceFormatError(
                f"{path}: line {line_no} has {len(row)} fields, the header has {len(header)} (truncated?)"
            )
        record = dict(zip(header, row))
        metrics = {h: _cell_value(c, f) for h, c, f in zip(header, row, factors)}
        bad = next((header[i] for i in numeric if isinstance(metrics[header[i]], str)), None)
        if bad is not None:
            hint = " (a decimal comma? export with LC_ALL=C)" if "," in record[bad] else ""
            raise TraceFormatError(f"{path}: line {line_no}, column {bad!r}: {record[bad]!r} is not a number{hint}")
        cols = columns_from_metrics(metrics)
        problem = physical_problem(cols)
        if problem:
            raise TraceFormatError(f"{path}: line {line_no} ({record['Kernel Name'][:60]}): {problem}")
        cols["kernel"] = record["Kernel Name"]
        cols["grid"] = cols["grid"] or _dims(record.get("Grid Size"))
        cols["block"] = cols["block"] or _dims(record.get("Block Size"))
        found = _range_of(record, nvtx_columns)
        cols["variant"], cols["shape"] = found if found else (None, None)
        cols["source"], cols["kind"] = NCU_SOURCE, "kernel"
        out.append(cols)
    return pd.DataFrame(out)
