"""What bounds the run without the profiler (and as traced), where the time goes, and the three things worth
doing, each with its one saving (``fuseprof.analysis.paths.savings``): the answer a reader wants first, drawn from the
idle, unprofiled, categories, top ops, fusion and slow-op sections."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.idle import TERMS, TRACED_VERDICTS, VERDICTS, verdict_of
from fuseprof.analysis.facts.unprofiled import gpu_bound_steps, host_scale
from fuseprof.analysis.judgements.cause_advice import cause_rows, graphs_after_syncs, sync_why
from fuseprof.analysis.paths.replay_compile import ReplayCompile, replay_compile
from fuseprof.analysis.paths.savings import saving, scaled_graph_part
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def launch_removed(estimate: pd.DataFrame | None, cause: str = "launch") -> float:
    """The idle of a cause (launch, data, sync) that is not there without the profiler, over the steps
    (``fuseprof.analysis.facts.unprofiled``; sync: ``sync_saving``)."""
    columns = [f"idle_{cause}_ns", f"idle_{cause}_unprofiled_ns"]
    if estimate is None or estimate.empty or not set(columns) <= set(estimate):
        return 0.0
    return float((estimate[columns[0]] - estimate[columns[1]]).sum())


# The un-profiled truth's rule (tests/fixtures/truth_unprofiled/*.truth.json, "rule"; issue 59 point 5): "GPU-bound
# when busy >= 80% of the un-profiled step; else the largest idle cause"
GPU_BOUND_SHARE = 0.8


def bound(idle: pd.DataFrame, estimate: pd.DataFrame | None = None) -> str:
    """What bounds the window without the profiler, by the rule its truth states (``GPU_BOUND_SHARE``): GPU-bound
    (or communication-bound, ``idle.verdict_of``) where busy, as the kernels take queued back to back
    (``queued_busy``), is at least 80% of busy and idle by cause summed over the window's rows, else the largest idle
    cause. The idle is without the profiler where ``estimate`` (the unprofiled table) is given: the launch and data
    idle less the profiler's host time, the sync idle what removing the syncs saves
    (``fuseprof.analysis.paths.sync_saving``). A GPU 70% busy whose idle is mostly syncs is sync-bound: that idle is
    what a user can take off the step. ``bound_as_traced`` keeps the labels' rule."""
    if idle.empty:
        return "unknown"
    totals = {k: float(idle[k].sum()) for k in TERMS if k in idle}
    for cause in ("launch", "data", "sync"):
        if f"idle_{cause}_ns" in totals:
            totals[f"idle_{cause}_ns"] -= launch_removed(estimate, cause)
    busy, totals = queued_busy(totals, float(idle["idle_queued_ns"].sum()) if "idle_queued_ns" in idle else 0.0)
    causes = {k: totals.get(k, 0.0) for k in VERDICTS if k != "busy_ns"}
    if busy >= GPU_BOUND_SHARE * (busy + sum(causes.values())) or max(causes.values()) <= 0:
        return verdict_of({**totals, **dict.fromkeys(causes, 0.0)})  # GPU-bound, or communication-bound
    return VERDICTS[max(causes, key=lambda k: causes[k])]


def queued_busy(totals: dict[str, float], queued: float) -> tuple[float, dict[str, float]]:
    """Busy as the truth measures it, the kernels queued back to back: busy with the gaps' ``queued`` latency
    (``fuseprof.analysis.facts.queued``), taken from the idle the window has left without the profiler, from its
    ``other`` part first (a queued gap is all other), then its launch part; and ``totals`` with that idle less."""
    left, busy = dict(totals), totals.get("busy_ns", 0.0)
    for cause in ("idle_other_ns", "idle_launch_ns"):
        taken = min(max(left.get(cause, 0.0), 0.0), queued)
        left[cause], busy, queued = left.get(cause, 0.0) - taken, busy + taken, queued - taken
    return busy, left


def bound_as_traced(idle: pd.DataFrame) -> str:
    """What bounds the window as the trace recorded it (``idle.TRACED_VERDICTS``: each gap read whole), summed over
    its steps; the gaps between steps count only where the window has no steps."""
    rows = idle[idle["step"].astype(str) != "(between steps)"] if len(idle) > 1 else idle
    if rows.empty:
        return "unknown"
    totals = {k: float(rows[k].sum()) for k in TRACED_VERDICTS}
    return TRACED_VERDICTS[max(totals, key=lambda k: totals[k])]


