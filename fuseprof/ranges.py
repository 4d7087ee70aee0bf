"""Labels of the ranges that wrap each measured call, shared by capture and parsers.

The same label names the torch.profiler ``record_function`` range and the NVTX push/pop
range that ``ncu --nvtx-include`` filters on, so a kernel from either tool maps back to its
variant and shape. '/' and '@' are ncu filter syntax, so labels use ':' between fields.
"""

from __future__ import annotations

import re

PREFIX = "fuseprof"
REGION = "region"  # the shape field of a user's own region (fuseprof.region): it has no case shape
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_LABEL_IN_TEXT_RE = re.compile(rf"{PREFIX}:([A-Za-z0-9_.\-]+):(\d+(?:x\d+)*|{REGION})")


def check_variant_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ValueError(f"variant name {name!r} may hold only letters, digits, '_', '.', '-'")
    return name


def range_label(variant: str, shape: str) -> str:
    """'fuseprof:eager:128x4096'."""
    return f"{PREFIX}:{check_variant_name(variant)}:{shape}"


def region_label(name: str) -> str:
    """'fuseprof:decode_step:region' for ``fuseprof.region("decode_step")``."""
    return f"{PREFIX}:{check_variant_name(name)}:{REGION}"


def parse_range_label(text: str) -> tuple[str, str] | None:
    """(variant, shape) from a label, or None for a range fuseprof did not write."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] != PREFIX:
        return None
    return parts[1], parts[2]


def first_range_label(names: object, separator: str = " / ") -> tuple[str, str] | None:
    """(variant, shape) of the first fuseprof label among range names joined by ``separator`` (the
    ``ranges`` of a linked trace event), or None."""
    if not isinstance(names, str):
        return None
    return next((found for found in map(parse_range_label, names.split(separator)) if found), None)


def search_range_label(text: str) -> tuple[str, str] | None:
    """(variant, shape) of the first fuseprof label inside longer text, such as ncu's CSV cell
    ``888  "<default domain>:fuseprof:eager:128x4096:none:none:..."``."""
    match = _LABEL_IN_TEXT_RE.search(text)
    return (match.group(1), match.group(2)) if match else None
