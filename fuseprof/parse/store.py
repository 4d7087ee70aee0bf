"""The trace store: each trace decoded once, its tables kept (Arrow, one file an entry) under the hash of its bytes.

Decoding JSON is most of what reading a trace costs, and a user analyses the same trace again and
again (another ``--window``, ``fusion``, ``report``, ``diff``). The first reading writes the decoded
tables (``TraceTables``: kernels, runtime calls, CPU ops, modules, ranges) into the store; later
ones read them back, to the bit (``fuseprof.parse.frames``). Other layers keep their own results
in an entry beside the tables (``put_frames`` / ``get_frames``: the analysis cache).

    where   $FUSEPROF_CACHE, else the system's cache folder: $XDG_CACHE_HOME/fuseprof or ~/.cache/fuseprof
            (Linux), ~/Library/Caches/fuseprof (macOS), %LOCALAPPDATA%\\fuseprof\\Cache (Windows): a user
            folder, never beside the trace (its folder may be read-only or shared); FUSEPROF_CACHE=off turns the
            store off. The run that creates the default folder says so on stderr, once
    key     SHA-256 of the file's bytes as stored (gzipped or not; ``fuseprof.parse.hashing``, which
            hashes while the command imports): a renamed or copied trace hits, an edited one misses
    version each entry lives under v<format>-<fuseprof version>-<hash of fuseprof's own source>:
            another fuseprof (a release, or a local edit) never reads an older entry; it rebuilds
    entry   a folder: ``manifest.json`` (each frame's span in the pack and its SHA-256, and the metadata's
            SHA-256), ``meta.json`` (the metadata: device, rank, notes, warnings; a kept answer's text) and
            ``frames.arrows``, every frame of the entry packed in one file
            (``fuseprof.parse.frames.pack_frames``: a rank's 33 small tables are one write, not 33)
    trust   every frame's SHA-256 is in the entry's manifest, checked before it is decoded, and the
            metadata's, of its bytes as written: checking it costs a hash, not the metadata encoded again
            (a 128-rank answer's 33 MB of text: 0.13 s to encode, 0.02 s to hash); a damaged or partial
            entry is removed and rebuilt, with a warning
    writes  into a temporary folder renamed into place: a reader never sees half an entry, and
            two processes storing one trace at once both succeed. A store that cannot be written
            (read-only, full) is a warning; the analysis goes on without it.
    owner   the store's folder holds a marker file (``.fuseprof-store``) and each version folder its
            own (``.fuseprof-store-version``): ``clear`` removes only version folders that carry it, never
            a folder of the user's that happens to sit there (``vllm-traces/``, ``v2-backup/``). Entries
            are used only when every folder and file from the store's root down is the user's own and
            writable by nobody else: an entry another user could have written (a shared, world-writable
            folder) is never served, and the store says so once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuseprof import __version__
from fuseprof.errors import FuseprofWarning
from fuseprof.parse.hashing import ENV, KEPT_FILE, content_key, default_root, platform_root
from fuseprof.parse.owned import (
    make_private_folder,
    owned_by_user,
    remove_stale_partials,
    temporary_name,
    write_private,
)

if TYPE_CHECKING:  # pandas and the decoder load when a frame is read or written: a kept answer needs neither
    import pandas as pd

    from fuseprof.parse.trace_events import TraceTables

FORMAT = 3  # 3: the metadata in its own file (2: in the manifest; 1: a Parquet file each frame)
_TABLES = ("gpu", "ops", "launches", "modules", "annotations", "autograd", "host_ops", "forward_ops", "parameters", "memory",
           "recorded", "syncs", "graph_calls")
_TIMED = ("name", "pid", "tid")
# The columns the decoder gives each table (``read_trace_tables``, whatever the trace holds; tests/test_bounded_inputs.py
# holds the two together): a stored entry whose frame has other columns is no entry of this code's — a foreign or
# edited file whose digests were written again — and is rebuilt, never read into a KeyError deep in the analysis
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "gpu": ("name", "cat", "stream", "device", "correlation", "external_id", "grid", "block", "registers", "shared",
            "bytes", "collective", "in_nelems", "nccl_dtype", "group_size", "communicator", "seq", "start_ns", "dur_ns"),
    "ops": (*_TIMED, "external_id", "input_dims", "input_type", "concrete", "rf_id", "sequence", "fwd_tid", "start_ns",
            "dur_ns"),
    "launches": (*_TIMED, "correlation", "external_id", "kernel", "start_ns", "dur_ns"),
    "modules": (*_TIMED, "start_ns", "dur_ns"),
    "annotations": (*_TIMED, "start_ns", "dur_ns"),
    "autograd": (*_TIMED, "sequence", "fwd_tid", "start_ns", "dur_ns"),
    "host_ops": (*_TIMED, "input_dims", "input_type", "concrete", "rf_id", "start_ns", "dur_ns"),
    "forward_ops": (*_TIMED, "sequence", "start_ns", "dur_ns"),
    "parameters": (*_TIMED, "input_dims", "input_type", "start_ns", "dur_ns"),
    "memory": ("pid", "tid", "addr", "bytes", "total_allocated", "total_reserved", "device_type", "device_id", "op",
               "caller", "start_ns"),
    "recorded": ("kind", "start_ns"),
    "syncs": (*_TIMED, "correlation", "stream", "device", "wait_stream", "wait_record", "start_ns", "dur_ns"),
    "graph_calls": (*_TIMED, "start_ns", "dur_ns"),
}
_MANIFEST = "manifest.json"
_META = "meta.json"  # the metadata, as written: its SHA-256 in the manifest
_PACK = "frames.arrows"  # the entry's frames, one Arrow IPC stream each (``fuseprof.parse.frames.pack_frames``)
ROOT_MARKER = ".fuseprof-store"
VERSION_MARKER = ".fuseprof-store-version"
_VERSION_NAME = re.compile(r"^v\d+-[0-9A-Za-z.+]+-[0-9a-f]{12}$")
_UNTRUSTED: set[Path] = set()  # folders already said to be writable by others, in this process


def _marker(kind: str) -> str:
    return json.dumps({"fuseprof": kind, "format": FORMAT}) + "\n"


def _has_marker(folder: Path, name: str, kind: str) -> bool:
    try:
        return json.loads((folder / name).read_text()).get("fuseprof") == kind
    except (OSError, ValueError, AttributeError):
        return False


_UNWRITABLE: set[Path] = set()  # store folders a write failed under, in this process
_PENDING: list[threading.Thread] = []  # writes in flight (``put_frames(..., background=True)``)


def wait_for_writes() -> None:
    """Block until every background write of this process is in place (or has failed with its warning)."""
    while _PENDING:
        _PENDING.pop().join()


@lru_cache(maxsize=1)
def code_version() -> str:
    """fuseprof's version and a hash of its own source: what an entry's tables were computed by."""
    digest = hashlib.blake2b(digest_size=6)
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")):
        digest.update(path.read_bytes())
    return f"v{FORMAT}-{__version__}-{digest.hexdigest()}"


def _meta_of(text: bytes) -> dict[str, Any]:
    """An entry's metadata from its JSON text. msgspec reads a kept answer's 30 MB of escaped text in 60% of the
    standard library's time; what it refuses (NaN and infinities, which ``json.dumps`` writes; a lone surrogate)
    the standard library reads, so the value is ``json.loads``' in every case."""
    import msgspec

    try:
        meta = msgspec.json.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        meta = json.loads(text)
    if not isinstance(meta, dict):
        raise ValueError("its metadata is no object")
    return meta


