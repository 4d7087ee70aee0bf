"""The critical path's tables: per step, its time by bound; what lies on it, with how much the step would shrink
if each took no time (slack: less than its time where another path takes over); and each fusion row's step
saving. The graph and the walk: ``fuseprof.analysis.paths.critical_path``; the replay: ``fuseprof.analysis.paths.whatif``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fuseprof.analysis.paths.critical_path import (
    BOUNDS,
    CATEGORIES,
    PATH_COLUMNS,
    HostLookup,
    StepGraph,
    labelled,
    walk,
    walk_segments,
)
from fuseprof.analysis.paths.loop_period import loop_periods
from fuseprof.analysis.paths.plan import Plan
from fuseprof.analysis.paths.whatif import fuse_plan, replay, step_times, zero_plan
from fuseprof.model.registry import Registry
from fuseprof.model.registry_data import DEFAULT as DEFAULT_REGISTRY
from fuseprof.parse.text_arrays import text_dtype
from fuseprof.parse.trace_events import TraceTables

if TYPE_CHECKING:
    from fuseprof.analysis.facts.result import TraceAnalysis

_BOUND_COLUMN = {b: b.replace("/", "_").replace(" ", "_") + "_ns" for b in BOUNDS}
_GROUP = ["bound", "name", "op", "module", "ranges"]
_NUMBERS = {"start_ns", "end_ns", "item", "to_item", "dep"}  # the path's columns of integers (PATH_COLUMNS)


def step_paths(graphs: Sequence[StepGraph], events: pd.DataFrame, tables: TraceTables, registry: Registry
               ) -> pd.DataFrame:
    """Every step's path segments, labelled (``critical_path.labelled``), with the step and bound of each."""
    if not graphs:
        return pd.DataFrame(columns=[*PATH_COLUMNS, "dur_ns", "name", "op", "module", "ranges", "step", "graph",
                                     "bound"])
    segments = [walk_segments(g) for g in graphs]
    rows = [row for mine in segments for row in mine]
    steps = [g.step for g, mine in zip(graphs, segments) for _ in mine]
    # made from its columns at once, the numbers as int64 arrays (what pandas infers from the rows' ints), not
    # inferred from the rows and set column by column after
    columns: dict[str, Any] = {c: np.array(values, np.int64) if c in _NUMBERS else list(values)
                               for c, values in zip(PATH_COLUMNS, zip(*rows))}
    path = pd.DataFrame({**columns, "dur_ns": columns["end_ns"] - columns["start_ns"], "step": steps,
                         "graph": np.repeat(np.arange(len(graphs), dtype=np.int64), [len(mine) for mine in segments])}
                        ) if rows else _empty_path()
    path = labelled(graphs, path, events, HostLookup(tables, registry))
    path["bound"] = path["category"].map(CATEGORIES)
    ranges = ["" if pd.isna(r) else str(r) for r in path["ranges"].tolist()]
    own = [r == s or r.startswith(s + " / ") for r, s in zip(ranges, steps)]  # the step's own range: not news
    path["ranges"] = [r[len(s) + 3:] if o and r != s else "" if o else r for r, s, o in zip(ranges, steps, own)]
    return path


def _empty_path() -> pd.DataFrame:
    """The segments' frame of steps whose paths hold none, with their columns' types."""
    path = pd.DataFrame([], columns=PATH_COLUMNS)
    path["dur_ns"] = path["end_ns"] - path["start_ns"]
    path["step"] = []
    path["graph"] = np.zeros(0, np.int64)
    return path


