"""The completeness report: which failed integrity checks are damage to the records and which are only how the
trace was captured, and how much of the trace's GPU time each puts in doubt.

Every failed row of the integrity table gets a ``kind`` and a ``doubt_pct``:

    damage    records wrong or missing (a kernel without its launch inside the trace, kernels overlapping on one
              stream, zero or repeated kernel timestamps, records the profiler said it dropped, a step without
              GPU work, a kernel starting before its launch call...). ``doubt_pct``: the share of the trace's GPU
              time (kernels, copies, sets) whose duration or attribution it makes unsure; null where no share
              can be told (records the profiler lost without a count), which ``fails`` reads as failing
    setting   what the capture left out (no input shapes, no module paths, whole-µs timestamps, no NCCL
              metadata, a graph replay without its capture, no device properties): never damage; the detail
              names the analyses it limits and the torch.profiler setting (or fuseprof option) that fills it in
    edge      records the trace's edges cut off (warm-up kernels launched before the profiler started, launch
              calls whose kernel ran after it stopped: ``integrity.dropped_records``)
    window    events outside the window the tables cover

``fails`` is what ``fuseprof check`` exits 1 on: damage putting ``FAIL_PCT`` or more of the GPU time in doubt (or
an unknown share), and any zero or repeated kernel timestamp (``ALWAYS``) — a CUPTI fault, never a measurement.
The rows this module adds (``findings``): zero and repeated kernel timestamps, the profiler's own notes of lost
records, steps with no GPU work and a trace that ends mid-step. Design and the shared traces' outcomes:
docs/validation.md ("A trace's completeness").
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.integrity import CAPTURE_DISAGREES_PCT, Dropped
from fuseprof.analysis.facts.iterations import Iterations
from fuseprof.model.capture_settings import SETTINGS
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_notes import TraceNotes

FAIL_PCT = 1.0  # damage putting this share of the GPU time in doubt fails `check`; below it, a note
ALWAYS = frozenset(("kernel_timestamps_zero", "kernel_timestamps_repeated", "kernels_written_twice"))
GPU_KINDS = ("kernel", "communication", "memcpy", "memset")

_LOSS = re.compile(r"dropped \d+ activity records|exceeded max .*buffer|stopped early\? = [1-9]|buffer overflow|"
                   r"terminating tracing", re.IGNORECASE)
_DROPPED = re.compile(r"dropped (\d+) activity records", re.IGNORECASE)


class Finding(NamedTuple):
    """One completeness row: an integrity check's ``check``, ``value``, ``ok`` and ``detail``, with its ``kind``
    (module docstring; None when ok) and the GPU time it puts in doubt (ns; None: unknown)."""

    check: str
    value: float | None
    ok: bool
    detail: str
    kind: str | None = None
    doubt_ns: float | None = 0.0


def gpu_ns(every: pd.DataFrame) -> float:
    """The trace's GPU time: every kernel's, copy's and set's duration, summed (the shares' denominator)."""
    return float(every.loc[every["kind"].isin(GPU_KINDS), "dur_ns"].sum()) if len(every) else 0.0


def _kernel_durations(every: pd.DataFrame) -> pd.Series:
    """The kernels' durations alone (what the findings' means read)."""
    return every["dur_ns"][every["kind"].isin(["kernel", "communication"])]


def timestamp_findings(every: pd.DataFrame) -> list[Finding]:
    """Zero and repeated kernel timestamps: a kernel whose end is its start (CUPTI in CUDA 12.6u2–13.0 wrote zero
    start and end stamps, PyTorch #192021: no kernel takes 0 ns, and none of the shared traces, µs ones included,
    has one), and a kernel starting on the ns where another of its stream starts (a stream runs one kernel after
    another: two starts at one time are one stamp written for both). Their time is unknown: always a failure."""
    kernels = every["kind"].isin(["kernel", "communication"]).to_numpy(bool)
    zero = int((every["dur_ns"].to_numpy(np.int64)[kernels] <= 0).sum())
    repeated = every["dur_ns"].to_numpy(np.int64)[kernels][_repeated_starts(every, kernels)]
    return [
        Finding("kernel_timestamps_zero", zero, zero == 0,
                f"{zero:,} kernel(s) end where they start (zero timestamps, a CUPTI fault): their time is "
                "unknown" if zero else "none", "damage" if zero else None, None if zero else 0.0),
        Finding("kernel_timestamps_repeated", len(repeated), not len(repeated),
                f"{len(repeated):,} kernel(s) start on the ns another kernel of their stream starts "
                f"({repeated.sum() / 1e3:,.3f} µs): one stamp written for two" if len(repeated)
                else "none", "damage" if len(repeated) else None, float(repeated.sum())),
    ]


def _repeated_starts(every: pd.DataFrame, kernels: np.ndarray) -> np.ndarray:
    """Per kernel (``kernels``: which events are), whether an earlier kernel of its device and stream (a missing one
    read as -1) started on the same ns: a frame's ``duplicated`` of the three, on arrays (sorted stably, so the
    first of equal keys is the earliest row)."""
    keys = [every[c].astype("Int64").fillna(-1).to_numpy(np.int64)[kernels] for c in ("device", "stream")]
    start = every["start_ns"].to_numpy(np.int64)[kernels]
    order = np.lexsort((start, keys[1], keys[0]))
    same = np.ones(max(len(order) - 1, 0), bool)
    for values in (*keys, start):
        same &= values[order][1:] == values[order][:-1]
    repeated = np.zeros(len(order), bool)
    repeated[order[1:]] = same
    return repeated


def profiler_findings(notes: TraceNotes, every: pd.DataFrame) -> list[Finding]:
    """The profiler's own notes that records were lost (Kineto's collected WARNING/ERROR/INFO lines: CUPTI's
    "Dropped N activity records", a full buffer's "Exceeded max GPU buffer count ... terminating tracing", the
    record counts' "CUPTI stopped early? = 1"). A count of dropped records puts that many mean GPU events in doubt;
    a stop says nothing of how much: unknown."""
    if not notes.read:
        return [Finding("profiler_lost_records", None, True, "not a Chrome trace JSON: no profiler notes read")]
    said = [m for level in ("ERROR", "WARNING", "INFO") for m in notes.log.get(level, []) if _LOSS.search(m)]
    if not said:
        levels = ", ".join(f"{len(notes.log[k])} {k}" for k in ("ERROR", "WARNING") if notes.log.get(k))
        return [Finding("profiler_lost_records", 0, True, "the profiler noted no lost records"
                        + (f" ({levels} line(s) about other matters)" if levels else ""))]
    counted = [int(n) for m in said for n in _DROPPED.findall(m)]
    gpu = every[every["kind"].isin(GPU_KINDS)]
    mean = float(gpu["dur_ns"].mean()) if len(gpu) else 0.0
    unknown = len(counted) < len(said)
    return [Finding("profiler_lost_records", sum(counted) if counted else None, False,
                    f"the profiler noted lost records: {said[0][:160]!r}" + (f" (and {len(said) - 1} more)" if len(
                        said) > 1 else "") + ("; how much GPU work they held is unknown" if unknown else
                                              f"; {sum(counted):,} records at the mean GPU event's duration"),
                    "damage", None if unknown else sum(counted) * mean)]


def _step_ranges(iterations: Iterations) -> pd.DataFrame:
    """The iterations that are ranges (a profiler's or an engine's steps), not periods of the launch sequence."""
    periodic = iterations.source.startswith("the launch sequence")
    return iterations.ranges if iterations.found and not periodic else iterations.ranges.iloc[:0]


def step_findings(calls: tuple[pd.DataFrame, pd.Series], every: pd.DataFrame, iterations: Iterations
                  ) -> list[Finding]:
    """Steps with no GPU work and a trace that ends mid-step. A step range between two steps with GPU work that
    holds none lost its records (the profiler's buffer, a cut file): its GPU time is taken as the median step's;
    the first or last such range is an edge (``prof.step()`` opens one more step that the profiler's stop closes
    empty). The last step ends mid-step when kernel launch calls inside it have no kernel in the trace (the
    profiler stopped, or the file was cut, before its GPU work was written): each at the mean kernel's duration.
    ``calls``: ``integrity.launch_calls`` of the trace, which the integrity rows read too (taken once for both)."""
    steps = _step_ranges(iterations).sort_values("start_ns", kind="stable").reset_index(drop=True)
    gpu = every[every["kind"].isin(GPU_KINDS)]
    per_step = gpu.groupby(gpu["profiler_step"].astype(str))["dur_ns"].sum() if "profiler_step" in gpu and len(
        gpu) else pd.Series(dtype=float)
    with_work = set(per_step.index.tolist())  # a set's lookups: a text column's isin cost ~1.5 ms a rank
    busy = np.array([name in with_work for name in steps["name"].astype(str).tolist()], bool)
    inner = np.zeros(len(steps), bool)
    if busy.any():
        first, last = np.flatnonzero(busy)[[0, -1]]
        inner[first:last + 1] = ~busy[first:last + 1]
    empty = steps[inner]
    median = float(per_step.median()) if len(per_step) else 0.0
    rows = [Finding("steps_without_gpu_work", len(empty), empty.empty,
                    f"{len(empty):,} of {len(steps):,} steps between steps with GPU work hold none "
                    f"({', '.join(empty['name'].astype(str)[:3])}): their records were lost; each taken as the "
                    "median step's GPU time" if len(empty) else (f"every step between the first and last with GPU "
                                                                 f"work has some ({len(steps):,} steps)" if len(
                        steps) else "no step ranges"), "damage" if len(empty) else None, len(empty) * median)]
    cut = 0
    if len(steps) and busy.any():
        launches, lost = calls
        last = steps.iloc[int(np.flatnonzero(busy)[-1])]
        start = launches["start_ns"].to_numpy("int64")
        inside = (start >= int(last["start_ns"])) & (start <= int(last["start_ns"]) + int(last["dur_ns"]))
        cut = int((lost.to_numpy(bool) & inside).sum())
    durations = _kernel_durations(every)
    mean = float(durations.mean()) if len(durations) else 0.0
    rows.append(Finding("trace_ends_mid_step", cut, cut == 0,
                        f"the last step with GPU work has {cut:,} kernel launch call(s) without their kernel: the "
                        "trace ends before that step's GPU work did; each taken as the mean kernel's duration"
                        if cut else "the last step's launches all have their kernels", "damage" if cut else None,
                        cut * mean))
    return rows


def _classified(row: Mapping[str, Any], every: pd.DataFrame, inside: Dropped | None) -> tuple[str, float | None]:
    """The kind of a failed integrity row that is not one of the findings here, and the GPU ns it puts in doubt."""
    check, value = str(row["check"]), row["value"]
    if check == "graph_kernel_time_attributed_pct":
        graph = every[every["graph_replay"].notna() & every["op"].notna()] if "graph_replay" in every else every[:0]
        wrong = float(graph.loc[graph["capture_disagrees"].astype(bool), "dur_ns"].sum()) \
            if "capture_disagrees" in graph and len(graph) else 0.0
        if len(graph) and 100 * wrong / float(graph["dur_ns"].sum()) > CAPTURE_DISAGREES_PCT:
            return "damage", wrong
    if check in SETTINGS:
        return "setting", 0.0
    if check == "events_outside_window":
        return "window", 0.0
    if check in ("kernels_without_launch", "launches_without_gpu_event") and inside is not None:
        durations = _kernel_durations(every)
        mean = float(durations.mean()) if len(durations) else 0.0
        n = inside.kernels if check == "kernels_without_launch" else inside.launches
        return ("damage", float(inside.kernel_ns) if check == "kernels_without_launch" else n * mean) if n else \
            ("edge", 0.0)
    if check == "overlapping_kernel_ns":
        return "damage", float(value)
    if check == "kernels_written_twice":
        twice = int(value or 0)
        return "damage", float(_kernel_durations(every).mean()) * twice if twice else 0.0
    if check == "largest_gpu_gap_ns":
        return "damage", 0.0  # the span and idle time are the gap's; no GPU event's time is
    return "damage", None  # impossible durations, merged processes, impossible allocator records: unknown


def classify(rows: pd.DataFrame, every: pd.DataFrame, tables: TraceTables,
             calls: tuple[pd.DataFrame, pd.Series] | None = None) -> pd.DataFrame:
    """The integrity rows with ``kind`` and ``doubt_pct`` (module docstring): the findings' own, else by
    ``_classified``; a setting's detail says what it limits and what fills it in. ``calls``: the trace's
    ``integrity.launch_calls``, which the integrity section took for its rows (taken again where not given)."""
    total = gpu_ns(every)
    pairs = ~rows["ok"].astype(bool) & rows["check"].isin(["kernels_without_launch", "launches_without_gpu_event"])
    from fuseprof.analysis.facts.integrity import dropped_records

    inside = dropped_records(tables, calls) if pairs.any() else None
    kinds, doubts, details = [], [], []
    for row in rows.to_dict("records"):  # a row as a dict: iterrows made a Series of each (~0.05 ms a row)
        kind, doubt, detail = row.get("kind"), row.get("doubt_ns"), str(row["detail"])
        if row["ok"]:
            kind, doubt = None, None
        elif not isinstance(kind, str):
            kind, doubt = _classified(row, every, inside)
        if kind == "setting" and row["check"] in SETTINGS:
            name, limits, fix = SETTINGS[str(row["check"])]
            detail += f" — a capture setting (--require {name}): limits {limits}; filled in by {fix}"
        kinds.append(kind)
        doubts.append(float("nan") if doubt is None or pd.isna(doubt) else (100 * doubt / total if total else 0.0))
        details.append(detail)
    return rows.drop(columns=[c for c in ("kind", "doubt_ns") if c in rows]).assign(
        detail=details, kind=kinds, doubt_pct=doubts)


def fails(rows: pd.DataFrame, require: Collection[str] = ()) -> list[str]:
    """The failed checks ``check`` exits 1 on, each with why: damage putting ``FAIL_PCT`` % or more of the GPU time
    in doubt, or an unknown share; any of ``ALWAYS``; a setting ``require`` names (``capture_settings.REQUIRABLE``)."""
    out = []
    for _, row in rows[~rows["ok"].astype(bool)].iterrows():
        check, kind, doubt = str(row["check"]), row["kind"], row["doubt_pct"]
        if kind == "damage" and (check in ALWAYS or pd.isna(doubt) or doubt >= FAIL_PCT):
            out.append(f"{check} ({'unknown share' if pd.isna(doubt) else f'{doubt:.3g}%'} of GPU time in doubt)")
        elif kind == "setting" and SETTINGS.get(check, ("",))[0] in require:
            out.append(f"{check} (--require {SETTINGS[check][0]})")
    return out


def notes(rows: pd.DataFrame, require: Collection[str] = ()) -> list[str]:
    """The failed checks that do not fail ``check``: settings, edges, the window, damage below ``FAIL_PCT``."""
    failing = {f.split(" (")[0] for f in fails(rows, require)}
    out = []
    for _, row in rows[~rows["ok"].astype(bool)].iterrows():
        check, kind, doubt = str(row["check"]), row["kind"], row["doubt_pct"]
        if check in failing:
            continue
        if kind == "setting" and check in SETTINGS:
            name, limits, fix = SETTINGS[check]
            out.append(f"{check} (capture setting '{name}': limits {limits}; turn on {fix})")
        elif kind == "damage":
            out.append(f"{check} ({doubt:.3g}% of GPU time in doubt, under {FAIL_PCT:g}%)")
        else:
            out.append(f"{check} ({_EDGE_NOTES.get(str(kind), str(kind))})")
    return out


_EDGE_NOTES = {"edge": "all at the trace's edges: work launched before the profiler started or run after it stopped",
               "window": "the tables cover the profiler steps; --window all covers every event"}
