"""The fusion finder's top chains, each as the recorded ops of one representative instance with the
finder's prediction for one chain: what ``fuseprof fusion --verify`` replays.

Per memory-bound chain group of the fusion table (``memory_bound_chain``: any chain class, forward or
backward), the representative is the most common shape signature among the group's chains (prefill and decode chains
share a group but not shapes); for it:

    trace_chain_ns      = median over those chains of Σ kernel durations (the trace's time per chain)
    fused_bytes         = the finder's fused bytes of one such chain (fuseprof.analysis.judgements.fusion.fused_bytes), by the
                          op graph the fusion table and the audit read (by an execution trace where one is beside
                          the trace, else by shapes): one dataflow pass, so a chain's bytes here are the table's
    predicted_fused_ns  = the fusion table's copy model at those bytes: fused_bytes / rate + fixed
    predicted_saving_ns = trace_chain_ns − predicted_fused_ns
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd

from fuseprof.analysis.facts.opgraph import OpGraph
from fuseprof.analysis.judgements.fusion import CopyModel, find_chains, linked_keys
from fuseprof.model.registry import Registry
from fuseprof.parse.textio import read_bytes
from fuseprof.verify.replay import Links, RecordedOp


@dataclass(frozen=True)
class ChainToVerify:
    """One group's representative chain and the finder's prediction for it (module docstring)."""

    fusion_row: int  # the group's row in the fusion table
    signature: str
    chain_class: str
    chain_count: int  # chains in the group
    chain_instances: int  # chains with the representative's shapes
    chain_kernels: int
    trace_chain_ns: float
    fused_bytes: float
    predicted_fused_ns: float
    ops: tuple[RecordedOp, ...]
    skipped: str | None = None  # why it cannot be replayed
    links: Links | None = None  # the op graph's edges among the ops (the replay links its tensors by them)

    @property
    def predicted_saving_ns(self) -> float:
        return self.trace_chain_ns - self.predicted_fused_ns


class _CpuOpArgs(msgspec.Struct):
    external_id: int | None = msgspec.field(default=None, name="External id")
    strides: list[Any] | None = msgspec.field(default=None, name="Input Strides")


class _CpuOp(msgspec.Struct):
    cat: str | None = None
    args: _CpuOpArgs | None = None


class _Events(msgspec.Struct):
    traceEvents: list[_CpuOp] = []  # noqa: N815 (the Chrome trace's key)


def recorded_strides(trace: Path) -> dict[int, list[Any]]:
    """External id → 'Input Strides' of each CPU op in the trace file (the analysis does not keep
    strides: only a replay needs them)."""
    try:
        events = msgspec.json.decode(read_bytes(trace), type=_Events).traceEvents
    except msgspec.DecodeError:
        return {}
    return {e.args.external_id: e.args.strides for e in events
            if e.cat == "cpu_op" and e.args is not None and e.args.external_id is not None and e.args.strides}


def _shape_signature(members: list[Any], events: pd.DataFrame) -> str:
    rows = events.loc[members]
    return repr(list(zip(rows["op"].astype("string").fillna("?"), rows["input_dims"].map(repr))))


def _op_ids(members: list[Any], events: pd.DataFrame) -> list[int | None]:
    """The chain's op ids in order, one per op however many kernels it launched."""
    ids = [None if pd.isna(o) else int(o) for o in events.loc[members, "op_id"]]
    return list(dict.fromkeys(ids)) if None not in ids else ids


def _links(op_ids: list[int | None], graph: OpGraph) -> Links | None:
    """Per op of the chain: argument position → the (step, output) of the chain that produced it, from the
    graph's edges (None where an op has no id)."""
    if None in op_ids:
        return None
    step = {o: i for i, o in enumerate(op_ids)}
    within = graph.within(o for o in op_ids if o is not None)
    return tuple({a: [(step[p], k) for p, k in ps if p != o] for a, ps in within[o].items()} for o in op_ids
                 if o is not None)


def _recorded_ops(members: list[Any], events: pd.DataFrame, strides: dict[int, list[Any]]) -> tuple[RecordedOp, ...]:
    """The chain's ops in order, one per op however many kernels it launched."""
    rows = events.loc[members]
    ops: list[RecordedOp] = []
    seen: set[Any] = set()
    for op, op_id, dims, types, concrete in zip(rows["op"], rows["op_id"], rows["input_dims"], rows["input_type"],
                                                rows["concrete"]):
        if op_id in seen:
            continue
        seen.add(op_id)
        ops.append(RecordedOp(str(op), dims, types, concrete, strides.get(int(op_id)) if pd.notna(op_id) else None))
    return tuple(ops)


def chains_to_verify(events: pd.DataFrame, fusion: pd.DataFrame, strides: dict[int, list[Any]],
                     top: int, registry: Registry, graph: OpGraph | None = None) -> list[ChainToVerify]:
    """The top ``top`` chain groups of the fusion table, in its order, predicted with the copy model the
    table used (its rate and fixed-cost columns); with the op graph the table read (``graph``), each chain's
    fused bytes and the edges among its ops (the replay then links tensors by them) are that graph's."""
    if fusion.empty or "memory_bound_chain" not in fusion:
        return []
    groups = fusion[fusion["memory_bound_chain"].astype(bool)].head(top)
    chains = find_chains(events, registry, graph)
    if groups.empty or chains.empty:
        return []
    chains = chains.assign(key=linked_keys(chains, events))
    picked = []
    for row, group in groups.iterrows():
        mine = chains[chains["key"] == group["key"]]
        shapes = mine["members"].map(lambda m: _shape_signature(m, events))
        common = shapes.value_counts().index[0]
        same = mine[shapes == common]
        first = same.iloc[0]
        unlinked = events.loc[first["members"], "op"].isna()
        fused = float(first["fused_bytes"])
        copy = CopyModel(float(group["copy_bytes_per_s"]), float(group["fixed_ns"]), str(group["rate_source"]))
        picked.append(ChainToVerify(
            fusion_row=int(row), signature=str(group["signature"]), chain_class=str(group["class"]),
            chain_count=int(group["count"]), chain_instances=len(same), chain_kernels=int(first["kernels"]),
            trace_chain_ns=float(same["measured_ns"].median()), fused_bytes=fused,
            predicted_fused_ns=float(copy.time_ns(fused)), ops=_recorded_ops(first["members"], events, strides),
            links=_links(_op_ids(first["members"], events), graph) if graph is not None else None,
            skipped="a kernel of the chain has no recorded op (no record_shapes, or graph-replayed)"
            if unlinked.any() else None))
    return picked
