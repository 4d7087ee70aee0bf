"""Read a text artifact that may be gzipped, turning damage into TraceFormatError.

Bounded and safe on hostile input: only regular files are read (a named pipe would block forever, a
link to /dev/zero would read until memory ran out); gzip data is decompressed in chunks up to
``max_bytes()`` (a 1 MB gzip bomb expands to GBs: 8 GiB, or ``FUSEPROF_MAX_TRACE_MB``); both are refused
with one line naming the file, and so is data that outgrows the memory the process may use (``ulimit -v``)
before that bound.
"""

from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path

from fuseprof.errors import InvalidArgumentError, TraceFormatError

MAX_BYTES = 8 * 2**30  # 8 GiB of JSON or CSV: beyond any trace seen, far below what would take the machine down
LIMIT_VARIABLE = "FUSEPROF_MAX_TRACE_MB"  # the bound in MiB, for a machine that reads larger traces or wants less


def max_bytes() -> int:
    """The most bytes a trace or CSV may hold once decompressed: ``MAX_BYTES``, or ``FUSEPROF_MAX_TRACE_MB`` MiB."""
    given = os.environ.get(LIMIT_VARIABLE)
    if given is None:
        return MAX_BYTES
    try:
        mib = float(given)
    except ValueError:
        mib = float("nan")
    if not mib > 0 or mib == float("inf"):
        raise InvalidArgumentError(f"{LIMIT_VARIABLE}={given!r}: give a size in MiB above 0")
    return int(mib * 2**20)
_CHUNK = 2**24


def require_regular(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise TraceFormatError(f"{path}: no such file") from None
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise TraceFormatError(f"{path}: is a directory, not a trace file")
    if not stat.S_ISREG(mode):
        raise TraceFormatError(f"{path}: not a regular file (a pipe, socket or device); give the file itself")


def _gunzip(raw: bytes, path: Path, limit: int) -> bytes | bytearray:
    """The decompressed bytes, grown in one buffer: holding the chunks and then joining them needed twice the
    decompressed size (a 1 MB gzip of whitespace took 2.4 GB)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out_buffer, size, data = bytearray(), 0, raw
    try:
        while data:
            out = inflater.decompress(data, _CHUNK)
            size += len(out)
            if size > limit:
                raise TraceFormatError(f"{path}: decompresses to more than {limit / 2**20:,.0f} MiB; refused "
                                       f"(a damaged file or a decompression bomb; {LIMIT_VARIABLE} sets the bound)")
            out_buffer += out
            del out
            data = inflater.unconsumed_tail
            if inflater.eof and inflater.unused_data[:2] == b"\x1f\x8b":  # concatenated gzip members
                data = inflater.unused_data
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        if not inflater.eof:
            raise TraceFormatError(f"{path}: damaged or truncated gzip data (it ends early)")
    except zlib.error as exc:
        raise TraceFormatError(f"{path}: damaged or truncated gzip data ({exc})") from None
    except MemoryError:
        raise TraceFormatError(f"{path}: decompressing it outgrew the memory this process may use ({size / 2**20:,.0f} "
                               f"MiB so far; ulimit -v?): a decompression bomb, or set {LIMIT_VARIABLE} below that "
                               "to be told so at once") from None
    return out_buffer  # a bytearray: every reader takes a buffer, and bytes() would copy it


_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _utf8(raw: bytes | bytearray, path: Path) -> bytes | bytearray:
    """The text as UTF-8 without a byte-order mark. A BOM is valid before JSON text (RFC 8259 lets a reader ignore
    it; Windows editors and .NET writers put one) but no JSON decoder takes it; UTF-16 with its BOM is what
    Windows PowerShell's ``>`` writes: decoded and made UTF-8 (twice the text's size, as the file holds)."""
    if raw[:3] == _UTF8_BOM:
        if isinstance(raw, bytearray):
            del raw[:3]  # in place: a bytearray drops its head without copying the rest
            return raw
        return raw[3:]
    if raw[:2] in _UTF16_BOMS:
        try:
            return raw.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceFormatError(f"{path}: starts as UTF-16 text but is not (byte {exc.start})") from None
    return raw


def read_bytes(path: Path, limit: int | None = None) -> bytes | bytearray:
    """The file's bytes, gunzipped when they start with gzip's magic (not by the file's name), at most
    ``limit`` (default ``MAX_BYTES``) of them, as UTF-8 without a byte-order mark (``_utf8``)."""
    require_regular(path)
    limit = limit or max_bytes()
    if path.stat().st_size > limit:
        raise TraceFormatError(f"{path}: larger than {limit / 2**20:,.0f} MiB; refused ({LIMIT_VARIABLE} sets the bound)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror})") from None
    except MemoryError:
        raise TraceFormatError(f"{path}: larger than the memory this process may use (ulimit -v?)") from None
    return _utf8(_gunzip(raw, path, limit) if raw[:2] == b"\x1f\x8b" else raw, path)


def read_text(path: Path) -> str:
    """The file's text (UTF-8; gunzipped as ``read_bytes`` does)."""
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{path}: not UTF-8 text (byte {exc.start}); is it a binary file?") from None


def _regular_only(path: str, flags: int) -> int:
    """``os.open`` for a regular file only, opened without blocking: a FIFO is refused, not waited on for a writer;
    a device (/dev/zero) or a socket is refused before a byte is read; checked on the open file, not its name."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(0, "not a regular file (a folder, pipe, socket or device); give the file itself")
    return fd


def read_settings(path: Path, what: str, limit: int) -> str:
    """The UTF-8 text of a small file the user names on the command line (``what``: '--plan FILE'): a regular file
    of at most ``limit`` bytes, else one line naming it (InvalidArgumentError)."""
    try:
        with open(path, "rb", opener=_regular_only) as file:
            raw = file.read(limit + 1)
    except FileNotFoundError:
        raise InvalidArgumentError(f"{what}: no such file") from None
    except OSError as exc:
        raise InvalidArgumentError(f"{what}: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise InvalidArgumentError(f"{what}: larger than {limit / 2**20:g} MiB; refused (no such file is that large)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"{what}: not UTF-8 text (byte {exc.start})") from None
