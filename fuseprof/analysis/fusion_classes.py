"""Fusion opportunities other than memory-bound chains, each with its own model, in the columns of
``fuseprof.analysis.fusion.opportunities`` so that every class ranks together by predicted saving:

    eager attention → SDPA   a batched GEMM (QKᵀ), the elementwise ops and softmax after it, and the
                             batched GEMM that multiplies by V (within a few kernels). Fused: attention
                             FLOPs (the two GEMMs' 4·B·H·Sq·Sk·D) at the tensor peak, or Q, K, V and O
                             read and written once at the DRAM rate, whichever is longer, plus one
                             kernel's fixed cost. The scores never reach memory.
    horizontal GEMM          consecutive GEMMs reading an input of the same shape and dtype (Q/K/V, gate/
                             up projections). Fused: one GEMM of the summed width: the input read once,
                             the weights and outputs as before, at the larger of FLOPs/peak and bytes/DRAM,
                             plus one fixed cost.
    GEMM epilogue            a bias add or activation (add, gelu, silu, relu, sigmoid, tanh) on the output
                             of the GEMM just before it, same shape. Fused into the GEMM's epilogue: its
                             kernel's time is saved, the GEMM's stays.

Rows are grouped by signature (ops and shapes aside, as the chains are) and keep only what saves time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fuseprof.analysis.fusion import CopyModel, per_stream, stream_step_order
from fuseprof.model.op_models import DTYPE_BYTES, OpInputs
from fuseprof.model.registry import GemmOperands, Registry
from fuseprof.model.roofline import Roof

_WINDOW = 6  # kernels between the softmax and each of its GEMMs, at most


def _shape(dims: object, types: object, i: int) -> list[int] | None:
    """Shape of tensor input ``i``, read as the cost models read it; None if not a tensor of ≥ 1 dim."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    return OpInputs(dims, types, []).tensor(i) or None


def _itemsize(e: pd.Series) -> int:
    """Bytes per element of the event's first input (2, bf16's, when not recorded)."""
    types = e["input_type"]
    return DTYPE_BYTES.get(str(types[0]), 2) if isinstance(types, list) and types else 2


def _time_ns(flops: float, nbytes: float, pipe: str, roof: Roof, copy: CopyModel) -> float:
    peak = roof.peak(pipe)
    compute = flops / peak * 1e9 if peak and not math.isnan(peak) else 0.0
    return max(compute, nbytes / roof.dram_bytes_per_s * 1e9) + copy.fixed_ns


def _cost(registry: Registry, op: object, dims: object, types: object,
          concrete: object) -> tuple[float, float, str] | None:
    est = registry.estimate(str(op), dims, types, concrete)
    return (est.flops, est.bytes, est.pipe) if est else None


def _batched(registry: Registry, op: str) -> bool:
    gemm = registry.role(op).gemm
    return gemm is not None and gemm.batched


def eager_attention(events: pd.DataFrame, roof: Roof, copy: CopyModel, registry: Registry) -> list[dict[str, object]]:
    rows = []
    for part in per_stream(events):
        part = part.reset_index()
        ops = part["op"].astype("string").fillna("").tolist()
        for i in (i for i, op in enumerate(ops) if registry.role(op).softmax):
            before = [j for j in range(max(0, i - _WINDOW), i) if _batched(registry, ops[j])]
            after = [j for j in range(i + 1, min(len(part), i + 1 + _WINDOW)) if _batched(registry, ops[j])]
            if not before or not after:
                continue
            first, last = before[-1], after[0]
            qk, pv = part.iloc[first], part.iloc[last]
            q, k = _shape(qk["input_dims"], qk["input_type"], 0), _shape(qk["input_dims"], qk["input_type"], 1)
            v = _shape(pv["input_dims"], pv["input_type"], 1)
            costs = [_cost(registry, e["op"], e["input_dims"], e["input_type"], e["concrete"]) for e in (qk, pv)]
            if q is None or k is None or v is None or None in costs:
                continue
            size = _itemsize(qk)
            out = math.prod(q[:-1]) * v[-1] * size
            nbytes = (math.prod(q) + math.prod(k) + math.prod(v)) * size + out
            flops = sum(c[0] for c in costs if c)
            span = part.iloc[first:last + 1]
            rows.append({"class": "eager attention → SDPA", "members": span["index"].tolist(),
                         "signature": " → ".join(ops[first:last + 1]) + " (eager attention)",
                         "kernels": len(span), "measured_ns": int(span["dur_ns"].sum()), "chain_bytes": np.nan,
                         "fused_bytes": float(nbytes), "module": qk["module"],
                         "predicted_ns": _time_ns(flops, nbytes, str(costs[0][2]) if costs[0] else "memory", roof,
                                                  copy), "known_fusion": "F.scaled_dot_product_attention (flash)"})
    return rows


