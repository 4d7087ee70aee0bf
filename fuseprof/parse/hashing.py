"""Where the trace store lives, and its keys: content hashes of trace files, hashed in a background thread
from the moment a trace verb starts.

Hashing a 134 MB trace takes 0.13 s; importing pandas and pyarrow, which every analysis needs first,
takes 0.45 s and leaves a core idle. ``prehash`` hashes the traces a command was given on that core
(``hashlib`` releases the GIL on large buffers) while the imports run; ``content_key`` then answers from
what it found, keyed by the file's path, size and modification time and used once (a later read of an
edited file hashes it again; the kept-answer key leaves it for the store's), or hashes the file itself. Only regular files are read. This module imports nothing heavy: the CLI calls it before pandas is loaded.

Across runs, the keys found are kept in the store's folder (``file-keys.json``: per resolved path, the file's
size, modification and change times, inode and device, and when the key was taken), as git keeps its index: a
warm run over 128 ranks' 250 MB hashed them in 0.15 s of its 0.34 s. A key is kept only where the file's identity is
the same before and after its bytes were read, and used only while all of those are the same and the file was last
modified and changed ``RACY_NS`` or more before the key was taken (a file written again
within the clock's step of the hashing could keep its times: git's "racily clean" entries); any doubt, and the
file is hashed again. The file is a cache: unreadable, it is ignored and written anew; another user's, or writable
by others (file or folder), it is ignored, and a folder others can write gets none.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from fuseprof.parse.owned import owned_by_user, write_private
from fuseprof.parse.textio import require_regular

ENV = "FUSEPROF_CACHE"
_CHUNK = 2**22
_KEYS: dict[tuple[str, int, int], str] = {}
_THREADS: list[threading.Thread] = []
KEPT_FILE = "file-keys.json"
KEPT_MAX = 20_000  # entries kept across runs, the most recent
KEPT_MAX_BYTES = KEPT_MAX * 4096  # a kept file past this was not written here: ignored
RACY_NS = 2_000_000_000
_KEPT: dict[Path, dict[str, list[object]]] = {}  # per store folder, its kept keys, read once a process
_KEPT_NEW: dict[Path, dict[str, list[object]]] = {}  # per store folder, this run's, written at its end
_KEPT_LOCK = threading.Lock()
_KEPT_REGISTERED = False  # whether the writer runs at the process's end


def platform_root(platform: str, environ: Mapping[str, str], home: Path) -> Path:
    """The store's folder where FUSEPROF_CACHE does not name one: each system's own place for caches (what the
    system's clean-up tools and backup exclusions know), as platformdirs has them."""
    if platform == "darwin":
        return home / "Library" / "Caches" / "fuseprof"
    if platform == "win32":
        return Path(environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "fuseprof" / "Cache"
    return Path(environ.get("XDG_CACHE_HOME") or home / ".cache") / "fuseprof"


def default_root() -> Path | None:
    """The store's folder: $FUSEPROF_CACHE, or the system's cache folder (``platform_root``); None when
    FUSEPROF_CACHE=off."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in ("off", "0", "no", "false", "none"):
        return None
    if value:
        return Path(value).expanduser()
    return platform_root(sys.platform, os.environ, Path.home())


def _identity(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


def file_sha256(path: Path) -> str:
    """SHA-256 of the file's bytes, read in chunks (a 500 MB trace is never held twice; SHA-256 runs on the
    CPU's own instructions where it has them, twice BLAKE2b's speed here)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()[:32]


def _stat_of(path: Path) -> tuple[str, list[int]] | None:
    """The resolved path and what a kept key is checked against: size, mtime, ctime (ns), inode, device."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return str(path.resolve()), [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _kept(root: Path) -> dict[str, list[object]]:
    """The keys kept across runs in the store folder ``root`` (``file-keys.json``), read once; {} where none is
    readable."""
    with _KEPT_LOCK:
        if root not in _KEPT:
            found: dict[str, list[object]] = {}
            try:
                if not (owned_by_user(root) and owned_by_user(root / KEPT_FILE)):
                    raise ValueError("another user's, or writable by others: its keys could name any content")
                if (root / KEPT_FILE).stat().st_size > KEPT_MAX_BYTES:
                    raise ValueError("larger than any file-keys.json this module writes")
                data = json.loads((root / KEPT_FILE).read_bytes())
                if isinstance(data, dict):
                    found = {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, list) and len(v) == 7}
            except (OSError, ValueError, RecursionError):
                pass
            _KEPT[root] = found
        return _KEPT[root]


def _kept_key(path: Path) -> str | None:
    """The key kept for ``path`` where its file is unchanged since, and was not written within ``RACY_NS`` of it."""
    root = default_root()
    found = _stat_of(path) if root is not None else None
    if root is None or found is None:
        return None
    entry = _KEPT_NEW.get(root, {}).get(found[0]) or _kept(root).get(found[0])
    if not entry:
        return None
    *seen, taken, key = entry
    if seen != found[1] or not isinstance(taken, int) or not isinstance(key, str) or len(key) != 32:
        return None
    return key if max(found[1][1], found[1][2]) <= taken - RACY_NS else None  # mtime and ctime well before


def _keep(path: Path, key: str, taken_ns: int, before: tuple[str, list[int]] | None) -> None:
    """Remember ``key`` for ``path`` in the store folder (written at the process's end), where the file's identity
    (``before``: taken before its bytes were read) is the same after: a file replaced while it was read, its old
    times put back (``cp -p``, ``rsync -t``, ``tar x``), would keep another file's key under its own identity."""
    global _KEPT_REGISTERED
    root = default_root()
    if root is None or before is None or _stat_of(path) != before:
        return
    with _KEPT_LOCK:
        if not _KEPT_REGISTERED:
            atexit.register(_write_kept)
            _KEPT_REGISTERED = True
        _KEPT_NEW.setdefault(root, {})[before[0]] = [*before[1], taken_ns, key]


def _write_kept() -> None:
    """Each store folder's kept keys with this run's, the most recent ``KEPT_MAX``, replaced whole (a reader never
    sees half); a folder that is gone by then (a test's, removed) is not made again."""
    with _KEPT_LOCK:  # the prehash thread may still be adding
        found = [(root, dict(new)) for root, new in _KEPT_NEW.items()]
    for root, new in found:
        if not root.is_dir() or not owned_by_user(root):
            continue
        merged = {**_kept(root), **new}
        newest = sorted(merged.items(), key=lambda kv: kv[1][5] if isinstance(kv[1][5], int) else 0)[-KEPT_MAX:]
        try:
            tmp = root / f".{KEPT_FILE}.{os.getpid()}.tmp"
            write_private(tmp, json.dumps(dict(newest), separators=(",", ":")).encode())
            os.replace(tmp, root / KEPT_FILE)
        except OSError:
            pass  # a cache: the next run hashes again


def _hashed(path: Path) -> str:
    """``file_sha256``, the key kept for the next run."""
    before, taken = _stat_of(path), time.time_ns()
    key = file_sha256(path)
    _keep(path, key, taken, before)
    return key


def _trace_files(path: Path) -> list[Path]:
    """The trace files a path names: itself, or the .json/.json.gz files in a folder or a bundle's raw/."""
    if path.is_dir():
        return sorted(p for folder in (path, path / "raw") if folder.is_dir() for p in folder.iterdir()
                      if p.name.endswith((".json", ".json.gz")))
    return [path]


def _hash_all(paths: list[Path]) -> None:
    for path in paths:
        identity = _identity(path)
        if identity is not None and identity not in _KEYS:
            try:
                _KEYS[identity] = _kept_key(path) or _hashed(path)
            except OSError:
                pass  # content_key reads it again and says what is wrong


def prehash(paths: Iterable[Path]) -> None:
    """Start hashing the trace files ``paths`` name (files, folders, bundles) in a background thread."""
    files = [f for p in paths for f in _trace_files(Path(p))]
    if files:
        thread = threading.Thread(target=_hash_all, args=(files,), name="fuseprof-prehash", daemon=True)
        _THREADS.append(thread)
        thread.start()


def content_key(path: Path, keep: bool = False) -> str:
    """The trace store's key of a file: SHA-256 of its bytes (from ``prehash`` when it got there first). ``keep``:
    leave it for the next call, which uses it up (a command's kept-answer key, then the store's key of the same
    file in the same run: each file hashed once)."""
    require_regular(path)
    while _THREADS:
        _THREADS.pop().join()
    identity = _identity(path)
    found = _KEYS.pop(identity, None) if identity is not None else None  # used once: no stale key later
    found = found or _kept_key(path) or _hashed(path)
    if keep and identity is not None:
        _KEYS[identity] = found
    return found
