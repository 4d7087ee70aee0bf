"""Bundles into DataFrames: the single entry point the dashboard, notebooks and CLI share."""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fuseprof.bundle.files import KERNELS, TIMINGS, find_bundles, read_manifest
from fuseprof.bundle.schema import KERNEL_COLUMN_NAMES, TIMING_COLUMN_NAMES, conform_kernels, conform_timings
from fuseprof.errors import BundleError

# Which tables each kind of bundle must hold: a missing one is damage, not an empty bundle.
REQUIRED = {"capture": (KERNELS, TIMINGS), "ingest": (KERNELS,), "bench": (TIMINGS,), "ceilings": ()}
# Columns every version of fuseprof has written: one missing (renamed by another version, or edited) would
# be filled with nulls, which sums turn into 0 — DRAM MB 0.0 and no time in `summary`. Refused instead.
CORE_COLUMNS = {
    KERNELS: ("kernel", "source", "duration_ns", "dram_read_bytes", "dram_write_bytes", "l2_read_bytes",
              "l2_write_bytes", "flops_fp32", "registers_per_thread"),
    TIMINGS: ("case", "variant", "shape", "gpu_median_ns", "nominal_bytes", "correct"),
}


def _read_table(bundle: Path, filename: str) -> pa.Table | None:
    manifest = read_manifest(bundle)  # validates the schema version before trusting the tables
    path = bundle / filename
    if not path.exists():
        if filename in REQUIRED.get(str(manifest.get("kind")), ()):
            raise BundleError(f"{path}: missing from a {manifest.get('kind')} bundle; recapture, or "
                              f"`fuseprof reparse {bundle}` if its raw/ folder is intact")
        return None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise BundleError(f"{path}: unreadable Parquet ({exc})") from None
    columns = KERNEL_COLUMN_NAMES if filename == KERNELS else TIMING_COLUMN_NAMES
    if table.num_columns and not set(table.column_names) & set(columns) - {"bundle"}:
        raise BundleError(f"{path}: none of fuseprof's columns ({', '.join(sorted(table.column_names)[:5])}, …): "
                          "not a fuseprof table")
    missing = [c for c in CORE_COLUMNS[filename] if c not in table.column_names]
    if table.num_rows and missing:
        raise BundleError(f"{path}: lacks the column(s) {', '.join(missing)} (written by another fuseprof, or edited); "
                          f"`fuseprof reparse {bundle}` rebuilds the kernel table from raw/")
    return table.append_column("bundle", pa.array([bundle.name] * table.num_rows, pa.string()))


# What one value costs once a table is a pandas frame: a number 8 bytes and its null mask 1; a string
# its characters and a Python str object (49 bytes) behind an 8-byte pointer. Measured on a 2,001,558-row
# kernel table (12 MB of Parquet): the frame took 1.90 GB, the estimate says 2.37 GB, peak RSS grew 2.6 GB.
NUMBER_BYTES = 9
STRING_OVERHEAD_BYTES = 57


def frame_bytes(bundle: Path, filename: str = KERNELS) -> int:
    """Memory a bundle's table would take as a pandas frame, estimated from its Parquet footer alone,
    so that a reader with a budget (the dashboard) can decline a huge table before reading it; 0 for a
    table that is absent or whose footer is unreadable (loading it then reports the damage)."""
    try:
        parquet = pq.ParquetFile(bundle / filename)
    except Exception:  # absent or damaged: the loader says which, with the bundle's name
        return 0
    meta, total = parquet.metadata, 0
    for index, field in enumerate(parquet.schema_arrow):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            characters = sum(meta.row_group(g).column(index).total_uncompressed_size for g in range(meta.num_row_groups))
            total += meta.num_rows * STRING_OVERHEAD_BYTES + characters
        else:
            total += meta.num_rows * NUMBER_BYTES
    return total


def past_budget(path: str | Path, budget_mb: float) -> tuple[set[str], list[str]]:
    """The bundles in ``path`` whose kernel tables would take the frames past ``budget_mb`` (in folder
    order), with a note for each: a 2-million-kernel table takes ~1.9 GB as a frame, and a server (the
    dashboard) holds it for every page. The budget is of ``frame_bytes``, read without the tables."""
    left_out: set[str] = set()
    notes, used = [], 0.0
    for bundle in find_bundles(Path(path)):
        size_mb = frame_bytes(bundle) / 1e6
        if used + size_mb <= budget_mb:
            used += size_mb
            continue
        left_out.add(bundle.name)
        notes.append(f"{bundle.name}: its kernel table would take ~{size_mb:,.0f} MB in memory, past the budget of "
                     f"{budget_mb:,.0f} MB ({used:,.0f} MB taken by the bundles before it); `fuseprof dashboard "
                     "--memory-mb N` raises it, or open a folder holding fewer bundles")
    return left_out, notes


def _load(path: str | Path, filename: str, leave_out: Collection[str] = ()) -> list[pd.DataFrame]:
    """Every bundle's table but those named in ``leave_out``: read as Arrow on a few threads (decoding
    releases the GIL), joined, and turned into pandas once — 100 bundles' kernel tables took 0.31 s
    through pandas one file at a time and 0.14 s this way, single-threaded, on 2-core machines."""
    found = find_bundles(Path(path))
    if not found:
        raise BundleError(f"{path}: holds no fuseprof bundle (a folder with manifest.json)")
    bundles = [b for b in found if b.name not in leave_out]
    if not bundles:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(bundles))) as pool:
        tables = [t for t in pool.map(lambda b: _read_table(b, filename), bundles) if t is not None and t.num_rows]
    if not tables:
        return []
    try:
        joined = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a column typed differently in some bundle: check them one by one
        return [t.to_pandas() for t in tables]
    return [joined.to_pandas()]


def load(path: str | Path, leave_out: Collection[str] = ()) -> pd.DataFrame:
    """Kernel frame over one bundle or every bundle in a folder (but the bundles named in ``leave_out``);
    columns in ``fuseprof.bundle.schema``."""
    frames = [f for f in _load(path, KERNELS, leave_out) if not f.empty]
    return _conformed(conform_kernels, frames, path)


def load_timings(path: str | Path, leave_out: Collection[str] = ()) -> pd.DataFrame:
    """Per-variant, per-shape timings and correctness over one bundle or a folder of bundles (but
    those named in ``leave_out``)."""
    frames = [f for f in _load(path, TIMINGS, leave_out) if not f.empty]
    return _conformed(conform_timings, frames, path)


def _conformed(conform, frames: list[pd.DataFrame], path: str | Path) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Typed to the schema; a column of the wrong type (numbers stored as text) names its bundle."""
    try:
        return conform(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())
    except (TypeError, ValueError) as exc:
        for frame in frames:
            for bundle, part in frame.groupby("bundle", sort=False):
                try:
                    conform(part)
                except (TypeError, ValueError):
                    raise BundleError(f"{bundle}: a column does not have its schema type ({exc}); rewrite it with "
                                      "`fuseprof reparse`") from None
        raise BundleError(f"{path}: tables do not conform to the schema ({exc})") from None
