"""Trace bundles on disk: written under a temporary name, renamed when complete, never overwritten.

Layout::

    <name>/manifest.json        schema version, case, shapes, device, versions, ncu settings
    <name>/kernels.parquet      one row per kernel launch (fuseprof.bundle.schema.KERNEL_COLUMNS)
    <name>/timings.parquet      one row per variant and shape (fuseprof.bundle.schema.TIMING_COLUMNS)
    <name>/raw/                 artifacts as captured: profiler_trace.json.gz, execution_trace.json.gz (which
                                tensor each op took), ncu_raw.csv.gz, ncu.log

No pickle anywhere: JSON and Parquet only, so a bundle from someone else is safe to open.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import warnings
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from fuseprof.bundle.schema import SCHEMA_VERSION, conform_kernels, conform_timings
from fuseprof.errors import BundleError, FuseprofWarning
from fuseprof.parse.names import short_kernel_name
from fuseprof.parse.owned import PARTIAL_MARKER, remove_stale_partials, temporary_name

if TYPE_CHECKING:  # frames pass through here; finding and reading bundles needs no pandas
    import pandas as pd

MANIFEST = "manifest.json"
KERNELS = "kernels.parquet"
TIMINGS = "timings.parquet"
RAW = "raw"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-").lower() or "bundle"


def _free_path(path: Path) -> Path:
    candidate, n = path, 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}-{n}")
        n += 1
    return candidate


_UNFINISHED: set[Path] = set()  # this process's bundles being written: what an interrupt must remove


def remove_unfinished() -> None:
    """Remove this process's half-written bundles (an interrupt's last act: a SIGTERM that lands between a
    writer's creation and its ``with`` block, or anywhere else, leaves none behind)."""
    for path in list(_UNFINISHED):
        shutil.rmtree(path, ignore_errors=True)
        _UNFINISHED.discard(path)


class BundleWriter:
    """Collects a bundle in a temporary folder (``temporary_name``, marked as fuseprof's); ``commit()``
    renames it into place."""

    def __init__(self, out_dir: Path, name: str) -> None:
        self.out_dir = out_dir
        self.name = slug(name)
        if out_dir.exists() and not out_dir.is_dir():
            raise BundleError(f"--out {out_dir}: is a file, not a folder")
        if is_bundle(out_dir):  # a new bundle inside it would be hidden from ls, load and the dashboard
            raise BundleError(f"--out {out_dir}: is a bundle; give the folder that holds bundles "
                              f"(e.g. --out {out_dir.parent})")
        self.path = out_dir / temporary_name(self.name, "partial")
        # before it exists: an interrupt at any moment from here finds it, absolute: wherever the process has gone
        self._unfinished = self.path.absolute()
        _UNFINISHED.add(self._unfinished)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_partials(out_dir)
            if self.path.exists():  # this process's own, from an earlier bundle of the same name
                shutil.rmtree(self.path)
            (self.path / RAW).mkdir(parents=True)
            (self.path / PARTIAL_MARKER).write_text("a bundle fuseprof is writing\n")
        except OSError as exc:
            self.abort()
            raise BundleError(f"--out {out_dir}: cannot write a bundle there ({exc.strerror})") from None

    def raw(self, filename: str) -> Path:
        return self.path / RAW / filename

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_manifest(self.path, manifest)

    def write_kernels(self, kernels: pd.DataFrame) -> None:
        write_kernels(self.path, kernels)

    def write_timings(self, timings: pd.DataFrame) -> None:
        write_timings(self.path, timings)

    def commit(self) -> Path:
        if not (self.path / MANIFEST).exists():
            raise BundleError(f"{self.path}: refusing to commit a bundle without a manifest")
        final = _free_path(self.out_dir / self.name)
        try:
            os.rename(self.path, final)
        except OSError as exc:
            raise BundleError(f"{final}: cannot move the finished bundle into place ({exc.strerror})") from None
        _UNFINISHED.discard(self._unfinished)
        # the marker goes only once the bundle is in place: a kill before the rename leaves a marked
        # partial, which the next run removes (unmarked, it would look like a user's and stay forever)
        (final / PARTIAL_MARKER).unlink(missing_ok=True)
        return final

    def abort(self) -> None:
        shutil.rmtree(self._unfinished, ignore_errors=True)
        _UNFINISHED.discard(self._unfinished)

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is not None:
            self.abort()
            if isinstance(exc, OSError):  # the disk filled or went read-only while writing
                raise BundleError(f"{self.out_dir}: writing the bundle failed ({exc.strerror or exc})") from None


def replace_atomically(target: Path, write: Any) -> None:
    """Write to a temporary sibling, then rename: a reader never sees half a file, and a failed write (a
    full or read-only disk) leaves no temporary file and is one line."""
    tmp = target.with_name(temporary_name(target.name, "tmp"))
    try:
        write(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        raise BundleError(f"{target}: cannot write ({exc.strerror or exc})") from None
    finally:
        if tmp.exists():
            tmp.unlink(missing_ok=True)


def write_manifest(bundle: Path, manifest: dict[str, Any]) -> None:
    body = {"schema_version": SCHEMA_VERSION, **manifest}
    text = json.dumps(body, indent=2, default=str) + "\n"
    replace_atomically(bundle / MANIFEST, lambda p: p.write_text(text))


def write_kernels(bundle: Path, kernels: pd.DataFrame) -> None:
    if "kernel" in kernels:
        kernels = kernels.assign(kernel_short=kernels["kernel"].map(short_kernel_name, na_action="ignore"))
    table = conform_kernels(kernels).drop(columns=["bundle"])
    replace_atomically(bundle / KERNELS, lambda p: table.to_parquet(p, index=False))


def write_timings(bundle: Path, timings: pd.DataFrame) -> None:
    table = conform_timings(timings).drop(columns=["bundle"])
    replace_atomically(bundle / TIMINGS, lambda p: table.to_parquet(p, index=False))


def is_bundle(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        raise BundleError(f"{path}: not a fuseprof bundle (no {MANIFEST})") from None
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path / MANIFEST}: damaged JSON ({exc.msg} at line {exc.lineno})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path / MANIFEST}: unreadable ({exc})") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{path / MANIFEST}: holds a {type(manifest).__name__}, not a fuseprof manifest (an object)")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise BundleError(
            f"{path}: bundle schema {manifest.get('schema_version')!r}, this fuseprof reads {SCHEMA_VERSION}"
        )
    return manifest


def find_bundles(root: Path) -> list[Path]:
    """``root`` itself if it is a bundle, else the bundles directly under it, sorted by name. Reading a folder
    first removes what fuseprof runs killed with -9 left half-written in it (``remove_stale_partials``: only
    fuseprof's own, of processes that are gone), saying so: none lingers hidden behind a 'no bundles'."""
    if not root.exists():
        raise BundleError(f"{root}: no such file or directory")
    if is_bundle(root):
        return [root]
    if not root.is_dir():
        raise BundleError(f"{root}: not a bundle directory")
    with contextlib.suppress(OSError):  # a folder the user may only read: nothing of ours to remove there
        removed = remove_stale_partials(root)
        if removed:
            warnings.warn(f"{root}: removed {len(removed)} half-written file(s) of fuseprof runs that were killed "
                          f"({', '.join(p.name for p in removed[:3])})", FuseprofWarning, stacklevel=2)
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and is_bundle(p))
