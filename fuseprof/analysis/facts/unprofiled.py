"""Each step's time without the profiler: the traced step less what the profiler added to the host.

A trace's host time is the host's time while torch.profiler recorded every op, launch, range, module and
Python frame. Per step (``ProfilerStep#N``, an engine's step, or the whole window):

    host_own_ns               = span_ns − idle_data_ns − the host's time inside synchronising calls (merged,
                                within the step): the host's own time; its waits on the GPU or the data loader
                                are no time the profiler lengthened
    share                     = ``SHARE_SCALE`` × Σ count × cost / Σ count × (cost + the event's time without
                                the profiler), by kind (``fuseprof.model.profiler_cost``: the calibration and the
                                fit; counted on every thread by the event's start: CPU ops and Python frames from
                                ``tables.recorded``, ranges, modules, launch calls from their tables), over the
                                events outside the DataLoader's ranges
    in_data                   = Σ count × cost × ``SHARE_SCALE`` × the host's speed (``host_speed``) over the
                                events inside the DataLoader's ranges, at most idle_data_ns (µs per event: a share
                                of the loader's time would count its unrecorded work, a sleep or a decode)
    host_removed_ns           = share × host_own_ns + in_data
    idle_launch_unprofiled_ns = max(0, idle_launch_ns − share × host_own_ns)
    idle_data_unprofiled_ns   = idle_data_ns − in_data
    step_unprofiled_ns        = span_ns − (idle_launch_ns − idle_launch_unprofiled_ns) − in_data

The GPU's work is unchanged; only the gaps where the GPU waited for the host to launch (``idle_launch``, the
idle section's) shrink, by at most the host time removed in the step: a GPU-bound step, whose host ran ahead,
keeps its time. The range ``step_unprofiled_{low,high}_ns`` is that with the removed time ± the calibration's
uncertainty (``profiler_cost.uncertainty``: wider, and said, for a vendor or torch the table does not describe).

A trace that carries fuseprof's own timing of the same steps without the profiler (``fuseprof_unprofiled`` at
its top level, ``{"step_ns": [...]}``: CUDA events around each un-profiled step, written by the capture) uses its
median instead: host_removed_ns = span_ns − the measured step, ``source`` says "measured".

The verdict without the profiler (``verdict``) is the idle section's (``idle.verdict_of``), its launch idle the
estimate's;
``host_scale`` is the factor on the host's time that the replays of savings and what-if
take (``whatif.Plan.host_scale``): 1 − Σ share × host_own / Σ host_own.
"""

from __future__ import annotations

import math
import statistics
import weakref
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.graphs import GRAPH_LAUNCH, GRAPH_NODE, KERNEL_LAUNCH
from fuseprof.analysis.facts.idle import verdict_of, verdict_terms
from fuseprof.analysis.facts.iterations import Iterations, step_at
from fuseprof.model import profiler_cost
from fuseprof.model.intervals import covered_ns, merge
from fuseprof.model.profiler_cost import DEFAULT, SETTINGS, Calibration, setting_of, sync_call_us, uncertainty
from fuseprof.model.registry import Registry
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import rows_named

KINDS = ("op", "launch", "graph_launch", "sync", "range", "module", "frame")
COUNTS = {"op": "ops", "launch": "launches", "graph_launch": "graph_launches", "sync": "syncs", "range": "ranges",
          "module": "modules", "frame": "frames"}  # the table's column of each kind's count
BETWEEN = "(between steps)"
_YEAR_NS = 365 * 86400 * 10**9


def capture_setting(tables: TraceTables) -> tuple[str, str]:
    """The calibrated setting of the trace and a line that says how it is known: written in the trace (torch
    writes ``record_shapes``, ``with_stack``, ``with_modules``), else inferred from what it recorded (shapes on
    ops; ``nn.Module:`` events; Python frames; ``[memory]`` events — torch writes no ``profile_memory``)."""
    written = tables.capture
    seen = {"record_shapes": any(isinstance(d, list) and len(d) > 0 for d in tables.ops["input_dims"].tolist())
            or bool(len(tables.host_ops)),
            "with_stack": bool((tables.recorded["kind"] == "frame").any()),
            "with_modules": bool(len(tables.modules)), "profile_memory": bool(len(tables.memory))}
    flags = {k: written.get(k, v) for k, v in seen.items()}
    said = [k for k in ("record_shapes", "with_stack", "with_modules") if k in written]
    how = ("as written in the trace" if len(said) == 3 else
           f"{', '.join(said)} as written, the rest inferred" if said else "inferred from the events recorded")
    setting = setting_of(**flags)
    on = [k for k, v in flags.items() if v]
    return setting, f"{SETTINGS[setting]} ({', '.join(on) or 'activities only'}: {how})"


