"""One rank's collectives, each with the computation its rank ran since the previous one.

A collective is a communication kernel (NCCL, RCCL, a custom all-reduce: ``kind == 'communication'``)
with the profiler's args: the collective's name, its input element count and dtype (bytes = elements
× dtype size), its communicator (``Process Group Name``) and, where the trace records it, its number
on that communicator (``Seq``), its launching op's ``Input Dims`` (``shape``) and its profiler step. Across ranks a
collective is matched by that number, else by its kind, size and end (``fuseprof.analysis.facts.collective_match``):
``match`` names it either way.

``launch_ns`` is when the host launched it (the launch call's start). ``compute_before_ns`` is, per
category, the time of the computation kernels that started after the previous collective on this rank
started and before this one: what a late rank did instead of
arriving (``fuseprof.analysis.facts.ranks.stragglers`` compares it with the other ranks').
"""

from __future__ import annotations

import numpy as np
import pandas as pd

NCCL_DTYPE_BYTES = {"BFloat16": 2, "Half": 2, "Float": 4, "Double": 8, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
                    "Int": 4, "Long": 8, "Char": 1, "Byte": 1, "Bool": 1}
COLUMNS = ["rank", "match", "communicator", "order", "seq", "collective", "bytes", "shape", "dtype", "group_size",
           "step", "start_ns", "dur_ns", "end_ns", "launch_ns", "compute_before_ns"]


_READ = frozenset(("communicator", "seq", "in_nelems", "nccl_dtype", "collective", "name", "group_size", "start_ns",
                   "dur_ns", "launch_start_ns", "input_dims", "profiler_step"))  # what ``collectives`` reads of a communication kernel's row


def collectives(events: pd.DataFrame, rank: int | None) -> pd.DataFrame:
    """One row per communication kernel of one rank, in issue order (columns in ``COLUMNS``)."""
    mine = (events["kind"] == "communication").to_numpy(bool)
    if not mine.any():
        return pd.DataFrame(columns=COLUMNS)
    read = [c for c in events.columns if c in _READ]  # the columns read, not the events' forty: a third the cost
    comm = events.loc[mine, read].sort_values("start_ns", kind="stable").reset_index(drop=True)
    communicator = (comm["communicator"].astype("string").fillna("") if "communicator" in comm
                    else pd.Series("", index=comm.index, dtype="string"))
    order = comm.groupby(communicator, sort=False).cumcount()
    seq = comm["seq"].astype("Int64") if "seq" in comm else pd.Series(pd.NA, index=comm.index, dtype="Int64")
    number = seq.astype("string").fillna("order " + order.astype(str))
    elements = comm["in_nelems"].astype("Float64")
    size = comm["nccl_dtype"].map(NCCL_DTYPE_BYTES).astype("Float64")
    return pd.DataFrame({
        "rank": rank, "match": communicator + "#" + number, "communicator": communicator, "order": order,
        "seq": seq, "collective": comm["collective"].fillna(comm["name"].str[:40]), "bytes": elements * size,
        "shape": _texts(comm, "input_dims"), "dtype": comm["nccl_dtype"], "group_size": comm["group_size"],
        "step": _texts(comm, "profiler_step"), "start_ns": comm["start_ns"].to_numpy(),
        "dur_ns": comm["dur_ns"].to_numpy(), "end_ns": (comm["start_ns"] + comm["dur_ns"]).to_numpy(),
        "launch_ns": comm["launch_start_ns"].astype("Int64").to_numpy(),  # integers: exact on any clock
        "compute_before_ns": _compute_before(events, comm["start_ns"].to_numpy(np.int64))}, columns=COLUMNS)


def _texts(comm: pd.DataFrame, column: str) -> pd.Series:
    """A column as text (missing: NA), or all NA where the events lack it."""
    if column not in comm:
        return pd.Series(pd.NA, index=comm.index, dtype="string")
    values = comm[column]
    return pd.Series([None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else str(v) for v in values],
                     index=comm.index, dtype="string")


def _compute_before(events: pd.DataFrame, starts: np.ndarray) -> list[dict[str, int]]:
    """Per collective, the computation kernel time by category since the previous collective started."""
    compute = (events["kind"] == "kernel").to_numpy(bool)  # on arrays: a filtered frame costs ~1 ms whatever its rows
    nxt = np.searchsorted(starts, events["start_ns"].to_numpy(np.int64)[compute], side="left")  # the collective after
    inside = nxt < len(starts)
    out: list[dict[str, int]] = [{} for _ in starts]
    for k, category, ns in zip(nxt[inside].tolist(), events["category"][compute][inside].astype(str).tolist(),
                               events["dur_ns"].to_numpy(np.int64)[compute][inside].tolist()):
        out[k][category] = out[k].get(category, 0) + ns
    return [dict(sorted(totals.items())) for totals in out]  # each by category, as a grouping sorts them
