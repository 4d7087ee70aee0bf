"""The per-trace summary tables of ``fuseprof analyze``: time per category, top kernels and ops, launch
statistics, the per-op roofline from recorded shapes, and ncu's measurements beside it. Pure
functions from the linked, categorised event table to result tables; times in integer ns."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.aggregate import aggregate
from fuseprof.analysis.graphs import is_graph_launch
from fuseprof.analysis.modes import modes
from fuseprof.model.derived import add_rates
from fuseprof.model.registry import CATEGORIES, Registry
from fuseprof.model.roofline import Roof, judge
from fuseprof.ranges import first_range_label


def category_table(events: pd.DataFrame) -> pd.DataFrame:
    """Per category: events, GPU time (sum of durations), share of the trace's GPU event time."""
    grouped = aggregate(events.groupby("category"), count=("dur_ns", "size"), time_ns=("dur_ns", "sum"))
    grouped = grouped.reindex([c for c in CATEGORIES if c in grouped.index] +
                              sorted(set(grouped.index) - set(CATEGORIES)))
    grouped["share_pct"] = 100 * grouped["time_ns"] / grouped["time_ns"].sum()
    return grouped.reset_index().sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)


def _with_modes(grouped: pd.DataFrame, events: pd.DataFrame, key: pd.Series, columns: tuple[str, ...]
                ) -> pd.DataFrame:
    """``grouped`` (indexed by the groups of ``key``) with each of ``columns``' mode per group."""
    for column in columns:
        found = modes(events[column], key).reindex(grouped.index)
        grouped[column] = found.where(found.notna(), None)
    return grouped


def _category_by_time(events: pd.DataFrame, key: pd.Series) -> pd.Series:
    """Per group of ``key``: the category of the kernels holding most of its GPU time (an aten::mm
    whose first kernel is a memset is a GEMM, not a memset)."""
    by = events.groupby([key, events["category"]], sort=False)["dur_ns"].sum().reset_index()
    by.columns = ["key", "category", "time"]
    return by.sort_values("time", ascending=False, kind="stable").drop_duplicates("key").set_index("key")["category"]


def top_kernels(events: pd.DataFrame, n: int) -> pd.DataFrame:
    """Kernels (and copies) by total time, with the op and module that launch them most often."""
    grouped = _with_modes(aggregate(
        events.groupby("name", sort=False), count=("dur_ns", "size"), time_ns=("dur_ns", "sum"),
        mean_ns=("dur_ns", "mean")),
        events, events["name"], ("op", "module"))
    grouped.insert(0, "category", _category_by_time(events, events["name"]))
    grouped["share_pct"] = 100 * grouped["time_ns"] / events["dur_ns"].sum()
    return grouped.sort_values("time_ns", ascending=False).head(n).reset_index()


def _signature(events: pd.DataFrame) -> pd.Series:
    """op name and its input shapes, e.g. aten::addmm [[512], [141, 512], [512, 512]]."""
    dims = events["input_dims"].map(lambda d: "" if not isinstance(d, list) else str(d))
    return events["op"].fillna("(no op)").astype(str) + " " + dims


def top_ops(events: pd.DataFrame, n: int) -> pd.DataFrame:
    """CPU ops (by name and input shapes) by the GPU time of the kernels they launched."""
    rows = events.assign(signature=_signature(events))
    calls = rows.groupby("signature", sort=False)["op_id"].nunique()
    grouped = _with_modes(aggregate(
        rows.groupby("signature", sort=False), op=("op", "first"), kernels=("dur_ns", "size"),
        time_ns=("dur_ns", "sum")), rows, rows["signature"], ("module",))
    grouped.insert(1, "category", _category_by_time(rows, rows["signature"]))
    grouped["calls"] = calls
    grouped["kernels_per_call"] = grouped["kernels"] / grouped["calls"].where(grouped["calls"] > 0)
    grouped["share_pct"] = 100 * grouped["time_ns"] / events["dur_ns"].sum()
    return grouped.sort_values("time_ns", ascending=False).head(n).reset_index()