def path_table(graphs: Sequence[StepGraph], path: pd.DataFrame) -> pd.DataFrame:
    """One row per step: its span, the path's length (the same, to the ns), its time by bound, the largest
    bound (ties: the first by name), and how many items lie on it. Summed over the rows as lists: a grouping
    and its reshaping were a dozen pandas calls a trace."""
    by_bound: dict[int, dict[str, int]] = defaultdict(dict)
    lengths: dict[int, int] = defaultdict(int)
    items: dict[int, set[int]] = defaultdict(set)
    for g, bound, ns, item in zip(path["graph"].tolist(), path["bound"].tolist(), path["dur_ns"].tolist(),
                                  path["item"].tolist()):
        lengths[g] += ns
        if isinstance(bound, str):  # a category with no bound is in the length only
            by_bound[g][bound] = by_bound[g].get(bound, 0) + ns
        if item >= 0:
            items[g].add(item)
    rows = []
    for k, g in enumerate(graphs):
        mine = by_bound.get(k, {})
        row = {"step": g.step, "span_ns": g.span_ns, "path_ns": int(lengths.get(k, 0))}
        row.update({_BOUND_COLUMN[b]: int(mine.get(b, 0)) for b in BOUNDS})
        row["bound"] = max(sorted(mine), key=lambda b: mine[b]) if mine else ""  # max(): the first of equals
        row["items_on_path"] = len(items.get(k, ()))
        rows.append(row)
    return pd.DataFrame(rows, columns=["step", "span_ns", "path_ns", *_BOUND_COLUMN.values(), "bound", "items_on_path"])


def path_top(graphs: Sequence[StepGraph], path: pd.DataFrame, top: int) -> pd.DataFrame:
    """The ``top`` largest things on the path over every step (a kernel, a call, or an op's host time, by name,
    op, module and range), with their share of the path and the step time saved if each took no time. Grouped
    as lists (each key's rows in the path's order, in the order keys first appear; the largest first, equals in
    that order), not by a frame's groupby: the same rows at a fraction of the calls."""
    columns = [*_GROUP, "time_ns", "share_pct", "step_saving_if_zero_ns"]
    if path.empty:
        return pd.DataFrame(columns=columns)
    # each column's values, a missing one as '': its mask at once and its list, not a cast and a where on a copy
    keys = zip(*([v if present else "" for v, present in zip(path[c].tolist(), path[c].notna().to_numpy().tolist())]
                 for c in _GROUP))
    members: dict[tuple[object, ...], list[int]] = {}
    for position, key in enumerate(keys):
        members.setdefault(key, []).append(position)
    durations = path["dur_ns"].to_numpy(np.int64)
    summed = [(key, int(durations[rows].sum())) for key, rows in members.items()]
    chosen = sorted(summed, key=lambda pair: -pair[1])[:top]  # stable: equals keep their first appearance's order
    text = text_dtype()
    time_ns = np.array([ns for _, ns in chosen], np.int64)
    columns_of = {c: path[c].to_numpy() for c in ("graph", "item", "to_item", "dep", "dur_ns")}
    saved = _savings(graphs, [{c: values[members[key]] for c, values in columns_of.items()} for key, _ in chosen])
    # made from its columns at once, in their order: not a frame grown column by column and selected again
    return pd.DataFrame({**{c: pd.Series([key[k] for key, _ in chosen], dtype=text) for k, c in enumerate(_GROUP)},
                         "time_ns": time_ns, "share_pct": 100.0 * time_ns / max(int(durations.sum()), 1),
                         # (no row, ``top`` 0: float64, what pandas made of an empty list set as the column)
                         "step_saving_if_zero_ns": np.array(saved, np.int64 if saved else np.float64)}, columns=columns)


def _savings(graphs: Sequence[StepGraph], rows: list[dict[str, np.ndarray]]) -> list[int]:
    """Per row, the step time saved over the steps it lies in if its ``segments`` of the path (its columns as
    arrays) took no time: every row's plans replayed at once (``whatif.step_times``)."""
    plans, involved = [], np.zeros((len(rows), len(graphs)), bool)
    unchanged = Plan()  # one for every step a row leaves alone: a replay only reads its plans
    for r, segments in enumerate(rows):
        order = np.argsort(segments["graph"].astype(np.int64), kind="stable")  # each step's segments together
        by_graph = segments["graph"].astype(np.int64)[order]
        columns = [segments[c].astype(np.int64)[order].tolist() for c in ("item", "to_item", "dep", "dur_ns")]
        cuts = [0, *(np.flatnonzero(np.diff(by_graph)) + 1).tolist(), len(by_graph)] if len(by_graph) else [0]
        plan = [unchanged] * len(graphs)
        for a, b in zip(cuts, cuts[1:]):
            k = int(by_graph[a])
            involved[r, k] = True
            plan[k] = zero_plan(graphs[k], *(values[a:b] for values in columns))
        plans.append(plan)
    spans = np.array([g.span_ns for g in graphs], np.int64)
    saved = np.where(involved, spans - step_times(graphs, plans), 0)
    return [int(x) for x in saved.sum(axis=1)]


