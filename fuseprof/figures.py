"""Plotly figure builders over the model's tables. No Streamlit here: the dashboard, the
notebooks and tests call the same builders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fuseprof.model.occupancy import block_size_curve, occupancy_curve
from fuseprof.model.roofline import Roof, chain_points

# Warm colours for unfused chains, blue for compiled, greens for fused kernels, purple for libraries.
KIND_PALETTES = {"unfused": ["#d62728", "#ff7f0e"], "compiled": ["#1f77b4", "#17becf"],
                 "fused": ["#2ca02c", "#bcbd22", "#8c564b"], "library": ["#9467bd", "#e377c2"]}
OTHER_COLOR = "#7f7f7f"


def variant_colors(variants: list[str], kinds: dict[str, str]) -> dict[str, str]:
    """A colour per variant, from its kind's palette, stable for a given list."""
    used: dict[str, int] = {}
    colors = {}
    for variant in sorted(variants):
        palette = KIND_PALETTES.get(kinds.get(variant, ""), [OTHER_COLOR])
        colors[variant] = palette[used.get(kinds.get(variant, ""), 0) % len(palette)]
        used[kinds.get(variant, "")] = used.get(kinds.get(variant, ""), 0) + 1
    return colors


def _hover(frame: pd.DataFrame) -> list[str]:
    return [f"{k}<br>{v} {s}<br>{b / 1e6:.2f} MB DRAM, {f / 1e6:.2f} MFLOP<br>{t / 1e3:.2f} µs"
            for k, v, s, b, f, t in zip(frame["kernel_short"], frame["variant"], frame["shape"],
                                        frame["dram_bytes"].fillna(0), frame["flops"].fillna(0),
                                        frame["duration_ns"].fillna(0))]


def roofline_figure(placed: pd.DataFrame, roof: Roof, variant_kinds: dict[str, str] | None = None) -> go.Figure:
    """Log-log roofline: DRAM slope, compute ceilings, a point per kernel, a star per chain.
    Kernels without FLOPs (copies, casts) have no place on a log FLOP axis and are left out."""
    colors = variant_colors([str(v) for v in placed["variant"].dropna().unique()], variant_kinds or {})
    fig = go.Figure()
    ai = np.logspace(-3, 3, 200)
    fig.add_trace(go.Scatter(x=ai, y=np.minimum(ai * roof.dram_bytes_per_s, max(roof.compute.values())),
                             mode="lines", name=f"DRAM {roof.dram_bytes_per_s / 1e12:.2f} TB/s",
                             line={"color": "black"}))
    for name, flops in roof.compute.items():
        ridge = flops / roof.dram_bytes_per_s
        fig.add_trace(go.Scatter(x=[ridge, ai[-1]], y=[flops, flops], mode="lines", line={"dash": "dash"},
                                 name=f"{name} {flops / 1e12:.1f} TFLOP/s"))
    points = placed[placed["flops"] > 0].copy()
    points["x"] = points["arithmetic_intensity"]
    points["y"] = points["achieved_flops_per_s"].where(~points["l2_resident"], points["attainable_flops_per_s"])
    for variant, group in points.groupby("variant", dropna=False, sort=True):
        for resident, part in group.groupby("l2_resident"):
            fig.add_trace(go.Scatter(
                x=part["x"], y=part["y"], mode="markers", hovertext=_hover(part),
                hoverinfo="text", name=f"{variant}{' (L2-resident)' if resident else ''}",
                marker={"color": colors.get(str(variant), OTHER_COLOR), "size": 9,
                        "symbol": "x" if resident else "circle"},
                customdata=part[["kernel_short", "shape", "dram_bytes", "flops", "duration_ns"]].to_numpy()))
    chains = chain_points(placed)
    chains = chains[(chains["kernels"] > 1) & (chains["flops"] > 0)]
    if not chains.empty:
        fig.add_trace(go.Scatter(
            x=chains["arithmetic_intensity"], y=chains["achieved_flops_per_s"],
            mode="markers", marker={"symbol": "star", "size": 14, "color": "#ff7f0e"}, name="unfused chain (whole)",
            hovertext=[f"{v} {s}: {k} kernels as one" for v, s, k in
                       zip(chains["variant"], chains["shape"], chains["kernels"])], hoverinfo="text"))
    fig.update_layout(title=f"Roofline against {roof.label}", xaxis_type="log", yaxis_type="log",
                      xaxis_title="arithmetic intensity (FLOP / DRAM byte)", yaxis_title="achieved FLOP/s",
                      legend_title="variant", height=560)
    return fig


def occupancy_figure(table: pd.DataFrame) -> go.Figure:
    """Theoretical (ncu and computed) against achieved occupancy, per kernel (numbered: the same
    kernel name recurs within a chain and across bundles)."""
    labels = kernel_labels(table)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=table["theoretical_occupancy_pct"], name="theoretical (ncu)"))
    fig.add_trace(go.Bar(x=labels, y=table["computed_occupancy_pct"], name="theoretical (computed)"))
    fig.add_trace(go.Bar(x=labels, y=table["achieved_occupancy_pct"], name="achieved (ncu)"))
    fig.update_layout(barmode="group", yaxis_title="occupancy %", height=480, title="Occupancy per kernel")
    return fig