@dataclass(frozen=True)
class TraceStore:
    """A store folder (``root``); ``None`` root: a store that keeps nothing."""

    root: Path | None

    def _entry(self, key: str, part: str) -> Path:
        assert self.root is not None
        return self.root / code_version() / key[:2] / key / part

    def _trusted(self, folder: Path) -> bool:
        """Whether ``folder`` (an entry) and every folder above it up to the root, and the entry's files,
        are the user's own and writable by nobody else; said once per store when not."""
        assert self.root is not None
        chain = [folder, *[p for p in folder.parents if p == self.root or self.root in p.parents]]
        files = [p for p in folder.iterdir()] if folder.is_dir() else []
        bad = next((p for p in [*chain, *files] if p.exists() and not owned_by_user(p)), None)
        if bad is None:
            return True
        if self.root not in _UNTRUSTED:
            _UNTRUSTED.add(self.root)
            warnings.warn(f"trace store: {bad} is another user's or writable by others; its entries are not used "
                          f"(set {ENV} to a folder of your own)", FuseprofWarning, stacklevel=3)
        return False

    def _create_root(self) -> None:
        """Make the store's folder. The process whose mkdir makes it at the system's default place (a folder the
        user never named) says on stderr where it is and how to move or clear it: once, on the process's real
        stderr, so that a kept answer (``fuseprof.commands.answers``) never repeats it."""
        assert self.root is not None
        if self.root.exists() or not make_private_folder(self.root):
            return
        if self.root == platform_root(sys.platform, os.environ, Path.home()) and sys.__stderr__ is not None:
            print(f"fuseprof: created the trace store {self.root}: decoded traces are kept there to be read again "
                  f"fast ({ENV}=DIR moves it, {ENV}=off turns it off, `fuseprof store --clear` empties it; "
                  "`fuseprof store --help`)", file=sys.__stderr__, flush=True)

    def _mark(self, version: Path) -> None:
        """Write the store's and the version folder's markers (what ``clear`` later trusts)."""
        assert self.root is not None
        for folder, name, kind in ((self.root, ROOT_MARKER, "trace store"), (version, VERSION_MARKER, "store version")):
            if not (folder / name).exists():
                try:
                    write_private(folder / name, _marker(kind).encode())
                except FileExistsError:  # another write (a background thread, a process) made it between the two
                    pass

    def get_frames(self, key: str, part: str, only: tuple[str, ...] | None = None, skip: tuple[str, ...] = (),
                   columns: dict[str, tuple[str, ...]] | None = None
                   ) -> tuple[dict[str, pd.DataFrame], dict[str, Any]] | None:
        """The frames (those named in ``only``, else all but ``skip``) and metadata stored under
        ``key``/``part``, or None (absent, or damaged: then removed with a warning, for the caller to
        rebuild). ``columns``: the columns each named frame must have, exactly (``TABLE_COLUMNS``)."""
        if self.root is None:
            return None
        wait_for_writes()
        folder = self._entry(key, part)
        if not folder.is_dir() or not self._trusted(folder):
            return None
        try:
            manifest = json.loads((folder / _MANIFEST).read_text())
            wanted = {n: span for n, span in manifest["frames"].items() if (only is None or n in only) and n not in skip}
            frames = {}
            if wanted:
                from fuseprof.parse.frames import unpack_frame

                with (folder / _PACK).open("rb") as fh:
                    for name, (start, length, digest) in wanted.items():
                        fh.seek(start)
                        data = fh.read(length)
                        if hashlib.sha256(data).hexdigest() != digest:
                            raise ValueError(f"{name} does not match its digest")
                        frames[name] = unpack_frame(data)
                        expected = (columns or {}).get(name)
                        if expected is not None and tuple(frames[name].columns) != expected:
                            raise ValueError(f"its {name} table has columns {list(frames[name].columns)}, not "
                                             f"{list(expected)}")
            lacking = [n for n in columns or {} if (only is None or n in only) and n not in skip and n not in frames]
            if lacking:  # an entry of this version lacks a table only where its manifest was edited
                raise ValueError(f"it lacks its {', '.join(lacking)} table(s)")
            meta = (folder / _META).read_bytes()
            if hashlib.sha256(meta).hexdigest() != manifest["meta_sha256"]:
                raise ValueError("its metadata does not match its digest")
            return frames, _meta_of(meta)
        except Exception as exc:  # any damage at all: never trusted, rebuilt
            warnings.warn(f"trace store: entry {folder} is damaged ({type(exc).__name__}: {exc}); rebuilding it",
                          FuseprofWarning, stacklevel=2)
            shutil.rmtree(folder, ignore_errors=True)
            return None

    def put_frames(self, key: str, part: str, frames: dict[str, pd.DataFrame], meta: dict[str, Any],
                   background: bool = False) -> bool:
        """Store ``frames`` and ``meta`` (JSON) under ``key``/``part``, whole or not at all; whether it
        is there now. ``background``: in a thread, while the caller goes on (Arrow's encoding and
        compression run outside the GIL, on another core); ``wait_for_writes`` (which ``analyze`` calls
        before it returns, and any read of the store calls first) waits for it. The frames must not change
        meanwhile."""
        if self.root is None or self.root in _UNWRITABLE:
            return False
        if background:
            thread = threading.Thread(target=self.put_frames, args=(key, part, frames, meta), name="fuseprof-store")
            _PENDING.append(thread)
            thread.start()
            return True
        for attempt in (1, 2):  # a folder removed under the write (a clean-up racing it): once more, from the top
            try:
                return self._write(key, part, frames, meta)
            except FileNotFoundError as exc:
                if attempt == 2:
                    return self._unwritable(exc)
            except OSError as exc:
                return self._unwritable(exc)
        return False

    def _unwritable(self, exc: OSError) -> bool:
        """A write that failed: said once per store (the other writes of the run go the same way)."""
        if self.root not in _UNWRITABLE:
            _UNWRITABLE.add(self.root)  # type: ignore[arg-type]
            warnings.warn(f"trace store: cannot write under {self.root} ({exc.strerror or exc}); going on "
                          f"without it (set {ENV} to a writable folder, or {ENV}=off)", FuseprofWarning, stacklevel=3)
        return False

    def _write(self, key: str, part: str, frames: dict[str, pd.DataFrame], meta: dict[str, Any]) -> bool:
        """``put_frames``' write itself, whole or not at all (raises OSError)."""
        folder = self._entry(key, part)
        self._create_root()
        make_private_folder(folder.parent)
        self._mark(folder.parents[2])
        if not self._trusted(folder.parent):
            return False
        remove_stale_partials(folder.parent)  # what a run killed with -9 left here
        # named as fuseprof's own, of this host and process: only a later run can prove it stale and remove it
        tmp = Path(tempfile.mkdtemp(prefix=f".{part}-", suffix=temporary_name("", "tmp").removeprefix("."),
                                    dir=folder.parent))
        try:
            spans: dict[str, tuple[int, int, str]] = {}
            if frames:
                from fuseprof.parse.frames import pack_frames

                data, where = pack_frames(frames)
                write_private(tmp / _PACK, data)
                view = memoryview(data)  # each span hashed where it lies, not copied out
                spans = {name: (start, length, hashlib.sha256(view[start:start + length]).hexdigest())
                         for name, (start, length) in where.items()}
            text = json.dumps(meta).encode()  # the metadata's digest is of these bytes, as a frame's of its own
            write_private(tmp / _META, text)
            write_private(tmp / _MANIFEST, json.dumps({"frames": spans,
                                                       "meta_sha256": hashlib.sha256(text).hexdigest()}).encode())
            try:
                tmp.rename(folder)
            except OSError:  # another process stored it first: theirs is as good
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return folder.is_dir()

    def tables(self, path: Path, key: str | None = None, background: bool = False) -> tuple[TraceTables, list[str]]:
        """The decoded tables of the trace at ``path`` (from the store, else decoded and stored, in the
        background if asked) and the warnings its decoding gave, to be shown by the caller (a warm read
        shows the same ones)."""
        from fuseprof.parse.trace_events import TraceTables, read_trace_tables

        key = key or content_key(path) if self.root is not None else None
        found = self.get_frames(key, "tables", columns=TABLE_COLUMNS) if key is not None else None
        if found is not None:
            frames, meta = found
            tables = TraceTables(path=path, **{t: frames[t] for t in _TABLES},
                                 devices={int(k): v for k, v in meta["devices"].items()}, rank=meta["rank"],
                                 device_properties={int(k): v for k, v in meta.get("properties", {}).items()},
                                 world_size=meta.get("world_size"), capture=meta.get("capture", {}))
            return tables, [w.replace("{path}", str(path)) for w in meta["warnings"]]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tables = read_trace_tables(path)
        said = [str(w.message) for w in caught]
        if key is not None:
            self.put_frames(key, "tables", {t: getattr(tables, t) for t in _TABLES},
                            {"devices": {str(k): v for k, v in tables.devices.items()}, "rank": tables.rank,
                             "properties": {str(k): v for k, v in tables.device_properties.items()},
                             "world_size": tables.world_size, "capture": tables.capture,
                             "warnings": [w.replace(str(path), "{path}") for w in said]}, background)
        return tables, said

    def versions(self) -> list[Path]:
        """The version folders fuseprof wrote (named as ``code_version`` names them, holding its marker,
        in a folder holding the store's marker): nothing else under the root is the store's."""
        if self.root is None or not _has_marker(self.root, ROOT_MARKER, "trace store"):
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink()
                      and _VERSION_NAME.match(p.name) and _has_marker(p, VERSION_MARKER, "store version"))

    def entries(self) -> list[Path]:
        """Every stored trace entry, of this fuseprof and of others (writes in flight finished first)."""
        wait_for_writes()
        return sorted(p for version in self.versions() for p in version.glob("??/*") if p.is_dir())

    def clear(self) -> int:
        """Remove every entry (of every fuseprof version), and only them: version folders with fuseprof's
        marker, and the keys kept across runs (``hashing.KEPT_FILE``) in a folder with the store's marker; the
        number of entries removed."""
        found = self.entries()
        for version in self.versions():
            shutil.rmtree(version, ignore_errors=True)
        if self.root is not None and _has_marker(self.root, ROOT_MARKER, "trace store"):
            (self.root / KEPT_FILE).unlink(missing_ok=True)
        return len(found)


def default_store() -> TraceStore:
    return TraceStore(default_root())
