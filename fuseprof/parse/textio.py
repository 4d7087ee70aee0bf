"""Read a text artifact that may be gzipped, turning damage into TraceFormatError."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from fuseprof.errors import TraceFormatError


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with gzip's magic (not by the file's name)."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise TraceFormatError(f"{path}: is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(f"{path}: damaged or truncated gzip data ({exc})") from None
    return raw


def read_text(path: Path) -> str:
    """The file's text (UTF-8; gunzipped as ``read_bytes`` does)."""
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{path}: not UTF-8 text (byte {exc.start}); is it a binary file?") from None
