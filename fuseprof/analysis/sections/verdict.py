"""What bounds the run, and the three things worth doing, with their predicted savings: the answer a reader
wants first, drawn from the idle, fusion and slow-op sections."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.cause_advice import cause_rows, graphs_after_syncs, sync_why
from fuseprof.analysis.idle import TERMS, TRACED_VERDICTS, verdict_of
from fuseprof.analysis.sections import Column, Context, Section, Table


def bound(idle: pd.DataFrame) -> str:
    """What bounds the window: the largest of busy time and idle time by cause, summed over its steps."""
    if idle.empty:
        return "unknown"
    totals = {k: float(idle[k].sum()) for k in TERMS if k in idle}
    return verdict_of(totals)


def bound_as_traced(idle: pd.DataFrame) -> str:
    """What bounds the window as the trace recorded it (``idle.TRACED_VERDICTS``: each gap read whole), summed over
    its steps; the gaps between steps count only where the window has no steps."""
    rows = idle[idle["step"].astype(str) != "(between steps)"] if len(idle) > 1 else idle
    if rows.empty:
        return "unknown"
    totals = {k: float(rows[k].sum()) for k in TRACED_VERDICTS}
    return TRACED_VERDICTS[max(totals, key=lambda k: totals[k])]


def worth_doing(fusion: pd.DataFrame, idle: pd.DataFrame, slow: pd.DataFrame, span_ns: float,
                n: int = 3) -> pd.DataFrame:
    """The candidates, ranked by predicted saving: each fusion row, the host's launch gaps (CUDA graphs where
    the work after them is launched kernel by kernel; the host's own work where a graph launch waited), the syncs,
    and the slow ops (their time above what their roof allows)."""
    rows = [{"what": f"fuse: {r['class']} — {r['signature'][:160]} ×{r['count']}", "saving_ns": r["saving_ns"],
             "why": f"{r['measured_ns'] / 1e3:,.1f} µs now; {r['known_fusion']}"}
            for _, r in fusion.dropna(subset=["saving_ns"]).iterrows()] if not fusion.empty else []
    if not idle.empty:
        before_graphs = float(idle["idle_launch_graph_ns"].sum())
        rows.append({"what": "close the host-bound gaps (CUDA graphs, torch.compile mode='reduce-overhead')",
                     "saving_ns": float(idle["idle_launch_ns"].sum() - idle["idle_startup_ns"].sum()) - before_graphs,
                     "why": "the GPU waited for the next launch"})
        rows.append({"what": "shorten the host's work between graph replays (scheduling, sampling, input copies)",
                     "saving_ns": before_graphs,
                     "why": "the GPU waited for the next graph launch: the work is already CUDA graphs"})
        rows.append({"what": "remove synchronisations (.item(), .cpu(), cudaStreamSynchronize)",
                     "saving_ns": float(idle["idle_sync_ns"].sum()), "why": sync_why(idle)})
        rows.append({"what": "overlap data loading with the GPU (DataLoader num_workers, pin_memory, prefetch)",
                     "saving_ns": float(idle["idle_data_ns"].sum()), "why": "the GPU waited for the next batch"})
        rows.append({"what": "keep allocations out of the step (the caching allocator's warm pool, CUDA graphs)",
                     "saving_ns": float(idle["idle_alloc_ns"].sum()), "why": "the host sat in cudaMalloc/cudaFree"})
        rows.extend(cause_rows(idle))
    for _, r in slow.iterrows() if not slow.empty else []:
        rows.append({"what": f"tune {r['signature'][:120]}", "saving_ns": r["time_ns"] * (1 - r["pct_of_roof"] / 100),
                     "why": f"at {r['pct_of_roof']:.1f}% of its roof"})
    frame = pd.DataFrame(rows, columns=["what", "saving_ns", "why"])
    frame = graphs_after_syncs(frame[frame["saving_ns"] > 0].sort_values("saving_ns", ascending=False), idle).head(n)
    return frame.assign(share_of_span_pct=100 * frame["saving_ns"] / span_ns if span_ns else float("nan"))


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    built = context.built
    whole = built["timeline"].iloc[0]
    verdict = pd.DataFrame([{"bound": bound(built["idle"]), "bound_as_traced": bound_as_traced(built["idle"]),
                             "busy_ns": int(whole["busy_ns"]),
                             "span_ns": int(whole["span_ns"]), "busy_pct": float(whole["busy_pct"])}])
    return {"verdict": verdict, "worth_doing": worth_doing(built["fusion"], built["idle"], built["slow_ops"],
                                                           float(whole["span_ns"]))}


SECTION = Section(
    name="verdict", order=0, build=_build, needs=("timeline", "idle", "fusion", "slow_ops"),
    description="What bounds the run (GPU, host launches, syncs, data loading, the allocator, event waits: the idle "
                "section's causes summed over its "
                "steps) and the three things worth doing, ranked by predicted saving (fusion rows, CUDA graphs for "
                "host-bound gaps, removing syncs, tuning slow ops). Sections: fuseprof/analysis/sections/verdict.py.",
    tables=(
        Table("verdict", "Verdict: what bounds the run", (
            Column("bound", "bound"), Column("as traced", "bound_as_traced"), Column("busy µs", "busy_ns", "us"),
            Column("span µs", "span_ns", "us"),
            Column("busy %", "busy_pct", "round:1"))),
        Table("worth_doing", "Worth doing, by predicted saving", (
            Column("what", "what", "text:100"), Column("saving µs", "saving_ns", "us"),
            Column("% of span", "share_of_span_pct", "round:1"), Column("why", "why", "text:60"))),
    ))
