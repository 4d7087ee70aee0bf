"""``aggregate`` is pandas' named aggregation, to the bit: the same frame as ``groupby(...).agg(**named)`` on real
traces' events, for every kind of reduction the analyses use, one key or several, null keys kept or dropped, text
and nested cells, no rows at all."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis.facts.aggregate import aggregate
from fuseprof.analysis.running.analyze import windowed_events
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, TRACES

REAL = [TRACES / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz", FIXTURES / "tp2" / "tp_mlp-rank0.json.gz",
        FIXTURES / "h200-graphs" / "graph-replay.json.gz"]
NAMED = {
    "count": ("dur_ns", "size"), "time_ns": ("dur_ns", "sum"), "mean_ns": ("dur_ns", "mean"),
    "median_ns": ("dur_ns", "median"), "first_start": ("start_ns", "min"), "last_end": ("end_ns", "max"),
    "op": ("op", "first"), "module": ("module", "first"), "dims": ("input_dims", "first"), "ops": ("op_id", "nunique"),
    "p90": ("dur_ns", lambda s: s.quantile(0.9)), "names": ("name", lambda v: "\x00".join(map(str, v))),
    "bytes": ("dur_ns", lambda v: v.sum(min_count=len(v))),
}


@pytest.fixture(scope="module", params=REAL, ids=lambda p: p.parent.name)
def events(request: pytest.FixtureRequest) -> pd.DataFrame:
    return windowed_events(read_trace_tables(Path(request.param))).events


@pytest.mark.parametrize("keys", ["name", ["op", "stream"], "module"], ids=str)  # module: all null in tp2
@pytest.mark.parametrize("dropna", [True, False])
@pytest.mark.parametrize("rows", ["all", "none"])
def test_aggregate_is_pandas_named_aggregation(events: pd.DataFrame, keys: str | list[str], dropna: bool,
                                               rows: str) -> None:
    frame = events if rows == "all" else events.iloc[:0]
    grouped = frame.groupby(keys, sort=False, dropna=dropna)
    expected = grouped.agg(**NAMED)
    pd.testing.assert_frame_equal(aggregate(grouped, **NAMED), expected, check_exact=True)
    if rows == "all" and keys == "name":
        assert len(expected) > 1  # groups, not one: the kernels' names say something on every trace here


def test_a_groupby_without_its_groups_as_index_is_refused(events: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="as_index=False"):
        aggregate(events.groupby("name", as_index=False), count=("dur_ns", "size"))
