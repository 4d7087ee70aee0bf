"""Terminal views of the capture-bundle tables (summary, roofline): human units, one line per row.
Formatting only; the tables come from ``fuseprof.tables`` and ``fuseprof.model``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fuseprof.commands.base import emit
from fuseprof.errors import FuseprofError


def print_summary(table: pd.DataFrame, kernels: pd.DataFrame, folder: Path, wide: bool = False) -> None:
    """One block per bundle (named above its rows), one row per case, variant and shape."""
    captured = table[table["case"].notna() & (table["kernels_per_call"].notna() | table["profiler_kernels"].notna())]
    if captured.empty:
        raise FuseprofError(f"{folder}: no capture bundle (fuseprof profile) to summarise")
    for bundle, rows in captured.groupby("bundle", sort=True):
        print(f"\n{bundle}  ({', '.join(rows['case'].unique())}; {', '.join(rows['dtype'].dropna().unique())})")
        mb = (lambda c: (rows[c] / 1e6).round(2))  # noqa: E731
        emit(pd.DataFrame({
            "variant": rows["variant"], "shape": rows["shape"], "kernels": rows["kernels_per_call"], "GPU µs": (rows["gpu_median_ns"] / 1e3).round(2),
            "called µs": (rows["as_called_median_ns"] / 1e3).round(2), "DRAM MB": mb("dram_bytes"),
            "L2 MB": mb("l2_bytes"), "nominal MB": mb("nominal_bytes"),
            "DRAM/nominal": rows["dram_bytes_over_nominal"].round(2), "GFLOP": (rows["flops"] / 1e9).round(3),
            "ok": rows["correct"].map({True: "yes", False: "WRONG"})}), "table", wide)
    # timing-only rows: bench bundles, and the copy rows of a capture run with --copy-baseline
    timed_only = table[table["case"].notna() & table["kernels_per_call"].isna() & table["profiler_kernels"].isna()]
    benches = timed_only[~timed_only["bundle"].isin(captured["bundle"])]
    if not benches.empty:
        print(f"\n+ {benches['bundle'].nunique()} bench bundle(s), {len(benches)} rows: `fuseprof compare {folder}`")
    if len(timed_only) > len(benches):
        print(f"+ {len(timed_only) - len(benches)} same-bytes copy rows of captures: `fuseprof breakdown BUNDLE`")
    traces = kernels[kernels["case"].isna()]["bundle"].nunique()
    if traces:
        print(f"+ {traces} trace bundle(s) without cases: `fuseprof analyze BUNDLE`")


def print_kernels(frame: pd.DataFrame, wide: bool = False) -> None:
    """``fuseprof show``: the kernel frame's main columns in human units (every column with ``wide``)."""
    if wide:
        emit(frame, "table", wide)
        return
    mb = (lambda c: (frame[c] / 1e6).round(3) if c in frame else None)  # noqa: E731
    dram = frame.get("dram_read_bytes", pd.Series(dtype=float)) + frame.get("dram_write_bytes", pd.Series(dtype=float))
    emit(pd.DataFrame({
        "bundle": frame["bundle"], "variant": frame["variant"], "shape": frame["shape"], "source": frame["source"],
        "kernel": frame["kernel_short"] if "kernel_short" in frame else frame["kernel"],
        "µs": (frame["duration_ns"] / 1e3).round(3), "grid": frame["grid"], "block": frame["block"],
        "regs": frame["registers_per_thread"], "DRAM MB": (dram / 1e6).round(3), "L2 read MB": mb("l2_read_bytes"),
        "occupancy %": frame["achieved_occupancy_pct"].round(1) if "achieved_occupancy_pct" in frame else None}),
        "table")


def print_roofline(placed: pd.DataFrame, wide: bool = False) -> None:
    emit(pd.DataFrame({
        "case": placed["case"], "variant": placed["variant"], "shape": placed["shape"],
        "kernel": placed["kernel_short"], "pipe": placed["roof_pipe"],
        "GFLOP": (placed["flops"] / 1e9).round(3), "DRAM MB": (placed["dram_bytes"] / 1e6).round(2),
        "µs": (placed["duration_ns"] / 1e3).round(2), "FLOP/B": placed["arithmetic_intensity"].round(2),
        "TFLOP/s": (placed["achieved_flops_per_s"] / 1e12).round(2),
        "TB/s": (placed["achieved_bytes_per_s"] / 1e12).round(2), "% roof": placed["pct_of_roof"].round(1),
        "bound": placed["bound"], "L2": placed["l2_resident"].map({True: "L2", False: ""})}), "table", wide)
    print(f"roof: {', '.join(sorted(placed['roof'].unique()))}")
