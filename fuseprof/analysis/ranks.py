"""Several ranks of one distributed run (one torch.profiler trace per rank): communication per rank
and the skew of each collective across ranks.

Collectives are NCCL kernels (``kind == 'communication'``) with the profiler's args: the collective's
name and its input element count and dtype (bytes = elements × dtype size). A collective is the k-th
one on each rank (every rank issues them in the same order). Traces of one host share its clock:
    skew_ns     = last rank's kernel start − first rank's kernel start (the last to arrive sets the time)
    transfer_ns = last end − last start (the collective's own time once everyone is there)
    wait_ns     = per rank, the last start − this rank's start (time spent waiting inside the kernel)
"""

from __future__ import annotations

import pandas as pd

from fuseprof.analysis.analyze import TraceAnalysis

NCCL_DTYPE_BYTES = {"BFloat16": 2, "Half": 2, "Float": 4, "Double": 8, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
                    "Int": 4, "Long": 8, "Char": 1, "Byte": 1, "Bool": 1}


def collectives(result: TraceAnalysis) -> pd.DataFrame:
    """One row per NCCL kernel of one rank, in issue order."""
    comm = result.events[result.events["kind"] == "communication"].sort_values("start_ns").reset_index(drop=True)
    elements = comm["in_nelems"].astype("Float64")
    size = comm["nccl_dtype"].map(NCCL_DTYPE_BYTES).astype("Float64")
    return pd.DataFrame({
        "rank": result.rank, "seq": range(len(comm)), "collective": comm["collective"].fillna(comm["name"].str[:40]),
        "bytes": elements * size, "dtype": comm["nccl_dtype"], "group_size": comm["group_size"],
        "start_ns": comm["start_ns"].to_numpy(), "dur_ns": comm["dur_ns"].to_numpy(),
        "end_ns": (comm["start_ns"] + comm["dur_ns"]).to_numpy()})


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
    """Per collective (k-th on every rank): bytes, skew across ranks, the last rank to arrive, the
    transfer time once all are there, and each rank's wait."""
    per_rank = pd.concat([collectives(r) for r in results], ignore_index=True)
    if per_rank.empty:
        return per_rank
    ranks = per_rank["rank"].nunique()
    rows = []
    for seq, group in per_rank.groupby("seq"):
        if len(group) < ranks:
            continue  # a rank's trace ended before this collective
        last = group.loc[group["start_ns"].idxmax()]
        waits = {f"wait_ns_rank{int(r)}": int(last["start_ns"] - s)  # in rank order: 0, 1, 2, …, 10, not 0, 1, 10
                 for r, s in sorted(zip(group["rank"].astype(int), group["start_ns"]))}
        rows.append({"seq": seq, "collective": group["collective"].iloc[0], "bytes": group["bytes"].iloc[0],
                     "skew_ns": int(group["start_ns"].max() - group["start_ns"].min()), "last_rank": int(last["rank"]),
                     "transfer_ns": int(group["end_ns"].max() - group["start_ns"].max()), **waits})
    return pd.DataFrame(rows)
