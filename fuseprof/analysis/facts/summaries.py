"""The per-trace summary tables of ``fuseprof analyze``: time per category, top kernels and ops, launch
statistics, the per-op roofline from recorded shapes, and ncu's measurements beside it. Pure
functions from the linked, categorised event table to result tables; times in integer ns."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.extensions import ExtensionArray

from fuseprof.analysis.facts.aggregate import aggregate
from fuseprof.analysis.facts.graphs import is_graph_launch
from fuseprof.analysis.facts.modes import modes
from fuseprof.model.derived import add_rates
from fuseprof.model.intervals import group_sums
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


class _Groups:
    """Rows grouped by a key, as ``groupby(key, sort=False)`` groups them — the groups in the order their keys first
    appear, a null key in none — with the reductions the top tables take, on arrays. Why: each table groups a window's
    events by one key and takes a handful of reductions; through pandas' groupby machinery each costs a fixed ~0.2 ms
    however few the rows, once per rank of a rank set (both top tables: 9.3 → 5.0 ms a rank, ``scripts/bench_phases.py``).
    The same values and dtypes as the groupby (tests/test_summaries.py holds them to it on the committed traces)."""

    def __init__(self, key: pd.Series) -> None:
        self.key = key
        self.codes, self.keys = pd.factorize(key)  # the keys as an Index of the key's own dtype
        self.keys.name = key.name
        self.size = np.bincount(self.codes[self.codes >= 0], minlength=len(self.keys))

    def sum(self, values: pd.Series) -> np.ndarray:
        """Each group's exact int64 sum of an integer column (``intervals.group_sums``)."""
        grouped = self.codes >= 0
        return group_sums(self.codes[grouped], values.to_numpy()[grouped], len(self.keys))

    def first(self, values: pd.Series) -> ExtensionArray:
        """Each group's first non-null value in row order (null where it has none), in the column's dtype."""
        valid = np.flatnonzero(values.notna().to_numpy() & (self.codes >= 0))
        found, at = np.unique(self.codes[valid], return_index=True)
        out = np.full(len(self.keys), None, dtype=object)
        out[found] = values.to_numpy(dtype=object)[valid[at]]
        return pd.array(out, dtype=values.dtype)

    def distinct(self, values: pd.Series) -> np.ndarray:
        """Each group's number of distinct non-null values (``nunique``)."""
        value_codes = pd.factorize(values)[0]
        valid = (value_codes >= 0) & (self.codes >= 0)
        width = int(value_codes[valid].max()) + 1 if valid.any() else 1  # a (group, value) pair as one number
        pairs = np.unique(self.codes[valid].astype(np.int64) * width + value_codes[valid])
        return np.bincount(pairs // width, minlength=len(self.keys)).astype(np.int64)

    def main_category(self, events: pd.DataFrame) -> ExtensionArray:
        """Each group's category holding most of its GPU time (an aten::mm whose first kernel is a memset is a GEMM,
        not a memset); ties to the (group, category) pair seen first, as a stable sort of ``groupby([key,
        category], sort=False)``'s sums takes it."""
        category = events["category"]
        category_codes, categories = pd.factorize(category)
        valid = (self.codes >= 0) & (category_codes >= 0)
        width = max(len(categories), 1)
        pair_codes, pairs = pd.factorize(self.codes[valid].astype(np.int64) * width + category_codes[valid])
        time = group_sums(pair_codes, events["dur_ns"].to_numpy()[valid], len(pairs))
        ranked = np.lexsort((np.arange(len(pairs)), -time))  # most time first, then first seen
        owners, first = np.unique(pairs[ranked] // width, return_index=True)
        out = np.full(len(self.keys), None, dtype=object)
        out[owners] = np.asarray(categories, dtype=object)[pairs[ranked[first]] % width]
        return pd.array(out, dtype=category.dtype)

    def modes(self, events: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, pd.Series]:
        """Each of ``columns``' most frequent value per group (``fuseprof.analysis.facts.modes``), None where it has none:
        a Series of Python objects indexed by the keys (a frame made from an object array would infer text)."""
        out = {}
        for column in columns:
            found = modes(events[column], self.key).reindex(self.keys)
            out[column] = found.where(found.notna(), None)
        return out


def top_kernels(events: pd.DataFrame, n: int) -> pd.DataFrame:
    """Kernels (and copies) by total time, with the op and module that launch them most often."""
    groups = _Groups(events["name"])
    time_ns = groups.sum(events["dur_ns"])
    grouped = pd.DataFrame({"category": groups.main_category(events), "count": groups.size, "time_ns": time_ns,
                            "mean_ns": time_ns / groups.size, **groups.modes(events, ("op", "module")),
                            "share_pct": 100 * time_ns / events["dur_ns"].sum()}, index=groups.keys)
    return grouped.sort_values("time_ns", ascending=False).head(n).reset_index()


def _signature(events: pd.DataFrame) -> pd.Series:
    """op name and its input shapes, e.g. aten::addmm [[512], [141, 512], [512, 512]]."""
    dims = events["input_dims"].map(lambda d: "" if not isinstance(d, list) else str(d))
    return events["op"].fillna("(no op)").astype(str) + " " + dims


def top_ops(events: pd.DataFrame, n: int) -> pd.DataFrame:
    """CPU ops (by name and input shapes) by the GPU time of the kernels they launched."""
    groups = _Groups(_signature(events).rename("signature"))
    time_ns, calls = groups.sum(events["dur_ns"]), groups.distinct(events["op_id"])
    grouped = pd.DataFrame({"op": groups.first(events["op"]), "category": groups.main_category(events),
                            "kernels": groups.size, "time_ns": time_ns, **groups.modes(events, ("module",)),
                            "calls": calls, "kernels_per_call": groups.size / np.where(calls > 0, calls, np.nan),
                            "share_pct": 100 * time_ns / events["dur_ns"].sum()}, index=groups.keys)
    return grouped.sort_values("time_ns", ascending=False).head(n).reset_index()


def launch_stats(events: pd.DataFrame) -> pd.DataFrame:
    """Per launch API: calls (a graph launch is one call however many kernels it replays), kernels
    per call, host time per call and launch-to-start latency (first GPU start − launch call start:
    queueing plus launch latency), median and 90th percentile, in ns.

    On arrays, as ``groupby([launch_api, correlation])`` then ``groupby(launch_api)`` make it (a kernel without a
    correlation id is in no call; the APIs sorted): through pandas' groupby machinery the ten reductions cost
    ~2.5 ms a rank whatever its size, the table's values a fraction of that (tests/test_summaries.py holds it to
    that formulation on the committed traces)."""
    rows = events[events["launch_api"].notna() & events["correlation"].notna()]  # a null key: in no group
    api_of_row, apis = pd.factorize(rows["launch_api"], sort=True)
    correlation_of_row, correlations = pd.factorize(rows["correlation"])
    width = max(len(correlations), 1)
    calls = _Groups(pd.Series(api_of_row.astype(np.int64) * width + correlation_of_row))  # a call: API, correlation
    first_start = np.full(len(calls.keys), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_start, calls.codes, rows["start_ns"].to_numpy(np.int64))
    host = np.asarray(calls.first(rows["launch_dur_ns"]).astype("float64"))
    launched = calls.first(rows["launch_start_ns"]).astype("Int64")
    latency = np.asarray((pd.array(first_start) - launched).astype("float64"))
    api_of_call = calls.keys.to_numpy() // width
    per_api = [api_of_call == a for a in range(len(apis))]
    launches = np.bincount(api_of_call, minlength=len(apis)).astype(np.int64)
    apis.name = "launch_api"
    out = pd.DataFrame({"launches": launches, "kernels": group_sums(api_of_call, calls.size, len(apis)),
                        "host_median_ns": [_median(host[m]) for m in per_api],
                        "host_p90_ns": [_p90(host[m]) for m in per_api],
                        "latency_median_ns": [_median(latency[m]) for m in per_api],
                        "latency_p90_ns": [_p90(latency[m]) for m in per_api]}, index=apis)
    out["kernels_per_launch"] = out["kernels"] / out["launches"]
    out["graph"] = is_graph_launch(out.index.to_series()).to_numpy()
    return out.reset_index().sort_values("launches", ascending=False).reset_index(drop=True)


def _median(values: np.ndarray) -> float:
    """The median of the non-NaN values (NaN: none), as a groupby's ``median`` takes it: the middle value, or the
    two middle ones' sum halved."""
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else np.nan


def _p90(values: np.ndarray) -> float:
    """The 90th percentile of the non-NaN values, linearly interpolated (NaN: none), as ``Series.quantile(0.9)``
    takes it (pandas asks NumPy for the percentile 0.9 × 100)."""
    values = values[~np.isnan(values)]
    return float(np.percentile(values, np.asarray([0.9]) * 100.0)[0]) if len(values) else np.nan


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


def _ncu_per_call(with_op: pd.DataFrame, calls: _Groups, modelled: list[int], by_signature: _Groups
                  ) -> dict[str, np.ndarray]:
    """ncu's FLOPs and DRAM bytes per call of each signature: each call's sum over its kernels (null: none
    measured), their mean over the signature's calls. All null where ncu measured none of them (a trace alone);
    else pandas' own float sums and means (compensated: NumPy's would differ in the last bits)."""
    columns = ("ncu_flops", "ncu_dram_bytes")
    if not all(c in with_op for c in columns) or with_op[list(columns)].isna().all(axis=None):
        return {c: np.full(len(by_signature.keys), np.nan) for c in columns}
    sums = with_op[list(columns)].groupby(calls.codes, sort=False).sum(min_count=1).iloc[modelled]
    return {c: sums[c].groupby(by_signature.codes, sort=False).mean().to_numpy() for c in columns}


def op_roofline(events: pd.DataFrame, roof: Roof, registry: Registry) -> pd.DataFrame:
    """Per op signature with a shape model: analytic ``flops`` and ``dram_bytes`` per call (every input
    read once, every output written once), the measured GPU time of its kernels per call
    (``duration_ns``), and the roofline judgement of every row type (``fuseprof.model.roofline.judge``:
    the same columns as a kernel's); where ncu measured the same kernels (``attach_ncu``), its FLOPs
    and DRAM bytes per call beside the analytic ones. Grouped on arrays (``_Groups``: per call, then per
    signature), as two groupbys would group them, without their fixed cost a rank (tests/test_summaries.py)."""
    with_op = events[events["op_id"].notna()]
    if with_op.empty or not any(isinstance(d, list) for d in with_op["input_dims"]):
        return pd.DataFrame()  # no recorded shapes: nothing to model, and nothing to pay for it
    calls = _Groups(with_op["op_id"])
    op, dims, types, concrete = (calls.first(with_op[c]) for c in ("op", "input_dims", "input_type", "concrete"))
    estimates = [registry.estimate(o, d, t, c) for o, d, t, c in zip(op, dims, types, concrete)]
    chosen = [(k, e.pipe) for k, e in enumerate(estimates) if e and e.pipe is not None]  # the calls with a model
    modelled = [k for k, _ in chosen]
    if not modelled:
        return pd.DataFrame()
    signature = [f"{op[k]} {dims[k]} " + (str([x for x in types[k] if x]) if isinstance(types[k], list) else "")
                 for k in modelled]  # a call with a model has its op's name (the model is found by it)
    by_signature = _Groups(pd.Series(signature, dtype=with_op["op"].dtype, name="signature"))
    # the counts as one column over every call, so its dtype is the same (an op without a model makes them floats)
    flops, dram_bytes = (pd.Series([getattr(e, field) if e else np.nan for e in estimates]).to_numpy()[modelled]
                         for field in ("flops", "bytes"))
    per_call = pd.DataFrame({"op": op[modelled], "roof_pipe": pd.array([pipe for _, pipe in chosen], dtype=object),
                             "flops": flops, "dram_bytes": dram_bytes,
                             "time_ns": calls.sum(with_op["dur_ns"])[modelled], "kernels": calls.size[modelled]})
    time_ns = by_signature.sum(per_call["time_ns"])
    out = pd.DataFrame({"op": by_signature.first(per_call["op"]),
                        "roof_pipe": by_signature.first(per_call["roof_pipe"]), "calls": by_signature.size,
                        "flops": by_signature.first(per_call["flops"]),
                        "dram_bytes": by_signature.first(per_call["dram_bytes"]), "time_ns": time_ns,
                        "kernels_per_call": by_signature.sum(per_call["kernels"]) / by_signature.size,
                        **_ncu_per_call(with_op, calls, modelled, by_signature)}, index=by_signature.keys)
    out["duration_ns"] = out["time_ns"] / out["calls"]
    judge(add_rates(out), roof)
    return out.sort_values("time_ns", ascending=False).reset_index()
