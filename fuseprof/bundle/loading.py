"""Bundles into DataFrames: the single entry point the dashboard, notebooks and CLI share."""

from __future__ import annotations

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


def _load(path: str | Path, filename: str) -> list[pd.DataFrame]:
    """Every bundle's table: read as Arrow on a few threads (decoding releases the GIL), joined,
    and turned into pandas once — 100 bundles' kernel tables took 0.31 s through pandas one file
    at a time and 0.14 s this way, single-threaded, on this project's 2-core machines."""
    bundles = find_bundles(Path(path))
    if not bundles:
        raise BundleError(f"{path}: holds no fuseprof bundle (a folder with manifest.json)")
    with ThreadPoolExecutor(max_workers=min(8, len(bundles))) as pool:
        tables = [t for t in pool.map(lambda b: _read_table(b, filename), bundles) if t is not None and t.num_rows]
    if not tables:
        return []
    try:
        joined = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a column typed differently in some bundle: check them one by one
        return [t.to_pandas() for t in tables]
    return [joined.to_pandas()]


def load(path: str | Path) -> pd.DataFrame:
    """Kernel frame over one bundle or every bundle in a folder; columns in ``fuseprof.bundle.schema``."""
    frames = [f for f in _load(path, KERNELS) if not f.empty]
    return _conformed(conform_kernels, frames, path)


def load_timings(path: str | Path) -> pd.DataFrame:
    """Per-variant, per-shape timings and correctness over one bundle or a folder of bundles."""
    frames = [f for f in _load(path, TIMINGS) if not f.empty]
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
