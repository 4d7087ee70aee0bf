"""Every fusion opportunity of a trace, of every class, ranked together by predicted saving.

Classes: the optimizer step (``optimizer``: an unfused step beside a fused one over the same parameters),
memory-bound chains (``fusion``; RoPE + KV-cache write and sampling chains named apart), eager attention →
SDPA, horizontal GEMMs and GEMM epilogues (``fusion_classes``: dataflow patterns of the op graph). Each kernel
belongs to at most one row, so savings never count a kernel twice: the optimizer step and eager attention
claim their kernels first, then the chains, then horizontal GEMMs and epilogues take what is left. For
every row:

    saving_ns         = measured_ns − predicted_fused_ns   (rows that save nothing are left out;
                        a row whose bytes are unknown has no prediction and ranks last)
    share_of_busy_pct = saving_ns / GPU busy time;  share_of_span_pct = saving_ns / the window's span
    launches_saved    = the members launched one by one − count  (an epilogue: its whole kernel; a kernel
                        replayed from a CUDA graph costs no launch of its own, so a replay saves none)
    host_launch_ns_saved = launches_saved · the median host time of one launch call

Slow ops are kept apart (``slow_ops``): op signatures below ``SLOW_PCT`` % of their roof and at least
``SLOW_SHARE`` % of busy time that no opportunity row holds. A kernel far from its roof is a kernel to
tune, not a fusion saving.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.graphs import is_graph_launch
from fuseprof.analysis.facts.opgraph import OpGraph
from fuseprof.analysis.facts.units import Units, window_units
from fuseprof.analysis.judgements.fusion import CopyModel, chain_groups
from fuseprof.analysis.judgements.fusion_classes import CLAIMING, class_instances, class_opportunities
from fuseprof.analysis.judgements.optimizer import CLASS as OPTIMIZER
from fuseprof.analysis.judgements.optimizer import optimizer_instances
from fuseprof.model.registry import Registry
from fuseprof.model.roofline import Roof
from fuseprof.parse.trace_events import TraceTables

SLOW_PCT, SLOW_SHARE = 30.0, 1.0


def opportunities(events: pd.DataFrame, timeline: pd.DataFrame, copy: CopyModel, roof: Roof,
                  registry: Registry, graph: OpGraph | None = None, units: Units | None = None,
                  tables: TraceTables | None = None) -> pd.DataFrame:
    """One row per opportunity group (class, signature, count, kernels, measured, bytes, predicted,
    saving, shares, launches, the kernel that already fuses it), best first; the optimizer step needs the
    decoded ``tables`` (its ranges and parameters)."""
    units = units if units is not None else window_units(events, graph, registry)
    steps = optimizer_instances(events, tables, registry, copy) if tables is not None else []
    instances = steps + class_instances(units, roof, copy, registry)
    claimed = {m for r in instances if r["class"] in (*CLAIMING, OPTIMIZER)
               for m in r["members"]}  # type: ignore[attr-defined]
    chains = chain_groups(events, copy, registry, claimed, graph)
    taken = {m for members in chains.get("members", []) for m in members}
    classes = class_opportunities(instances, taken)
    parts = [f for f in (chains, classes) if not f.empty]
    if not parts:
        return pd.DataFrame()
    frame = pd.concat(parts, ignore_index=True)
    frame["memory_bound_chain"] = frame.get("memory_bound_chain", pd.Series(False, index=frame.index)).fillna(False) \
        .astype(bool)
    frame["saving_ns"] = frame["measured_ns"] - frame["predicted_fused_ns"]
    frame = frame[~(frame["saving_ns"] <= 0)].copy()
    whole = timeline.set_index("stream").loc["all"]
    frame["share_of_busy_pct"] = 100 * frame["saving_ns"] / whole["busy_ns"]
    frame["share_of_span_pct"] = 100 * frame["saving_ns"] / whole["span_ns"]
    epilogue = frame["class"] == "GEMM epilogue"
    frame["launches"] = frame["count"] * frame["kernels_per_chain"]
    replayed = is_graph_launch(events["launch_api"]) if "launch_api" in events else pd.Series(False, index=events.index)
    launched = _launched(frame["members"], events.index, replayed.to_numpy(bool))
    frame["launches_saved"] = [max(0, n - (0 if e else c)) if n else 0
                               for n, c, e in zip(launched, frame["count"], epilogue)]
    one_launch = events.loc[~replayed, "launch_dur_ns"].astype("float64").median() if (~replayed).any() else 0.0
    frame["host_launch_ns_saved"] = frame["launches_saved"] * float(one_launch if one_launch == one_launch else 0.0)
    frame["fixed_ns"] = copy.fixed_ns
    frame["copy_bytes_per_s"] = copy.bytes_per_s
    frame["rate_source"] = copy.source
    return frame.sort_values("saving_ns", ascending=False, na_position="last").reset_index(drop=True)


def _launched(members: pd.Series, index: pd.Index, replayed: np.ndarray) -> list[int]:
    """Per row, how many of its members were launched one by one: not replayed from a CUDA graph (a member that
    is no event counts as launched). Found by position in the events' index (unique: an index with a repeated label
    is refused, as a reindex refused it), not by a Series reindexed per row."""
    out = []
    for labels in members:
        at = index.get_indexer(list(labels))
        out.append(int(np.count_nonzero(at < 0) + np.count_nonzero(~replayed[at[at >= 0]])))
    return out


def slow_ops(op_roofline: pd.DataFrame, fusion: pd.DataFrame, busy_ns: float) -> pd.DataFrame:
    """Op signatures far below their roof (< ``SLOW_PCT`` %) holding ≥ ``SLOW_SHARE`` % of busy time,
    whose op no fusion row names."""
    if op_roofline.empty:
        return pd.DataFrame()
    in_fusion = {op.split(" (")[0].strip() for sig in fusion.get("signature", []) for part in sig.split(" → ")
                 for op in part.split(" + ")}
    share = 100 * op_roofline["time_ns"] / busy_ns if busy_ns else op_roofline["time_ns"] * 0
    slow = op_roofline[(op_roofline["pct_of_roof"] < SLOW_PCT) & (share >= SLOW_SHARE)
                       & ~op_roofline["op"].isin(in_fusion)]
    return slow.assign(share_of_busy_pct=share[slow.index])[
        ["signature", "op", "calls", "time_ns", "share_of_busy_pct", "pct_of_roof", "bound", "roof_pipe"]
    ].reset_index(drop=True)
