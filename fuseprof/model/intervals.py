"""Unions and overlaps of [start, end) intervals in integer ns: busy time counts overlapping work once."""

from __future__ import annotations

import numpy as np


def runs(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For intervals sorted by start: where each run of overlapping (or touching) ones begins, the positions of
    the first members of ``merge``'s unions."""
    if start.size == 0:
        return np.zeros(0, np.int64)
    reach = np.maximum.accumulate(end)
    new = np.empty(start.size, dtype=bool)
    new[0] = True
    new[1:] = start[1:] > reach[:-1]
    return np.flatnonzero(new)


def grouped_in_start_order(codes: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Rows grouped by ``codes`` (integers), each group in start order (ties: the rows' order): the positions in
    that order, and each group's bounds in it (``order[bounds[g]:bounds[g + 1]]`` is group g, groups by code). One
    stable sort for every group, where a groupby and a sorted frame per group cost pandas' overhead each time."""
    order = np.lexsort((start, codes))
    if not order.size:
        return order, [0]
    ordered = codes[order]
    return order, np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True]).tolist()


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as sorted, disjoint intervals."""
    if start.size == 0:
        return start.astype(np.int64), end.astype(np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    firsts = runs(s, e)
    return s[firsts], np.maximum.reduceat(e, firsts)


def union_ns(start: np.ndarray, end: np.ndarray) -> int:
    s, e = merge(start, end)
    return int((e - s).sum())


def overlap_ns(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Length of (∪a) ∩ (∪b) for two merged interval sets."""
    return int(covered_ns(a, b[0], b[1]).sum())


def _measure_before(merged: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """Length of (∪merged) ∩ (−∞, t) for each t: the measure below t, exact in int64."""
    s, e = merged
    before = np.concatenate([[0], np.cumsum(e - s)])  # measure of the intervals before interval k
    k = np.searchsorted(s, t, side="right") - 1  # the last interval starting at or before t
    inside = np.minimum(t, e[np.maximum(k, 0)]) - s[np.maximum(k, 0)]
    return np.where(k >= 0, before[np.maximum(k, 0)] + np.maximum(inside, 0), 0)


def covered_ns(merged: tuple[np.ndarray, np.ndarray], start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each interval [start, end), the length it shares with a merged interval set (one pass of
    binary searches instead of a loop over every pair)."""
    if merged[0].size == 0:
        return np.zeros(start.size, np.int64)
    return _measure_before(merged, end) - _measure_before(merged, np.minimum(start, end))


def apart(codes: np.ndarray, start: np.ndarray, end: np.ndarray, groups: int
          ) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Intervals of ``groups`` groups (``codes``: each interval's group, 0..groups-1) moved onto one line where no
    two groups meet: group k's into [k·width, (k+1)·width), its lengths and order unchanged. Then one ``merge``,
    ``union_ns`` or ``covered_ns`` on the moved intervals is every group's at once, and ``moved // width`` is the
    group of any point of them. None where int64 cannot hold the line (the caller goes group by group)."""
    if start.size == 0:
        return start.astype(np.int64), end.astype(np.int64), 1
    low = int(min(start.min(), end.min()))
    width = int(max(start.max(), end.max())) - low + 1
    if width * groups >= 1 << 62:
        return None
    shift = codes.astype(np.int64) * width - low
    return start + shift, end + shift, width


def group_sums(codes: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Per group, the exact int64 sum of ``values`` (``codes``: each value's group)."""
    out = np.zeros(groups, np.int64)
    np.add.at(out, codes, values.astype(np.int64))
    return out