def worth_doing(fusion: pd.DataFrame, idle: pd.DataFrame, slow: pd.DataFrame, span_ns: float,
                n: int = 3, estimate: pd.DataFrame | None = None, compiled: ReplayCompile | None = None
                ) -> pd.DataFrame:
    """The candidates, ranked by their one saving (the step time removed without the profiler,
    ``fuseprof.analysis.paths.savings``; ``gpu_saving_ns`` beside it): each fusion row, the host's launch gaps (CUDA
    graphs where the work after them is launched kernel by kernel; the host's own work where a graph launch
    waited), the syncs, the replayed eager kernels' runs compiled (``compiled``:
    ``fuseprof.analysis.paths.replay_compile``), and the slow ops (their time above what their roof allows)."""
    one = saving(fusion)
    rows = [{"what": f"fuse: {r['class']} — {r['signature'][:160]} ×{r['count']}", "saving_ns": s,
             "gpu_saving_ns": r["saving_ns"], "why": f"{r['measured_ns'] / 1e3:,.1f} µs now; {r['known_fusion']}"}
            for (_, r), s in zip(fusion.iterrows(), one) if s == s] if not fusion.empty else []
    if not idle.empty:
        eager, before_graphs = scaled_graph_part(idle, estimate if estimate is not None else pd.DataFrame())
        nothing = float("nan")  # the GPU's own work is unchanged
        rows.append({"what": "close the host-bound gaps (CUDA graphs, torch.compile mode='reduce-overhead')",
                     "saving_ns": eager, "gpu_saving_ns": nothing,
                     "why": "the GPU waited for the next launch"})
        rows.append({"what": "shorten the host's work between graph replays (scheduling, sampling, input copies)",
                     "saving_ns": before_graphs, "gpu_saving_ns": nothing,
                     "why": "the GPU waited for the next graph launch: the work is already CUDA graphs"})
        rows.append({"what": "remove synchronisations (.item(), .cpu(), cudaStreamSynchronize)",
                     "saving_ns": float(idle["idle_sync_ns"].sum()) - launch_removed(estimate, "sync"),
                     "gpu_saving_ns": nothing, "why": sync_why(idle)})
        rows.append({"what": "overlap data loading with the GPU (DataLoader num_workers, pin_memory, prefetch)",
                     "saving_ns": float(idle["idle_data_ns"].sum()) - launch_removed(estimate, "data"),
                     "gpu_saving_ns": nothing,
                     "why": "the GPU waited for the next batch"})
        rows.append({"what": "keep allocations out of the step (the caching allocator's warm pool, CUDA graphs)",
                     "saving_ns": float(idle["idle_alloc_ns"].sum()), "gpu_saving_ns": nothing,
                     "why": "the host sat in cudaMalloc/cudaFree"})
        rows.extend(cause_rows(idle))
    if compiled is not None and compiled.runs:
        rows.append({"what": f"compile the replayed eager kernels (torch.compile before the capture): "
                             f"{compiled.kernels} memory-bound kernels in {compiled.runs} runs, one kernel a run",
                     "saving_ns": compiled.step_saving_ns, "gpu_saving_ns": compiled.gpu_saving_ns,
                     "why": "graph-replayed elementwise, copy and reduction kernels, one node each"})
    for _, r in slow.iterrows() if not slow.empty else []:
        above = r["time_ns"] * (1 - r["pct_of_roof"] / 100)
        rows.append({"what": f"tune {r['signature'][:120]}", "saving_ns": above, "gpu_saving_ns": above,
                     "why": f"at {r['pct_of_roof']:.1f}% of its roof"})
    frame = pd.DataFrame(rows, columns=["what", "saving_ns", "gpu_saving_ns", "why"])
    frame = graphs_after_syncs(frame[frame["saving_ns"] > 0].sort_values("saving_ns", ascending=False), idle).head(n)
    return frame.assign(share_of_span_pct=100 * frame["saving_ns"] / span_ns if span_ns else float("nan"))


