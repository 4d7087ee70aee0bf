"""The top kernels, top ops, launch statistics and per-op roofline, made on arrays (``summaries._Groups``,
``launch_stats``, ``op_roofline``), are the frames pandas' groupby makes of the same events, to the bit: every
value, dtype and index, on real traces' events, with nulls where a trace has none, with ncu's measurements, and
on no events at all. The reference is the groupby formulation the tables were first written in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fuseprof.analysis.facts.graphs import is_graph_launch
from fuseprof.analysis.facts.modes import modes
from fuseprof.analysis.facts.summaries import launch_stats, op_roofline, top_kernels, top_ops
from fuseprof.analysis.running.analyze import windowed_events
from fuseprof.model.derived import add_rates
from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.roofline import capture_roof, judge
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


def groupby_launch_stats(events: pd.DataFrame) -> pd.DataFrame:
    rows = events[events["launch_api"].notna()]
    calls = rows.groupby(["launch_api", "correlation"], sort=False).agg(
        kernels=("dur_ns", "size"), host_ns=("launch_dur_ns", "first"), first_start_ns=("start_ns", "min"),
        launch_start_ns=("launch_start_ns", "first")).reset_index()
    calls["latency_ns"] = (calls["first_start_ns"] - calls["launch_start_ns"].astype("Int64")).astype("float64")
    calls["host_ns"] = calls["host_ns"].astype("float64")
    out = calls.groupby("launch_api").agg(
        launches=("kernels", "size"), kernels=("kernels", "sum"), host_median_ns=("host_ns", "median"),
        host_p90_ns=("host_ns", lambda s: s.quantile(0.9)), latency_median_ns=("latency_ns", "median"),
        latency_p90_ns=("latency_ns", lambda s: s.quantile(0.9)))
    out["kernels_per_launch"] = out["kernels"] / out["launches"]
    out["graph"] = is_graph_launch(out.index.to_series()).to_numpy()
    return out.reset_index().sort_values("launches", ascending=False).reset_index(drop=True)


def groupby_op_roofline(events: pd.DataFrame) -> pd.DataFrame:
    roof, registry = capture_roof("NVIDIA H200"), DEFAULT
    with_op = events[events["op_id"].notna()]
    if with_op.empty or not any(isinstance(d, list) for d in with_op["input_dims"]):
        return pd.DataFrame()
    if "ncu_flops" not in with_op:
        with_op = with_op.assign(ncu_flops=np.nan, ncu_dram_bytes=np.nan)
    calls = with_op.groupby("op_id", sort=False)
    per_call = calls.agg(op=("op", "first"), dims=("input_dims", "first"), types=("input_type", "first"),
                         concrete=("concrete", "first"), time_ns=("dur_ns", "sum"), kernels=("dur_ns", "size"))
    per_call[["ncu_flops", "ncu_dram_bytes"]] = calls[["ncu_flops", "ncu_dram_bytes"]].sum(min_count=1)
    estimates = [registry.estimate(o, d, t, c) for o, d, t, c in
                 zip(per_call["op"], per_call["dims"], per_call["types"], per_call["concrete"])]
    per_call["flops"] = [e.flops if e else np.nan for e in estimates]
    per_call["dram_bytes"] = [e.bytes if e else np.nan for e in estimates]
    per_call["roof_pipe"] = [e.pipe if e else None for e in estimates]
    per_call = per_call[per_call["roof_pipe"].notna()]
    if per_call.empty:
        return pd.DataFrame()
    per_call["signature"] = per_call["op"] + " " + per_call["dims"].map(str) + " " + per_call["types"].map(
        lambda t: str([x for x in t if x]) if isinstance(t, list) else "")
    out = per_call.groupby("signature", sort=False).agg(
        op=("op", "first"), roof_pipe=("roof_pipe", "first"), calls=("time_ns", "size"), flops=("flops", "first"),
        dram_bytes=("dram_bytes", "first"), time_ns=("time_ns", "sum"), kernels_per_call=("kernels", "mean"),
        ncu_flops=("ncu_flops", "mean"), ncu_dram_bytes=("ncu_dram_bytes", "mean"))
    out["duration_ns"] = out["time_ns"] / out["calls"]
    judge(add_rates(out), roof)
    return out.sort_values("time_ns", ascending=False).reset_index()


def _ncu_measured(events: pd.DataFrame) -> pd.DataFrame:
    """ncu's FLOPs and bytes on two kernels in three (float sums whose order shows in the last bits), none on the
    rest: what ``attach_ncu`` leaves on a capture's events."""
    values = np.random.default_rng(7).uniform(1e6, 1e12, (len(events), 2)) / 3
    values[::3] = np.nan
    return events.assign(ncu_flops=values[:, 0], ncu_dram_bytes=values[:, 1])


