"""Bundles into DataFrames: the single entry point the dashboard, notebooks and CLI share."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from fuseprof.bundle import KERNELS, TIMINGS, find_bundles, read_manifest
from fuseprof.errors import BundleError
from fuseprof.schema import KERNEL_COLUMN_NAMES, TIMING_COLUMN_NAMES, conform_kernels, conform_timings

# Which tables each kind of bundle must hold: a missing one is damage, not an empty bundle.
REQUIRED = {"capture": (KERNELS, TIMINGS), "ingest": (KERNELS,), "bench": (TIMINGS,), "ceilings": ()}


def _read_table(bundle: Path, filename: str) -> pd.DataFrame:
    manifest = read_manifest(bundle)  # validates the schema version before trusting the tables
    path = bundle / filename
    if not path.exists():
        if filename in REQUIRED.get(str(manifest.get("kind")), ()):
            raise BundleError(f"{path}: missing from a {manifest.get('kind')} bundle; recapture, or "
                              f"`fuseprof reparse {bundle}` if its raw/ folder is intact")
        return pd.DataFrame()
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise BundleError(f"{path}: unreadable Parquet ({exc})") from None
    columns = KERNEL_COLUMN_NAMES if filename == KERNELS else TIMING_COLUMN_NAMES
    if len(frame.columns) and not set(frame.columns) & set(columns) - {"bundle"}:
        raise BundleError(f"{path}: none of fuseprof's columns ({', '.join(sorted(frame.columns)[:5])}, …): "
                          "not a fuseprof table")
    frame["bundle"] = bundle.name
    return frame


def _load(path: str | Path, filename: str) -> list[pd.DataFrame]:
    """Every bundle's table, read on a few threads (Parquet decoding releases the GIL: 100 bundles
    took 0.48 s in one thread on this project's 2-core machines)."""
    bundles = find_bundles(Path(path))
    if not bundles:
        raise BundleError(f"{path}: holds no fuseprof bundle (a folder with manifest.json)")
    with ThreadPoolExecutor(max_workers=min(8, len(bundles))) as pool:
        return list(pool.map(lambda b: _read_table(b, filename), bundles))


def load(path: str | Path) -> pd.DataFrame:
    """Kernel frame over one bundle or every bundle in a folder; columns in ``fuseprof.schema``."""
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
            try:
                conform(frame)
            except (TypeError, ValueError):
                raise BundleError(f"{frame['bundle'].iloc[0]}: a column does not have its schema type ({exc}); "
                                  "rewrite it with `fuseprof reparse`") from None
        raise BundleError(f"{path}: tables do not conform to the schema ({exc})") from None
