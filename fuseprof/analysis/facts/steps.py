"""Steps: which GPU work each iteration launched (a ``ProfilerStep#N``, an engine's step, a period of the
launch sequence: ``fuseprof.analysis.facts.iterations``), a timeline row per step, and the window the other tables
are computed over.

A trace from ``torch.profiler.schedule`` can hold GPU work of earlier (warm-up) steps whose launch
calls were not recorded; peers (TraceLens, HTA) analyse the GPU work of the profiled steps. Here an
event belongs to the iteration whose range spans the start of the op or launch call that started it, on
whichever thread; an event with no launch record belongs to no step.

Windows (``--window``): ``steps`` (every event of an iteration; the default where the iterations are
torch.profiler's steps), ``all`` (every GPU event in the trace; the default otherwise: an engine's steps or a
launch period are shown per step while the tables keep the whole trace), ``N`` or ``N-M`` (the iterations
numbered N to M: ``ProfilerStep#N``, ``step[DECODE bs=32] #N``, ``iteration #N``).
"""

from __future__ import annotations

import re

import pandas as pd

from fuseprof.analysis.facts.iterations import Iterations, number, step_at
from fuseprof.analysis.facts.timeline import breakdown, breakdowns
from fuseprof.errors import InvalidArgumentError

OUTSIDE = "(outside the profiled steps)"


def profiler_steps(events: pd.DataFrame, iterations: Iterations) -> pd.Series:
    """Per event, the iteration around the op or launch call that started it (null: none, or no launch
    record)."""
    # by time on any thread: the backward pass launches from autograd's own thread, and NCCL from its
    # own, while ProfilerStep#N is recorded on the thread that called prof.step()
    return step_at(iterations, events["op_start_ns"].fillna(events["launch_start_ns"]))


def window_mask(events: pd.DataFrame, spec: str | None, iterations: Iterations) -> tuple[pd.Series, str]:
    """Which events the tables cover, and a line that says so."""
    has_steps = events["profiler_step"].notna().any()
    spec = spec or ("steps" if has_steps and iterations.default else "all")
    if spec == "all":
        return pd.Series(True, index=events.index), "window: the whole trace"
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", spec)
    if match is None and spec != "steps":  # what was typed is wrong before what the trace holds matters
        raise InvalidArgumentError(f"--window {spec!r}: use all, steps, N or N-M (step numbers)")
    if not has_steps:
        raise InvalidArgumentError(f"--window {spec}: the trace has no iterations (no ProfilerStep#N, no engine "
                                   "step range, no repeating launch sequence); use --window all")
    numbers = events["profiler_step"].map(number)
    if spec == "steps":
        mask = events["profiler_step"].notna()
        shown = sorted({int(n) for n in numbers.dropna()})
        which = "the profiled steps" if iterations.default else f"the iterations of {iterations.source}"
        return mask, f"window: {which} ({', '.join(f'#{n}' for n in shown)})"
    assert match is not None
    lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
    mask = numbers.between(lo, hi).fillna(False).astype(bool)
    if not mask.any():
        known = sorted({int(n) for n in numbers.dropna()})
        raise InvalidArgumentError(f"--window {spec}: no GPU work in those steps; the trace's steps: "
                                   f"{', '.join(map(str, known))}")
    which = "profiler step" if iterations.default else "iteration"
    return mask, f"window: {which}s #{lo}–#{hi}" if hi != lo else f"window: {which} #{lo}"


def step_table(events: pd.DataFrame) -> pd.DataFrame:
    """One timeline row per profiler step (span, busy, idle, computation, communication, memcpy of
    the GPU work it launched) and one for the GPU work outside every step; empty without steps."""
    if events["profiler_step"].isna().all():  # no steps: no rows, and the columns a step row has
        return pd.DataFrame(columns=["step", *breakdown(events.iloc[:0]).keys()])
    key = events["profiler_step"].astype(object).where(events["profiler_step"].notna(), OUTSIDE)
    rows = [{"step": step, **totals} for step, totals in breakdowns(events, key)]
    frame = pd.DataFrame(rows)
    frame["order"] = frame["step"].map(lambda s: number(s) if number(s) is not None else 1 << 62)
    return frame.sort_values("order", kind="stable").drop(columns="order").reset_index(drop=True)
