"""Text in pandas' Python-backed string arrays while a trace's tables are built.

Why: pandas 3 infers a column of text as ``str`` backed by Arrow where pyarrow is installed. Each operation on such
a column (a row filter's take, a cast, ``to_numpy``, a factorize) is a ``pyarrow.compute`` call costing tens of µs
whatever the rows, and an analysis filters, joins and groups its tables of a few hundred rows thousands of times:
the Python-backed arrays of the same dtype (pandas' ``mode.string_storage``) cut two ranks' cold analysis by 7% of
its instructions under callgrind. They hold the same values under the same missing-value rules, and the answers are
the same to the byte (``scripts/snapshot_analyses.py`` on every committed and shared trace). What builds a trace's
tables runs inside it — the decoder (``read_trace_tables``), the analysis (``windowed_events``, ``analyze_tables``),
the across-ranks tables (``build_across``) — so the tables hold the same dtypes whoever calls them: the runner, a
library caller, a stored analysis rebuilding its events.

The setting is the process's (pandas has no per-thread options): ``fuseprof.parse.held_setting`` holds it while
any block is open in any thread and puts back the caller's own after the last, since a library call must not change
its host's session; another thread of the host running pandas meanwhile makes its text Python-backed too (the same
values)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd

from fuseprof.parse.held_setting import HeldSetting

_OPTION = "mode.string_storage"
_STORAGE: HeldSetting[str] = HeldSetting(lambda: pd.get_option(_OPTION), lambda v: pd.set_option(_OPTION, v),
                                         lambda _found: "python")


@contextmanager
def python_strings() -> Iterator[None]:
    """pandas' string storage ``python`` inside the block (or the function it decorates: ``@python_strings()``)."""
    with _STORAGE.block():
        yield


def text_dtype() -> object:
    """The dtype pandas gives a column of text made now (``str`` in the string storage of the moment: Python-backed
    inside ``python_strings``): what a table built from lists gives its text columns, to be the same table as one
    built by pandas' own operations."""
    return pd.Series([""]).dtype
