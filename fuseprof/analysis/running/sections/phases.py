"""A training step's phases: forward, backward, recomputation (checkpointing), optimizer, communication, other."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.phases import phase_table
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    return {"phases": phase_table(context.events)}


SECTION = Section(
    name="phases", order=25, build=_build,
    description="Per profiler step, the GPU time of each phase of a training step — forward, backward (autograd's "
                "own record of each backward node's run), recomputation (forward ops run again inside backward: "
                "activation checkpointing), optimizer (the registry's optimizer ranges), communication, other — "
                "and each backward kernel's forward op and module (by autograd's sequence number): "
                "fuseprof/analysis/facts/phases.py. Shown for traces with a backward or optimizer phase.",
    tables=(Table("phases", "Phases of the training step (GPU time per step; fuseprof/analysis/facts/phases.py)", (
        Column("step", "step"), Column("phase", "phase"), Column("kernels", "kernels", "int"),
        Column("GPU µs", "time_ns", "us"), Column("% of step", "share_pct", "round:1")),
        figure="phases", hide_empty=True),))