def vendor_of(tables: TraceTables) -> str | None:
    """NVIDIA or AMD, from the device names or the runtime's calls (hip…); None where neither says."""
    names = " ".join(tables.devices.values()).upper()
    calls = tables.launches["name"].astype(str)
    if "AMD" in names or "INSTINCT" in names or calls.str.startswith("hip").any():
        return "AMD"
    if "NVIDIA" in names or calls.str.startswith("cu").any():
        return "NVIDIA"
    return None


def step_counts(tables: TraceTables, iterations: Iterations, registry: Registry, steps: list[object],
                within: tuple[np.ndarray, np.ndarray] | None = None,
                recorded: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """Per step (``steps``; ``all``: the whole trace), the events the profiler recorded, by kind (``KINDS``); those
    that began inside ``within`` (merged intervals) alone where it is given. ``recorded``: ``recorded_events``
    where the caller has it (the whole steps' count and their data loading's read the same events)."""
    starts, kinds = recorded if recorded is not None else recorded_events(tables, registry)
    if within is not None:
        inside = covered_ns(within, starts, starts + 1) > 0
        starts, kinds = starts[inside], kinds[inside]
    # one look-up for every event (each a search over the iterations' ranges), then counted by step and kind
    keys = step_at(iterations, pd.Series(starts)).to_numpy(object) if iterations.found else \
        np.full(len(starts), "all", dtype=object)
    present = ~pd.isna(keys)
    codes, found = pd.factorize(keys[present])
    table = np.zeros((len(found) + 1, len(KINDS)), np.int64)  # the last row: a step no event fell in
    np.add.at(table, (codes, kinds[present]), 1)
    rows = table[pd.Index(found, dtype=object).get_indexer(pd.Index(steps, dtype=object))]
    return pd.DataFrame({"step": pd.Series(steps, dtype=object), **{k: rows[:, j] for j, k in enumerate(KINDS)}})


def recorded_events(tables: TraceTables, registry: Registry) -> tuple[np.ndarray, np.ndarray]:
    """Every event the profiler recorded that ``step_counts`` counts: its start (ns) and its kind (the position in
    ``KINDS``)."""
    parts = _recorded_starts(tables, registry)
    starts = np.concatenate(list(parts.values()))
    kinds = np.repeat([KINDS.index(k) for k in parts], [len(p) for p in parts.values()])
    return starts, kinds


# what the last trace's tables gave, per reading, while the objects read are the same ones (each held weakly, by
# identity; the value itself is held until the next trace's replaces it: a few arrays of event starts): the unprofiled
# table and the fusion table's dropped calls (``host_cost_between``) read the same recorded events and host speed,
# each text searches over every launch call (128 ranks: 0.6 s of the second reading)
_LAST: dict[str, tuple[list[weakref.ref[object]], object]] = {}
_Kept = TypeVar("_Kept")


def _last_trace(reading: str, read: list[object], compute: Callable[[], _Kept]) -> _Kept:
    """``compute()``, or what it gave for the same ``read`` objects (every one the same object) the last time."""
    if reading in _LAST:
        refs, value = _LAST[reading]
        if len(refs) == len(read) and all(r() is x for r, x in zip(refs, read)):
            return value  # type: ignore[return-value]
    value = compute()
    _LAST[reading] = ([weakref.ref(x) for x in read], value)
    return value


def _recorded_starts(tables: TraceTables, registry: Registry) -> dict[str, np.ndarray]:
    """``recorded_events`` by kind: each kind's starts (ns); the arrays are shared, never written to."""
    return _last_trace("recorded", [tables, tables.launches, tables.recorded, tables.annotations, tables.modules,
                                    registry], lambda: _read_recorded_starts(tables, registry))


def _sync_calls(tables: TraceTables, registry: Registry) -> np.ndarray:
    """Which launch-table rows are synchronising calls (the registry's ``sync`` host causes: ``cudaStreamSynchronize``,
    a blocking copy, …): one text search per trace, kept (``_last_trace``)."""
    def read() -> np.ndarray:
        launches = tables.launches
        syncs = [c.calls for c in registry.host_causes if c.cause == "sync" and c.calls]
        return launches.index.isin(rows_named(launches, *syncs).index) if syncs else np.zeros(len(launches), bool)
    return _last_trace("sync calls", [tables, tables.launches, registry], read)


def _read_recorded_starts(tables: TraceTables, registry: Registry) -> dict[str, np.ndarray]:
    """What ``_recorded_starts`` keeps, read from the tables."""
    launches = tables.launches
    name = launches["name"].astype(str)
    graph = name.str.contains(GRAPH_LAUNCH.pattern, regex=True)
    sync = _sync_calls(tables, registry)
    launch = name.str.contains(GRAPH_NODE.pattern, regex=True) & ~graph & ~sync
    recorded = tables.recorded
    parts = {"op": recorded["start_ns"][(recorded["kind"] == "op").to_numpy()],
             "frame": recorded["start_ns"][(recorded["kind"] == "frame").to_numpy()],
             "launch": launches["start_ns"][launch.to_numpy()], "graph_launch": launches["start_ns"][graph.to_numpy()],
             "sync": launches["start_ns"][sync], "range": tables.annotations["start_ns"],
             "module": tables.modules["start_ns"]}
    return {k: p.to_numpy(np.int64) for k, p in parts.items()}


def median_launch_us(tables: TraceTables) -> float | None:
    """The trace's median kernel-launch call as traced (µs); None under ``profiler_cost.MIN_LAUNCHES`` kernel launches."""
    launches = tables.launches
    kernel = launches[launches["name"].astype(str).str.contains(KERNEL_LAUNCH.pattern, regex=True)]
    return float(kernel["dur_ns"].median()) / 1e3 if len(kernel) >= profiler_cost.MIN_LAUNCHES else None


def host_speed(tables: TraceTables) -> float:
    """How slow this trace's host is against the calibration's: its median kernel-launch call over the
    calibration host's (``profiler_cost.REFERENCE_LAUNCH_US``), within 0.25-4. The profiler's cost is host CPU time, so a host
    that launches twice as fast pays about half; 1 where the trace has too few kernel launches to say."""
    launch = _last_trace("speed", [tables, tables.launches], lambda: median_launch_us(tables))
    return 1.0 if launch is None else float(np.clip(launch / profiler_cost.REFERENCE_LAUNCH_US, 0.25, 4.0))


def _per_kind(row: dict[str, float]) -> dict[str, float]:
    """µs per event by kind from a calibration row (a kind the row lacks: 0; a synchronising call: ``.item()``'s
    figure less the ops and the copy it records, counted as ops and a launch already)."""
    return {k: max(0.0, row.get(k, 0.0)) for k in KINDS if k != "sync"} | {"sync": sync_call_us(row)}


def _kind_costs(setting: str, calibration: Calibration) -> dict[str, float]:
    """One recorded event's cost by kind (µs) under ``setting``, as the unit loops measured it."""
    return _per_kind(calibration.per_event_us[setting])


def host_cost_between(tables: TraceTables, registry: Registry, calibration: Calibration = DEFAULT
                      ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The host time (ns) the profiler added to the events that began in each [lo, hi): the fit's share scale ×
    the events' calibrated costs × the host's speed against the calibration's (``host_speed``), on every thread.
    What one host call and the dispatch before it cost beyond their own work: a plan that drops the call removes
    only that work (``paths.path.fusion_step_savings``); the step's share (``host_scale``) would remove the
    profiler's share of the step from every call alike, too much from a short op's call, which is mostly the
    profiler's."""
    cost = _kind_costs(capture_setting(tables)[0], calibration)
    factor = _ns_per_cost_us(tables, calibration)
    # per kind, its starts in order: an interval's events of that kind are a searchsorted apart (no array of every
    # event's cost: a large window's 1M events held beside its replays)
    kept = [(starts if bool((starts[1:] >= starts[:-1]).all()) else np.sort(starts), cost[k] * factor)
            for k, starts in _recorded_starts(tables, registry).items() if len(starts) and cost[k] > 0]

    def between(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        total = np.zeros(len(lo), np.float64)
        for starts, ns in kept:
            total += ns * np.maximum(np.searchsorted(starts, hi, "left") - np.searchsorted(starts, lo, "left"), 0)
        return np.rint(total).astype(np.int64)
    return between


def _ns_per_cost_us(tables: TraceTables, calibration: Calibration) -> float:
    """ns of this trace's host per µs of the table's cost: the fit's share scale × the host's speed."""
    return calibration.share_scale * host_speed(tables) * 1e3


def profiler_share(counts: pd.DataFrame, setting: str, calibration: Calibration = DEFAULT) -> np.ndarray:
    """Per row of ``counts``, the profiler's share of the host's own time: the fit's scale × Σ count × cost over
    Σ count × (cost + the event's time without the profiler), within 0 and ``profiler_cost.MAX_SHARE``; 0 where
    nothing was recorded."""
    added = _weighted(counts, _kind_costs(setting, calibration))
    whole = added + _weighted(counts, _per_kind(calibration.unprofiled_us))
    share = calibration.share_scale * np.divide(added, whole, out=np.zeros_like(added), where=whole > 0)
    return np.clip(share, 0.0, profiler_cost.MAX_SHARE)


def sync_wait_ns(tables: TraceTables, iterations: Iterations, registry: Registry, steps: list[object],
                 span: np.ndarray) -> np.ndarray:
    """Per step (``steps``; ``all``: the whole trace), the host's time inside the synchronising calls
    (``_sync_calls``) that began in it, each cut at the step's end, overlapping calls on several threads counted
    once, at most the step's ``span``: time the host waited on the GPU, which the profiler did not lengthen."""
    launches = tables.launches[_sync_calls(tables, registry)]
    start = launches["start_ns"].to_numpy(np.int64)
    end = start + np.maximum(launches["dur_ns"].to_numpy(np.int64), 0)
    if not iterations.found:
        return np.minimum(np.full(len(steps), int(np.diff(np.stack(merge(start, end)), axis=0).sum())),
                          np.maximum(span, 0))
    ranges = iterations.ranges.assign(end_ns=iterations.ranges["start_ns"] + iterations.ranges["dur_ns"])
    bounds = ranges.groupby("name").agg(lo=("start_ns", "min"), hi=("end_ns", "max"))
    owner = step_at(iterations, pd.Series(start)).astype(object)
    inside = owner.notna().to_numpy()
    cut = np.minimum(end[inside], owner[inside].map(bounds["hi"]).to_numpy(np.int64))
    waits = merge(start[inside], np.maximum(cut, start[inside]))
    named = pd.Series(steps, dtype=object)
    lo = named.map(bounds["lo"]).fillna(0).to_numpy(np.int64)
    hi = named.map(bounds["hi"]).fillna(0).to_numpy(np.int64)
    return np.minimum(covered_ns(waits, lo, hi), np.maximum(span, 0))


def _measured(tables: TraceTables) -> float | None:
    """The median un-profiled step fuseprof's capture measured (ns), where the trace carries it (a value that is no
    finite positive number of ns below a year is no measurement, and is left out)."""
    steps = tables.capture.get("unprofiled", {}).get("step_ns")
    values = [float(v) for v in steps if isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(v) and 0 < v < _YEAR_NS] if isinstance(steps, list) else []
    return statistics.median(values) if values else None


def _measured_source(tables: TraceTables) -> str:
    """How fuseprof's capture timed the steps, where it says so in the words it writes (any other text, which a
    trace could carry, is not repeated)."""
    method = tables.capture.get("unprofiled", {}).get("method")
    how = f" ({method})" if method in ("CUDA events", "host clock") else ""
    return f"measured: fuseprof's timing of the same steps without the profiler{how}"


def unprofiled(idle: pd.DataFrame, tables: TraceTables, iterations: Iterations, registry: Registry,
               calibration: Calibration = DEFAULT) -> pd.DataFrame:
    """Per step of the idle table (the module docstring): the events counted, the host time removed, the launch
    idle and the step time without the profiler with its range, and the verdict then; the setting, the
    uncertainty and the source as columns."""
    rows = idle[idle["step"].astype(str) != BETWEEN].reset_index(drop=True) if len(idle) else idle
    setting, how = capture_setting(tables)
    torch = tables.capture.get("unprofiled", {}).get("torch")
    uncertain, why = uncertainty(vendor_of(tables), torch if isinstance(torch, str) else None)
    recorded = recorded_events(tables, registry)
    counts = step_counts(tables, iterations, registry, rows["step"].tolist(), recorded=recorded)
    out = pd.DataFrame({"step": rows["step"], "span_ns": rows["span_ns"].astype(np.int64)})
    out[[COUNTS[k] for k in KINDS]] = counts[list(KINDS)].to_numpy(np.int64)
    measured = _measured(tables)
    span = out["span_ns"].to_numpy(np.int64)
    launch, data = rows["idle_launch_ns"].to_numpy(np.int64), rows["idle_data_ns"].to_numpy(np.int64)
    # the profiler's cost on the events inside the DataLoader's ranges was paid in the data idle, in µs per event
    # (a share of the loader's time would count its unrecorded work, a sleep or a decode, as the profiler's); the
    # share is of the rest
    loading = _data_spans(tables, registry)
    in_loader = step_counts(tables, iterations, registry, rows["step"].tolist(), loading, recorded) \
        if loading[0].size else None
    share = profiler_share(counts if in_loader is None else counts.assign(**{
        k: np.maximum(counts[k].to_numpy(np.int64) - in_loader[k].to_numpy(np.int64), 0) for k in KINDS}),
        setting, calibration)
    own = np.maximum(span - data - sync_wait_ns(tables, iterations, registry, rows["step"].tolist(), span), 0)
    removed = (np.maximum(span - int(measured), 0) if measured is not None
               else np.rint(share * own).astype(np.int64))
    in_data = np.zeros(len(out), np.int64) if measured is not None or in_loader is None else np.minimum(np.rint(
        _weighted(in_loader, _kind_costs(setting, calibration)) * _ns_per_cost_us(tables, calibration)
    ).astype(np.int64), data)
    out["host_removed_ns"] = removed + in_data
    out["host_own_ns"] = own
    out["idle_launch_ns"], out["idle_data_ns"] = launch, data
    out["idle_launch_unprofiled_ns"] = np.maximum(launch - removed, 0)
    out["idle_data_unprofiled_ns"] = data - in_data
    spread = 0.0 if measured is not None else uncertain
    for column, factor in (("step_unprofiled_ns", 1.0), ("step_unprofiled_low_ns", 1 + spread),
                           ("step_unprofiled_high_ns", 1 - spread)):
        less = [np.rint(part * factor).astype(np.int64) for part in (removed, in_data)]
        out[column] = span - (launch - np.maximum(launch - less[0], 0)) - (data - np.maximum(data - less[1], 0))
    out["verdict_as_traced"] = rows["verdict_as_traced"].to_numpy(object)
    out["verdict"] = [verdict_of({**r, "idle_launch_ns": u, "idle_data_ns": d}) for r, u, d in zip(
        verdict_terms(rows), out["idle_launch_unprofiled_ns"], out["idle_data_unprofiled_ns"])]
    # a step named by two ranges (PyTorch 1.8 wrote ProfilerStep#N as an op too): its longest is its host span
    ranges = iterations.ranges.groupby("name")["dur_ns"].max() if iterations.found else pd.Series(dtype="int64")
    out["host_span_ns"] = out["step"].map(ranges).fillna(out["span_ns"]).astype(np.int64)
    out["uncertainty_pct"] = 100.0 * spread
    out["setting"] = how
    out["source"] = (_measured_source(tables) if measured is not None else
                     f"estimated: the profiler's share of the host's time "
                     f"{np.median(share) if len(share) else 0.0:.0%} (recorded events × {calibration.source}), {why}")
    return out


def _weighted(counts: pd.DataFrame, per_kind: dict[str, float]) -> np.ndarray:
    """Per row of ``counts``, Σ count × µs per event of that kind."""
    return np.asarray(sum(counts[k].to_numpy(np.float64) * per_kind[k] for k in KINDS), dtype=np.float64)


def _data_spans(tables: TraceTables, registry: Registry) -> tuple[np.ndarray, np.ndarray]:
    """The DataLoader's ranges (the registry's ``data loading`` host cause), merged: where the host's time is the
    data idle's."""
    patterns = [c.ranges for c in registry.host_causes if c.cause == "data loading" and c.ranges]
    rows = rows_named(tables.annotations, *patterns) if patterns else tables.annotations.iloc[:0]
    start = rows["start_ns"].to_numpy(np.int64)
    return merge(start, start + rows["dur_ns"].to_numpy(np.int64))


def gpu_bound_steps(estimate: pd.DataFrame) -> set[str]:
    """The steps the estimate finds GPU-bound without the profiler (its ``verdict``): their replays run on the
    GPU's own path (``paths.replay_compile``)."""
    if estimate.empty or not {"verdict", "step"} <= set(estimate):
        return set()
    return set(estimate.loc[estimate["verdict"] == "GPU-bound", "step"].astype(str))


def host_scale(estimate: pd.DataFrame) -> float:
    """The factor on the host's time without the profiler (the replays': ``whatif.Plan.host_scale``): 1 − the
    profiler's share of the host's own time over the steps, Σ (host removed − the data idle's part) / Σ the host's
    own time (``host_own_ns``); 1 where nothing is known."""
    if estimate.empty or "host_own_ns" not in estimate:
        return 1.0
    own = float(estimate["host_own_ns"].sum())
    in_data = (estimate["idle_data_ns"] - estimate["idle_data_unprofiled_ns"]).sum()
    return max(0.0, 1.0 - float(estimate["host_removed_ns"].sum() - in_data) / own) if own > 0 else 1.0
