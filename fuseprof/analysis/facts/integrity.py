"""The integrity check: what a trace lets fuseprof see, before any headline number is believed.

One row per check: ``check``, ``value``, ``ok`` and ``detail``. ``DEPENDS`` says which printed
sections rest on which checks, so a number resting on a failed check is flagged where it is shown.

    attributed_kernel_time_pct      kernel time in the window whose launching op is known (by External id
                                    where it names the op around the launch call, else by that op in time,
                                    or through a graph capture), or whose launch call sits outside every op
                                    inside a ``record_function`` range (a Triton or extension kernel called
                                    from Python: the range names the code); ok ≥ 90
    graph_kernel_time_attributed_pct  of the graph-replayed kernel time, the share attributed to an op
                                    through a capture trace; ok ≥ 99 (no graph kernels: ok, value null),
                                    and at most ``CAPTURE_DISAGREES_PCT`` of it GEMM or attention kernels
                                    given an op that computes neither (the capture of another graph)
    kernels_without_launch          GPU events whose launch call is not in the trace (warm-up work of
                                    earlier steps, a profiler started mid-run); ok when 0
    events_outside_window           GPU events the window leaves out of every table; ok when 0, or
                                    when the user chose the window (--window)
    overlapping_kernel_ns           per stream, Σ kernel durations − the union of their intervals: time
                                    that kernels on one stream overlap (they cannot: the timestamps
                                    are off, except where programmatic dependent launch starts a graph
                                    or LaunchKernelEx kernel early: ``dependent_launch``); ok when the
                                    rest is up to 0.1% of the kernel time (CUPTI's own jitter)
    timestamp_resolution_ns         1 when times carry ns (three decimals of µs), 1000 when every
                                    timestamp and duration is a whole µs (short kernels lose up to 1 µs
                                    each); ok when < 1000
    shapes_recorded_pct             op-launched kernel time whose op has recorded input shapes
                                    (record_shapes=True); ok > 0 (the per-op roofline needs it)
    modules_recorded_pct            op-launched kernel time with an nn.Module path (with_modules=True): its
                                    launching op's, or for a backward kernel its forward op's
    kernels_without_device          GPU events whose device the trace's deviceProperties neither names nor
                                    describes (SMs/CUs, memory, arch: ``devices.device_from_properties``)
    launches_without_gpu_event      kernel launch calls outside any graph capture whose kernel is not in
                                    the trace (records lost by the profiler's buffer, or cut out of the
                                    file: every time table would read low); ok when 0
    kernels_written_twice           kernel records beyond the first of their name under one kernel launch
                                    call (not a graph launch): the same record again; ok when 0
    largest_gpu_gap_ns              the longest stretch without GPU work in the window; failed when over
                                    1 s and over half the span (two captures or two processes' clocks in
                                    one trace: the span and idle time would be that gap)
    gpus_in_trace                   GPUs with kernels in the trace; ok when 1 (streams are per GPU, the
                                    'all' timeline row and the idle analysis are one GPU's)
    host_processes                  processes whose host calls the trace records; ok when 1 (one profiler
                                    writes one process: two are files merged, whose ranks, steps and
                                    streams every table would mix, whether or not their clocks agree)
    impossible_durations            GPU events whose duration no run can have (``impossible_durations``): one
                                    that holds a later kernel of its own stream whole inside it (a stream
                                    runs its work in order), or one longer than the host's whole recording
                                    (its first host event's start to its last one's end) and the other GPU
                                    work's; ok when 0 (one bogus 10^9 µs kernel makes the span 1,000 s,
                                    and the overlap check, a share of kernel time it inflates, passes)
    memory_records_impossible       allocator records no allocator writes (``fuseprof.analysis.facts.memory``,
                                    ``impossible_records``); ok when 0. The memory tables rest on it
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.dependent_launch import PDL_LEAD_NS, dependent_launch_overlap_ns
from fuseprof.analysis.facts.graphs import KERNEL_LAUNCH, capture_numbers, kernel_launches, outermost
from fuseprof.analysis.facts.memory import impossible_records
from fuseprof.analysis.facts.replay_twin import ATTRIBUTED_BY
from fuseprof.analysis.facts.timeline import stream_labels
from fuseprof.model.intervals import apart, union_ns
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import matching

if TYPE_CHECKING:
    from fuseprof.analysis.facts.result import TraceAnalysis

LONE_GAP_NS, LONE_GAP_SHARE = 10**9, 0.5  # one idle stretch over 1 s holding over half the span: not one run
CAPTURE_DISAGREES_PCT = 5.0  # % of attributed replay time whose kernel name and captured op disagree: another graph

DEPENDS = {
    "top_ops": ("attributed_kernel_time_pct", "graph_kernel_time_attributed_pct"),
    "op_roofline": ("attributed_kernel_time_pct", "graph_kernel_time_attributed_pct", "shapes_recorded_pct",
                    "timestamp_resolution_ns"),
    "fusion": ("attributed_kernel_time_pct", "graph_kernel_time_attributed_pct", "shapes_recorded_pct"),
    "timeline": ("overlapping_kernel_ns", "timestamp_resolution_ns", "kernels_without_launch",
                 "launches_without_gpu_event", "kernels_written_twice", "gpus_in_trace", "largest_gpu_gap_ns",
                 "host_processes", "impossible_durations"),
    "categories": ("attributed_kernel_time_pct", "launches_without_gpu_event", "kernels_written_twice",
                   "impossible_durations"),
    "memory": ("memory_records_impossible",),
}
for _table in ("top_ops", "op_roofline", "fusion"):  # every time table sums the durations
    DEPENDS[_table] += ("impossible_durations",)


def _linked_by(with_op: pd.DataFrame) -> str:
    """How kernels were linked to their op, where not all by External id (fuseprof.parse.trace_link)."""
    by = with_op["linked_by"].value_counts() if "linked_by" in with_op else pd.Series(dtype=int)
    by_time = int(by.get("time", 0))
    return f" ({by_time:,} by the op around the launch call: their External ids name no such op)" if by_time else ""


def _pct(part: float, whole: float) -> float:
    return float(100 * part / whole) if whole else float("nan")


def _overlap_on_streams(kernels: pd.DataFrame) -> int:
    """The kernels' time that overlaps another kernel's of the same stream (a stream of one GPU: two GPUs share
    stream ids): every stream's at once, its intervals apart from the others' (``intervals.apart``)."""
    codes, streams = pd.factorize(stream_labels(kernels))
    kept = codes >= 0
    start = kernels["start_ns"].to_numpy(np.int64)[kept]
    end = start + kernels["dur_ns"].to_numpy(np.int64)[kept]
    moved = apart(codes[kept], start, end, len(streams))
    unions = union_ns(*moved[:2]) if moved is not None else \
        sum(union_ns(start[codes[kept] == k], end[codes[kept] == k]) for k in range(len(streams)))
    return int((end - start).sum()) - unions


def _largest_gap(events: pd.DataFrame) -> int:
    """The longest time no GPU event ran, between the first and the last (ns)."""
    if len(events) < 2:
        return 0
    order = np.argsort(events["start_ns"].to_numpy(np.int64), kind="stable")
    start = events["start_ns"].to_numpy(np.int64)[order]
    reach = np.maximum.accumulate(start + events["dur_ns"].to_numpy(np.int64)[order])
    return int(max(0, (start[1:] - reach[:-1]).max()))


def impossible_durations(events: pd.DataFrame, host_span: tuple[int, int] | None) -> pd.DataFrame:
    """The GPU events whose duration no run can have: a kernel holding a later kernel of its own stream whole
    inside it (a stream runs its work in order: the earlier one's end is wrong), or an event longer than the host's
    whole recording (``host_span``: its first event's start and last event's end; None for a trace without host
    events, where nothing bounds a duration) and than every other GPU event's span of starts."""
    if events.empty:
        return events
    start = events["start_ns"].to_numpy(np.int64)
    end = start + events["dur_ns"].to_numpy(np.int64)
    bad = np.zeros(len(events), bool)
    kernels = events["kind"].isin(["kernel", "communication"]).to_numpy(bool)
    codes = pd.factorize(stream_labels(events))[0]
    for code in np.unique(codes[kernels & (codes >= 0)]):
        at = np.flatnonzero(kernels & (codes == code))
        order = at[np.lexsort((-end[at], start[at]))]  # by start, the longer first where two start together
        later_end = np.minimum.accumulate(end[order][::-1])[::-1]  # the earliest end among it and those after
        bad[order[:-1]] |= later_end[1:] <= end[order[:-1]]
    if host_span is not None:
        first, last = min(host_span[0], int(start.min())), max(host_span[1], int(start.max()))
        bad |= end - start > last - first
    return events[bad]


def _written_twice(kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernel records beyond the first of their name under one kernel launch call: a launch runs one kernel (a
    graph launch runs many, under one correlation id, and is not one), so the rest are the same record written
    again, elsewhere in time (a merged or edited trace), and every time table counts them."""
    plain = kernels[matching(kernels["launch_api"], KERNEL_LAUNCH)]
    return plain[plain.duplicated(["correlation", "name"], keep="first")]


def launch_calls(tables: TraceTables) -> tuple[pd.DataFrame, pd.Series]:
    """The kernel launch calls outside stream captures (a capture's launches run no kernel), one per launch (a
    driver call nested in its runtime call is the same launch), and which of them have no kernel in the trace."""
    calls = tables.launches.sort_values("start_ns", kind="stable")
    parts = [outermost(thread[kernel_launches(thread) & ~capture_numbers(thread)[1]])
             for _, thread in calls.groupby("tid", sort=False)]
    launches = pd.concat(parts) if parts else calls
    seen = set(tables.gpu["correlation"].dropna().astype("int64"))
    return launches, ~launches["correlation"].isin(seen) & launches["correlation"].notna()


def lost_launches(calls: tuple[pd.DataFrame, pd.Series]) -> tuple[int, int]:
    """(kernel launch calls whose kernel is not in the trace, kernel launch calls), of ``launch_calls``' answer."""
    launches, lost = calls
    return int(lost.sum()), len(launches)


class Dropped(NamedTuple):
    """Records the profiler dropped (``dropped_records``): GPU events without their launch call, their GPU time,
    and kernel launch calls without their kernel, each between the trace's edges."""

    kernels: int
    kernel_ns: int
    launches: int


def dropped_records(tables: TraceTables, calls: tuple[pd.DataFrame, pd.Series] | None = None) -> Dropped:
    """The records missing from inside the trace, told apart from what its edges cut off. A trace's head holds
    GPU work launched before the profiler started (no launch call: warm-up), which runs before the first event on
    its stream whose launch is recorded (the trace's first such event where the stream has none); its tail holds
    launch calls whose kernel had not run when the profiler stopped, made after the last call on their thread
    whose kernel is recorded. A GPU event without its launch after that first event, or a launch without its
    kernel before that last call, is a record the profiler dropped (a full activity buffer, a file cut and
    edited): every time table reads low, and a code change cannot make it (a kernel a change removes takes its
    launch call with it). ``calls``: ``launch_calls(tables)`` where the caller took it already."""
    gpu = tables.gpu
    launched = gpu["correlation"].isin(set(tables.launches["correlation"].dropna().astype("int64"))).fillna(False)
    launched = launched.to_numpy(bool)
    where = [gpu[c].astype("Int64").fillna(-1).to_numpy("int64") for c in ("device", "stream")]
    first = pd.Series(gpu["start_ns"].to_numpy("int64")[launched]).groupby(
        [w[launched] for w in where]).min() if launched.any() else pd.Series(dtype="int64")
    orphans = ~launched
    keys = pd.MultiIndex.from_arrays([w[orphans] for w in where]) if orphans.any() else None
    # integers throughout: as floats, times of a clock of µs since the epoch are 256 ns apart
    edge = first.astype("Int64").reindex(keys).fillna(first.min()).to_numpy("int64") \
        if keys is not None and len(first) else np.full(int(orphans.sum()), np.iinfo(np.int64).max)
    starts = gpu["start_ns"].to_numpy("int64")[orphans]
    inside = starts > edge
    launches, lost = calls if calls is not None else launch_calls(tables)
    last = launches[~lost].groupby("tid", sort=False)["start_ns"].max()
    thread_last = last.astype("Int64").reindex(launches["tid"].to_numpy()).fillna(np.iinfo(np.int64).min)
    before_last = launches["start_ns"].to_numpy("int64") < thread_last.to_numpy("int64")
    return Dropped(int(inside.sum()), int(gpu["dur_ns"].to_numpy("int64")[orphans][inside].sum()),
                   int((lost.to_numpy(bool) & before_last).sum()))


class Unlaunched(NamedTuple):
    """Ops of B that launched nothing where A's ops of the same name, shapes and dtypes always launched GPU work
    (``unlaunched_in``): their count, how many ops of those signatures B holds, and the most common signature."""

    ops: int
    of: int
    example: str


def _signatures(frame: pd.DataFrame) -> pd.Series:
    """An op's name, recorded shapes and dtypes as one text (ops without recorded shapes are left out: NaN)."""
    if frame.empty or "input_dims" not in frame:
        return pd.Series(dtype=object)
    shaped = frame["input_dims"].map(lambda d: isinstance(d, list) and len(d) > 0).astype(bool)
    return (frame["name"].astype(str) + " " + frame["input_dims"].map(str) + " "
            + frame["input_type"].map(str)).where(shaped)


def unlaunched_in(a: TraceTables, b: TraceTables, least: int = 10) -> Unlaunched:
    """Kernels B lost *together with* their launch calls, seen through the ops that made them: a signature (name,
    shapes, dtypes) of which A holds at least ``least`` ops, every one of which launched GPU work, and of which B
    holds ops that launched nothing (B's shaped leaf ops: ``TraceTables.host_ops``). A code change that stops an op
    launching changes the op or its shapes as a rule; the same op on the same shapes launching in one run and not in
    the other is what a profiler that dropped the launch and its kernel leaves. Traces without recorded shapes say
    nothing here (zeros)."""
    launched_a, quiet_a = _signatures(a.ops).value_counts(), _signatures(a.host_ops).value_counts()
    always = launched_a[(launched_a >= least) & ~launched_a.index.isin(quiet_a.index)]
    quiet_b = _signatures(b.host_ops).value_counts()
    lost = quiet_b[quiet_b.index.isin(always.index)]
    if lost.empty:
        return Unlaunched(0, 0, "")
    launched_b = _signatures(b.ops).value_counts()
    of = int(lost.sum() + launched_b.reindex(lost.index).fillna(0).sum())
    return Unlaunched(int(lost.sum()), of, str(lost.idxmax())[:120])


def dropped(result: TraceAnalysis) -> Dropped:
    """Records the profiler dropped from inside an analysed trace (``dropped_records``: not what its edges cut
    off). Its integrity rows say whether any record lacks its pair; only then are its tables read (from the
    store) to tell the edges from the inside — where they cannot be read (no trace file), every such record
    counts."""
    checks = result.integrity.set_index("check")["value"] if not result.integrity.empty else pd.Series(dtype=float)
    orphans, lost = (int(checks.get(c, 0) or 0) for c in ("kernels_without_launch", "launches_without_gpu_event"))
    if not orphans and not lost:
        return Dropped(0, 0, 0)
    if result.source is None:
        return Dropped(orphans, 0, lost)
    from fuseprof.parse.store import default_store

    return dropped_records(default_store().tables(result.source)[0])


def _launched_in_a_range(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernels launched by a call outside every op (a Triton kernel, an extension's launch) inside a user's
    ``record_function`` range — not a graph replay's, whose op is the capture's, which only a capture gives."""
    if "ranges" not in kernels:
        return kernels.iloc[:0]
    direct = kernels["graph_replay"].isna() if "graph_replay" in kernels else pd.Series(True, index=kernels.index)
    return kernels[kernels["op"].isna() & kernels["launch_api"].notna() & kernels["ranges"].notna() & direct]


def _graph_row(kernels: pd.DataFrame) -> tuple[str, float | None, bool | None, str]:
    """The graph check: the share of graph-replayed kernel time attributed through a capture, failed outright
    where the capture's ops disagree with the kernels' names (``CAPTURE_DISAGREES_PCT``: another graph's)."""
    graph = kernels[kernels["graph_replay"].notna()] if "graph_replay" in kernels else kernels.iloc[:0]
    attributed = graph[graph["op"].notna()]
    disagree = graph[graph["capture_disagrees"]] if "capture_disagrees" in graph else graph.iloc[:0]
    disagree_pct = _pct(disagree["dur_ns"].sum(), attributed["dur_ns"].sum())
    another = disagree_pct == disagree_pct and disagree_pct > CAPTURE_DISAGREES_PCT
    return ("graph_kernel_time_attributed_pct", _pct(attributed["dur_ns"].sum(), graph["dur_ns"].sum()) if len(graph)
            else None, False if another else None,
            f"{len(graph)} graph-replayed kernels, {len(attributed)} attributed" + _attributed_by(graph)
            + ("" if len(attributed) == len(graph) else "; their capture is not in the trace: pass it with "
               "--graph-capture, or an eager trace of the same model with --eager-twin (their categories come "
               "from kernel names)")
            + (f"; but {disagree_pct:.0f}% of their time is GEMM or attention kernels given ops that compute neither "
               f"({', '.join(disagree['op'].value_counts().index[:3])}): the capture is another graph's"
               if another else ""))


def _attributed_by(graph: pd.DataFrame) -> str:
    """How the replayed kernels' time was attributed (``attributed_by``: capture, eager twin, warm-up, family, none),
    each way's share of it."""
    if "attributed_by" not in graph or graph.empty:
        return ""
    shares = graph.groupby(graph["attributed_by"].astype(object).fillna("none"))["dur_ns"].sum()
    total = graph["dur_ns"].sum()
    return "; time attributed by " + ", ".join(f"{way} {_pct(shares.get(way, 0), total):.0f}%"
                                               for way in ATTRIBUTED_BY)


def _record_rows(events: pd.DataFrame, kernels: pd.DataFrame) -> list[tuple[str, int, bool, str]]:
    """The checks that the records are one run's, once: no kernel written twice, one GPU, no lone gap."""
    twice = _written_twice(kernels)
    gap = _largest_gap(events)
    span = int((events["start_ns"] + events["dur_ns"]).max() - events["start_ns"].min()) if len(events) else 0
    one_gap = gap > LONE_GAP_NS and gap > LONE_GAP_SHARE * span
    devices = sorted(int(d) for d in kernels["device"].dropna().unique()) if "device" in kernels else []
    return [
        ("kernels_written_twice", len(twice), twice.empty,
         f"{len(twice):,} kernel records repeat another of their name under one kernel launch call "
         f"({twice['dur_ns'].sum() / 1e3:,.3f} µs): a launch runs one kernel, so the trace holds them twice (merged "
         "or edited) and every time table counts them" if len(twice) else "one kernel per kernel launch"),
        ("largest_gpu_gap_ns", gap, not one_gap,
         f"one stretch of {gap / 1e9:,.1f} s without GPU work is {_pct(gap, span):.0f}% of the span: two captures, or "
         "two processes' clocks, in one trace; the span, idle time and busy % are that gap's" if one_gap
         else f"the longest stretch without GPU work, {gap / 1e6:,.3f} ms, is {_pct(gap, span):.0f}% of the span"
         + (f" (under {LONE_GAP_NS / 1e9:g} s: idle time of one run, not two clocks)" if gap > LONE_GAP_SHARE * span
            else "")),
        ("gpus_in_trace", len(devices), len(devices) <= 1,
         f"kernels on {len(devices)} GPUs ({', '.join(map(str, devices))}) in one trace: streams are per GPU "
         "(DEVICE:STREAM), but the 'all' row, the idle time and the steps read them as one GPU's busy time"
         if len(devices) > 1 else "one GPU"),
    ]


# the columns the checks read: they filter the events a dozen times, each filter on these a third of the cost of one
# on the events' forty
_READ = frozenset(("kind", "start_ns", "dur_ns", "op", "launch_api", "ranges", "graph_replay", "capture_disagrees",
                   "attributed_by", "input_dims", "module", "forward_module", "device", "stream", "correlation", "name", "linked_by"))


def _overlap_row(kernels: pd.DataFrame, kernel_ns: float) -> tuple[str, int, bool, str]:
    """Kernels overlapping on one stream: their timestamps are off, except where a kernel was launched to start
    before its predecessor ends (programmatic dependent launch, legal)."""
    overlap = _overlap_on_streams(kernels)
    dependent_ns, dependent_pairs = dependent_launch_overlap_ns(kernels)
    return ("overlapping_kernel_ns", overlap, overlap - dependent_ns <= 1e-3 * kernel_ns,
            (f"kernels on one stream overlap by {_pct(overlap - dependent_ns, kernel_ns):.3g}% of kernel time: their "
             "timestamps are off" if overlap > dependent_ns else "none wrong")
            + (f"; {dependent_pairs:,} kernels start up to {PDL_LEAD_NS / 1e3:g} µs before their predecessor ends "
               f"({dependent_ns / 1e3:,.3f} µs): programmatic dependent launch, legal" if dependent_pairs else "")
            if overlap else "none")


def _impossible_rows(all_events: pd.DataFrame, host_span: tuple[int, int] | None,
                     memory: pd.DataFrame | None) -> list[tuple[str, int, bool, str]]:
    """Durations and allocator records no run can have: damage, which the time and memory tables rest on."""
    impossible = impossible_durations(all_events, host_span)
    memory_faults, memory_fault = impossible_records(memory) if memory is not None else (0, "")
    return [
        ("impossible_durations", len(impossible), impossible.empty,
         f"{len(impossible):,} GPU event(s) ({impossible['dur_ns'].max() / 1e3:,.3f} µs the longest) hold a later "
         "kernel of their stream, or outlast the host's whole recording: damaged durations, which every time "
         "table sums" if len(impossible) else "none"),
        ("memory_records_impossible", memory_faults, memory_faults == 0,
         f"{memory_faults:,} allocator record(s) no allocator writes, the first with {memory_fault}: the memory "
         "tables' peaks and holders are not the run's" if memory_faults else "none"),
    ]


def integrity(all_events: pd.DataFrame, window: pd.Series, device_named: pd.Series,
              lost: tuple[int, int] = (0, 0), window_asked: str | None = None, processes: int = 1,
              host_span: tuple[int, int] | None = None, memory: pd.DataFrame | None = None) -> pd.DataFrame:
    """The checks over a trace's GPU events (``window``: the events the tables cover; ``device_named``: whether each
    event's device has a name in the trace; ``lost``: ``lost_launches``; ``window_asked``: the ``--window`` given, whose
    left-out events are what was asked, not a fault; ``processes``: how many processes' host calls the trace holds;
    ``host_span``: the first host event's start and the last one's end, None where it has none; ``memory``: the
    allocator's records, the decoder's ``memory`` table)."""
    all_events = all_events[[c for c in all_events.columns if c in _READ]]
    # what is only counted and summed is taken on arrays, not as filtered frames
    dur, inside = all_events["dur_ns"].to_numpy(np.int64), window.to_numpy(bool)
    outside, unnamed = int((~inside).sum()), int((~device_named.to_numpy(bool)).sum())
    no_launch = all_events["launch_api"].isna().to_numpy(bool)
    events = all_events[inside]
    kernels = events[events["kind"].isin(["kernel", "communication"])]
    kernel_ns = float(kernels["dur_ns"].sum())
    with_op = kernels[kernels["op"].notna()]
    in_range = _launched_in_a_range(kernels)
    stamps = np.concatenate([all_events["start_ns"].to_numpy(np.int64), all_events["dur_ns"].to_numpy(np.int64)])
    resolution = 1000 if stamps.size and not (stamps % 1000).any() else 1
    op_ns = with_op["dur_ns"].to_numpy(np.int64)
    shapes = op_ns[with_op["input_dims"].map(lambda d: isinstance(d, list)).to_numpy(bool)]
    own = with_op["module"].notna()
    modules = op_ns[(own | with_op["forward_module"].notna() if "forward_module" in with_op else own).to_numpy(bool)]
    rows = [
        ("attributed_kernel_time_pct", _pct(with_op["dur_ns"].sum() + in_range["dur_ns"].sum(), kernel_ns), None,
         f"{len(with_op)} of {len(kernels)} kernels have a launching op" + _linked_by(with_op)
         + (f"; {len(in_range):,} more were launched outside every op, inside a record_function range (a Triton or "
            "extension kernel called from Python: its range names the code)" if len(in_range) else "")),
        _graph_row(kernels),
        ("kernels_without_launch", int(no_launch.sum()), not no_launch.any(),
         f"{dur[no_launch].sum() / 1e3:,.3f} µs of GPU work whose launch is not in the trace (warm-up of "
         "earlier steps?)" if no_launch.any() else "every GPU event has its launch call"),
        ("events_outside_window", outside, outside == 0 or window_asked is not None,
         f"{dur[~inside].sum() / 1e3:,.3f} µs left out of every table"
         + (f", as --window {window_asked} asks" if window_asked is not None else "") if outside else "none"),
        _overlap_row(kernels, kernel_ns),
        ("timestamp_resolution_ns", resolution, resolution < 1000,
         "every time is a whole µs: short kernels lose up to 1 µs each" if resolution >= 1000 else "ns (µs with 3 decimals)"),
        ("shapes_recorded_pct", _pct(shapes.sum(), with_op["dur_ns"].sum()), None,
         "input shapes of the launching ops (record_shapes=True)"),
        ("modules_recorded_pct", _pct(modules.sum(), with_op["dur_ns"].sum()), None,
         "nn.Module paths (with_modules=True or with_stack=True; a backward kernel: its forward op's)"),
        ("kernels_without_device", unnamed, unnamed == 0,
         "GPU events on a device the trace neither names nor describes: pass --device" if unnamed else "none"),
        *_record_rows(events, kernels),
        ("host_processes", processes, processes <= 1,
         f"host calls of {processes} processes in one trace (files merged?): every table mixes them; analyse each "
         "process's trace on its own" if processes > 1 else "one process"),
        ("launches_without_gpu_event", lost[0], lost[0] == 0,
         f"{lost[0]:,} of {lost[1]:,} kernel launches have no kernel in the trace: records were lost, and every time "
         "table reads low" if lost[0] else "every kernel launch has its kernel"),
        *_impossible_rows(all_events, host_span, memory),
    ]
    return _judged(rows)


_THRESHOLDS = {"attributed_kernel_time_pct": 90.0, "graph_kernel_time_attributed_pct": 99.0,
               "shapes_recorded_pct": 1e-9, "modules_recorded_pct": 1e-9}


def _judged(rows: Sequence[tuple[str, object, bool | None, str]]) -> pd.DataFrame:
    """The rows as the table: a row without its own verdict (``ok`` None) is ok at or above its threshold, or
    with no value at all."""
    out = []
    for check, value, ok, detail in rows:
        if ok is None:
            ok = value is None or (not pd.isna(value) and value >= _THRESHOLDS[check])  # type: ignore[operator]
        out.append({"check": check, "value": value, "ok": bool(ok), "detail": detail})
    return pd.DataFrame(out)


def failed_for(rests_on: Sequence[str], checks: pd.DataFrame) -> list[str]:
    """Those of the checks a table ``rests_on`` (its section's declaration) that failed ('check (value)')."""
    if checks.empty:
        return []
    failed = checks[~checks["ok"] & checks["check"].isin(list(rests_on))]
    return [f"{c} ({v:.4g})" if isinstance(v, float) else f"{c} ({v})" for c, v in zip(failed["check"], failed["value"])]
