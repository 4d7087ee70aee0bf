"""Which collective kernel on one rank is which on another, by structure (issue 61, point 3).

Every rank issues a communicator's collectives in one order (NCCL requires it), and a trace's window holds a
contiguous run of them: a rank's collectives are the reference rank's shifted by a whole number of places (a
window that starts a collective earlier or later). The shift is the one under which the most pairs are the same
collective — the same kind and size (its bytes, its launching op's ``Input Dims``) and ends that agree within the
collective's transfer time once the ranks' clock offset (the median difference of the pairs' ends) is taken off: a
collective ends on every rank together, when the last rank has arrived and the data moved. A pair that differs in
kind, size or end is no pair, whatever its place. Neither a start's overlap (a collective starting in the very µs
the previous one ended overlaps that one) nor the position alone decides.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.iterations import number

SLACK_NS = 2_000  # on top of the transfer time: a writer of whole µs rounds each of two ends by up to 1 µs
NEAR = 2  # shifts tried beyond the difference in length and around the ends' nearest pairs
MODE_UP_TO = 512  # pairs up to which the offset is the most agreed-on difference (a square of comparisons)
JOB_START_STEP = 1  # a window whose first step is ProfilerStep#0 or #1 holds the job's start


def signature(part: pd.DataFrame) -> np.ndarray:
    """Per collective, its kind and size as one text: what must agree between ranks for a pair."""
    shape = part["shape"].astype("string").fillna("") if "shape" in part else ""
    size = part["bytes"].astype("string").fillna("")
    return (part["collective"].astype("string").fillna("") + "|" + size + "|" + shape).to_numpy(str)


Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]  # one rank's collectives in start order: signature, end, duration


def pairing(ref: Arrays, mine: Arrays) -> np.ndarray:
    """Per collective of ``mine``, the place in ``ref`` of the same collective, -1 where none (the module
    docstring). The best shift sets the ranks' clock offset; the collectives it leaves unpaired (a collective one
    trace lost mid-window: a dropped step, a truncated buffer) are then paired under the other shifts, at that
    offset and keeping both ranks' order."""
    (sig_r, end_r, dur_r), (sig_m, end_m, dur_m) = ref, mine
    n, m = len(end_r), len(end_m)

    def agree(k: int, offset: int | None) -> tuple[np.ndarray, np.ndarray, int]:
        j = np.arange(max(0, -k), min(m, n - k))  # mine[j] is ref[j + k]
        i = j + k
        same = sig_m[j] == sig_r[i]
        if not same.any():
            return j[:0], i[:0], 0
        differences = end_m[j] - end_r[i]  # small integers where the clocks are one: exact on any clock
        tolerance = np.minimum(dur_m[j], dur_r[i]) + SLACK_NS
        offset = _offset(differences[same], tolerance[same]) if offset is None else offset
        ok = same & (np.abs(differences - offset) <= tolerance)
        return j[ok], i[ok], offset

    shifts = _shifts(end_r, end_m)
    tried = {k: agree(k, None) for k in shifts}
    if not any(len(j) for j, _, _ in tried.values()):
        return np.full(m, -1, np.int64)
    best = max(shifts, key=lambda k: (len(tried[k][0]), -abs(tried[k][2]), -abs(k)))
    found = np.full(m, -1, np.int64)
    j, i, offset = tried[best]
    found[j] = i
    for k in sorted(shifts, key=lambda k: abs(k - best)):
        for a, b in zip(*agree(k, offset)[:2]):
            if found[a] < 0 and _in_order(found, int(a), int(b)):
                found[a] = b
    return found


def _offset(differences: np.ndarray, tolerance: np.ndarray) -> int:
    """The clock offset most pairs agree on: the difference of ends that the most others lie within their
    tolerance of (a median of two pairs, one of them wrong, agrees with neither); past ``MODE_UP_TO`` pairs the
    median, which most pairs being right makes right."""
    if len(differences) > MODE_UP_TO:
        return int(np.median(differences))
    near = np.abs(differences[None, :] - differences[:, None]) <= tolerance[None, :]
    return int(differences[int(np.argmax(near.sum(axis=1)))])


