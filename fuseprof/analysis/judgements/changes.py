"""What a change did to each part of the model (issue 62 point 2), read from an ``align.Alignment``.

Per module (the part each kernel is counted under, ``align``) and per op within it: A and B's GPU time,
kernels and launches per step (the median over each run's steps), the class of change, A's share of
the step, A's step-to-step spread, and the share of A's time the alignment matched.

Classes, read from the module's own units in the two reference steps (B's: those counted under the
module, or where B counts none there, the B units aligned with the module's A units), first that holds:

    new / gone     the module has kernels in one run only
    graphed        most of B's kernels in it are replayed from a CUDA graph, few of A's
    compiled       B launches it from a torch.compile'd graph and A does not: most of B's units sit under
                   Inductor's graph-call range (``## Call CompiledFxGraph … ##``) or torch.compile's wrapper
                   module (``OptimizedModule_k``) and few of A's, or B runs Inductor (``triton_*``) kernels
                   there and A none. Like ``graphed`` it names how the work is launched, so a GEMM the
                   compiled graph calls as the same cuBLAS kernel is ``compiled`` too (its ops changed: no
                   eager ``aten::linear`` dispatches it). A torch that logs the graph call as a CPU op rather
                   than a range leaves only the Triton names: its extern kernels then read as below
    fused          the module's ops changed (an op of A is not in B, or one of B not in A; ops compared by
                   name) and B does A's changed work in fewer ops with no new heavy kind: fewer op calls
                   came than went (per op name, the calls B adds against those A loses: SiLU written out,
                   mul + sigmoid + mul, -> silu + mul is three calls to two), and every anchor category
                   the new calls run (GEMM, attention, convolution, communication) is one the gone calls
                   ran. Elementwise, reduction, copy and
                   normalization kernels may merge into one op of any light category (a fused op's
                   category names the composite: ``_fused_rms_norm`` is "normalization"). Dequant + GEMM ->
                   one int8 GEMM op, eight GELU calls -> one, eager RMSNorm -> ``F.rms_norm``, foreach
                   AdamW -> ``_fused_adamw_``. The kernel count does not decide it (``_weight_int8pack_mm``
                   launches its own casts). Also the same ops in fewer kernels
    replaced       the ops changed otherwise: as many ops or more (a bf16 GEMM -> an int8 or fp8 GEMM and
                   its casts), or a new op runs an anchor kind A's gone ops did not (two GEMMs, a mask and
                   a softmax -> one attention kernel: another algorithm, not A's steps run together)
    moved          the same ops, other kernels (another vendor's or library's GEMM family); between two
                   GPUs (the runs' devices differ) also what would read fused or replaced: a vendor's
                   libraries split and join kernels their own way
    same           the same ops and kernels

``related`` says whether the runs share model structure, with the evidence: the share of A's time in
module paths B also has, in op signatures B also has (``diff.matched_share``'s rule), and in anchors
(GEMM, attention, …) the alignment paired with a B anchor of the same op and shapes, module or kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.judgements.align import Alignment, align

RELATED = 0.5  # the least share of A's time, by any one evidence, for two runs to count as one model


@dataclass
class Changes:
    """``modules`` and ``ops``: one row per module and per (module, op); ``summary``: the matched and
    unmatched shares and the relatedness evidence; ``alignment``: the units behind them."""

    modules: pd.DataFrame
    ops: pd.DataFrame
    summary: dict[str, object]
    alignment: Alignment


def per_step(units: pd.DataFrame, keys: list[str], steps: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """Each side's time, kernels and launches per step and ``keys``: every step of ``units`` and of ``steps``
    (each side's, those without GPU work too), zeros included."""
    frame = units  # a graph's kernels share one launch: the graph's replay
    sums = frame.groupby(["side", "step", *keys], observed=True).agg(
        time_ns=("dur_ns", "sum"), kernels=("dur_ns", "size"), launches=("launch", "nunique"))
    listed = pd.DataFrame([(s, step) for s, names in (steps or {}).items() for step in names],
                          columns=["side", "step"])
    every = pd.concat([frame[["side", "step"]], listed]).drop_duplicates()
    parts = frame[keys].drop_duplicates()
    grid = every.merge(parts, how="cross").set_index(["side", "step", *keys])
    return grid.join(sums).fillna(0).reset_index()


def _medians(units: pd.DataFrame, keys: list[str], steps: dict[str, list[str]]) -> pd.DataFrame:
    each = per_step(units, keys, steps)
    medians = each.groupby(["side", *keys])[["time_ns", "kernels", "launches"]].median().unstack("side")
    medians.columns = [f"{metric}_{s.lower()}" for metric, s in medians.columns]
    for column in ("time_ns_a", "time_ns_b", "kernels_a", "kernels_b", "launches_a", "launches_b"):
        if column not in medians:
            medians[column] = 0.0
    return medians.fillna(0.0)


def _spread(units: pd.DataFrame, keys: list[str], steps: dict[str, list[str]]) -> pd.Series:
    """A's step-to-step spread per row, % of its median (±2 robust standard errors; NaN under 3 steps)."""
    from fuseprof.analysis.judgements.noise import robust_noise_pct

    each = per_step(units[units["side"] == "A"], keys, {"A": steps.get("A", [])})
    if each["step"].nunique() < 3:
        return pd.Series(np.nan, index=each.groupby(keys).size().index, dtype="float64")
    return each.groupby(keys)["time_ns"].apply(lambda v: robust_noise_pct(v.to_numpy("float64")))


def change_class(a: pd.DataFrame, b: pd.DataFrame, other_gpu: bool = False,
                 partners: pd.DataFrame | None = None) -> str:
    """The class of change of one module from its A and B units in the reference steps (module docstring);
    ``other_gpu``: the runs ran on different GPUs; ``partners``: B's units aligned with A's, which stand for
    B's where B counts none under the module (its work ran in a kernel counted under a neighbour)."""
    if a.empty:
        return "new"
    if b.empty:  # a module whose kernels B ran inside another module's kernels is not gone
        if partners is None or partners.empty or not a["group"].ge(0).all():
            return "gone"
        b = partners
    if b["graphed"].mean() > 0.5 >= a["graphed"].mean():
        return "graphed"
    triton_a, triton_b = (u["name"].str.startswith("triton_").any() for u in (a, b))
    if (triton_b and not triton_a) or _share(b, "compiled") > 0.5 >= _share(a, "compiled"):
        return "compiled"
    ops_a, ops_b = set(a["op"]) - {""}, set(b["op"]) - {""}
    gone, came = ops_a - ops_b, ops_b - ops_a
    changed = bool(ops_b) and bool(gone or came)
    if other_gpu and (changed or len(b) < len(a)):
        return "moved"
    if changed:
        return "fused" if _fewer_calls_of_same_kinds(a, b) else "replaced"
    if len(b) < len(a):
        return "fused"
    return "moved" if set(a["name"]) != set(b["name"]) else "same"


def _share(units: pd.DataFrame, flag: str) -> float:
    return float(units[flag].mean()) if flag in units and len(units) else 0.0


def _calls(units: pd.DataFrame) -> pd.Series:
    """Calls per op name (distinct op calls, not kernels: ``_weight_int8pack_mm`` launches its own casts)."""
    named = units[units["op"] != ""]
    return named.groupby("op")["op_call"].nunique()


def _fewer_calls_of_same_kinds(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """B does A's changed work together: fewer calls came than went, and no anchor kind (GEMM, attention, …)
    the gone calls did not run (module docstring: fused vs replaced). Calls, not distinct names: SiLU written
    out (mul, sigmoid, mul) -> ``F.silu`` and a mul is one name gone and one come, but three calls -> two.
    Went: A's calls of ops B lacks and the calls an op both run lost; came: B's calls of ops A lacks. An op
    both run that B calls more often is a new op's own helper (the casts ``_weight_int8pack_mm`` calls
    inside itself: the trace names the leaf op), not work that came."""
    calls_a, calls_b = _calls(a), _calls(b)
    ops = calls_a.index.union(calls_b.index)
    calls_a, calls_b = calls_a.reindex(ops, fill_value=0), calls_b.reindex(ops, fill_value=0)
    went, came = (calls_a - calls_b).clip(lower=0), calls_b.where(calls_a == 0, 0)
    kinds = [set(u.loc[u["anchor"].astype(bool) & u["op"].isin(ops[d > 0]), "category"].astype(str))
             for u, d in ((a, went), (b, came))]
    return int(came.sum()) < int(went.sum()) and kinds[1] <= kinds[0]


def _classes(units: pd.DataFrame, keys: list[str], other_gpu: bool) -> pd.Series:
    reference = units[units["reference"]]
    by_side = {s: dict(tuple(reference[reference["side"] == s].groupby(keys[0] if len(keys) == 1 else keys)))
               for s in ("A", "B")}
    empty = reference.iloc[:0]
    names = set(by_side["A"]) | set(by_side["B"])
    b_side = reference[reference["side"] == "B"]
    return pd.Series({k: change_class(by_side["A"].get(k, empty), by_side["B"].get(k, empty), other_gpu,
                                      b_side[b_side["group"].isin(by_side["A"].get(k, empty)["group"])])
                      for k in names},
                     dtype="string")


def _table(units: pd.DataFrame, keys: list[str], steps: dict[str, list[str]], other_gpu: bool) -> pd.DataFrame:
    table = _medians(units, keys, steps)
    a = units[units["side"] == "A"]
    matched = a[a["group"] >= 0].groupby(keys)["dur_ns"].sum() / a.groupby(keys)["dur_ns"].sum()
    total_a = a.groupby("step")["dur_ns"].sum().median() if len(a) else 0
    table["change"] = _classes(units, keys, other_gpu).reindex(table.index).fillna("same")
    table["delta_ns"] = table["time_ns_b"] - table["time_ns_a"]
    table["change_pct"] = np.where(table["time_ns_a"] > 0, 100 * table["delta_ns"] / table["time_ns_a"].where(
        table["time_ns_a"] > 0, 1), np.inf)
    table["share_a_pct"] = 100 * table["time_ns_a"] / total_a if total_a else 0.0
    table["matched_a_pct"] = 100 * matched.reindex(table.index).fillna(0.0)
    table["spread_a_pct"] = _spread(units, keys, steps).reindex(table.index)
    out = table.reset_index()
    return out.iloc[out["delta_ns"].abs().sort_values(ascending=False, kind="stable").index].reset_index(drop=True)


def evidence(alignment: Alignment, signature_share: float) -> dict[str, float]:
    """The three shares of A's reference-step time that say whether the runs are one model (docstring)."""
    units = alignment.units[alignment.units["reference"]]
    a, b = units[units["side"] == "A"], units[units["side"] == "B"]
    total = float(a["dur_ns"].sum()) or 1.0
    named_b = set(b.loc[b["has_module"], "module"])
    module_share = float(a.loc[a["has_module"] & a["module"].isin(named_b), "dur_ns"].sum()) / total
    anchors = a[a["anchor"] & (a["pair"] >= 0)]
    partner = b[b["pair"] >= 0].set_index("pair")
    kin = [(p.sig == partner.at[p.pair, "sig"]) or (p.name == partner.at[p.pair, "name"])
           or (p.has_module and p.module == partner.at[p.pair, "module"]) for p in anchors.itertuples()]
    anchor_total = float(a.loc[a["anchor"], "dur_ns"].sum()) or 1.0
    return {"module_share": module_share, "signature_share": signature_share,
            "anchor_share": float(anchors.loc[kin, "dur_ns"].sum()) / anchor_total if kin else 0.0}


def changes(a: TraceAnalysis, b: TraceAnalysis) -> Changes:
    """The aligned comparison of two runs: per module and op, with the summary (module docstring)."""
    from fuseprof.analysis.judgements.diff import matched_share

    alignment = align(a, b)
    units = alignment.units
    other_gpu = bool(a.device and b.device and a.device != b.device)
    modules = _table(units, ["part"], alignment.steps, other_gpu)
    ops = _table(units, ["part", "op"], alignment.steps, other_gpu)
    reference = units[units["reference"]]
    ra, rb = reference[reference["side"] == "A"], reference[reference["side"] == "B"]
    shares = evidence(alignment, matched_share(a, b) if len(a.events) and len(b.events) else 0.0)
    total_a, total_b = int(ra["dur_ns"].sum()), int(rb["dur_ns"].sum())
    summary: dict[str, object] = {
        "matched_a_pct": 100 * float(ra.loc[ra["group"] >= 0, "dur_ns"].sum()) / total_a if total_a else 0.0,
        "unmatched_a_ns": int(ra.loc[ra["group"] < 0, "dur_ns"].sum()),
        "unmatched_b_ns": int(rb.loc[rb["group"] < 0, "dur_ns"].sum()),
        "step_a_ns": total_a, "step_b_ns": total_b,
        "related": max(shares.values()) >= RELATED, **{f"{k}_pct": 100 * v for k, v in shares.items()},
        "notes": list(alignment.notes)}
    return Changes(modules, ops, summary, alignment)


def unrelated_evidence(summary: dict[str, object]) -> str:
    """The evidence behind 'unrelated', in words."""
    return (f"{float(summary['module_share_pct']):.1f}% of A's GPU time is in module paths B also has, "  # type: ignore[arg-type]
            f"{float(summary['signature_share_pct']):.1f}% of its GEMM/attention time in ops of the same shapes, "  # type: ignore[arg-type]
            f"{float(summary['anchor_share_pct']):.1f}% aligned to B anchors of the same op, module or kernel "  # type: ignore[arg-type]
            f"(one of them must reach {100 * RELATED:.0f}%)")


def summary_table(summary: dict[str, object]) -> pd.DataFrame:
    """The summary as one row (its notes joined), for csv/json output beside the tables."""
    return pd.DataFrame([{**summary, "notes": "; ".join(map(str, summary["notes"]))}])  # type: ignore[call-overload]