def _api_without_correlations(events: pd.DataFrame) -> pd.DataFrame:
    """The most used launch API's kernels with no correlation id: in no call, so the API has no row."""
    api = events["launch_api"].mode()
    if api.empty:
        return events
    return events.assign(correlation=events["correlation"].where(events["launch_api"] != api.iloc[0]))


def _with_nulls(events: pd.DataFrame) -> pd.DataFrame:
    """Every third event without a category, every second without an op, one in four without an op call; one in five
    without a correlation id, every second without its launch's host time, one in three without its launch start."""
    out = events.copy()
    out.loc[out.index[::3], "category"] = pd.NA
    out.loc[out.index[::2], "op"] = pd.NA
    out.loc[out.index[1::4], "op_id"] = pd.NA
    out.loc[out.index[::5], "correlation"] = pd.NA
    out.loc[out.index[::2], "launch_dur_ns"] = pd.NA
    out.loc[out.index[1::3], "launch_start_ns"] = pd.NA
    return out


def _ties(events: pd.DataFrame) -> pd.DataFrame:
    """Every event 1 µs, every other one's category changed: a kernel's categories tie on time, and the table
    takes the one seen first, as the groupby's stable sort does."""
    flipped = pd.Series(["GEMM", "elementwise"] * len(events), dtype=events["category"].dtype)[:len(events)]
    return events.assign(dur_ns=1000, category=flipped.set_axis(events.index))


VARIANTS = {"as decoded": lambda e: e, "nulls": _with_nulls, "ties": _ties, "no events": lambda e: e.iloc[:0],
            "no category": lambda e: e.assign(category=pd.Series(pd.NA, index=e.index, dtype=e["category"].dtype)),
            "ncu measured": _ncu_measured,
            "an API without correlations": _api_without_correlations,
            "no launch times": lambda e: e.assign(launch_dur_ns=pd.Series(pd.NA, index=e.index, dtype="Int64"),
                                                  launch_start_ns=pd.Series(pd.NA, index=e.index, dtype="Int64"))}


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


@pytest.mark.parametrize("variant", VARIANTS)
def test_launch_statistics_are_the_groupby_frame(events: pd.DataFrame, variant: str) -> None:
    rows = VARIANTS[variant](events)
    expected = groupby_launch_stats(rows)
    pd.testing.assert_frame_equal(launch_stats(rows), expected, check_exact=True)
    if variant == "as decoded":  # several calls per API, so medians and percentiles between values
        assert len(expected) >= 1 and expected["launches"].max() > 2
    if variant == "an API without correlations":
        assert events["launch_api"].mode().iloc[0] not in set(expected["launch_api"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_op_roofline_is_the_groupby_frame(events: pd.DataFrame, variant: str) -> None:
    rows = VARIANTS[variant](events)
    rows = rows.assign(op_id=rows["op_id"].where(rows["op"].notna()))  # an op call always has its op's name
    expected = groupby_op_roofline(rows)
    pd.testing.assert_frame_equal(op_roofline(rows, capture_roof("NVIDIA H200"), DEFAULT), expected, check_exact=True)
    if variant == "as decoded" and not expected.empty:  # signatures of many calls, the ones measured by several
        assert expected["calls"].max() > 1
