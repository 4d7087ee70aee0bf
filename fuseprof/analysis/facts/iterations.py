"""Iterations: the repeating unit of work a trace holds — a training step, a decode step — found from what
the trace records, not from one annotation.

The first source that finds any, in this order:
1. the ``record_function`` ranges of the registry's ``iteration_ranges`` (torch.profiler's ``ProfilerStep#N``,
   SGLang's ``step[DECODE bs=32]``, vLLM's ``execute_…_context_…_generation_…``): the first row whose ranges
   the trace holds; each range is an iteration (numbered ``#k`` in time order where its name has no number);
2. the period of the launch sequence: each eager kernel, memcpy or memset is one launch, and each graph
   launch one (its kernels together), in the order their ops or launch calls started; a launch the host
   reached after a wait (a gap over 5× the median gap between launches and over 100 µs: data loading, a sync) differs from the same
   launch reached straight away, so a step whose body is an inner loop is one iteration, not many. The period is the
   smallest ``p`` at which the sequence best matches itself shifted by ``p`` (candidates: the spacing of each
   launch name's occurrences), kept when it matches ≥ 80% of positions, repeats at least twice and the
   repeats hold ≥ 90% of the distinct launches (a single forward pass, whose layers repeat but whose
   embedding and head do not, has no iterations). An iteration starts where the host waited longest
   between launches, at the same place in every period: the launch whose preceding host gap, summed over
   the periods, is largest.

Each iteration is a time range on the host's clock (``start_ns``, ``dur_ns``; ``tid`` ``*``: any thread), so
GPU events (by the start of the op or launch call that started them) and memory records take the
iteration around them (``step_at``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.aggregate import aggregate
from fuseprof.model.registry import Registry
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import enclosing, rows_named

_NUMBERED = re.compile(r"#(\d+)$")
MIN_MATCH = 0.8  # share of positions a period must repeat
MIN_VOCABULARY = 0.9  # share of distinct launches the repeats must hold
LONG_WAIT, LONG_WAIT_NS = 5, 100_000  # a launch after a host gap this much longer than usual is another launch
_CANDIDATES = 64  # periods tried, most common spacing first
_COLUMNS = ["name", "start_ns", "dur_ns", "tid"]


@dataclass(frozen=True)
class Iterations:
    """A trace's iterations (``ranges``: ``name``, ``start_ns``, ``dur_ns``, ``tid``), what found them
    (``source``: 'torch.profiler', 'SGLang', 'the launch sequence', …; '' for none), and whether the tables
    cover only them unless ``--window`` says otherwise (``default``)."""

    ranges: pd.DataFrame
    source: str
    default: bool = False

    @property
    def found(self) -> bool:
        return not self.ranges.empty

    def describe(self) -> str:
        """One line: how many iterations, found how."""
        if not self.found:
            return "iterations: none (no step ranges, no repeating launch sequence)"
        return f"iterations: {len(self.ranges)} ({self.source})"


NONE = Iterations(pd.DataFrame(columns=_COLUMNS), "")


def number(label: object) -> int | None:
    """The iteration number in a label ('ProfilerStep#12' → 12, 'step[DECODE bs=32] #3' → 3), or None."""
    match = _NUMBERED.search(label) if isinstance(label, str) else None
    return int(match.group(1)) if match else None


def find_iterations(tables: TraceTables, events: pd.DataFrame, registry: Registry) -> Iterations:
    """The trace's iterations (the module docstring): by range, else by the launch sequence's period."""
    for row in registry.iteration_ranges:
        spans = rows_named(tables.annotations, row.ranges)
        if not spans.empty:
            spans = spans.sort_values("start_ns", kind="stable")
            names = spans["name"].astype(str)
            unnumbered = names.map(number).isna().to_numpy()
            ordinal = pd.Series(np.arange(1, len(spans) + 1), index=spans.index).astype(str)
            names = names.where(~unnumbered, names + " #" + ordinal)
            ranges = spans.assign(name=names, tid="*")[_COLUMNS].reset_index(drop=True)
            return Iterations(ranges, row.source, row.default)
    return _by_period(events)


def step_at(iterations: Iterations, times: pd.Series) -> pd.Series:
    """Per time (ns on the trace's clock; null stays null), the iteration around it (null: none)."""
    anchor = pd.DataFrame({"start_ns": times, "tid": "*"}, index=times.index).dropna()
    anchor["start_ns"] = anchor["start_ns"].astype(np.int64)
    found = _in_disjoint(iterations.ranges, anchor["start_ns"].to_numpy(np.int64))
    if found is None:
        return enclosing(iterations.ranges, anchor, None).reindex(times.index)
    return pd.Series(found, index=anchor.index, dtype="string").reindex(times.index)


def _in_disjoint(ranges: pd.DataFrame, times: np.ndarray) -> np.ndarray | None:
    """Per time, the name of the range around it (None: none), by one search over the range starts, where the
    ranges one after another never overlap (steps: every trace's case); None where they do (nested or overlapping
    ranges: ``enclosing``'s walk, whose innermost answer this equals on disjoint ones). A search, not a walk in
    Python per time: a trace records hundreds of thousands of events for its steps to be counted on."""
    ranges = ranges[(ranges["tid"].astype(str) == "*").to_numpy(bool)]
    if ranges.empty or not len(times):
        return None
    start = ranges["start_ns"].to_numpy(np.int64)
    end = start + ranges["dur_ns"].to_numpy(np.int64)
    order = np.lexsort((-end, start))  # the walk's order: by start, the longer first
    start, end = start[order], end[order]
    if (end[:-1] > start[1:]).any():
        return None
    names = np.array([str(n) for n in ranges["name"].to_numpy(object)[order]] + [None], dtype=object)
    k = np.searchsorted(start, times, "right") - 1
    inside = (k >= 0) & (times < end[np.maximum(k, 0)])
    return names[np.where(inside, k, len(start))]


def _launches(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The launch sequence: per launch (an eager GPU event, or a graph launch's kernels together) a code
    for what it launched, and the host time it started, in that order."""
    anchor = events["op_start_ns"].fillna(events["launch_start_ns"])
    timed = events[anchor.notna()].assign(anchor=anchor[anchor.notna()].astype(np.int64))
    if timed.empty:
        return np.array([], np.int64), np.array([], np.int64)
    replay = timed["graph_replay"].astype("string") if "graph_replay" in timed else pd.Series(
        pd.NA, index=timed.index, dtype="string")
    replayed = replay.notna().to_numpy()
    # an eager event is a launch of its own; a graph launch's kernels are one, in their order (by first position)
    position = np.arange(len(timed))
    eager = pd.DataFrame({"first": position[~replayed], "anchor": timed["anchor"].to_numpy()[~replayed],
                          "what": [str(n) for n in timed["name"].to_numpy(object)[~replayed]]})
    graphs = aggregate(timed[replayed].assign(first=position[replayed]).groupby(replay[replayed], sort=False),
                       first=("first", "min"), anchor=("anchor", "min"),
                       what=("name", lambda names: "\x00".join(map(str, names))))
    if len(graphs):  # concatenated only then: an empty frame's columns could turn the int64 times to float
        eager = pd.concat([eager, graphs.reset_index(drop=True)], ignore_index=True).sort_values("first", kind="stable")
    units = eager
    units = units.sort_values("anchor", kind="stable")
    anchors = units["anchor"].to_numpy(np.int64)
    gaps = np.diff(anchors, prepend=anchors[0])
    positive = gaps[gaps > 0]  # launches of one op start together: their gap is no measure of the host's pace
    usual = float(np.median(positive)) if positive.size else 0.0
    waited = gaps > max(LONG_WAIT * usual, LONG_WAIT_NS)  # the host did something else first
    same = (units["what"] == units["what"].iloc[0]).to_numpy()
    waited[0] = waited[same][1:].mean() > 0.5 if same.sum() > 1 else False  # the first launch's wait is unseen
    codes = pd.factorize(units["what"] + np.where(waited, "\x01", ""))[0].astype(np.int64)
    return codes, anchors


def _candidate_periods(codes: np.ndarray) -> np.ndarray:
    """Periods worth trying: the most common spacing between consecutive occurrences of each launch."""
    order = np.argsort(codes, kind="stable")
    same = codes[order][1:] == codes[order][:-1]
    gaps = np.diff(order)[same]
    gaps = gaps[(gaps > 0) & (gaps <= codes.size // 2)]
    if not gaps.size:
        return gaps
    values, counts = np.unique(gaps, return_counts=True)
    return np.sort(values[np.argsort(-counts, kind="stable")[:_CANDIDATES]])


def _best_period(codes: np.ndarray) -> tuple[int, float]:
    """The smallest period within 1% of the best self-match (0 where none repeats), and its match."""
    scored = [(float(np.mean(codes[:-p] == codes[p:])), int(p)) for p in _candidate_periods(codes)]
    if not scored:
        return 0, 0.0
    best = max(score for score, _ in scored)
    return min(p for score, p in scored if score >= best - 0.01), best


def _offset(anchors: np.ndarray, period: int) -> int:
    """Where in the period an iteration starts: the position whose shortest preceding host gap over the
    periods is longest (a true boundary waits in every iteration; the trace's first launch counts as one)."""
    gaps = np.diff(anchors, prepend=np.iinfo(np.int64).min // 2).astype(np.float64)
    gaps[0] = np.inf
    return int(np.argmax([gaps[r::period].min() for r in range(period)]))


def _by_period(events: pd.DataFrame) -> Iterations:
    codes, anchors = _launches(events)
    period, match = _best_period(codes) if codes.size >= 2 else (0, 0.0)
    if not period or match < MIN_MATCH:
        return NONE
    offset = _offset(anchors, period)
    starts = np.arange(offset, codes.size - period + 1, period)
    if starts.size < 2 or np.unique(codes[offset:starts[-1] + period]).size < MIN_VOCABULARY * np.unique(codes).size:
        return NONE
    ends = np.append(anchors[starts[1:]] - 1, anchors[starts[-1] + period - 1] + 1)  # ranges hold their end
    ranges = pd.DataFrame({"name": [f"iteration #{k + 1}" for k in range(starts.size)],
                           "start_ns": anchors[starts], "dur_ns": ends - anchors[starts], "tid": "*"})
    return Iterations(ranges, f"the launch sequence: a period of {period} launches, {match:.0%} repeated")