def _top(frame: pd.DataFrame, name: str) -> tuple[str, float]:
    if frame.empty:
        return "", float("nan")
    return str(frame[name].iloc[0]), float(frame["share_pct"].iloc[0])


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    built = context.built
    whole, idle, estimate = built["timeline"].iloc[0], built["idle"], built["unprofiled"]
    span = int(whole["span_ns"])
    removed = sum(launch_removed(estimate, cause) for cause in ("launch", "data", "sync"))
    queued = float(idle["idle_queued_ns"].sum()) if "idle_queued_ns" in idle else 0.0  # the bound's busy, as queued
    spans = {f"span_unprofiled{s}_ns": span - int((estimate["span_ns"] - estimate[f"step_unprofiled{s}_ns"]).sum())
             if len(estimate) else span for s in ("", "_low", "_high")}
    fusion = built["fusion"]
    held = {m for members in fusion["members"] for m in members} if "members" in fusion else set()
    compiled = replay_compile(context.step_graphs(), context.events, host_scale(estimate), held,
                              gpu_bound_steps(estimate))
    worth = worth_doing(fusion, idle, built["slow_ops"], float(spans["span_unprofiled_ns"]),
                        estimate=estimate, compiled=compiled)
    category, category_pct = _top(built["categories"], "category")
    op, op_pct = _top(built["top_ops"], "signature")
    verdict = pd.DataFrame([{
        "bound": bound(idle, estimate), "bound_as_traced": bound_as_traced(idle), "busy_ns": int(whole["busy_ns"]),
        "span_ns": span, "busy_pct": float(whole["busy_pct"]), **spans,
        "busy_unprofiled_pct": min(100.0, 100 * (float(whole["busy_ns"]) + queued) / spans["span_unprofiled_ns"])
        if spans["span_unprofiled_ns"] else float("nan"),
        "host_removed_ns": int(estimate["host_removed_ns"].sum()) if len(estimate) else 0,
        "launch_idle_removed_ns": int(removed),
        "estimate": str(estimate["source"].iloc[0]) if len(estimate) else "",
        "top_category": category, "top_category_pct": category_pct, "top_op": op, "top_op_pct": op_pct,
        "first_advice": str(worth["what"].iloc[0]) if len(worth) else "",
        "first_saving_ns": float(worth["saving_ns"].iloc[0]) if len(worth) else float("nan"),
        "first_gpu_saving_ns": float(worth["gpu_saving_ns"].iloc[0]) if len(worth) else float("nan")}])
    return {"verdict": verdict, "worth_doing": worth}


def headline(verdict: pd.DataFrame) -> str:
    """The verdict box in one paragraph: the bound without the profiler (and as traced), the step's span then,
    where the GPU time goes, and the first advice with its saving."""
    if verdict.empty:
        return ""
    v = verdict.iloc[0]
    text = (f"{v['bound']} without the profiler (as traced: {v['bound_as_traced']}): GPU busy "
            f"{v['busy_ns'] / 1e3:,.1f} µs of a {v['span_unprofiled_ns'] / 1e3:,.1f} µs span "
            f"({v['span_unprofiled_low_ns'] / 1e3:,.1f}–{v['span_unprofiled_high_ns'] / 1e3:,.1f}) without the "
            f"profiler, {v['span_ns'] / 1e3:,.1f} µs as traced ({v['estimate']}).")
    if v["top_category"]:
        text += (f" The GPU's time goes to {v['top_category']} ({v['top_category_pct']:.1f}%); the top op is "
                 f"{str(v['top_op'])[:100]} ({v['top_op_pct']:.1f}%).")
    if v["first_advice"]:
        gpu = v["first_gpu_saving_ns"]
        beside = f"; GPU time {gpu / 1e3:,.1f} µs" if gpu == gpu and abs(gpu - v["first_saving_ns"]) >= 1e3 else ""
        text += f" First: {v['first_advice']} — saves {v['first_saving_ns'] / 1e3:,.1f} µs of step time{beside}."
    return text


SECTION = Section(
    name="verdict", order=0, build=_build,
    needs=("timeline", "idle", "unprofiled", "categories", "top_ops", "fusion", "slow_ops"),
    description="What bounds the run without the profiler (GPU-bound from 80% busy, else the largest idle cause: host "
                "launches, syncs, data loading, the allocator, event waits; the idle section's causes summed over its "
                "steps, the launch idle less the host time the "
                "profiler added: fuseprof/analysis/facts/unprofiled.py) and as traced, where the GPU time goes (top category "
                "and op), and the three things worth doing, ranked by their one saving — the step time removed "
                "without the profiler, the GPU time beside it (fuseprof/analysis/paths/savings.py: fusion rows, CUDA graphs "
                "for host-bound gaps, removing syncs, tuning slow ops). Sections: fuseprof/analysis/running/sections/verdict.py.",
    tables=(
        Table("verdict", "Verdict: what bounds the run", (
            Column("bound without profiler", "bound"), Column("as traced", "bound_as_traced"),
            Column("busy µs", "busy_ns", "us"),
            Column("span µs", "span_ns", "us"), Column("busy %", "busy_pct", "round:1"),
            Column("span without profiler µs", "span_unprofiled_ns", "us"),
            Column("busy % without profiler (queued)", "busy_unprofiled_pct", "round:1")), summary=headline),
        Table("worth_doing", "Worth doing, by the step time each removes without the profiler", (
            Column("what", "what", "text:100"), Column("saving µs", "saving_ns", "us"),
            Column("GPU time µs", "gpu_saving_ns", "us"),
            Column("% of span", "share_of_span_pct", "round:1"), Column("why", "why", "text:60"))),
    ))
