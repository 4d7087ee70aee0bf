"""A/B diff of two traces (eager against torch.compile, before against after a change, one GPU
against another): totals, per category and per op signature, matched by op, never by kernel name
(compiled Triton kernels are named after what they fuse).

An op signature is the CPU op's name with its input shapes; GPU work with no op (a kernel launched
outside any recorded op) is keyed by its kernel name. For each row: time and launches in A and B,
their deltas, and whether it appeared (only in B) or disappeared (only in A). Rows are ranked by
the size of the time delta.
"""

from __future__ import annotations

import pandas as pd

from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.model.registry import Registry


def _dims(registry: Registry, op: object, dims: object) -> str:
    """The op's recorded input shapes, those of its functional form only: Inductor calls the out= overload
    (``extern_kernels.mm(a, b, out=buf)``), which the profiler records as one more input (the registry's
    ``functional_inputs``), so eager and compiled match."""
    if not isinstance(dims, list):
        return ""
    keep = registry.role(op if isinstance(op, str) else None).functional_inputs
    return f" {dims[:keep] if keep else dims}"


def signature(events: pd.DataFrame, registry: Registry) -> pd.Series:
    """Each GPU event's op signature: the op's name and functional inputs, or '(kernel) NAME' without an op."""
    dims = [_dims(registry, o, d) for o, d in zip(events["op"], events["input_dims"])]
    return events["op"].fillna("(kernel) " + events["name"].str.slice(0, 80)).astype(str) + pd.Series(
        dims, index=events.index)


def _side(events: pd.DataFrame, key: pd.Series) -> pd.DataFrame:
    return events.assign(key=key).groupby("key").agg(time_ns=("dur_ns", "sum"), launches=("dur_ns", "size"),
                                                     category=("category", "first"))


def _diff(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    both = a.merge(b, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    for column in ("time_ns_a", "time_ns_b", "launches_a", "launches_b"):
        both[column] = both[column].fillna(0).astype("int64")
    both["category"] = both["category_b"].fillna(both["category_a"])
    both["time_delta_ns"] = both["time_ns_b"] - both["time_ns_a"]
    both["launch_delta"] = both["launches_b"] - both["launches_a"]
    both["change"] = "changed"
    both.loc[both["launches_a"] == 0, "change"] = "appeared"
    both.loc[both["launches_b"] == 0, "change"] = "disappeared"
    both.loc[(both["time_delta_ns"] == 0) & (both["launch_delta"] == 0), "change"] = "same"
    out = both.drop(columns=["category_a", "category_b"]).reset_index(names="key")
    order = out["time_delta_ns"].abs().sort_values(ascending=False, kind="stable").index
    return out.loc[order].reset_index(drop=True)


def diff_by_op(a: TraceAnalysis, b: TraceAnalysis) -> pd.DataFrame:
    """Per op signature: time and launches in A and B, deltas, change; ranked by |time delta|."""
    return _diff(_side(a.events, signature(a.events, a.registry)), _side(b.events, signature(b.events, b.registry)))


def diff_by_category(a: TraceAnalysis, b: TraceAnalysis) -> pd.DataFrame:
    return _diff(_side(a.events, a.events["category"]), _side(b.events, b.events["category"]))


def diff_totals(a: TraceAnalysis, b: TraceAnalysis) -> pd.DataFrame:
    """Span, busy, idle, computation, memcpy time and GPU events of each trace, and B − A; the peak allocated
    device memory where both traces have the allocator's records (``fuseprof.analysis.facts.memory``)."""
    ta = a.timeline.set_index("stream").loc["all"]
    tb = b.timeline.set_index("stream").loc["all"]
    rows = []
    for column in ("span_ns", "busy_ns", "idle_ns", "computation_ns", "communication_ns", "memcpy_ns", "memset_ns",
                   "events"):
        rows.append({"metric": column, "a": int(ta[column]), "b": int(tb[column]),
                     "delta": int(tb[column]) - int(ta[column])})
    memory_a, memory_b = (r.frames.get("memory", pd.DataFrame()) for r in (a, b))
    if not memory_a.empty and not memory_b.empty:
        pa, pb = int(memory_a["peak_allocated_bytes"].max()), int(memory_b["peak_allocated_bytes"].max())
        rows.append({"metric": "peak_allocated_bytes", "a": pa, "b": pb, "delta": pb - pa})
    return pd.DataFrame(rows)


def matched_share(a: TraceAnalysis, b: TraceAnalysis) -> float:
    """Share of A's anchor time (GEMM, attention, convolution, communication: the model's skeleton, which
    fusing the rest leaves alone) in op signatures — op and input shapes — that B also has; all of A's time
    where A has no anchor."""
    anchors = a.events["role"] == "anchor"
    events = a.events[anchors] if anchors.any() else a.events
    sig_a, sig_b = signature(events, a.registry), set(signature(b.events, b.registry))
    total = events["dur_ns"].sum()
    return float(events.loc[sig_a.isin(sig_b), "dur_ns"].sum() / total) if total else 0.0
