"""Where the trace store lives, and its keys: content hashes of trace files, hashed in a background thread
from the moment a trace verb starts.

Hashing a 134 MB trace takes 0.13 s; importing pandas and pyarrow, which every analysis needs first,
takes 0.45 s and leaves a core idle. ``prehash`` hashes the traces a command was given on that core
(``hashlib`` releases the GIL on large buffers) while the imports run; ``content_key`` then answers from
what it found, keyed by the file's path, size and modification time and used once (a later read of an
edited file hashes it again; the kept-answer key leaves it for the store's), or hashes the file itself. Only regular files are read. This module imports nothing heavy: the CLI calls it before pandas is loaded.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from fuseprof.parse.textio import require_regular

ENV = "FUSEPROF_CACHE"
_CHUNK = 2**22
_KEYS: dict[tuple[str, int, int], str] = {}
_THREADS: list[threading.Thread] = []


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
                _KEYS[identity] = file_sha256(path)
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
    found = found or file_sha256(path)
    if keep and identity is not None:
        _KEYS[identity] = found
    return found