def chains_of(row: pd.Series) -> list[tuple[list[object], float]]:
    """A fusion row's chains (its members, listed chain after chain) with each chain's predicted fused time."""
    members, count = list(row["members"]), max(int(row["count"]), 1)
    predicted = row.get("predicted_fused_ns")
    if predicted is None or pd.isna(predicted) or len(members) % count:
        return []
    size = len(members) // count
    return [(members[i:i + size], float(predicted) / count) for i in range(0, len(members), size)]


def plan_savings(graphs: Sequence[StepGraph], plans: Sequence[Sequence[Plan]], host_scale: float = 1.0) -> list[int]:
    """Per row of ``plans`` (one plan per step), the step time saved over every step: every row replayed at once;
    with ``host_scale`` (the host's time without the profiler: ``unprofiled.host_scale``) before and after."""
    if host_scale == 1.0:
        before = sum(g.span_ns for g in graphs)
    else:
        scaled = Plan(host_scale=host_scale)
        before = int(step_times(graphs, [[scaled] * len(graphs)]).sum())
        plans = [[p.merge(scaled) for p in row] for row in plans]
    return [before - int(t) for t in step_times(graphs, plans).sum(axis=1)]


def loop_savings(graphs: Sequence[StepGraph], plans: Sequence[Sequence[Plan]], host_scale: float) -> list[int]:
    """Per row of ``plans`` (one plan per step), the loop's time it saves over every step, the host's time scaled by
    ``host_scale``: each step's period in its loop before less after (``loop_period``), where a step replayed
    alone would count the host's lead that a GPU-bound loop hides."""
    periods = loop_periods(graphs, [[Plan()] * len(graphs), *plans], host_scale)
    return [int(v) for v in (periods[0][None, :] - periods[1:]).sum(axis=1)]


