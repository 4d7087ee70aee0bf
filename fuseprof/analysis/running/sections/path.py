"""The critical path of each step: its time by bound, and what lies on it with its slack."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.paths.job_path import path_legs
from fuseprof.analysis.paths.path import path_table, path_top, step_paths
from fuseprof.analysis.running.sections import Column, Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    graphs = context.step_graphs()
    path = step_paths(graphs, context.events, context.tables, context.registry)
    return {"critical_path": path_table(graphs, path), "path_top": path_top(graphs, path, context.top),
            "path_legs": path_legs(graphs, path)}


SECTION = Section(
    name="path", order=95, build=_build,
    description="Each step as a dependency graph (host calls in their threads' order and autograd's hand-overs, "
                "launch → kernel, stream order, stream waits, synchronisations) and its critical path: the binding "
                "dependency walked back from the step's end, so its length is the step's span to the ns; its time "
                "by bound (GPU kernel, launch/host, sync, allocator, communication, data loading), and the things on "
                "it with the step time saved if each took no time (the step replayed: less than its time where "
                "another path takes over). Formulas: fuseprof/analysis/paths/critical_path.py, whatif.py, path.py.",
    tables=(
        Table("critical_path", "Critical path per step (its length is the step's span; fuseprof/analysis/paths/critical_path.py)", (
            Column("step", "step"), Column("span µs", "span_ns", "us"), Column("path µs", "path_ns", "us"),
            Column("GPU kernel µs", "GPU_kernel_ns", "us"), Column("launch/host µs", "launch_host_ns", "us"),
            Column("sync µs", "sync_ns", "us"), Column("allocator µs", "allocator_ns", "us"),
            Column("communication µs", "communication_ns", "us"), Column("data µs", "data_loading_ns", "us"),
            Column("before the step µs", "previous_step_ns", "us"), Column("bound", "bound"),
            Column("items", "items_on_path", "int")), hide_empty=True),
        Table("path_top", "On the critical path (all steps; step saving if it took no time: the steps replayed, "
                          "fuseprof/analysis/paths/whatif.py)", (
            Column("bound", "bound"), Column("what", "name", "text:50"), Column("op", "op", "text:30"),
            Column("module", "module", "text:40"), Column("range", "ranges", "text:40"),
            Column("on path µs", "time_ns", "us"), Column("% of path", "share_pct", "round:1"),
            Column("step saving if 0 µs", "step_saving_if_zero_ns", "us")), hide_empty=True, rows="top"),
        Table("path_legs", "The critical path between collectives (what the job's path across ranks walks: "
                           "fuseprof/analysis/paths/job_path.py)", shown=False),
    ))