def _operands(registry: Registry, op: object) -> GemmOperands:
    """Where a GEMM op's operands are (the registry's role; the first two arguments where it has none)."""
    return registry.role(str(op)).gemm or GemmOperands()


def _gemm_input(registry: Registry, op: object, dims: object, types: object) -> tuple[tuple[int, ...], str] | None:
    """(shape, dtype) of a GEMM's activation input (mm/linear take it first, addmm second)."""
    i = _operands(registry, op).activation
    shape = _shape(dims, types, i)
    return (tuple(shape), str(types[i])) if shape and isinstance(types, list) else None


def horizontal_gemms(events: pd.DataFrame, roof: Roof, copy: CopyModel, registry: Registry) -> list[dict[str, object]]:
    """Runs of ≥ 2 GEMM calls back to back (no other kernel between them, on one stream and step, launched
    within a few launch intervals of each other) whose activation inputs have one shape and dtype."""
    kernels = events[(events["kind"] == "kernel") & events["stream"].notna()]
    launches = kernels.sort_values("start_ns", kind="stable")["launch_start_ns"].astype("float64").dropna()
    launches = launches.drop_duplicates()
    # siblings are launched back to back: no more than 4 typical launch intervals apart (the last projection
    # of one iteration and the first of the next share an input shape, with the host's loop between them)
    near = 4 * float(launches.diff().median()) if len(launches) > 2 else float("inf")
    order, group = stream_step_order(kernels)  # each (stream, step) together, in start order
    ordered = kernels.iloc[order]
    columns = {name: ordered[source].to_numpy(dtype=object, na_value=None) for name, source in (
        ("op_id", "op_id"), ("op", "op"), ("dims", "input_dims"), ("types", "input_type"),
        ("concrete", "concrete"), ("category", "category"), ("module", "module"))}
    columns["launch"] = ordered["launch_start_ns"].astype("float64").to_numpy(na_value=np.nan)
    members: dict[int, list[object]] = {}
    for op_id, label in zip(events["op_id"].to_numpy(dtype=object, na_value=None), events.index):
        if op_id is not None:
            members.setdefault(int(op_id), []).append(label)
    found = []
    for lo, hi in zip(*_bounds(group)):
        for run in _sibling_runs(columns, lo, hi, near, registry):
            calls = [{name: values[i] for name, values in columns.items()} for i in run]
            found.append(_horizontal(calls, members, events, roof, copy, registry))
    return [r for r in found if r]


def _bounds(group: np.ndarray) -> tuple[list[int], list[int]]:
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if len(group) else np.zeros(0, int)
    return starts.tolist(), [*starts[1:].tolist(), len(group)]


def _sibling_runs(columns: dict[str, np.ndarray], lo: int, hi: int, near: float,
                  registry: Registry) -> list[list[int]]:
    """The runs (row positions) of one stream and step: each op's first kernel is its call; a call's
    kernels are consecutive, so any other kernel (or op) between two GEMM calls breaks the run."""
    position: dict[object, int] = {}
    calls, order = [], []
    for i in range(lo, hi):
        op_id = columns["op_id"][i]
        if op_id not in position:
            position[op_id] = len(position)
            if op_id is not None:
                calls.append(i)
                order.append(position[op_id])
    keys = [_gemm_input(registry, columns["op"][i], columns["dims"][i], columns["types"][i])
            if columns["category"][i] == "GEMM" else None for i in calls]
    launch = columns["launch"]
    runs, k = [], 0
    while k < len(calls):
        j = k + 1
        while (j < len(calls) and keys[k] is not None and keys[j] == keys[k] and order[j] == order[j - 1] + 1
               and not launch[calls[j]] - launch[calls[j - 1]] > near):
            j += 1
        if j - k >= 2:
            runs.append(calls[k:j])
        k = j
    return runs