def launch_stats(events: pd.DataFrame) -> pd.DataFrame:
    """Per launch API: calls (a graph launch is one call however many kernels it replays), kernels
    per call, host time per call and launch-to-start latency (first GPU start − launch call start:
    queueing plus launch latency), median and 90th percentile, in ns."""
    rows = events[events["launch_api"].notna()]
    calls = aggregate(
        rows.groupby(["launch_api", "correlation"], sort=False), kernels=("dur_ns", "size"),
        host_ns=("launch_dur_ns", "first"), first_start_ns=("start_ns", "min"),
        launch_start_ns=("launch_start_ns", "first")).reset_index()
    calls["latency_ns"] = (calls["first_start_ns"] - calls["launch_start_ns"].astype("Int64")).astype("float64")
    calls["host_ns"] = calls["host_ns"].astype("float64")
    out = aggregate(
        calls.groupby("launch_api"), launches=("kernels", "size"), kernels=("kernels", "sum"),
        host_median_ns=("host_ns", "median"),
        host_p90_ns=("host_ns", lambda s: s.quantile(0.9)), latency_median_ns=("latency_ns", "median"),
        latency_p90_ns=("latency_ns", lambda s: s.quantile(0.9)))
    out["kernels_per_launch"] = out["kernels"] / out["launches"]
    out["graph"] = is_graph_launch(out.index.to_series()).to_numpy()
    return out.reset_index().sort_values("launches", ascending=False).reset_index(drop=True)


def attach_ncu(events: pd.DataFrame, ncu_rows: pd.DataFrame) -> pd.DataFrame:
    """ncu's measured FLOPs and DRAM bytes on the trace's kernels of the same capture: matched by the
    fuseprof range (variant), the kernel's short name and its order within them (torch.profiler and
    ncu demangle differently; both saw the same launches inside the same NVTX/record ranges)."""
    from fuseprof.model.derived import derive
    from fuseprof.parse.names import short_kernel_name

    out = events.copy()
    out["ncu_flops"], out["ncu_dram_bytes"] = np.nan, np.nan
    if ncu_rows.empty:
        return out
    kernels = out[out["kind"] == "kernel"]
    variant = kernels["ranges"].map(lambda r: (first_range_label(r) or (None, None))[0])
    keys = pd.DataFrame({"variant": variant, "short": kernels["name"].map(short_kernel_name)}, index=kernels.index)
    keys["nth"] = keys.groupby(["variant", "short"], dropna=False).cumcount()
    measured = derive(ncu_rows)
    measured = measured.assign(short=measured["kernel_short"],
                               nth=measured.groupby(["variant", "kernel_short"], dropna=False).cumcount())
    joined = keys.reset_index().merge(measured[["variant", "short", "nth", "flops", "dram_bytes"]],
                                      on=["variant", "short", "nth"], how="left").set_index("index")
    out.loc[joined.index, "ncu_flops"] = joined["flops"].astype(float)
    out.loc[joined.index, "ncu_dram_bytes"] = joined["dram_bytes"].astype(float)
    return out


def op_roofline(events: pd.DataFrame, roof: Roof, registry: Registry) -> pd.DataFrame:
    """Per op signature with a shape model: analytic ``flops`` and ``dram_bytes`` per call (every input
    read once, every output written once), the measured GPU time of its kernels per call
    (``duration_ns``), and the roofline judgement of every row type (``fuseprof.model.roofline.judge``:
    the same columns as a kernel's); where ncu measured the same kernels (``attach_ncu``), its FLOPs
    and DRAM bytes per call beside the analytic ones."""
    with_op = events[events["op_id"].notna()]
    if with_op.empty or not any(isinstance(d, list) for d in with_op["input_dims"]):
        return pd.DataFrame()  # no recorded shapes: nothing to model, and nothing to pay for it
    if "ncu_flops" not in with_op:
        with_op = with_op.assign(ncu_flops=np.nan, ncu_dram_bytes=np.nan)
    calls = with_op.groupby("op_id", sort=False)
    per_call = aggregate(calls, op=("op", "first"), dims=("input_dims", "first"), types=("input_type", "first"),
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
    out = aggregate(
        per_call.groupby("signature", sort=False), op=("op", "first"), roof_pipe=("roof_pipe", "first"),
        calls=("time_ns", "size"), flops=("flops", "first"),
        dram_bytes=("dram_bytes", "first"), time_ns=("time_ns", "sum"), kernels_per_call=("kernels", "mean"),
        ncu_flops=("ncu_flops", "mean"), ncu_dram_bytes=("ncu_dram_bytes", "mean"))
    out["duration_ns"] = out["time_ns"] / out["calls"]
    judge(add_rates(out), roof)
    return out.sort_values("time_ns", ascending=False).reset_index()
