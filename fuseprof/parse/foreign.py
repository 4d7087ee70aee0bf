"""Other profilers' files given where a torch.profiler trace belongs, recognised by their content (whatever their
name says) so the user is told what the file is and what to run instead of "not valid JSON … truncated?".

Why by content: a report renamed ``trace.json``, or a SQLite export without its extension, fails the same way as a
damaged trace, and the fix differs. Read here: at most the first ``_HEAD`` bytes (gunzipped when gzip's magic leads),
of a regular file only (a pipe would block); nothing heavier than the standard library, so the command line can ask
before it imports pandas.
"""

from __future__ import annotations

import re
import stat
import zlib
from pathlib import Path

from fuseprof.parse.perfetto_proto import is_protobuf_trace

_HEAD = 1 << 16
_SQLITE = b"SQLite format 3\x00"
_NCU_REP = b"NVR\x00"  # the first bytes of every Nsight Compute report (tests/fixtures/*.ncu-rep)
_NSYS_SUFFIXES = (".nsys-rep", ".qdrep")  # Nsight Systems' reports: recognised by name (no documented magic)
# tables every ``nsys export --type sqlite`` holds; SQLite keeps its schema's text in the file's first pages
_NSYS_TABLES = (b"CUPTI_ACTIVITY_KIND_KERNEL", b"CUPTI_ACTIVITY_KIND_RUNTIME", b"NVTX_EVENTS", b"TARGET_INFO_GPU")
_NSYS_NEXT = ("`nsys stats --report cuda_gpu_kern_sum,cuda_api_sum {path}` summarises its kernels and API calls; for "
              "fuseprof, record the run with torch.profiler and give that trace")
_ET_SCHEMA = re.compile(rb'"schema"\s*:')
_ET_NODES = re.compile(rb'"nodes"\s*:\s*\[')


def _head(path: Path) -> bytes:
    """The file's first bytes, gunzipped when it is gzip (a damaged gzip: the bytes as they are)."""
    with path.open("rb") as f:
        raw = f.read(_HEAD)
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, _HEAD)
    except zlib.error:
        return raw


def _regular_head(path: Path) -> bytes | None:
    """A regular file's first bytes; None for anything else (a pipe would block) or a file that cannot be read."""
    try:
        return _head(path) if stat.S_ISREG(path.stat().st_mode) else None
    except OSError:
        return None


_JSON_START = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*[{\[]")  # a JSON object or array, after a BOM and blanks


def holds_trace(path: Path) -> bool:
    """Whether a regular file's content is a trace fuseprof reads — JSON text (gzipped or not, UTF-16 included) or a
    Perfetto protobuf — whatever its name: torch 2.13 writes Chrome JSON into ``x.pftrace``, and users keep traces
    as ``.txt`` or gzip without ``.gz``. Another tool's file (``foreign_file``) and an execution trace are not."""
    head = _regular_head(path)
    if head is None:
        return False
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        head = head.decode("utf-16", "ignore").encode()
    if _JSON_START.match(head):
        return not (b'"traceEvents"' not in head and _ET_SCHEMA.search(head) and _ET_NODES.search(head))
    return is_protobuf_trace(head)


def foreign_file(path: Path) -> str | None:
    """What another tool's file is and the next step, as one sentence after the path; None for anything else
    (a trace, a damaged trace, a path that is not a regular file: the reader says what is wrong with those)."""
    head = _regular_head(path)
    if head is None:
        return None
    if head.startswith(_NCU_REP):
        return (f"an Nsight Compute report (.ncu-rep), not a torch.profiler trace; make it a bundle with "
                f"`fuseprof ingest {path}`, then `fuseprof roofline` or `fuseprof summary` on the bundle")
    if head.startswith(_SQLITE) and any(table in head for table in _NSYS_TABLES):
        return f"an Nsight Systems SQLite export, not a torch.profiler trace; {_NSYS_NEXT.format(path=path)}"
    if head.startswith(_SQLITE):
        return ("an SQLite database, not a torch.profiler trace (an Nsight Systems export holds its CUPTI_ACTIVITY_KIND_"
                "tables: `nsys stats` summarises one); give the torch.profiler trace")
    if path.name.lower().endswith(_NSYS_SUFFIXES):
        return f"an Nsight Systems report, not a torch.profiler trace; {_NSYS_NEXT.format(path=path)}"
    if b'"traceEvents"' not in head and _ET_SCHEMA.search(head) and _ET_NODES.search(head):
        return ("a PyTorch execution trace (Chakra: 'schema' and 'nodes'), not a torch.profiler trace; give the "
                "torch.profiler trace recorded with it, with this file beside it named X.et.json.gz for X.json.gz: "
                "fuseprof reads the two together")
    return None
