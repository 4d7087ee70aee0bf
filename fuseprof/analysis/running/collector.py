"""Python's cyclic garbage collector, run less often while a trace is decoded and analysed.

Why: the collector starts a pass every 700 net new container objects (its first generation's threshold), and
passes reach the older generations in proportion; an analysis makes millions of short-lived containers
(dependency lists, per-row tuples) beside tables that stay, and almost none of them in reference cycles. On the
131 MB bench trace (``scripts/bench_trace_parse.py``) the collector took a fifth of ``analyze``'s CPU time and
freed nothing of note. A higher first threshold keeps it on (a cycle is still freed, later): at 100,000 the same
trace still paid 17 first- and 2 second-generation passes over the containers the tables and the analysis keep
(0.47 s of its 7 s, timed by ``gc.callbacks``); at 1,000,000 none runs inside, and one pass after the block takes
what is left (0.15 s; 1.1% fewer instructions under callgrind, the same peak RSS). A rank of a rank set makes far
fewer, so it pays that one pass per rank either way. What that pass found was nearly all one cycle, each step graph
and its replay inputs (221,791 objects on that trace; 54k per rank of 270 steps): broken since
(``whatif._Inputs``), the pass takes 0.04 s there and 2 ms a rank. The user's own thresholds are restored after, since a library
call must not change its host's interpreter."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from fuseprof.parse.held_setting import HeldSetting

FIRST_GENERATION_THRESHOLD = 1_000_000
_THRESHOLDS: HeldSetting[tuple[int, ...]] = HeldSetting(
    gc.get_threshold, lambda t: gc.set_threshold(*t),
    lambda found: (max(found[0], FIRST_GENERATION_THRESHOLD), *found[1:]))


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The collector's first threshold at least ``FIRST_GENERATION_THRESHOLD`` inside the block (or the function
    it decorates: ``@fewer_collections()``); blocks that overlap in threads share it (``fuseprof.parse.held_setting``)."""
    with _THRESHOLDS.block():
        yield
