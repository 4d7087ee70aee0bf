"""The top kernels and top ops, made on arrays (``summaries._Groups``), are the frames pandas' groupby makes of the
same events, to the bit: every value, dtype and index, on real traces' events, with nulls where a trace has none,
and on no events at all. The reference is the groupby formulation the tables were first written in."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis.analyze import windowed_events
from fuseprof.analysis.modes import modes
from fuseprof.analysis.summaries import top_kernels, top_ops
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, TRACES

REAL = [TRACES / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz", FIXTURES / "tp2" / "tp_mlp-rank0.json.gz",
        FIXTURES / "h200-graphs" / "graph-replay.json.gz"]


def _with_modes(grouped: pd.DataFrame, events: pd.DataFrame, key: pd.Series, columns: tuple[str, ...]) -> None:
    for column in columns:
        found = modes(events[column], key).reindex(grouped.index)
        grouped[column] = found.where(found.notna(), None)


def _category_by_time(events: pd.DataFrame, key: pd.Series) -> pd.Series:
    by = events.groupby([key, events["category"]], sort=False)["dur_ns"].sum().reset_index()
    by.columns = ["key", "category", "time"]
    return by.sort_values("time", ascending=False, kind="stable").drop_duplicates("key").set_index("key")["category"]


def groupby_top_kernels(events: pd.DataFrame, n: int) -> pd.DataFrame:
    grouped = events.groupby("name", sort=False).agg(count=("dur_ns", "size"), time_ns=("dur_ns", "sum"),
                                                     mean_ns=("dur_ns", "mean"))
    _with_modes(grouped, events, events["name"], ("op", "module"))
    grouped.insert(0, "category", _category_by_time(events, events["name"]))
    grouped["share_pct"] = 100 * grouped["time_ns"] / events["dur_ns"].sum()
    return grouped.sort_values("time_ns", ascending=False).head(n).reset_index()


def groupby_top_ops(events: pd.DataFrame, n: int) -> pd.DataFrame:
    dims = events["input_dims"].map(lambda d: "" if not isinstance(d, list) else str(d))
    rows = events.assign(signature=events["op"].fillna("(no op)").astype(str) + " " + dims)
    calls = rows.groupby("signature", sort=False)["op_id"].nunique()
    grouped = rows.groupby("signature", sort=False).agg(op=("op", "first"), kernels=("dur_ns", "size"),
                                                        time_ns=("dur_ns", "sum"))
    _with_modes(grouped, rows, rows["signature"], ("module",))
    grouped.insert(1, "category", _category_by_time(rows, rows["signature"]))
    grouped["calls"] = calls
    grouped["kernels_per_call"] = grouped["kernels"] / grouped["calls"].where(grouped["calls"] > 0)
    grouped["share_pct"] = 100 * grouped["time_ns"] / events["dur_ns"].sum()
    return grouped.sort_values("time_ns", ascending=False).head(n).reset_index()


def _with_nulls(events: pd.DataFrame) -> pd.DataFrame:
    """Every third event without a category, every second without an op, one in four without an op call."""
    out = events.copy()
    out.loc[out.index[::3], "category"] = pd.NA
    out.loc[out.index[::2], "op"] = pd.NA
    out.loc[out.index[1::4], "op_id"] = pd.NA
    return out


def _ties(events: pd.DataFrame) -> pd.DataFrame:
    """Every event 1 µs, every other one's category changed: a kernel's categories tie on time, and the table
    takes the one seen first, as the groupby's stable sort does."""
    flipped = pd.Series(["GEMM", "elementwise"] * len(events), dtype=events["category"].dtype)[:len(events)]
    return events.assign(dur_ns=1000, category=flipped.set_axis(events.index))


VARIANTS = {"as decoded": lambda e: e, "nulls": _with_nulls, "ties": _ties, "no events": lambda e: e.iloc[:0],
            "no category": lambda e: e.assign(category=pd.Series(pd.NA, index=e.index, dtype=e["category"].dtype))}


@pytest.fixture(scope="module", params=REAL, ids=lambda p: p.parent.name)
def events(request: pytest.FixtureRequest) -> pd.DataFrame:
    return windowed_events(read_trace_tables(Path(request.param))).events


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("n", [3, 10_000])
def test_top_tables_are_the_groupby_frames(events: pd.DataFrame, variant: str, n: int) -> None:
    rows = VARIANTS[variant](events)
    kernels, ops = groupby_top_kernels(rows, n), groupby_top_ops(rows, n)
    pd.testing.assert_frame_equal(top_kernels(rows, n), kernels, check_exact=True)
    pd.testing.assert_frame_equal(top_ops(rows, n), ops, check_exact=True)
    if variant == "as decoded":  # several kernels, some run many times; ops (the graph replay's: one, "(no op)")
        assert len(kernels) >= 3 and kernels["count"].max() > 1 and len(ops) >= 1
