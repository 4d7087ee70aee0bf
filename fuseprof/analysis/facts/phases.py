"""The phases of a training step, from what autograd and the optimizer record — no kernel or op name is read.

Per GPU event, by its launch call (time and thread; the launching op where there is no call):
    communication  a communication kernel (the op registry's category), in whatever phase it overlaps
    backward       launched inside a backward node's run (``autograd::engine::evaluate_function: …``, the
                   decoder's ``autograd`` table) on its thread
    recomputation  launched inside a backward node's run by an op that autograd numbered (``Sequence number``):
                   a forward op run again during backward — activation checkpointing; gradient formulas run
                   with grad mode off and carry no number
    optimizer      launched inside a range the registry marks as the optimizer (``PhaseRange``:
                   ``Optimizer.step#…``, ``Optimizer.zero_grad#…``)
    forward        launched before the first backward run since the last optimizer range ended (or in a step
                   with no backward at all: inference)
    other          between the last backward run and the optimizer (gradient clipping, a grad scaler's checks)

A backward kernel's forward op is the op autograd numbered with the backward node's ``Sequence number``
(``forward_ops``, outside every backward run); its module the ``nn.Module`` around that op (``forward_module``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.model.registry import Registry
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import enclosing, rows_named

PHASES = ("forward", "backward", "recomputation", "optimizer", "communication", "other")


def launch_points(events: pd.DataFrame) -> pd.DataFrame:
    """Each event's launch point: the launch call's start (the op's where there is none) and thread."""
    start = events["launch_start_ns"].astype("Int64").fillna(events["op_start_ns"].astype("Int64"))
    points = pd.DataFrame({"start_ns": start, "tid": events["tid"]}).dropna()
    points["start_ns"] = points["start_ns"].astype(np.int64)
    points["tid"] = points["tid"].astype(str)
    return points


def _named_by(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    return frame.assign(name=frame[column].astype("Int64").astype(str))


def _optimizer_ranges(tables: TraceTables, registry: Registry) -> pd.DataFrame:
    return rows_named(tables.annotations, *(r.ranges for r in registry.phase_ranges if r.phase == "optimizer"))


def _last_before(times: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per ``at``, the latest of ``times`` at or before it; -1 where none is."""
    ordered = np.append(-1, np.sort(times))
    return ordered[np.searchsorted(ordered[1:], at, side="right")]


def _forward_or_other(points: pd.DataFrame, runs: pd.DataFrame, optimizer: pd.DataFrame) -> pd.Series:
    """Per launch point outside backward and optimizer: forward when no backward run began since the last
    optimizer range ended (or before any), else other."""
    t = points["start_ns"].to_numpy(np.int64)
    last_run = _last_before(runs["start_ns"].to_numpy(np.int64) if len(runs) else np.zeros(0, np.int64), t)
    ends = (optimizer["start_ns"] + optimizer["dur_ns"]).to_numpy(np.int64) if len(optimizer) else np.zeros(0, np.int64)
    last_opt = _last_before(ends, t)
    forward = (last_run < 0) | (last_opt > last_run)
    return pd.Series(np.where(forward, "forward", "other"), index=points.index)


def _forward_modules(tables: TraceTables, runs: pd.DataFrame) -> dict[int, tuple[str, str | None]]:
    """Per autograd sequence number, the forward op that has it (not inside a backward run) and its module."""
    ops = tables.forward_ops
    if ops.empty:
        return {}
    inside = enclosing(runs, ops.assign(tid=ops["tid"].astype(str)), None)
    forward = ops[inside.isna()].drop_duplicates("sequence", keep="first")
    modules = tables.modules.assign(name=tables.modules["name"].str.removeprefix("nn.Module: "))
    module = enclosing(modules, forward.assign(tid=forward["tid"].astype(str)), " / ")
    return {int(s): (str(n), None if pd.isna(m) else str(m))
            for s, n, m in zip(forward["sequence"], forward["name"], module)}


def point_phases(points: pd.DataFrame, tables: TraceTables, registry: Registry) -> pd.DataFrame:
    """``phase`` (forward, backward, optimizer, other), ``forward_op`` and ``forward_module`` (in backward: the
    forward op the node differentiates and its module) and ``phase_range`` (in the optimizer: its range) of host
    work at ``points`` (``start_ns``, ``tid``: a launch call, an allocation)."""
    out = pd.DataFrame({"phase": pd.Series("other", index=points.index, dtype=object),
                        "forward_op": pd.Series(pd.NA, index=points.index, dtype="string"),
                        "forward_module": pd.Series(pd.NA, index=points.index, dtype="string")})
    runs = _named_by(tables.autograd.dropna(subset=["sequence"]), "sequence")
    optimizer = _optimizer_ranges(tables, registry)
    run_sequence = enclosing(runs, points, None)
    out["phase"] = _forward_or_other(points, runs, optimizer)
    out["phase_range"] = enclosing(optimizer, points, None)
    out.loc[out["phase_range"].notna().to_numpy(), "phase"] = "optimizer"
    backward = run_sequence.notna()
    if not backward.any():  # no autograd run around any point (inference): no forward op to name
        return out
    out.loc[backward.to_numpy(), "phase"] = "backward"
    forward = _forward_modules(tables, runs)
    found = run_sequence[backward].astype(int).map(lambda s: forward.get(s, (None, None)))
    out.loc[found.index, "forward_op"] = [f[0] for f in found]
    out.loc[found.index, "forward_module"] = [f[1] for f in found]
    return out


def gpu_phases(events: pd.DataFrame, tables: TraceTables, registry: Registry) -> pd.DataFrame:
    """``phase``, ``forward_op`` and ``forward_module`` per event (index of ``events``; the module docstring)."""
    out = pd.DataFrame({"phase": pd.Series("other", index=events.index, dtype=object),
                        "forward_op": pd.Series(pd.NA, index=events.index, dtype="string"),
                        "forward_module": pd.Series(pd.NA, index=events.index, dtype="string")})
    points = launch_points(events)
    out.loc[points.index] = point_phases(points, tables, registry)[list(out.columns)]
    backward = out["phase"] == "backward"
    if backward.any():  # a backward kernel whose op has a sequence number re-ran the forward (checkpointing)
        numbered = events["op_id"].astype("Float64").map(tables.ops.dropna(subset=["external_id"]).drop_duplicates(
            "external_id").set_index("external_id")["sequence"])
        out.loc[(backward & numbered.notna()).to_numpy(), "phase"] = "recomputation"
    out.loc[(events["category"] == "communication").to_numpy(), "phase"] = "communication"
    return out


def phase_table(events: pd.DataFrame) -> pd.DataFrame:
    """Per profiler step and phase: GPU events, GPU time and its share of the step's; empty unless the trace
    has a backward or optimizer phase (a training step)."""
    if not events["phase"].isin(["backward", "recomputation", "optimizer"]).any():
        return pd.DataFrame(columns=["step", "phase", "kernels", "time_ns", "share_pct"])
    step = events["profiler_step"].astype(object).where(events["profiler_step"].notna(), "all")
    grouped = events.assign(step=step).groupby(["step", "phase"], sort=False)["dur_ns"].agg(["size", "sum"])
    frame = grouped.rename(columns={"size": "kernels", "sum": "time_ns"}).reset_index()
    frame["share_pct"] = 100 * frame["time_ns"] / frame.groupby("step")["time_ns"].transform("sum")
    steps = {s: i for i, s in enumerate(pd.unique(step))}  # in the order the trace ran them
    order = frame.assign(a=frame["step"].map(steps), b=frame["phase"].map({p: i for i, p in enumerate(PHASES)}))
    return frame.loc[order.sort_values(["a", "b"], kind="stable").index].reset_index(drop=True)
