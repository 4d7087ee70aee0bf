"""Plotly figure builders over the model's tables. No Streamlit here: the dashboard, the
notebooks and tests call the same builders."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fuseprof.display import plain
from fuseprof.model.devices import PIPES, SmLimits
from fuseprof.model.launches import lanes
from fuseprof.model.occupancy import HOPPER, block_size_curve, occupancy, occupancy_curve
from fuseprof.model.roofline import Roof, chain_points

# Warm colours for unfused chains, blue for compiled, greens for fused kernels, purple for libraries.
KIND_PALETTES = {"unfused": ["#d62728", "#ff7f0e"], "compiled": ["#1f77b4", "#17becf"],
                 "fused": ["#2ca02c", "#bcbd22", "#8c564b"], "library": ["#9467bd", "#e377c2"]}
OTHER_COLOR = "#7f7f7f"


_TEXT_ATTRIBUTES = ("x", "y", "text", "hovertext", "customdata", "name", "labels")


def _plain_values(values: Any) -> Any:
    """``values`` (a string, a list, an array, nested) with every string made ``plain``; numbers as they are."""
    if isinstance(values, str):
        return plain(values)
    if isinstance(values, np.ndarray):
        return values if values.dtype.kind not in "OUS" else np.vectorize(_plain_values, otypes=[object])(values)
    if isinstance(values, (list, tuple)):
        return [_plain_values(v) for v in values]
    return values


def as_text(build: Callable[..., go.Figure]) -> Callable[..., go.Figure]:
    """A figure builder whose figure shows every string it carries as text (``plain``): the data's names,
    categories, hover texts and custom data. Templates are the builders' own markup; a trace's string that
    goes into one is made ``plain`` where it is written."""
    @functools.wraps(build)
    def built(*args: Any, **kwargs: Any) -> go.Figure:
        fig = build(*args, **kwargs)
        for trace in fig.data:
            for attribute in _TEXT_ATTRIBUTES:
                if attribute in trace and trace[attribute] is not None:
                    trace[attribute] = _plain_values(trace[attribute])
        if fig.layout.title.text:
            fig.layout.title.text = plain(fig.layout.title.text)
        for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:  # ticks name the categories they mark
            for attribute in ("tickvals", "ticktext"):
                if axis[attribute] is not None:
                    axis[attribute] = _plain_values(list(axis[attribute]))
        return fig
    return built


_TICK_CHARS = 48  # a category's tick label beyond this is cut (with …); its hover keeps the whole name
_PLOT_AREA_PX = 300  # what a chart keeps for its data however long its category labels
_TICKS_SHOWN = 50  # at most so many category labels on end side by side (each needs ~14 px of width)


def fit_categories(fig: go.Figure, labels: list[str], height: int) -> go.Figure:
    """``fig`` (categories ``labels`` on x) readable at any number and length of names: ticks cut to
    ``_TICK_CHARS``, on end where they would not fit flat, every k-th where more than ``_TICKS_SHOWN``
    (hovers name every bar), and the figure made taller than ``height`` so the data keeps
    ``_PLOT_AREA_PX`` (300 kernels' names left it 64 px)."""
    shown = [t if len(t) <= _TICK_CHARS else t[:_TICK_CHARS - 1] + "…" for t in labels]
    step = -(-len(labels) // _TICKS_SHOWN) if labels else 1
    longest = max((len(t) for t in shown), default=0)
    on_end = len(labels) * 7 * longest > 1000
    fig.update_xaxes(tickmode="array", tickvals=labels[::step], ticktext=shown[::step],
                     tickangle=-90 if on_end else 0)
    fig.update_layout(height=max(height, _PLOT_AREA_PX + 140 + 6 * longest) if on_end else height)
    return fig


def variant_colors(variants: list[str], kinds: dict[str, str]) -> dict[str, str]:
    """A colour per variant, from its kind's palette, stable for a given list."""
    used: dict[str, int] = {}
    colors = {}
    for variant in sorted(variants):
        palette = KIND_PALETTES.get(kinds.get(variant, ""), [OTHER_COLOR])
        colors[variant] = palette[used.get(kinds.get(variant, ""), 0) % len(palette)]
        used[kinds.get(variant, "")] = used.get(kinds.get(variant, ""), 0) + 1
    return colors


def _si(value: float, unit: str) -> str:
    """1.23e14, 'FLOP/s' -> '123 TFLOP/s': hovers carry units, scaled for a human."""
    if value is None or pd.isna(value):
        return f"n/a {unit}"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


_HOVER = ("<b>%{customdata[0]}</b><br>%{customdata[1]}<br>%{customdata[2]}<br>%{customdata[3]:.4g} MB DRAM, "
          "%{customdata[4]:.4g} GFLOP, %{customdata[5]:.2f} µs<br>AI %{x:.3g} FLOP/B · %{customdata[6]:.4g} TFLOP/s · "
          "%{customdata[7]:.3g} TB/s<br>measured against %{customdata[8]} of %{customdata[9]}: "
          "%{customdata[10]:.1f}% of roof (%{customdata[11]}-bound)<extra></extra>")


def _point_names(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """The three lines naming a point: kernel, bundle, variant and shape for ncu kernel rows; op
    signature, calls and kernels per call for op rows."""
    if "kernel_short" in frame:
        return (frame["kernel_short"].astype(str), frame["bundle"].astype(str),
                frame["variant"].astype(str) + " " + frame["shape"].astype(str))
    return (frame["signature"].astype(str), frame["calls"].astype(str) + " calls",
            frame["kernels_per_call"].round(2).astype(str) + " kernels a call (FLOPs and bytes per call, analytic)")


def roofline_customdata(frame: pd.DataFrame) -> np.ndarray:
    """The numbers behind each point's hover (``_HOVER``), in units a reader wants: a template and
    numbers instead of a sentence per point halves what a 3,000-kernel chart sends to the browser."""
    peaks = frame["peak_flops_per_s"].astype(float)
    text = {v: f"{v / 1e12:.4g} TFLOP/s" for v in peaks.dropna().unique()}
    # a roof without this pipe's peak (B200 prints no SIMT FP16 rate) gives NaN, which no dict key equals
    pipe = [f"{PIPES[p]} {text.get(v, '(no peak in this roof)')}" if p in PIPES else "DRAM"
            for p, v in zip(frame["roof_pipe"], peaks)]
    return np.column_stack([
        *_point_names(frame),
        (frame["dram_bytes"] / 1e6).astype(float).round(4), (frame["flops"] / 1e9).astype(float).round(6),
        (frame["duration_ns"] / 1e3).astype(float).round(3), (frame["achieved_flops_per_s"] / 1e12).astype(float).round(5),
        (frame["achieved_bytes_per_s"] / 1e12).astype(float).round(4), pipe, frame["roof"].astype(str),
        frame["pct_of_roof"].astype(float).round(2), frame["bound"].astype(str)])


# Roofs are drawn in greys and dashes, never in a variant's colour.
ROOF_DASHES = ["dash", "dot", "dashdot", "longdash", "longdashdot", "solid"]


def _draw_roof(fig: go.Figure, roof: Roof, pipes: list[str], ai: np.ndarray, color: str, suffix: str) -> None:
    known = [roof.peak(p) for p in pipes if not np.isnan(roof.peak(p))]
    top = max(known) if known else roof.dram_bytes_per_s * ai[-1]
    fig.add_trace(go.Scatter(x=ai, y=np.minimum(ai * roof.dram_bytes_per_s, top), mode="lines",
                             name=f"{roof.label}: DRAM {roof.dram_bytes_per_s / 1e12:.2f} TB/s{suffix}",
                             line={"color": color, "width": 2 if not suffix else 1}, hoverinfo="name"))
    for i, pipe in enumerate(pipes):
        peak = roof.peak(pipe)
        if np.isnan(peak):
            continue
        fig.add_trace(go.Scatter(x=[peak / roof.dram_bytes_per_s, ai[-1]], y=[peak, peak], mode="lines",
                                 line={"dash": ROOF_DASHES[i % len(ROOF_DASHES)], "color": color,
                                       "width": 2 if not suffix else 1},
                                 name=f"{roof.label}: {PIPES[pipe]} {peak / 1e12:.1f} TFLOP/s{suffix}",
                                 hoverinfo="name"))


@as_text
def roofline_figure(placed: pd.DataFrame, roofs: list[Roof], reference: Roof | None = None,
                    variant_kinds: dict[str, str] | None = None) -> go.Figure:
    """Log-log roofline for any rows judged by ``fuseprof.model.roofline.judge``: the roofs the points
    are judged against (black), the reference roof (grey), and a point per row. ncu kernel rows are
    coloured by variant, L2-resident ones drawn as crosses, and each call's whole chain as a star;
    op rows (from recorded shapes) are coloured by pipe and sized by their GPU time. Only the
    ceilings of pipes that some point is measured against are drawn (plus FP32). Rows without
    FLOPs (copies, casts) have no place on a log FLOP axis and are left out."""
    kernels = "kernel_short" in placed
    points = placed[(placed["flops"].fillna(0) > 0) & (placed["dram_bytes"].fillna(0) > 0)].copy()
    pipes = sorted(set(points["roof_pipe"].dropna().astype(str)) & set(PIPES) | {"fp32"}, key=list(PIPES).index)
    fig = go.Figure()
    # the curve's x by Python's pow, one value at a time: NumPy's vectorised power differs in the last bit between
    # CPUs (AVX-512 or not), and a committed notebook's figure must come out the same on every machine
    ai = np.array([10.0 ** x for x in np.linspace(-2, 4, 200).tolist()])
    for roof in roofs:
        _draw_roof(fig, roof, pipes, ai, "black", "")
    if reference is not None and reference.label not in {r.label for r in roofs}:
        _draw_roof(fig, reference, pipes, ai, "#9e9e9e", " (reference)")
    resident = points["l2_resident"].fillna(False) if "l2_resident" in points else pd.Series(False, points.index)
    points["x"] = points["arithmetic_intensity"]
    points["y"] = points["achieved_flops_per_s"].where(~resident, points["attainable_flops_per_s"])
    points["resident"] = resident
    series = "variant" if kernels else "roof_pipe"
    colors = variant_colors([str(v) for v in points[series].dropna().unique()], variant_kinds or {})
    for name, group in points.groupby(series, dropna=False, sort=True):
        for in_l2, part in group.groupby("resident"):
            label = str(name) if kernels else f"ops on {PIPES.get(str(name), name)}"
            size = 9 if kernels else np.clip(np.sqrt(part["time_ns"] / points["time_ns"].max()) * 22, 6, 22)
            fig.add_trace(go.Scatter(
                x=part["x"], y=part["y"], mode="markers", customdata=roofline_customdata(part),
                hovertemplate=_HOVER, name=f"{label}{' (L2-resident)' if in_l2 else ''}",
                marker={"color": colors.get(str(name), OTHER_COLOR) if kernels else None, "size": size,
                        "symbol": "x" if in_l2 else "circle"}))
    if kernels:
        _draw_chains(fig, placed)
    judged = ", ".join(r.label for r in roofs)
    title = (f"Roofline: each kernel against its pipe's ceiling on {judged}" if kernels else
             f"Per-op roofline from recorded shapes, against {judged} (size: GPU time)")
    fig.update_layout(title=title, xaxis_type="log", yaxis_type="log",
                      xaxis_title=f"{'' if kernels else 'analytic '}arithmetic intensity (FLOP / DRAM byte)",
                      yaxis_title="achieved FLOP/s", height=640,
                      legend={"orientation": "h", "yanchor": "top", "y": -0.15, "x": 0, "font": {"size": 11}},
                      margin={"b": 40})
    return fig


def _draw_chains(fig: go.Figure, placed: pd.DataFrame) -> None:
    """A star per variant and shape: the whole chain of a call's kernels as one point."""
    chains = chain_points(placed)
    chains = chains[(chains["kernels"] > 1) & (chains["flops"] > 0) & ~chains["l2_resident"].fillna(False)]
    if chains.empty:
        return
    fig.add_trace(go.Scatter(
        x=chains["arithmetic_intensity"], y=chains["achieved_flops_per_s"],
        mode="markers", marker={"symbol": "star", "size": 14, "color": "#ff7f0e"}, name="whole chain of a call",
        customdata=[[b, f"{v} {s}", k, f"{_si(f, 'FLOP')} over {_si(d, 'B')} DRAM in {t / 1e3:.1f} µs",
                     _si(f / (t * 1e-9), "FLOP/s")] for b, v, s, k, f, d, t in
                    zip(chains["bundle"], chains["variant"], chains["shape"], chains["kernels"], chains["flops"],
                        chains["dram_bytes"], chains["duration_ns"])],
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}: %{customdata[2]} kernels as one<br>%{customdata[3]}: "
                      "%{customdata[4]}<extra></extra>"))


@as_text
def occupancy_figure(table: pd.DataFrame) -> go.Figure:
    """Theoretical (ncu and computed) against achieved occupancy, per kernel (numbered: the same
    kernel name recurs within a chain and across bundles)."""
    labels = kernel_labels(table)
    fig = go.Figure()
    for column, name in (("theoretical_occupancy_pct", "theoretical (ncu)"),
                         ("computed_occupancy_pct", "theoretical (computed)"), ("achieved_occupancy_pct", "achieved (ncu)")):
        fig.add_trace(go.Bar(x=labels, y=table[column], name=name, customdata=table["bundle"],
                             hovertemplate=f"%{{x}}<br>{name}: %{{y:.1f}}%<extra>%{{customdata}}</extra>"))
    fig.update_layout(barmode="group", yaxis_title="occupancy %", title="Occupancy per kernel")
    return fit_categories(fig, labels, 480)


def kernel_labels(table: pd.DataFrame) -> list[str]:
    """'3: eager 128x4096 reduce_kernel' — unique per row of ``table``."""
    return [f"{i}: {v} {s} {k}" for i, (v, s, k) in
            enumerate(zip(table["variant"], table["shape"], table["kernel_short"]))]


@as_text
def occupancy_curves_figure(threads: int, registers: int, shared_bytes: int, limits: SmLimits = HOPPER) -> go.Figure:
    """Theoretical occupancy against registers per thread and against block size (every value the
    calculator gives, drawn as steps) on an SM with ``limits`` (the kernel's GPU's: ``occupancy.device_limits``);
    the launch's own configuration marked on each."""
    by_regs = occupancy_curve(threads, shared_bytes, limits=limits)
    by_block = block_size_curve(registers, shared_bytes, limits=limits)
    own = occupancy(threads, registers, shared_bytes, limits)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=by_regs["registers_per_thread"], y=by_regs["theoretical_occupancy_pct"],
                             mode="lines", name=f"vs registers/thread ({threads} threads)", line_shape="hv",
                             hovertemplate="%{x} registers/thread: %{y:.1f}% occupancy<extra></extra>"))
    fig.add_trace(go.Scatter(x=by_block["threads_per_block"], y=by_block["theoretical_occupancy_pct"],
                             mode="lines", name=f"vs block size ({registers} registers)", line_shape="hv",
                             xaxis="x2", hovertemplate="%{x} threads/block: %{y:.1f}% occupancy<extra></extra>"))
    fig.add_trace(go.Scatter(x=[registers], y=[own.theoretical_pct], mode="markers", marker={"size": 12},
                             name=f"this launch: {own.theoretical_pct:.1f}% ({own.limiter})",
                             hovertemplate=f"{registers} registers, {threads} threads, {shared_bytes} B shared: "
                                           "%{y:.1f}%<extra></extra>"))
    fig.update_layout(xaxis={"title": "registers per thread"}, yaxis={"title": "theoretical occupancy %"},
                      xaxis2={"title": "threads per block", "overlaying": "x", "side": "top"}, height=420,
                      title="Occupancy as a function of registers and block size",
                      legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0})
    return fig


