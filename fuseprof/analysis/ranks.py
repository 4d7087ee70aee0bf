"""Several ranks of one distributed run (one torch.profiler trace per rank): communication per rank
and the skew of each collective across ranks.

Each rank's collectives come with its analysis (``fuseprof.analysis.collectives``: communication kernels
with their bytes, matched across ranks by their number on their communicator, else by their order on
it). Traces of one host share its clock:
    skew_ns     = last rank's kernel start − first rank's kernel start (the last to arrive sets the time)
    transfer_ns = last end − last start (the collective's own time once everyone is there)
    wait_ns     = per rank, the last start − this rank's start (time spent waiting inside the kernel)
"""

from __future__ import annotations

import pandas as pd

from fuseprof.analysis.analyze import TraceAnalysis


def rank_summary(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per rank: span, busy, computation, communication and its exposed part (not overlapped by
    computation), and communication's share of busy time."""
    rows = []
    for r in results:
        t = r.timeline.set_index("stream").loc["all"]
        rows.append({"rank": r.rank, "trace": r.name, "span_ns": t["span_ns"], "busy_ns": t["busy_ns"],
                     "computation_ns": t["computation_ns"], "communication_ns": t["communication_ns"],
                     "exposed_communication_ns": t["exposed_communication_ns"],
                     "communication_share_pct": 100 * t["communication_ns"] / t["busy_ns"] if t["busy_ns"] else 0.0})
    return pd.DataFrame(rows).sort_values("rank").reset_index(drop=True)


def collective_skew(results: list[TraceAnalysis]) -> pd.DataFrame:
    """Per collective (matched across ranks by ``match``: its number on its communicator): bytes, skew
    across ranks, the last rank to arrive, the transfer time once all are there, and each rank's wait."""
    per_rank = pd.concat([r.collectives for r in results if not r.collectives.empty], ignore_index=True) \
        if any(not r.collectives.empty for r in results) else pd.DataFrame()
    if per_rank.empty:
        return per_rank
    ranks = per_rank["rank"].nunique()
    rows = []
    for seq, (match, group) in enumerate(per_rank.groupby("match", sort=False)):
        if len(group) < ranks:
            continue  # a rank's trace ended before this collective
        last = group.loc[group["start_ns"].idxmax()]
        waits = {f"wait_ns_rank{int(r)}": int(last["start_ns"] - s)  # in rank order: 0, 1, 2, …, 10, not 0, 1, 10
                 for r, s in sorted(zip(group["rank"].astype(int), group["start_ns"]))}
        rows.append({"seq": seq, "match": match, "collective": group["collective"].iloc[0],
                     "bytes": group["bytes"].iloc[0], "skew_ns": int(group["start_ns"].max() - group["start_ns"].min()),
                     "last_rank": int(last["rank"]), "transfer_ns": int(group["end_ns"].max() - group["start_ns"].max()),
                     **waits})
    return pd.DataFrame(rows)
