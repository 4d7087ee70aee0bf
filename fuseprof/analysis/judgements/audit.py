"""The catalogue audit: for each fusion of the registry's catalogue, is it done in this trace?

Each entry names a dataflow pattern of the op graph (``fuseprof.analysis.judgements.patterns``) that finds its
instances, done and not done. Verdicts: ``fused`` (every instance is done by one unit: named as evidence,
with its time), ``not fused`` (every instance runs apart: its time now and the predicted saving),
``partly fused`` (both), ``not present`` (no instance: the model has no such step, or the trace records
too little to see it — no shapes, no ops). A user's entry is a row away::

    registry = DEFAULT.extend(catalogue=[CatalogueEntry("my fused MoE", "kernels", fused=r"my_fused_moe")])
"""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from fuseprof.analysis.facts.opgraph import OpGraph
from fuseprof.analysis.facts.units import Units, window_units
from fuseprof.analysis.judgements.fusion import CopyModel
from fuseprof.analysis.judgements.optimizer import CLASS as OPTIMIZER
from fuseprof.analysis.judgements.patterns import Costs, Found, find
from fuseprof.analysis.paths.savings import held_by, of_class
from fuseprof.model.registry import Registry
from fuseprof.model.roofline import Roof


def audit(events: pd.DataFrame, graph: OpGraph | None, roof: Roof, copy: CopyModel, registry: Registry,
          units: Units | None = None, opportunity_savings: dict[str, float] | None = None,
          opportunities: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per entry of the registry's catalogue: fusion, verdict, instances (fused, not fused), time_ns
    (of the unfused units, else of the fused ones), saving_ns and gpu_saving_ns (the one saving, and the GPU time,
    of the ``opportunities`` rows — the fusion table — that hold its unfused instances: ``analysis.savings``),
    predicted_saving_ns (the pattern's own GPU prediction), evidence. ``opportunity_savings``: per catalogue
    pattern, the GPU saving the opportunity table predicts for it where its pattern predicts none (the optimizer
    step's cost model needs the parameters, which the opportunity reads: ``analysis.optimizer``)."""
    units = units if units is not None else window_units(events, graph, registry)
    costs = Costs(roof, copy, registry)
    rows = []
    everything = [find(units, entry, costs) for entry in registry.catalogue]
    held = _held(opportunities, [[f for f in found if not f.fused] for found in everything],
                 [entry.pattern for entry in registry.catalogue])
    for entry, found, (one, gpu) in zip(registry.catalogue, everything, held):
        done, undone = [f for f in found if f.fused], [f for f in found if not f.fused]
        verdict = ("partly fused" if done and undone else "not fused" if undone else "fused" if done
                   else "not present")
        shown = undone or done
        savings = [f.saving_ns for f in undone if not math.isnan(f.saving_ns)]
        if undone and not savings and entry.pattern in (opportunity_savings or {}):
            savings = [(opportunity_savings or {})[entry.pattern]]
        rows.append({"fusion": entry.name, "verdict": verdict, "fused_instances": len(done),
                     "unfused_instances": len(undone), "time_ns": _time(shown), "saving_ns": one,
                     "gpu_saving_ns": gpu, "predicted_saving_ns": float(sum(savings)) if savings else float("nan"),
                     "evidence": _evidence(undone, "") + _evidence(done, "; done by " if undone else "")})
    return pd.DataFrame(rows)


def _labels(undone: list[Found]) -> set[object]:
    """The GPU events of an entry's unfused instances."""
    return {label for f in undone for u in f.units for label in u.labels}


def _held(opportunities: pd.DataFrame | None, undone: list[list[Found]], patterns: list[str]
          ) -> list[tuple[float, float]]:
    """Per entry (its unfused instances), the saving of the opportunity rows holding their kernels, shared with
    the other entries holding the same rows (``savings.held_by``); the optimizer step, whose pattern does not name
    its class's rows' kernels, quotes its class's rows where it holds none."""
    if opportunities is None or opportunities.empty:
        return [(float("nan"), float("nan"))] * len(undone)
    held = held_by(opportunities, [_labels(mine) for mine in undone])
    return [of_class(opportunities, OPTIMIZER) if mine and math.isnan(found[0]) and pattern == "optimizer" else found
            for found, pattern, mine in zip(held, patterns, undone)]


def _time(found: list[Found]) -> int:
    """The GPU time of the instances' units, each unit counted once."""
    units = {u.op_id: u.time_ns for f in found for u in f.units}
    return int(sum(units.values()))


def _evidence(found: list[Found], prefix: str) -> str:
    if not found:
        return ""
    common = Counter(f.signature for f in found).most_common(2)
    return prefix + "; ".join(f"{signature} ×{count}" for signature, count in common)
