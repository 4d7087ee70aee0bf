"""Fusion opportunities other than memory-bound chains, found by the dataflow patterns of the op graph
(``fuseprof.analysis.judgements.patterns``), each with its own model, in the columns of
``fuseprof.analysis.judgements.fusion.opportunities`` so that every class ranks together by predicted saving:

    eager attention → SDPA   a softmax whose input comes from a batched GEMM (QKᵀ, through mask and
                             scale) and whose output reaches a batched GEMM (·V), at any distance. Fused:
                             the two GEMMs' FLOPs at the tensor peak, or Q, K, V and O read and written once
                             at the DRAM rate, whichever is longer, plus one kernel's fixed cost.
    horizontal GEMM          GEMMs reading one activation (the same producer in the graph, through casts),
                             none reading another's output: Q/K/V, gate/up, a layer's weight gradients.
                             Fused: one GEMM of the summed width — the input read once, the weights and
                             outputs as before, at the larger of FLOPs/peak and bytes/DRAM, plus one fixed cost.
    GEMM epilogue            an activation alone, or a bias add, reading a GEMM's output. Fused into the
                             GEMM's epilogue: its kernel's time is saved, the GEMM's stays.
    gradient clipping        a norm per gradient and a scale per gradient (``clip_grad_norm_(foreach=False)``):
                             fused, two multi-tensor passes — 3 × the gradients' bytes, two kernels' fixed cost
                             (``patterns.clip``).
    zero-grad                gradients written with zeros inside ``Optimizer.zero_grad#``: ``set_to_none=True``
                             writes nothing, so the saving is their time (``patterns.zero_grad``).
    linear cross-entropy     the LM head's GEMM, its logits' casts, log_softmax and nll_loss, and their backward:
                             fused, the head's GEMMs as measured and one in-place pass over the logits
                             (``patterns.linear_ce``).

Rows are grouped by signature (ops and shapes aside, as the chains are) and keep only what saves time.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.aggregate import aggregate
from fuseprof.analysis.facts.units import Unit, Units
from fuseprof.analysis.judgements.fusion import CopyModel
from fuseprof.analysis.judgements.patterns import (
    Costs,
    Found,
    attention,
    clip,
    epilogue,
    found_once,
    linear_ce,
    sibling_cost,
    zero_grad,
)
from fuseprof.model.registry import CatalogueEntry, Registry
from fuseprof.model.roofline import Roof

_KNOWN = {"eager attention → SDPA": "F.scaled_dot_product_attention (flash)",
          "horizontal GEMM": "one GEMM over the concatenated weights (QKV / gate-up)",
          "GEMM epilogue": "cuBLASLt epilogue (torch._addmm_activation), Inductor, CUTLASS",
          "gradient clipping": "clip_grad_norm_(foreach=True): torch's default on CUDA",
          "zero-grad": "optimizer.zero_grad(set_to_none=True): torch's default",
          "linear cross-entropy": "Liger LigerFusedLinearCrossEntropyLoss (its chunked GEMMs can cost more than "
                                  "it saves: docs/traces.md)"}
# the classes whose kernels the chain finder leaves to them (fuseprof.analysis.judgements.opportunities)
CLAIMING = ("eager attention → SDPA", "gradient clipping", "zero-grad", "linear cross-entropy")


def sibling_gemms(units: Units) -> list[list[Unit]]:
    """Groups of ≥ 2 non-batched GEMMs that read one activation (the same producers, through casts) of one
    shape and dtype, none of them reading another's output. An activation no op of the trace produced (the
    model's input) has no producer to share: there, GEMMs reading it one after another (no GEMM on another
    input between them) are the group."""
    groups: dict[tuple[object, object], list[Unit]] = {}
    run = 0
    previous: object = None
    for unit in units:
        if not unit.is_gemm or unit.batched or unit.operand("activation") is None:
            continue
        position = unit.gemm.activation if unit.gemm else 0
        sources, _ = units.sources(unit.op_id, position, lambda u: u.category == "copy/cast", depth=3)
        value = unit.operand("activation")
        if sources:
            key: object = frozenset(s.op_id for s in sources)
        else:
            run += previous != ("external", value)
            key = ("external", run)
        previous = key if sources else ("external", value)
        groups.setdefault((key, value), []).append(unit)
    found = []
    for members in groups.values():
        ids = {m.op_id for m in members}
        apart = [m for m in members if not units.producer_ids(m.op_id) & ids]
        if len(apart) >= 2:
            found.append(sorted(apart, key=lambda m: m.order))
    return found


def _row(cls: str, found: Found, signature: str, predicted_ns: float, fused_bytes: float,
         costs: Costs) -> dict[str, object]:
    members = [label for u in found.units for label in u.labels]
    estimates = [costs.estimate(u) for u in found.units]
    chain = sum(e[1] for e in estimates if e) if all(estimates) else np.nan
    return {"class": cls, "members": members, "signature": signature, "kernels": len(members),
            "measured_ns": int(sum(u.time_ns for u in found.units)), "chain_bytes": float(chain),
            "fused_bytes": fused_bytes, "module": found.units[0].module or None, "predicted_ns": predicted_ns,
            "known_fusion": _KNOWN[cls]}


def _entry(registry: Registry, pattern: str) -> CatalogueEntry:
    """The registry's catalogue entry of ``pattern`` (the audit's: its finder's instances are then found once for
    both, ``patterns.found_once``), else one of its own. Either finds the same unfused instances: attention reads
    no entry, and the epilogue's ``fused`` regex adds fused ones only."""
    return next((e for e in registry.catalogue if e.pattern == pattern), CatalogueEntry(pattern, pattern))