def _horizontal(calls: list[dict[str, Any]], members_of: dict[int, list[object]], events: pd.DataFrame,
                roof: Roof, copy: CopyModel, registry: Registry) -> dict[str, object]:
    members = sorted((label for c in calls for label in members_of[int(c["op_id"])]), key=events.index.get_loc)
    costs = [_cost(registry, c["op"], c["dims"], c["types"], c["concrete"]) for c in calls]
    if None in costs:
        return {}
    shape, dtype = _gemm_input(registry, calls[0]["op"], calls[0]["dims"], calls[0]["types"]) or ((), "")
    input_bytes = math.prod(shape) * DTYPE_BYTES.get(dtype, 2)
    flops = sum(c[0] for c in costs if c)
    nbytes = sum(c[1] for c in costs if c) - (len(costs) - 1) * input_bytes
    return {"class": "horizontal GEMM", "members": members,
            "signature": " + ".join(str(c["op"]) for c in calls) + f" (same input {list(shape)})",
            "kernels": len(members), "measured_ns": int(events.loc[members, "dur_ns"].sum()),
            "chain_bytes": float(sum(c[1] for c in costs if c)), "fused_bytes": float(nbytes),
            "module": calls[0]["module"],
            "predicted_ns": _time_ns(flops, nbytes, str(costs[0][2]) if costs[0] else "memory", roof, copy),
            "known_fusion": "one GEMM over the concatenated weights (QKV / gate-up)"}


def gemm_epilogues(events: pd.DataFrame, registry: Registry) -> list[dict[str, object]]:
    rows = []
    for part in per_stream(events):
        after_gemm = (part["category"].astype("string").shift() == "GEMM").fillna(False)
        epilogue = part["op"].map(lambda op: registry.role(op if isinstance(op, str) else None).epilogue)
        candidate = epilogue.astype(bool) & after_gemm & (part["kind"] == "kernel")
        at = np.flatnonzero(candidate.to_numpy(bool))
        fields = ["op", "input_dims", "input_type", "concrete", "dur_ns", "module"]
        for label, e, g in zip(part.index[at], part[fields].iloc[at].itertuples(index=False),
                               part[fields[:3]].iloc[at - 1].itertuples(index=False)):
            out = _shape(e.input_dims, e.input_type, 0)
            gemm_out = _gemm_output(registry, g.op, g.input_dims, g.input_type)
            if out is None or gemm_out is None or math.prod(out) != math.prod(gemm_out):
                continue
            cost = _cost(registry, e.op, e.input_dims, e.input_type, e.concrete)
            rows.append({"class": "GEMM epilogue", "members": [label],
                         "signature": f"{g.op} → {e.op} (epilogue)", "kernels": 1,
                         "measured_ns": int(e.dur_ns), "chain_bytes": cost[1] if cost else np.nan,
                         "fused_bytes": 0.0,  # the GEMM writes its output once, with the epilogue applied
                         "module": e.module, "predicted_ns": 0.0,
                         "known_fusion": "cuBLASLt epilogue (torch._addmm_activation), Inductor, CUTLASS"})
    return rows


def _gemm_output(registry: Registry, op: object, dims: object, types: object) -> list[int] | None:
    operands = _operands(registry, op)
    a, b = _shape(dims, types, operands.activation), _shape(dims, types, operands.weight)
    if a is None or b is None:
        return None
    n = b[0] if operands.weight_layout == "NK" else b[-1]
    return [*a[:-1], n]


def class_opportunities(events: pd.DataFrame, roof: Roof, copy: CopyModel, registry: Registry) -> pd.DataFrame:
    """Every instance of the three classes, grouped by class and signature, with the chains' columns."""
    found = (eager_attention(events, roof, copy, registry) + horizontal_gemms(events, roof, copy, registry)
             + gemm_epilogues(events, registry))
    if not found:
        return pd.DataFrame()
    frame = pd.DataFrame(found)
    frame["key"] = frame["class"] + ": " + frame["signature"]
    groups = frame.groupby("key", sort=False).agg(
        **{"class": ("class", "first")}, signature=("signature", "first"), count=("measured_ns", "size"),
        kernels_per_chain=("kernels", "first"), measured_ns=("measured_ns", "sum"),
        chain_bytes=("chain_bytes", "sum"), fused_bytes=("fused_bytes", "sum"),
        predicted_fused_ns=("predicted_ns", "sum"), module=("module", "first"), known_fusion=("known_fusion", "first"),
        members=("members", lambda m: [x for ms in m for x in ms]))
    groups["chain_bytes"] = groups["chain_bytes"].where(groups["chain_bytes"] > 0)
    groups["saving_ns"] = groups["measured_ns"] - groups["predicted_fused_ns"]
    return groups[groups["saving_ns"] > 0].reset_index()
