"""ncu unit strings to base units, table-driven from units seen in real H200 captures."""

from __future__ import annotations

import pytest

from fuseprof.parse.units import scale_to_base


@pytest.mark.parametrize(
    ("unit", "factor"),
    [
        ("", 1.0), ("byte", 1.0), ("Kbyte", 1e3), ("Mbyte", 1e6), ("Gbyte", 1e9),
        ("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("nsecond", 1.0), ("usecond", 1e3), ("msecond", 1e6),
        ("hz", 1.0), ("Ghz", 1e9), ("cycle/nsecond", 1e9), ("cycle/second", 1.0),
        ("byte/cycle", 1.0), ("Kbyte/cycle", 1e3), ("Gbyte/second", 1e9), ("Tbyte/s", 1e12),
        ("%", 1.0), ("block", 1.0), ("inst", 1.0), ("Minst", 1e6),
    ],
)
def test_scale_to_base(unit: str, factor: float) -> None:
    assert scale_to_base(unit) == pytest.approx(factor)
