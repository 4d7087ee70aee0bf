"""``fuseprof analyze``: a whole-model torch.profiler trace as tables, on traces fuseprof did not capture.

Pure functions from the linked event table (``fuseprof.analysis.events``) to result tables; the
facade ``analyze_trace`` runs them all. Times are integer nanoseconds throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fuseprof.analysis.events import categorized_events
from fuseprof.analysis.fusion import CopyModel, copy_model_from_bench, kernel_floor_ns, opportunities
from fuseprof.analysis.timeline import gpu_timeline
from fuseprof.bundle.files import RAW, is_bundle
from fuseprof.errors import TraceFormatError
from fuseprof.model.derived import add_rates
from fuseprof.model.devices import require_device
from fuseprof.model.op_registry import CATEGORIES, OpFamily, estimate
from fuseprof.model.roofline import Roof, capture_roof, judge
from fuseprof.parse.trace_events import read_trace_tables
from fuseprof.ranges import first_range_label


@dataclass
class TraceAnalysis:
    """Every table ``fuseprof analyze`` prints for one trace; ``notes`` say what could not be done."""

    name: str
    device: str | None
    roof: Roof
    events: pd.DataFrame
    timeline: pd.DataFrame
    categories: pd.DataFrame
    top_kernels: pd.DataFrame
    top_ops: pd.DataFrame
    launches: pd.DataFrame
    op_roofline: pd.DataFrame
    fusion: pd.DataFrame
    rank: int | None = None
    notes: list[str] = field(default_factory=list)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"timeline": self.timeline, "categories": self.categories, "top_kernels": self.top_kernels,
                "top_ops": self.top_ops, "launches": self.launches, "op_roofline": self.op_roofline,
                "fusion": self.fusion}


def category_table(events: pd.DataFrame) -> pd.DataFrame:
    """Per category: events, GPU time (sum of durations), share of the trace's GPU event time."""
    grouped = events.groupby("category").agg(count=("dur_ns", "size"), time_ns=("dur_ns", "sum"))
    grouped = grouped.reindex([c for c in CATEGORIES if c in grouped.index] +
                              sorted(set(grouped.index) - set(CATEGORIES)))
    grouped["share_pct"] = 100 * grouped["time_ns"] / grouped["time_ns"].sum()
    return grouped.reset_index().sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)


def _mode(values: pd.Series) -> object:
    counts = values.dropna().value_counts()
    return counts.index[0] if len(counts) else None


def _category_by_time(events: pd.DataFrame, key: pd.Series) -> pd.Series:
    """Per group of ``key``: the category of the kernels holding most of its GPU time (an aten::mm
    whose first kernel is a memset is a GEMM, not a memset)."""
    by = events.groupby([key, events["category"]], sort=False)["dur_ns"].sum().reset_index()
    by.columns = ["key", "category", "time"]
    return by.sort_values("time", ascending=False, kind="stable").drop_duplicates("key").set_index("key")["category"]


def top_kernels(events: pd.DataFrame, n: int) -> pd.DataFrame:
    """Kernels (and copies) by total time, with the op and module that launch them most often."""
    grouped = events.groupby("name", sort=False).agg(
        count=("dur_ns", "size"), time_ns=("dur_ns", "sum"),
        mean_ns=("dur_ns", "mean"), op=("op", _mode), module=("module", _mode))
    grouped.insert(0, "category", _category_by_time(events, events["name"]))
    grouped["share_pct"] = 100 * grouped["time_ns"] / events["dur_ns"].sum()
    return grouped.sort_values("time_ns", ascending=False).head(n).reset_index()


def _signature(events: pd.DataFrame) -> pd.Series:
    """op name and its input shapes, e.g. 'aten::addmm [[512], [141, 512], [512, 512]]'."""
    dims = events["input_dims"].map(lambda d: "" if not isinstance(d, list) else str(d))
    return events["op"].fillna("(no op)").astype(str) + " " + dims


def top_ops(events: pd.DataFrame, n: int) -> pd.DataFrame:
    """CPU ops (by name and input shapes) by the GPU time of the kernels they launched."""
    rows = events.assign(signature=_signature(events))
    calls = rows.groupby("signature", sort=False)["op_id"].nunique()
    grouped = rows.groupby("signature", sort=False).agg(
        op=("op", "first"), kernels=("dur_ns", "size"), time_ns=("dur_ns", "sum"), module=("module", _mode))
    grouped.insert(1, "category", _category_by_time(rows, rows["signature"]))
    grouped["calls"] = calls
    grouped["kernels_per_call"] = grouped["kernels"] / grouped["calls"].where(grouped["calls"] > 0)
    grouped["share_pct"] = 100 * grouped["time_ns"] / events["dur_ns"].sum()
    return grouped.sort_values("time_ns", ascending=False).head(n).reset_index()


def launch_stats(events: pd.DataFrame) -> pd.DataFrame:
    """Per launch API: count, host time per launch call and launch-to-start latency (GPU start −
    launch call start: queueing plus launch latency), median and 90th percentile, in ns."""
    rows = events[events["launch_api"].notna()].copy()
    rows["latency_ns"] = rows["start_ns"] - rows["launch_start_ns"].astype("float64")
    out = rows.groupby("launch_api").agg(
        launches=("dur_ns", "size"), host_median_ns=("launch_dur_ns", "median"),
        host_p90_ns=("launch_dur_ns", lambda s: s.astype("float64").quantile(0.9)),
        latency_median_ns=("latency_ns", "median"), latency_p90_ns=("latency_ns", lambda s: s.quantile(0.9)))
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


