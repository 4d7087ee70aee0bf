"""The catalogue audit: for each fusion of seed 002's catalogue, is it done in this trace?

Verdicts: ``fused`` (a kernel or op that does it is in the trace: named as evidence, with its time),
``not fused`` (the unfused pieces are there: their time now and the finder's predicted saving),
``partly fused`` (both), ``not present`` (neither: the model has no such step). The catalogue is the op
registry's (``fuseprof.model.registry.CatalogueEntry``: a regular expression for the fused kernels or
ops, and which opportunity classes or op chains show the unfused form), so an engine's own kernels are
a row away::

    registry = DEFAULT.extend(catalogue=[CatalogueEntry("my fused MoE", fused=r"my_fused_moe", ops=(r"moe",))])
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from fuseprof.analysis.fusion import CopyModel, per_stream
from fuseprof.model.registry import CatalogueEntry, Registry


def _unfused(entry: CatalogueEntry, fusion: pd.DataFrame) -> pd.DataFrame:
    if fusion.empty:
        return fusion
    picked = pd.Series(False, index=fusion.index)
    for cls in entry.classes:
        name, _, count = cls.partition(":")
        rows = fusion["class"] == name
        if count:
            rows &= fusion["signature"].str.count(r" \+ ") == int(count) - 1
        picked |= rows
    if entry.chains:
        chains = fusion["class"].isin(["memory-bound chain", "RoPE + KV-cache write", "sampling chain"])
        has_all = fusion["signature"].map(lambda s: all(op in s.split(" → ") for op in entry.chains))
        picked |= chains & has_all
    return fusion[picked]


def _by_stream(events: pd.DataFrame) -> list[dict[str, list[Any]]]:
    """Each stream's events in start order, as columns of plain values (read once for every pair entry)."""
    return [{"op": part["op"].astype("string").fillna("").tolist(), "dur": part["dur_ns"].tolist(),
             "dims": part["input_dims"].tolist(), "types": part["input_type"].tolist(),
             "concrete": part["concrete"].tolist()} for part in per_stream(events)]


def _pairs(entry: CatalogueEntry, streams: list[dict[str, list[Any]]], copy: CopyModel,
           registry: Registry) -> pd.DataFrame:
    """Separate kernels of ``entry.pair``: their time now, and the fused kernel's predicted time (the
    second op's bytes — it reads both inputs and writes the output — at the copy rate, plus one fixed
    cost)."""
    if entry.pair is None:
        return pd.DataFrame()
    first, second = entry.pair
    rows = []
    for part in streams:
        ops = part["op"]
        for i, op in enumerate(ops):
            j = next((j for j in range(i + 1, min(i + 4, len(ops))) if ops[j] == second), None) if op == first else None
            if j is None:
                continue
            est = registry.estimate(ops[j], part["dims"][j], part["types"][j], part["concrete"][j])
            time = int(part["dur"][i]) + int(part["dur"][j])
            predicted = copy.time_ns(est.bytes) if est else float("nan")
            rows.append({"measured_ns": time, "saving_ns": time - predicted,
                         "signature": f"{first} (kernel) … {second} (kernel)", "count": 1})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    return pd.DataFrame([{"measured_ns": frame["measured_ns"].sum(), "saving_ns": frame["saving_ns"].sum(min_count=1),
                          "signature": frame["signature"].iloc[0], "count": len(frame)}])


def _matcher(events: pd.DataFrame) -> Callable[[re.Pattern[str]], pd.Series]:
    """A mask of the events whose kernel name or op matches a pattern; each distinct string is searched
    once per pattern, not once per event."""
    names = events["name"].astype(str)
    ops = events["op"].astype("string").fillna("").astype(str)
    distinct = pd.unique(pd.concat([names, ops]))

    def hits(pattern: re.Pattern[str]) -> pd.Series:
        found = [v for v in distinct if pattern.search(v)]
        return names.isin(found) | ops.isin(found)
    return hits


def audit(events: pd.DataFrame, fusion: pd.DataFrame, copy: CopyModel, registry: Registry) -> pd.DataFrame:
    """One row per entry of the registry's catalogue: fusion, verdict, time_ns (of the unfused pieces, else of
    the fused kernels), predicted_saving_ns, evidence."""
    rows = []
    hits, streams = _matcher(events), _by_stream(events)
    for entry in registry.catalogue:
        unfused = _unfused(entry, fusion)
        if unfused.empty:
            unfused = _pairs(entry, streams, copy, registry)
        fused = events[hits(re.compile(entry.fused, re.IGNORECASE))]
        partial = fused.empty and bool(entry.partial)
        if partial:
            fused = events[hits(re.compile(entry.partial, re.IGNORECASE))]
        present = fused.empty and any(hits(re.compile(p, re.IGNORECASE)).any() for p in entry.ops)
        verdict = ("partly fused" if not fused.empty and (not unfused.empty or partial) else "not fused"
                   if not unfused.empty else "fused" if not fused.empty else "present, no fusion found" if present
                   else "not present")
        rows.append({"fusion": entry.name, "verdict": verdict, **_evidence(unfused, fused)})
    return pd.DataFrame(rows)


def _evidence(unfused: pd.DataFrame, fused: pd.DataFrame) -> dict[str, object]:
    if not unfused.empty:
        return {"time_ns": int(unfused["measured_ns"].sum()),
                "predicted_saving_ns": float(unfused["saving_ns"].sum(min_count=1)),
                "evidence": "; ".join(f"{s} ×{c}" for s, c in zip(unfused["signature"].head(2), unfused["count"].head(2)))
                + (f"; fused elsewhere by {fused['name'].iloc[0]}" if not fused.empty else "")}
    if not fused.empty:
        top = fused.groupby("name")["dur_ns"].sum().sort_values(ascending=False).index[0]
        op = fused.loc[fused["name"] == top, "op"].dropna()
        return {"time_ns": int(fused["dur_ns"].sum()), "predicted_saving_ns": float("nan"),
                "evidence": f"{top} ({len(fused)} kernels; op {op.iloc[0] if len(op) else 'none'})"}
    return {"time_ns": 0, "predicted_saving_ns": float("nan"), "evidence": ""}