def _in_order(found: np.ndarray, a: int, b: int) -> bool:
    """Whether pairing ``mine[a]`` with ``ref[b]`` keeps the pairs in both ranks' order (and ``ref[b]`` free)."""
    before, after = found[:a][found[:a] >= 0], found[a + 1:][found[a + 1:] >= 0]
    return (not len(before) or int(before[-1]) < b) and (not len(after) or int(after[0]) > b)


def _shifts(end_r: np.ndarray, end_m: np.ndarray) -> list[int]:
    """The shifts worth trying: none to a few beyond the difference in length (windows that hold the same run, or
    one more or less at either end), and those that pair each end of ``mine`` with the reference's nearest end
    on the raw clocks (a window that starts or stops far from the other's)."""
    n, m = len(end_r), len(end_m)
    reach = abs(n - m) + NEAR
    found = set(range(-reach, reach + 1))
    for j in (0, m - 1):
        at = int(np.clip(np.searchsorted(end_r, end_m[j]), 0, n - 1))
        near = min((a for a in (at - 1, at) if 0 <= a < n), key=lambda a: abs(int(end_r[a]) - int(end_m[j])))
        found |= set(range(near - j - NEAR, near - j + NEAR + 1))
    return sorted(k for k in found if -m < k < n)


def aligned(both: pd.DataFrame) -> pd.DataFrame:
    """Every rank's collectives (``fuseprof.analysis.facts.collectives``), those numbered by order renumbered as the
    reference rank's (of the communicator, the rank holding most of its collectives; the lowest of those) they
    pair with (``pairing``); a collective that pairs with none is its rank's only (``…#rank R only N``).
    Collectives numbered by ``Seq`` stay. On arrays, one sort per communicator: a frame's filter, sort and
    assignment per rank cost a millisecond each."""
    by_order = both["seq"].isna().to_numpy(bool)
    if not by_order.any():
        return both
    rows = np.flatnonzero(by_order)
    signatures = signature(both.iloc[rows])
    communicators = both["communicator"].astype("string").fillna("").to_numpy(object)[rows]
    ranks = pd.to_numeric(both["rank"]).fillna(-1).to_numpy(np.int64)[rows]  # a rank not numbered: one apart
    starts = both["start_ns"].to_numpy(np.int64)[rows]
    ends, durations = both["end_ns"].to_numpy(np.int64)[rows], both["dur_ns"].to_numpy(np.int64)[rows]
    orders = both["order"].to_numpy(np.int64)[rows].copy()
    matches = both["match"].to_numpy(object)[rows].copy()
    codes, names = pd.factorize(communicators)
    sorted_rows = np.lexsort((starts, ranks, codes))  # by communicator, rank, start
    for code, communicator in enumerate(names):
        mine_all = sorted_rows[codes[sorted_rows] == code]
        rank_of = ranks[mine_all]
        cut = np.flatnonzero(np.diff(rank_of)) + 1
        per_rank = dict(zip(rank_of[np.r_[0, cut]].tolist(), np.split(mine_all, cut)))
        most = max(len(v) for v in per_rank.values())
        reference = min(r for r, v in per_rank.items() if len(v) == most)
        ref = per_rank[reference]
        ref_arrays = (signatures[ref], ends[ref], durations[ref])
        for rank, mine in per_rank.items():
            if rank == reference:
                continue
            at = pairing(ref_arrays, (signatures[mine], ends[mine], durations[mine]))
            order = np.where(at >= 0, orders[ref][np.maximum(at, 0)], -1 - orders[mine])
            orders[mine] = order
            matches[mine] = [f"{communicator}#order {o}" if o >= 0 else f"{communicator}#rank {rank} only {-1 - o}"
                             for o in order.tolist()]
    out = both.copy()
    out.iloc[rows, out.columns.get_loc("order")] = orders
    out.iloc[rows, out.columns.get_loc("match")] = matches
    return out


def holds_job_start(group: pd.DataFrame) -> bool:
    """Whether a communicator's first collective in the window can be the job's first (its skew then the ranks'
    start-up offset, not a wait): where a rank's window holds the job's start — its step is ProfilerStep#0 or #1,
    or it lies in no numbered step (a capture of the whole run). A window of step 10 holds no start-up."""
    if "step" not in group:
        return True
    numbers = [number(s) for s in group["step"].tolist()]
    return any(n is None or n <= JOB_START_STEP for n in numbers)