def fusion_step_savings(graphs: Sequence[StepGraph], fusion: pd.DataFrame, host_scale: float = 1.0,
                        host_cost: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> pd.Series:
    """Per fusion row, the step time its fusion saves over every step in the loop (``loop_savings``; null: no
    predicted time), the host's time scaled by ``host_scale`` (1: as traced); with ``host_cost`` (the profiler's
    host time in an interval: ``unprofiled.host_cost_between``) each call the fusion drops removes its own time
    without the profiler (``without_profiler_drops``)."""
    graph_of: dict[object, list[int]] = defaultdict(list)  # each GPU event's step graph(s)
    for k, g in enumerate(graphs):
        for e in g.event:
            if e is not None:
                graph_of[e].append(k)
    out: list[int | None] = []
    plans: list[list[Plan]] = []
    for _, row in fusion.iterrows():
        chains = chains_of(row)
        if not chains or not graphs:
            out.append(None)
            continue
        per_graph: list[list[tuple[list[object], float]]] = [[] for _ in graphs]
        for chain in chains:  # a chain goes to the steps its kernels ran in (each step's plan: its own chains)
            for k in dict.fromkeys(k for e in chain[0] for k in graph_of.get(e, ())):
                per_graph[k].append(chain)
        row_plans = [fuse_plan(g, mine) for g, mine in zip(graphs, per_graph)]
        if host_cost is not None:
            row_plans = steps_without_profiler_drops(graphs, row_plans, host_scale, host_cost)
        plans.append(row_plans)
        out.append(len(plans) - 1)
    saved = loop_savings(graphs, plans, host_scale) if plans else []
    return pd.Series([None if k is None else saved[k] for k in out], index=fusion.index, dtype="Float64")


def without_profiler_drops(graph: StepGraph, plan: Plan, host_scale: float,
                           host_cost: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Plan:
    """``plan`` with each call it drops (its time and its host lags set to 0) removing that call's own time without
    the profiler — its traced time and lags less the profiler's cost in them (``host_cost``) — from a replay whose
    host is scaled by ``host_scale``: the call keeps the rest of its scaled time. Scaled alike, a fused chain's
    short ops dropped what the profiler mostly made (h100/prefill_eager's eager attention: eight calls a layer)."""
    return steps_without_profiler_drops([graph], [plan], host_scale, host_cost)[0]


def steps_without_profiler_drops(graphs: Sequence[StepGraph], plans: Sequence[Plan], host_scale: float,
                                 host_cost: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> list[Plan]:
    """``without_profiler_drops`` of each step's plan, the profiler's cost of every step's dropped calls asked of
    ``host_cost`` at once (it works interval by interval: a call per step was most of a fusion row's plans); a plan
    that drops no call, or any where the host is as traced (its calls' traced time is what they take), as it is."""
    if host_scale == 1.0:
        return list(plans)
    dropped = [[v for v, d in plan.duration.items() if d == 0 and graph.kind[v] == "call"]
               for graph, plan in zip(graphs, plans)]
    if not any(dropped):
        return list(plans)
    lags, t0, t1 = [], [], []
    for graph, plan, calls in zip(graphs, plans, dropped):
        for v in calls:
            lags.append(sum(d.lag - plan.lag[(v, i)] for i, d in enumerate(graph.deps[v])
                            if (v, i) in plan.lag and d.kind == "host"))
            t0.append(graph.t0[v])
            t1.append(graph.t1[v])
    lag, start, end = (np.array(values, np.int64) for values in (lags, t0, t1))
    traced = end - start + lag
    own = np.maximum(traced - host_cost(start - lag, end), 0)
    kept = np.maximum(np.rint(host_scale * traced).astype(np.int64) - own, 0).tolist()
    out, at = [], 0
    for plan, calls in zip(plans, dropped):
        mine, at = kept[at:at + len(calls)], at + len(calls)
        out.append(Plan({**plan.duration, **dict(zip(calls, mine))}, plan.lag, plan.host_scale, plan.gpu_scale)
                   if calls else plan)
    return out


def drop_cost(tables: TraceTables, registry: Registry | None, host_scale: float | None
              ) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """What ``without_profiler_drops`` reads (``unprofiled.host_cost_between``), where the host is replayed without
    the profiler (``host_scale`` given and not 1); None elsewhere, where it would change nothing."""
    from fuseprof.analysis.facts.unprofiled import host_cost_between

    return None if host_scale is None or host_scale == 1.0 else host_cost_between(tables, registry or DEFAULT_REGISTRY)


def result_graphs(result: TraceAnalysis, tables: TraceTables) -> list[StepGraph]:
    """The step graphs of an analysis (its events and iterations), for the what-if over a stored analysis."""
    from fuseprof.analysis.facts.iterations import find_iterations
    from fuseprof.analysis.paths.critical_path import step_graphs

    return step_graphs(result.events, tables, result.registry, find_iterations(tables, result.events, result.registry))


def fusion_rows(fusion: pd.DataFrame, selector: str) -> pd.DataFrame:
    """The fusion rows a ``--fuse`` selector names: ``top:N`` (the first N, ranked by GPU saving), ``all``, or
    text found in the row's class (``optimizer``, ``attention``, ``horizontal``, ``memory-bound``)."""
    from fuseprof.errors import InvalidArgumentError

    if selector == "all":
        return fusion
    if selector.startswith("top:"):
        count = selector[4:]
        if not count.isdigit() or int(count) < 1:
            raise InvalidArgumentError(f"--fuse {selector}: give top:N with N ≥ 1")
        return fusion.head(int(count))
    chosen = fusion[fusion["class"].astype(str).str.contains(selector, case=False, regex=False)]
    if chosen.empty:
        classes = ", ".join(sorted(set(fusion["class"].astype(str)))) or "none"
        raise InvalidArgumentError(f"--fuse {selector!r}: no fusion row of that class (this trace's classes: {classes})")
    return chosen


def region_windows(graph: StepGraph, tables: TraceTables, region: str) -> list[tuple[int, int]]:
    """The time windows of a ``--graph`` region in one step: ``step`` (all of it), or every ``record_function``
    range or ``nn.Module`` whose name contains ``region``, inside the step."""
    if region == "step":
        return [(graph.start_ns, graph.end_ns)]
    spans = pd.concat([tables.annotations, tables.modules], ignore_index=True)
    spans = spans[spans["name"].astype(str).str.contains(region, regex=False)
                  & (spans["start_ns"] >= graph.start_ns) & (spans["start_ns"] < graph.end_ns)]
    return [(int(s), int(s + d)) for s, d in zip(spans["start_ns"], spans["dur_ns"])]


def whatif_table(graphs: Sequence[StepGraph], fusion: pd.DataFrame, tables: TraceTables, fuse: Sequence[str] = (),
                 graph_regions: Sequence[str] = (), step_time_ns: float | None = None,
                 compile_regions: Sequence[str] = (), overlap: bool = False,
                 waits: dict[int, int] | None = None, host_scale: float | None = None,
                 registry: Registry | None = None) -> pd.DataFrame:
    """Per step: its span, the replayed time with the plan (fusion rows chosen by ``fuse``, regions captured as
    CUDA graphs, regions compiled: their memory-bound rows fused and their host time between launches gone,
    communication overlapped, collectives shortened by ``waits`` — a late rank made not late) and the step saving; with ``step_time_ns`` (the step measured apart from the profiler) also both
    at that scale (the host's time scaled so that the unchanged replay's median equals it: ``calibrated_scale``;
    else ``host_scale``: the host's time without the profiler, estimated — then ``scaled_*`` are the steps' periods
    in their loop (``loop_period``), each call a fusion drops removing its own time without the profiler
    (``without_profiler_drops``) — replayed but not walked).
    ``attrs``: the chosen rows' GPU saving (the fusion table's), their number, the host scale, the critical
    path's time by bound before and after over every step (``path_change``; at the measured scale where given),
    and ``in_place``: a line per part of the plan that changes nothing because it is done already (a region whose
    every launch is a graph launch; one whose every launch runs inside compiled code, by ``registry``'s names)."""
    from fuseprof.analysis.paths.whatif import calibrated_scale, replayed

    rows = pd.concat([fusion_rows(fusion, s) for s in fuse]).drop_duplicates("key") if fuse else fusion.iloc[:0]
    chains = [c for _, row in rows.iterrows() for c in chains_of(row)]
    pointwise = [c for _, row in fusion[fusion["memory_bound_chain"].astype(bool)].iterrows() for c in chains_of(row)] \
        if compile_regions and len(fusion) else []
    if compile_regions:  # the GPU saving beside: the rows a compile fuses, with the chosen ones
        rows = pd.concat([rows, fusion[fusion["memory_bound_chain"].astype(bool)]]).drop_duplicates("key")
    scale = calibrated_scale(graphs, step_time_ns) if step_time_ns is not None and graphs else host_scale
    compiled = compiled_spans(tables, registry)
    # without the profiler (estimated): each fused call removes its own un-profiled time, and a step takes its
    # loop's period, as the fusion table's step saving does (one saving per opportunity: ``savings``)
    estimated = scale if scale is not None and step_time_ns is None else None
    cost = drop_cost(tables, registry, estimated) if chains else None
    out, change, plans = [], [], []
    for g in graphs:
        fused = fuse_plan(g, chains)
        rest = _other_plans(g, tables, graph_regions, compile_regions, pointwise, compiled, overlap, waits)
        after = replay(g, plan := fused.merge(rest))
        scaled = Plan(host_scale=scale) if scale is not None and step_time_ns is not None else Plan()  # measured
        change.append(_bounds(walk(replayed(g, scaled))).rename("before_ns").to_frame().join(
            _bounds(walk(replayed(g, plan.merge(scaled)))).rename("after_ns"), how="outer"))
        row = {"step": g.step, "span_ns": g.span_ns, "after_ns": after, "step_saving_ns": g.span_ns - after,
               "step_saving_pct": 100.0 * (g.span_ns - after) / max(g.span_ns, 1)}
        if scale is not None and estimated is None:
            row["scaled_before_ns"] = replay(g, Plan(host_scale=scale))
            row["scaled_after_ns"] = replay(g, plan.merge(Plan(host_scale=scale)))
        out.append(row)  # without the profiler, each call the fusion drops keeps the part that was the profiler's
        plans.append(without_profiler_drops(g, fused, estimated, cost).merge(rest)
                     if cost is not None and estimated is not None else plan)
    frame = pd.DataFrame(out)
    if estimated is not None and graphs:
        periods = loop_periods(graphs, [[Plan()] * len(graphs), plans], estimated)
        frame["scaled_before_ns"], frame["scaled_after_ns"] = periods[0], periods[1]
    gpu = rows["saving_ns"].astype("Float64").sum() if len(rows) else 0
    path_change = pd.concat(change).fillna(0).groupby(level=0).sum().astype("int64") if change else pd.DataFrame()
    in_place = in_place_notes(graphs, tables, graph_regions, compile_regions, compiled)
    frame.attrs.update(gpu_saving_ns=float(gpu) if pd.notna(gpu) else None, rows=int(len(rows)), host_scale=scale,
                       path_change=path_change.reindex([b for b in BOUNDS if b in path_change.index]),
                       in_place=in_place)
    return frame


def _other_plans(g: StepGraph, tables: TraceTables, graph_regions: Sequence[str], compile_regions: Sequence[str],
                 pointwise: list[tuple[list[object], float]], compiled: tuple[np.ndarray, np.ndarray], overlap: bool,
                 waits: dict[int, int] | None) -> Plan:
    """``whatif_table``'s plan for one step less its fusions: graph regions, compiled regions, communication
    overlapped, a late rank made not late."""
    from fuseprof.analysis.paths.whatif import compile_plan, graph_plan, not_late_plan, overlap_plan

    rest = Plan()
    for region in graph_regions:
        rest = rest.merge(_regions(g, tables, region, graph_plan))
    for region in compile_regions:
        rest = rest.merge(_regions(g, tables, region, lambda g, w: compile_plan(g, pointwise, w, compiled)))
    rest = rest.merge(overlap_plan(g)) if overlap else rest
    return rest.merge(not_late_plan(g, waits)) if waits else rest


def compiled_spans(tables: TraceTables, registry: Registry | None) -> tuple[np.ndarray, np.ndarray]:
    """The start and end of every range and op ``registry`` names a compiled region (torch.compile's region, its
    graph call, AOTAutograd's function); none without a registry."""
    spans = pd.concat([tables.annotations, tables.ops], ignore_index=True)[["name", "start_ns", "dur_ns"]]
    if registry is None or spans.empty:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    names = spans["name"].astype(str)
    compiled = {n for n in pd.unique(names) if "compiled region" in registry.kinds(n)}
    kept = spans[names.isin(compiled).to_numpy(bool)]
    start = kept["start_ns"].to_numpy(np.int64)
    return start, start + kept["dur_ns"].to_numpy(np.int64)


def in_place_notes(graphs: Sequence[StepGraph], tables: TraceTables, graph_regions: Sequence[str],
                   compile_regions: Sequence[str], compiled: tuple[np.ndarray, np.ndarray]) -> list[str]:
    """A line per region of the plan whose change is in place already: every launch a graph launch (graph), or
    inside compiled code (compile); the plan changes nothing there (issue 59, point 3)."""
    from fuseprof.analysis.paths.whatif import already_compiled, already_graphs

    def everywhere(region: str, done: Callable[[StepGraph, tuple[int, int]], bool]) -> bool:
        return bool(graphs) and all(done(g, w) for g in graphs for w in region_windows(g, tables, region))

    return [f"graph {r}: every launch in it is a CUDA graph launch already; the plan changes nothing there"
            for r in graph_regions if everywhere(r, already_graphs)] + [
        f"compile {r}: every launch in it runs inside compiled code already; the plan changes nothing there"
        for r in compile_regions if everywhere(r, lambda g, w: already_compiled(g, compiled, w))]


def _bounds(path: pd.DataFrame) -> pd.Series:
    """A walked path's time by bound."""
    return path["dur_ns"].groupby(path["category"].map(CATEGORIES)).sum()


def _regions(graph: StepGraph, tables: TraceTables, region: str,
             plan_of: Callable[[StepGraph, tuple[int, int]], Plan]) -> Plan:
    """The plan ``plan_of`` makes for every window of ``region`` in one step."""
    from fuseprof.errors import InvalidArgumentError

    windows = region_windows(graph, tables, region)
    if not windows:
        raise InvalidArgumentError(f"region {region!r}: no record_function range or module of that name in "
                                   f"{graph.step} (or give step)")
    plan = Plan()
    for window in windows:
        plan = plan.merge(plan_of(graph, window))
    return plan
