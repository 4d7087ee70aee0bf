"""Steps: the GPU work each iteration (``ProfilerStep#N``, an engine's step, a period of the launch sequence)
launched, a timeline row per step."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.steps import step_table
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    return {"steps": step_table(context.every)}


SECTION = Section(
    name="steps", order=20, build=_build,
    description="The GPU work each iteration launched (span, busy, idle, computation, communication, memcpy) — a "
                "ProfilerStep#N, else an engine's step range (SGLang, vLLM), else a period of the launch sequence "
                "(fuseprof/analysis/facts/iterations.py) — and the work outside every step (warm-up left by "
                "torch.profiler.schedule). Windows: fuseprof/analysis/facts/steps.py.",
    tables=(Table("steps", "Profiler steps (GPU work each step launched)", (
        Column("step", "step"), Column("span µs", "span_ns", "us"), Column("busy µs", "busy_ns", "us"),
        Column("idle µs", "idle_ns", "us"), Column("compute µs", "computation_ns", "us"),
        Column("comm µs", "communication_ns", "us"), Column("memcpy µs", "memcpy_ns", "us"),
        Column("events", "events", "int")), figure="steps", hide_empty=True),))