@as_text
def fusion_figure(summary: pd.DataFrame, variant_kinds: dict[str, str] | None = None) -> go.Figure:
    """Per shape and variant (one bundle): GPU time, measured and nominal DRAM bytes, launches per call."""
    from plotly.subplots import make_subplots

    colors = variant_colors([str(v) for v in summary["variant"].unique()], variant_kinds or {})
    fig = make_subplots(rows=1, cols=3, subplot_titles=("GPU time (µs)", "DRAM bytes per call (MB)",
                                                        "kernels per call"))
    bundle = str(summary["bundle"].iloc[0]) if len(summary) else ""
    for variant, part in summary.groupby("variant", sort=True):
        color = {"color": colors.get(str(variant), OTHER_COLOR)}
        fig.add_trace(go.Bar(x=part["shape"], y=part["gpu_median_ns"] / 1e3, name=str(variant),
                             legendgroup=str(variant), marker=color,
                             hovertemplate=f"{plain(variant)} %{{x}}: %{{y:,.2f}} µs GPU time<extra>{plain(bundle)}</extra>"),
                      row=1, col=1)
        fig.add_trace(go.Bar(x=part["shape"], y=part["dram_bytes"] / 1e6, name=str(variant),
                             legendgroup=str(variant), showlegend=False, marker=color,
                             hovertemplate=f"{plain(variant)} %{{x}}: %{{y:,.2f}} MB DRAM<extra>{plain(bundle)}</extra>"),
                      row=1, col=2)
        fig.add_trace(go.Bar(x=part["shape"], y=part["kernels_per_call"], name=str(variant),
                             legendgroup=str(variant), showlegend=False, marker=color,
                             hovertemplate=f"{plain(variant)} %{{x}}: %{{y}} kernels per call<extra>{plain(bundle)}</extra>"),
                      row=1, col=3)
    nominal = summary.drop_duplicates("shape")
    fig.add_trace(go.Scatter(x=nominal["shape"], y=nominal["nominal_bytes"] / 1e6, mode="markers",
                             marker={"symbol": "line-ew-open", "size": 30, "color": "black"},
                             name="nominal bytes", hovertemplate="%{x}: %{y:,.2f} MB nominal<extra></extra>"),
                  row=1, col=2)
    # shapes span decades (1x4096 to 32768x8192): log axes keep the small ones visible
    # labels at 1, 2 and 5 of each decade: Plotly's own choice labels every digit, which collide below 500 px
    fig.update_yaxes(type="log", dtick="D2", row=1, col=1)
    fig.update_yaxes(type="log", dtick="D2", row=1, col=2)
    fig.update_layout(barmode="group", height=460, title="Fused against unfused (log axes)",
                      legend={"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0})
    return fig


@as_text
def launches_figure(kernels: pd.DataFrame, variant_kinds: dict[str, str] | None = None) -> go.Figure:
    """Each lane's kernels on a time axis (one call per variant, or one step per stream for a trace
    without variants), with the host launch calls beneath."""
    fig = go.Figure()
    keys = lanes(kernels)
    rows = kernels.assign(lane=kernels[keys].astype(str).agg(" ".join, axis=1) if keys[0] == "step"
                          else kernels["variant"].astype(str))
    colors = variant_colors(sorted(rows["lane"].unique()), variant_kinds or {})
    origin = rows["launch_start_ns"].min() if rows["launch_start_ns"].notna().any() else rows["start_ns"].min()
    for lane, part in rows.groupby("lane", sort=True):
        color = colors.get(str(lane), OTHER_COLOR)
        fig.add_trace(go.Bar(
            y=[f"{lane} GPU"] * len(part), x=part["duration_ns"] / 1e3, base=(part["start_ns"] - origin) / 1e3,
            orientation="h", name=f"{lane} kernels", customdata=part["kernel_short"],
            hovertemplate="%{customdata}: %{x:,.3f} µs<extra></extra>", marker={"color": color}))
        fig.add_trace(go.Bar(
            y=[f"{lane} host"] * len(part), x=part["launch_api_ns"] / 1e3,
            base=(part["launch_start_ns"] - origin) / 1e3, orientation="h", name=f"{lane} launch calls",
            customdata=part["launch_api"], hovertemplate="%{customdata}: %{x:,.3f} µs on the host<extra></extra>",
            marker={"color": color, "opacity": 0.45}))
    fig.update_layout(barmode="overlay", xaxis_title="µs from the first launch call", height=420,
                      title="Launches: host launch calls and GPU kernels")
    return fig


@as_text
def timeline_figure(timeline: pd.DataFrame) -> go.Figure:
    """Busy time split by kind and idle time, per stream (and 'all'), in µs: stacked bars."""
    fig = go.Figure()
    parts = (("computation_ns", "computation", "#1f77b4"), ("communication_ns", "communication", "#9467bd"),
             ("memcpy_ns", "memcpy", "#ff7f0e"), ("memset_ns", "memset", "#bcbd22"), ("idle_ns", "idle", "#d9d9d9"))
    for column, name, color in parts:
        fig.add_trace(go.Bar(x=timeline[column] / 1e3, y=timeline["stream"].astype(str), orientation="h", name=name,
                             marker={"color": color}, hovertemplate=f"{name}: %{{x:,.3f}} µs<extra>stream %{{y}}</extra>"))
    fig.update_layout(barmode="stack", xaxis_title="µs (kinds of busy time can overlap across streams)",
                      yaxis_title="stream", height=260 + 30 * len(timeline), title="GPU timeline")
    return fig


@as_text
def categories_figure(categories: pd.DataFrame) -> go.Figure:
    """GPU time per category (µs), largest first."""
    fig = go.Figure(go.Bar(x=categories["category"], y=categories["time_ns"] / 1e3,
                           customdata=categories[["count", "share_pct"]].to_numpy(),
                           hovertemplate="%{x}: %{y:,.3f} µs, %{customdata[0]} events, %{customdata[1]:.1f}%"
                                         "<extra></extra>"))
    fig.update_layout(yaxis_title="GPU time (µs)", height=360, title="Time by category")
    return fig


@as_text
def diff_figure(by_category: pd.DataFrame) -> go.Figure:
    """Per category: GPU time in A and in B (µs), side by side."""
    fig = go.Figure()
    fig.add_trace(go.Bar(x=by_category["key"], y=by_category["time_ns_a"] / 1e3, name="A",
                         hovertemplate="A %{x}: %{y:,.3f} µs<extra></extra>"))
    fig.add_trace(go.Bar(x=by_category["key"], y=by_category["time_ns_b"] / 1e3, name="B",
                         hovertemplate="B %{x}: %{y:,.3f} µs<extra></extra>"))
    fig.update_layout(barmode="group", yaxis_title="GPU time (µs)", height=380, title="A against B, per category")
    return fig


BREAKDOWN_PARTS = {"GEMM": ("gemm_share", "#1f77b4"), "attention": ("attention_share", "#9467bd"),
                   "memory-bound kernels": ("memory_bound_share", "#ff7f0e")}


@as_text
def module_diff_figure(modules: pd.DataFrame, top: int = 20) -> go.Figure:
    """``fuseprof.analysis.judgements.changes``' modules: the ``top`` by |time delta|, A's and B's GPU time per step (µs)
    side by side, the class of change in the hover."""
    view = modules.head(top).iloc[::-1]
    labels = view["part"].str.split(" / ").str[-2:].str.join(" / ")
    fig = go.Figure()
    for side, color in (("a", "#7f7f7f"), ("b", "#1f77b4")):
        fig.add_trace(go.Bar(y=labels, x=view[f"time_ns_{side}"] / 1e3, name=side.upper(), orientation="h",
                             marker_color=color, customdata=np.stack([view["part"], view["change"]], axis=-1),
                             hovertemplate=f"{side.upper()} %{{customdata[0]}}: %{{x:,.3f}} µs "
                                           "(%{customdata[1]})<extra></extra>"))
    fig.update_layout(barmode="group", xaxis_title="GPU time per step (µs)", title="A against B, per module (aligned)",
                      height=max(380, 120 + 28 * len(view)))
    return fig


@as_text
def breakdown_figure(breakdown: pd.DataFrame, shape: str) -> go.Figure:
    """One shape of ``fuseprof.tables.breakdown.variant_breakdown``: each variant's as-called
    latency split into kernel time by kind (profiler, per call) and the rest (host work and
    launch gaps the GPU waited through)."""
    view = breakdown[breakdown["shape"] == shape].sort_values("as_called_us")
    fig = go.Figure()
    for name, (share, color) in BREAKDOWN_PARTS.items():
        fig.add_trace(go.Bar(y=view["variant"], x=view["kernel_us"] * view[share], name=name, orientation="h",
                             marker_color=color, hovertemplate=f"%{{y}}: {name} %{{x:,.1f}} µs<extra></extra>"))
    waiting = (view["as_called_us"] - view["kernel_us"]).clip(lower=0)
    fig.add_trace(go.Bar(y=view["variant"], x=waiting, name="host and launch gaps", orientation="h",
                         marker_color=OTHER_COLOR, hovertemplate="%{y}: GPU idle %{x:,.1f} µs<extra></extra>"))
    fig.update_layout(barmode="stack", xaxis_title="µs per call (as called)", height=360,
                      title=f"Where one call's time goes, {shape}",
                      legend={"orientation": "h", "y": -0.4, "traceorder": "normal"})
    return fig


@as_text
def steps_figure(steps: pd.DataFrame) -> go.Figure:
    """Per profiler step: busy time by kind and idle time (µs), stacked; the work outside the steps too."""
    fig = go.Figure()
    for column, name, color in (("computation_ns", "computation", "#1f77b4"), ("communication_ns", "communication",
                                "#9467bd"), ("memcpy_ns", "memcpy", "#ff7f0e"), ("idle_ns", "idle", "#d9d9d9")):
        fig.add_trace(go.Bar(x=steps["step"].astype(str), y=steps[column] / 1e3, name=name, marker={"color": color},
                             hovertemplate=f"{name}: %{{y:,.3f}} µs<extra>%{{x}}</extra>"))
    fig.update_layout(barmode="stack", yaxis_title="µs", height=360, title="Profiler steps")
    return fig


PHASE_COLORS = {"forward": "#1f77b4", "backward": "#ff7f0e", "recomputation": "#e377c2", "optimizer": "#2ca02c",
                "communication": "#9467bd", "other": "#b0b0b0"}


@as_text
def phases_figure(phases: pd.DataFrame) -> go.Figure:
    """Per profiler step: GPU time by phase (µs), stacked, in the phases' order."""
    fig = go.Figure()
    for phase, color in PHASE_COLORS.items():
        part = phases[phases["phase"] == phase]
        if not part.empty:
            fig.add_trace(go.Bar(x=part["step"].astype(str), y=part["time_ns"] / 1e3, name=phase,
                                 marker={"color": color}, hovertemplate=f"{phase}: %{{y:,.3f}} µs<extra>%{{x}}</extra>"))
    fig.update_layout(barmode="stack", yaxis_title="GPU µs", height=360, title="Phases of the training step")
    return fig


@as_text
def memory_figure(timeline: pd.DataFrame) -> go.Figure:
    """Allocated and reserved device memory (GB) over the trace's time (ms from its first record), per device."""
    fig = go.Figure()
    first = int(timeline["start_ns"].min()) if not timeline.empty else 0
    for device, part in timeline.groupby("device", sort=False):
        x = (part["start_ns"].astype("int64") - first) / 1e6
        for column, dash in (("total_allocated", "solid"), ("total_reserved", "dot")):
            label = f"{device} {column.removeprefix('total_')}"
            fig.add_trace(go.Scatter(x=x, y=part[column].astype("float64") / 1e9, mode="lines", name=label,
                                     line={"dash": dash, "shape": "hv"},
                                     hovertemplate=f"{plain(label)}: %{{y:,.3f}} GB at %{{x:,.3f}} ms<extra></extra>"))
    fig.update_layout(xaxis_title="ms from the first record", yaxis_title="GB", height=360, title="Device memory")
    return fig
