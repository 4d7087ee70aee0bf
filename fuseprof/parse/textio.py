"""Read a text artifact that may be gzipped, turning damage into TraceFormatError."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from fuseprof.errors import TraceFormatError


def read_text(path: Path) -> str:
    """The file's text; gzip is detected by its magic bytes, not by the file name."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(f"{path}: damaged or truncated gzip data ({exc})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{path}: not UTF-8 text (byte {exc.start}); is it a binary file?") from None