def op_roofline(events: pd.DataFrame, roof: Roof) -> pd.DataFrame:
    """Per op signature with a shape model: analytic ``flops`` and ``dram_bytes`` per call (every input
    read once, every output written once), the measured GPU time of its kernels per call
    (``duration_ns``), and the roofline judgement of every row type (``fuseprof.model.roofline.judge``:
    the same columns as a kernel's); where ncu measured the same kernels (``attach_ncu``), its FLOPs
    and DRAM bytes per call beside the analytic ones."""
    with_op = events[events["op_id"].notna()]
    if with_op.empty:
        return pd.DataFrame()
    if "ncu_flops" not in with_op:
        with_op = with_op.assign(ncu_flops=np.nan, ncu_dram_bytes=np.nan)
    per_call = with_op.groupby("op_id", sort=False).agg(
        op=("op", "first"), dims=("input_dims", "first"), types=("input_type", "first"),
        concrete=("concrete", "first"), time_ns=("dur_ns", "sum"), kernels=("dur_ns", "size"),
        ncu_flops=("ncu_flops", lambda v: v.sum(min_count=1)),
        ncu_dram_bytes=("ncu_dram_bytes", lambda v: v.sum(min_count=1)))
    estimates = [estimate(o, d, t, c) for o, d, t, c in
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


def trace_files(path: Path) -> list[Path]:
    """The trace(s) behind a path: a trace file, or a bundle's raw profiler trace(s)."""
    if path.is_dir():
        if not is_bundle(path):
            raise TraceFormatError(f"{path}: a folder that is not a fuseprof bundle; give a trace file or a bundle")
        found = sorted((path / RAW).glob("*.json*"))
        if not found:
            raise TraceFormatError(f"{path}: bundle holds no torch.profiler trace under {RAW}/")
        return found
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file")
    return [path]


def analyze_trace(path: Path, device: str | None = None, top: int = 15, registry: list[OpFamily] | None = None,
                  measured: dict[str, Roof] | None = None, name: str | None = None,
                  copy: CopyModel | None = None, ncu_rows: pd.DataFrame | None = None) -> TraceAnalysis:
    """Every table for one trace file. ``device`` names the GPU when the trace lacks
    ``deviceProperties`` (or overrides it): 'H100 SXM', 'NVIDIA H200', ..."""
    tables = read_trace_tables(path)
    events = categorized_events(tables, registry)
    if ncu_rows is not None and not ncu_rows.empty:
        events = attach_ncu(events, ncu_rows)
    notes = []
    if events.empty:
        raise TraceFormatError(f"{path}: no GPU kernels, memcpys or memsets; was the trace captured with "
                               "ProfilerActivity.CUDA?")
    names = sorted({tables.device_name(d) or "" for d in events["device"].dropna().unique()} - {""})
    device_name = device or (names[0] if names else None)
    roof = capture_roof(device_name, measured)
    if "assumed" in roof.label:
        notes.append(f"roof: {roof.label}; pass --device to name the GPU")
    if events["input_dims"].map(lambda d: isinstance(d, list)).sum() == 0:
        notes.append("no input shapes in the trace (captured without record_shapes=True): no per-op roofline")
    if events["module"].isna().all():
        notes.append("no nn.Module paths (captured without with_stack=True / with_modules=True)")
    timeline = gpu_timeline(events)
    return TraceAnalysis(
        name=name or path.name, device=device_name, roof=roof, events=events, timeline=timeline,
        categories=category_table(events), top_kernels=top_kernels(events, top), top_ops=top_ops(events, top),
        launches=launch_stats(events), op_roofline=op_roofline(events, roof),
        fusion=opportunities(events, timeline, copy or CopyModel(roof.dram_bytes_per_s, kernel_floor_ns(events),
                                                                   f"{roof.label} DRAM + the trace's kernel floor")),
        rank=tables.rank, notes=notes)


def analyze(paths: list[Path] | Path, device: str | None = None, top: int = 15,
            registry: list[OpFamily] | None = None) -> list[TraceAnalysis]:
    """``analyze_trace`` over trace files and bundles (one result per trace)."""
    from fuseprof.bundle.loading import load_timings
    from fuseprof.model.roofline import measured_roofs

    if isinstance(paths, (str, Path)):
        paths = [Path(paths)]
    if device is not None:
        require_device(device)
    results = []
    for path in map(Path, paths):
        traces = trace_files(path)
        # a bundle among others (traces/): their measured ceilings and bench copies apply to it
        measured = measured_roofs(path.parent) if path.is_dir() else None
        copy = copy_model_from_bench(load_timings(path.parent)) if path.is_dir() else None
        ncu_rows = None
        if path.is_dir():
            from fuseprof.bundle.loading import load

            kernels = load(path)
            ncu_rows = kernels[kernels["source"] == "ncu"]
        for trace in traces:
            name = f"{path.name}/{trace.relative_to(path)}" if path.is_dir() else trace.name
            results.append(analyze_trace(trace, device, top, registry, measured, name, copy, ncu_rows))
    return results
