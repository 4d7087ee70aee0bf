"""Nsight Compute units to fuseprof's base units: bytes, nanoseconds, per-second rates.

ncu auto-scales values unless ``--print-units base`` is given ("Kbyte", "usecond",
"cycle/nsecond"); the units row of a raw CSV and ``IMetric.unit()`` say which scale applies.
"""

from __future__ import annotations

_SI = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
# ncu writes both spellings: "usecond" in some pages, "us" in the raw page's units row
_TIME_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
_PER_TIME = {unit: 1e9 / ns for unit, ns in _TIME_NS.items()}
_HZ = {"hz": 1.0, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9}


# Counted things ncu reports in base units (×1), optionally SI-prefixed ("Kbyte"): every unit seen in
# ncu 2025.3's raw pages here. Anything else is refused, never taken as ×1.
_BASE = {"", "%", "SM", "block", "byte", "cluster", "cycle", "inst", "pass", "register", "request", "sector",
         "thread", "warp", "wavefront", "lane", "instruction", "transaction", "context", "ratio", "x"}


class UnknownUnitError(ValueError):
    """A unit fuseprof cannot convert to its base units."""


def _term_factor(word: str) -> float:
    if word in _TIME_NS:
        return _TIME_NS[word]
    if word in _HZ:
        return _HZ[word]
    if word in _BASE:
        return 1.0
    if len(word) > 1 and word[0] in _SI and word[1:] in _BASE:
        return _SI[word[0]]
    raise UnknownUnitError(word)


def scale_to_base(unit: str | None) -> float:
    """Factor that turns a value in ``unit`` into base units (durations in ns, rates per second);
    ``UnknownUnitError`` for a unit it cannot convert."""
    if not unit:
        return 1.0
    unit = unit.strip()
    if "/" in unit:
        num, _, den = unit.partition("/")
        if den in _PER_TIME:
            return _term_factor(num) * _PER_TIME[den]
        return _term_factor(num) / _term_factor(den)
    return _term_factor(unit)