def class_instances(units: Units, roof: Roof, copy: CopyModel, registry: Registry) -> list[dict[str, object]]:
    """Every instance of the classes, best first by class: eager attention, horizontal GEMMs, epilogues, gradient
    clipping, zero-grad, linear cross-entropy."""
    costs = Costs(roof, copy, registry)
    rows = []
    for found in found_once(attention, units, _entry(registry, "attention"), costs):
        if not found.fused and not math.isnan(found.saving_ns):
            measured = sum(u.time_ns for u in found.units)
            rows.append(_row("eager attention → SDPA", found, found.signature, measured - found.saving_ns,
                             found.fused_bytes, costs))
    for group in sibling_gemms(units):
        predicted, nbytes = sibling_cost(group, costs)
        if math.isnan(predicted):
            continue
        shape = group[0].operand("activation")
        signature = " + ".join(g.op for g in group) + f" (same input {list(shape.dims) if shape else '?'})"
        rows.append(_row("horizontal GEMM", Found(False, tuple(group), ""), signature, predicted, nbytes, costs))
    for found in found_once(epilogue, units, _entry(registry, "epilogue"), costs):  # its unfused: whatever its regex
        if not found.fused:
            gemm, consumer = found.units
            rows.append(_row("GEMM epilogue", Found(False, (consumer,), ""), f"{gemm.op} → {consumer.op} (epilogue)",
                             0.0, 0.0, costs))
    for cls, pattern in (("gradient clipping", clip), ("zero-grad", zero_grad), ("linear cross-entropy", linear_ce)):
        entry = next((e for e in registry.catalogue if e.pattern == pattern.__name__), None)
        for found in found_once(pattern, units, entry, costs) if entry is not None else ():
            if not found.fused and not math.isnan(found.saving_ns):
                measured = sum(u.time_ns for u in found.units)
                rows.append(_row(cls, found, found.signature, measured - found.saving_ns, found.fused_bytes, costs))
    return rows


def class_opportunities(rows: list[dict[str, object]], taken: set[object]) -> pd.DataFrame:
    """The instances, each kernel in at most one (an instance holding a kernel ``taken`` or held by one
    before it is left out), grouped by class and signature, with the chains' columns."""
    kept = []
    for row in rows:
        members = set(row["members"])  # type: ignore[call-overload]
        if members & taken:
            continue
        taken |= members
        kept.append(row)
    if not kept:
        return pd.DataFrame()
    frame = pd.DataFrame(kept)
    frame["key"] = frame["class"] + ": " + frame["signature"]
    groups = aggregate(
        frame.groupby("key", sort=False), **{"class": ("class", "first")}, signature=("signature", "first"),
        count=("measured_ns", "size"),
        kernels_per_chain=("kernels", "first"), measured_ns=("measured_ns", "sum"),
        chain_bytes=("chain_bytes", "sum"), fused_bytes=("fused_bytes", "sum"),
        predicted_fused_ns=("predicted_ns", lambda v: v.sum(min_count=len(v))),  # one unknown: the group's unknown
        module=("module", "first"), known_fusion=("known_fusion", "first"),
        members=("members", lambda m: [x for ms in m for x in ms]))
    groups["chain_bytes"] = groups["chain_bytes"].where(groups["chain_bytes"] > 0)
    groups["fused_bytes"] = groups["fused_bytes"].where(groups["fused_bytes"] > 0, np.nan).where(
        groups["class"] != "GEMM epilogue", 0.0)
    groups["saving_ns"] = groups["measured_ns"] - groups["predicted_fused_ns"]
    return groups[~(groups["saving_ns"] <= 0)].reset_index()  # an unknown saving is kept: it ranks last
