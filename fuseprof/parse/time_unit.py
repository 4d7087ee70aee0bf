"""The unit of a trace's ``ts`` and ``dur``: microseconds, as the Trace Event Format says, or nanoseconds where a
writer put them there and says so.

The format's ``displayTimeUnit`` is a viewer's setting only; Kineto writes ``"ms"`` and µs times with three
decimals. Some exporters write ``displayTimeUnit: "ns"`` and whole nanoseconds in ``ts`` and ``dur``: read as µs,
every time of theirs is 1000x too long (a 3 µs kernel, 3 ms). Such a trace is told by its evidence, never by the
setting alone:

- a time with a fraction is µs with ns decimals (an ns writer writes whole numbers): µs;
- else the launch calls (``cudaLaunchKernel``, ``hipLaunchKernel``, ``cuLaunchKernel``...) tell: on any GPU and
  host one takes 1.5–50 µs, never under 0.2 µs, and their median across a trace is never a millisecond. A median
  of ``NS_LAUNCH_MEDIAN`` or more read as µs (≥ 0.2 ms a launch) is ns (≥ 0.2 µs a launch); below it, µs;
- a trace with neither (no fraction, no launch call) cannot be told: refused with what to do, not guessed.

A trace without ``displayTimeUnit: "ns"`` is µs, whatever its numbers say (a malformed trace is the integrity
checks' to flag, not a unit to guess).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from fuseprof.errors import TraceFormatError

NS_PER_US, NS_PER_NS = 1000, 1
NS_LAUNCH_MEDIAN = 200.0  # a trace's median launch call in its own unit: 200 µs is no launch, 200 ns is too fast


def says_ns(display_unit: object) -> bool:
    """Whether a trace's ``displayTimeUnit`` is ``"ns"`` (the only setting that may mean its times are ns)."""
    return isinstance(display_unit, str) and display_unit.strip().lower() == "ns"


def ns_per_unit(display_unit: object, fractional: bool, launch_durations: Sequence[float], path: Path) -> int:
    """Nanoseconds per unit of the trace's ``ts`` and ``dur`` (the module docstring's rules): ``NS_PER_US`` or
    ``NS_PER_NS``. ``fractional``: whether any time has a fraction; ``launch_durations``: its launch calls' ``dur``
    as written."""
    if not says_ns(display_unit) or fractional:
        return NS_PER_US
    if not launch_durations:
        raise TraceFormatError(f"{path}: displayTimeUnit is 'ns' and every time a whole number, with no launch call "
                               "to tell whether ts and dur are µs (as the Trace Event Format says) or ns; divide them "
                               "by 1000 if they are ns, or remove displayTimeUnit if they are µs")
    return NS_PER_NS if statistics.median(launch_durations) >= NS_LAUNCH_MEDIAN else NS_PER_US
