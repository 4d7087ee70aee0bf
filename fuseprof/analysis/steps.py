"""Profiler steps: which GPU work each ``ProfilerStep#N`` launched, a timeline row per step, and the
window the other tables are computed over.

A trace from ``torch.profiler.schedule`` can hold GPU work of earlier (warm-up) steps whose launch
calls were not recorded; peers (TraceLens, HTA) analyse the GPU work of the profiled steps. Here an
event belongs to the step whose ``ProfilerStep#N`` range (a CPU ``user_annotation``) spans the start
of the op or launch call that started it, on whichever thread; an event with no launch record
belongs to no step.

Windows (``--window``): ``steps`` (the default when the trace has profiler steps: every event of a
profiled step), ``all`` (every GPU event in the trace), ``N`` or ``N-M`` (the steps numbered N to M).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from fuseprof.analysis.timeline import breakdown
from fuseprof.errors import InvalidArgumentError
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import enclosing

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
OUTSIDE = "(outside the profiled steps)"


def profiler_steps(events: pd.DataFrame, tables: TraceTables) -> pd.Series:
    """Per event, the ``ProfilerStep#N`` range around the op or launch call that started it (null:
    none, or no launch record)."""
    # by time on any thread: the backward pass launches from autograd's own thread, and NCCL from its
    # own, while ProfilerStep#N is recorded on the thread that called prof.step()
    return step_at(tables, events["op_start_ns"].fillna(events["launch_start_ns"]))


def step_at(tables: TraceTables, times: pd.Series) -> pd.Series:
    """Per time (ns on the trace's clock; null stays null), the ``ProfilerStep#N`` range around it."""
    steps = tables.annotations[tables.annotations["name"].str.match(STEP_NAME.pattern)].assign(tid="*")
    anchor = pd.DataFrame({"start_ns": times, "tid": "*"}, index=times.index).dropna()
    anchor["start_ns"] = anchor["start_ns"].astype(np.int64)
    return enclosing(steps, anchor, None).reindex(times.index)


def _number(step: object) -> int | None:
    match = STEP_NAME.match(str(step)) if isinstance(step, str) else None
    return int(match.group(1)) if match else None


def window_mask(events: pd.DataFrame, spec: str | None) -> tuple[pd.Series, str]:
    """Which events the tables cover, and a line that says so."""
    has_steps = events["profiler_step"].notna().any()
    spec = spec or ("steps" if has_steps else "all")
    if spec == "all":
        return pd.Series(True, index=events.index), "window: the whole trace"
    if not has_steps:
        raise InvalidArgumentError(f"--window {spec}: the trace has no ProfilerStep#N ranges; use --window all")
    numbers = events["profiler_step"].map(_number)
    if spec == "steps":
        mask = numbers.notna()
        shown = sorted({int(n) for n in numbers.dropna()})
        return mask, f"window: the profiled steps ({', '.join(f'#{n}' for n in shown)})"
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", spec)
    if match is None:
        raise InvalidArgumentError(f"--window {spec!r}: use all, steps, N or N-M (profiler step numbers)")
    lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
    mask = numbers.between(lo, hi).fillna(False).astype(bool)
    if not mask.any():
        known = sorted({int(n) for n in numbers.dropna()})
        raise InvalidArgumentError(f"--window {spec}: no GPU work in those steps; the trace's steps: "
                                   f"{', '.join(map(str, known))}")
    return mask, f"window: profiler steps #{lo}–#{hi}" if hi != lo else f"window: profiler step #{lo}"


def step_table(events: pd.DataFrame) -> pd.DataFrame:
    """One timeline row per profiler step (span, busy, idle, computation, communication, memcpy of
    the GPU work it launched) and one for the GPU work outside every step; empty without steps."""
    if events["profiler_step"].isna().all():  # no steps: no rows, and the columns a step row has
        return pd.DataFrame(columns=["step", *breakdown(events.iloc[:0]).keys()])
    key = events["profiler_step"].astype(object).where(events["profiler_step"].notna(), OUTSIDE)
    rows = [{"step": step, **breakdown(part)} for step, part in events.groupby(key, sort=False)]
    frame = pd.DataFrame(rows)
    frame["order"] = frame["step"].map(lambda s: _number(s) if _number(s) is not None else 1 << 62)
    return frame.sort_values("order", kind="stable").drop(columns="order").reset_index(drop=True)
