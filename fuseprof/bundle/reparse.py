"""``fuseprof reparse``: rebuild a bundle's kernel table from the raw artifacts it keeps.

A parser fix then reaches bundles already captured without another GPU run. Only the derived
``kernels.parquet`` is replaced (atomically); raw artifacts and timings are never touched.
"""

from __future__ import annotations

from pathlib import Path

from fuseprof import __version__
from fuseprof.bundle.files import RAW, read_manifest, remove_stale_partials, write_kernels, write_manifest
from fuseprof.bundle.provenance import now_utc
from fuseprof.errors import BundleError
from fuseprof.parse.dispatch import parse_raw_dir


def reparse(bundle: Path) -> int | None:
    """Re-parse ``bundle/raw`` into ``kernels.parquet``; returns the number of kernel rows, or
    None for a bundle that keeps no raw artifacts (bench and ceilings bundles hold timings only)."""
    manifest = read_manifest(bundle)
    raw = bundle / RAW
    if raw.exists() and (raw.is_symlink() or not raw.is_dir()):
        raise BundleError(f"{raw}: not a folder of raw artifacts (a file or a link); the bundle is damaged")
    if not raw.is_dir():
        return None
    remove_stale_partials(bundle)  # temporary files of a reparse that was killed
    kernels = parse_raw_dir(bundle / RAW)
    if manifest.get("case"):
        kernels["case"], kernels["dtype"] = manifest["case"], manifest.get("dtype")
    write_kernels(bundle, kernels)
    manifest["reparsed"] = {"utc": now_utc(), "fuseprof": __version__}
    write_manifest(bundle, manifest)
    return len(kernels)