def kernel_labels(table: pd.DataFrame) -> list[str]:
    """'3: eager 128x4096 reduce_kernel' — unique per row of ``table``."""
    return [f"{i}: {v} {s} {k}" for i, (v, s, k) in
            enumerate(zip(table["variant"], table["shape"], table["kernel_short"]))]


def occupancy_curves_figure(threads: int, registers: int, shared_bytes: int) -> go.Figure:
    """Theoretical occupancy against registers per thread and against block size; the kernel's own
    configuration marked on each."""
    by_regs = occupancy_curve(threads, shared_bytes)
    by_block = block_size_curve(registers, shared_bytes)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=by_regs["registers_per_thread"], y=by_regs["theoretical_occupancy_pct"],
                             mode="lines", name=f"vs registers/thread ({threads} threads)", line_shape="hv"))
    fig.add_trace(go.Scatter(x=by_block["threads_per_block"], y=by_block["theoretical_occupancy_pct"],
                             mode="lines", name=f"vs block size ({registers} registers)", line_shape="hv",
                             xaxis="x2"))
    fig.add_trace(go.Scatter(x=[registers], y=[float(by_regs.set_index("registers_per_thread")
                                                     ["theoretical_occupancy_pct"].reindex([registers], method="ffill")
                                                     .iloc[0])],
                             mode="markers", marker={"size": 12}, name="this kernel"))
    fig.update_layout(xaxis={"title": "registers per thread"}, yaxis={"title": "theoretical occupancy %"},
                      xaxis2={"title": "threads per block", "overlaying": "x", "side": "top"}, height=420,
                      title="Occupancy as a function of registers and block size")
    return fig


def fusion_figure(summary: pd.DataFrame, variant_kinds: dict[str, str] | None = None) -> go.Figure:
    """Per shape and variant (one bundle): GPU time, measured and nominal DRAM bytes, launches per call."""
    from plotly.subplots import make_subplots

    colors = variant_colors([str(v) for v in summary["variant"].unique()], variant_kinds or {})
    fig = make_subplots(rows=1, cols=3, subplot_titles=("GPU time (µs)", "DRAM bytes per call (MB)",
                                                        "kernels per call"))
    for variant, part in summary.groupby("variant", sort=True):
        color = {"color": colors.get(str(variant), OTHER_COLOR)}
        fig.add_trace(go.Bar(x=part["shape"], y=part["gpu_median_ns"] / 1e3, name=str(variant),
                             legendgroup=str(variant), marker=color), row=1, col=1)
        fig.add_trace(go.Bar(x=part["shape"], y=part["dram_bytes"] / 1e6, name=str(variant),
                             legendgroup=str(variant), showlegend=False, marker=color), row=1, col=2)
        fig.add_trace(go.Bar(x=part["shape"], y=part["kernels_per_call"], name=str(variant),
                             legendgroup=str(variant), showlegend=False, marker=color), row=1, col=3)
    nominal = summary.drop_duplicates("shape")
    fig.add_trace(go.Scatter(x=nominal["shape"], y=nominal["nominal_bytes"] / 1e6, mode="markers",
                             marker={"symbol": "line-ew-open", "size": 30, "color": "black"},
                             name="nominal bytes"), row=1, col=2)
    fig.update_layout(barmode="group", height=460, title="Fused against unfused")
    return fig


def launches_figure(kernels: pd.DataFrame, variant_kinds: dict[str, str] | None = None) -> go.Figure:
    """Each variant's kernels on a time axis (one profiled call), with the launch calls beneath."""
    fig = go.Figure()
    colors = variant_colors([str(v) for v in kernels["variant"].dropna().unique()], variant_kinds or {})
    for variant, part in kernels.groupby("variant", sort=True):
        color = colors.get(str(variant), OTHER_COLOR)
        origin = part["launch_start_ns"].min()
        fig.add_trace(go.Bar(
            y=[f"{variant} GPU"] * len(part), x=part["duration_ns"] / 1e3, base=(part["start_ns"] - origin) / 1e3,
            orientation="h", name=f"{variant} kernels", hovertext=part["kernel_short"], hoverinfo="text+x",
            marker={"color": color}))
        fig.add_trace(go.Bar(
            y=[f"{variant} host"] * len(part), x=part["launch_api_ns"] / 1e3,
            base=(part["launch_start_ns"] - origin) / 1e3, orientation="h", name=f"{variant} launch calls",
            hovertext=part["launch_api"], hoverinfo="text+x", marker={"color": color, "opacity": 0.45}))
    fig.update_layout(barmode="overlay", xaxis_title="µs from the first launch call", height=420,
                      title="Launches: host launch calls and GPU kernels")
    return fig
