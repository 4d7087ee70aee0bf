"""Graph-replayed kernels attributed without their capture: aligned, replay by replay, to eager kernels of the same
model — an eager trace given beside the replay (its "eager twin"), or the engine's own eager warm-up steps in the
replay's trace.

A replay's kernels carry no op (they share their ``cudaGraphLaunch``'s correlation id); an eager step of the same
model ran the same kernels, each launched by its op inside its module. The replay's sequence of (kind, kernel name)
is aligned to each eager step's (``difflib.SequenceMatcher``, order-aware: the eager step may hold kernels and copies
the graph left out, a replay may hold nodes eager never ran) and the step that aligns best gives each matched
replayed kernel its op, shapes and module. Only kernels in equal runs are matched (a run the two replace by as many
kernels of other names is left unmatched: an ``index_select`` kernel where eager ran a ``gather`` is another op). The
share of the replay's kernels matched is every such kernel's ``attribution_confidence`` (of the replay, not of the
step: an eager step may run the graph's work several times, a decode step per token); below ``MIN_RATIO`` the step
is another computation and nothing is taken from it: generic kernels (copies, elementwise, GEMMs) alone align a
replay of decode to another model's training step by more than half (H100 fixtures: 57%, the same model's prefill
67%, its eager decode 99–100%).
"""

from __future__ import annotations

from collections.abc import Iterator
from difflib import SequenceMatcher

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.graphs import REPLAY_ID_SCALE
from fuseprof.model.intervals import grouped_in_start_order

MIN_RATIO = 0.8  # below this the best eager step holds too few of the replay's kernels in order (docstring)
COLUMNS = ("op", "input_dims", "input_type", "concrete", "module")
# how a replayed kernel was attributed (``attributed_by``): its capture trace's launch (fuseprof.analysis.facts.graphs), an
# eager twin's kernel, a warm-up step's kernel (here), its kernel family's name alone (events), nothing
ATTRIBUTED_BY = ("capture", "eager twin", "warm-up", "family", "none")


def eager_steps(events: pd.DataFrame) -> list[pd.DataFrame]:
    """The eager steps of linked GPU events (``link_gpu_events``; replayed kernels left out), each in start order:
    one per outermost range (``ProfilerStep#N``), the whole trace as one where none is recorded; only steps where
    some kernel has an op (nothing to take from the others); steps with the same kernel sequence once."""
    eager = events[events["graph_replay"].isna()] if "graph_replay" in events else events
    if eager.empty or not eager["op"].notna().any():
        return []
    key = eager["step"].astype(object).fillna("") if "step" in eager else pd.Series("", index=eager.index)
    # every step's rows in start order from one stable sort (steps in the order they first appear), and the tokens
    # of all of them made once: a grouped, sorted frame per step cost most of it (hta_torchrec's 26 steps)
    order, bounds = grouped_in_start_order(pd.factorize(key)[0], eager["start_ns"].to_numpy())
    tokens, has_op = _tokens(eager[["kind", "name"]].iloc[order]), eager["op"].notna().to_numpy()[order]
    steps, seen = [], set()
    for a, b in zip(bounds[:-1], bounds[1:]):
        names = tokens[a:b]
        if has_op[a:b].any() and names not in seen:
            seen.add(names)
            steps.append(eager.iloc[order[a:b]])
    return steps


def _tokens(part: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    """Each event as what the alignment compares: its kind and its kernel name, whitespace-trimmed."""
    return tuple(zip(part["kind"].astype(str), part["name"].astype(str).str.strip()))


def _pairs(replay: tuple[tuple[str, str], ...], step: tuple[tuple[str, str], ...]) -> tuple[list[tuple[int, int]],
                                                                                             float]:
    """The (replay position, step position) pairs the alignment matches, and the share of the replay matched."""
    matcher = SequenceMatcher(None, replay, step, autojunk=False)
    pairs: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += zip(range(i1, i2), range(j1, j2))
    return pairs, len(pairs) / max(len(replay), 1)


def align_replays(events: pd.DataFrame, steps: list[pd.DataFrame], method: str) -> pd.DataFrame:
    """``events`` (with ``graph_replay``, ``attributed_by`` and ``attribution_confidence``) with each replayed kernel
    not yet attributed given the op, shapes and module of the eager kernel it aligns to (``_Aligner``), its
    ``op_id`` one per replay and eager op (negative, as a capture's), ``attributed_by`` = ``method``.

    The replays' rows and tokens are read once for all of them and every column written once at the end (the rows
    of two replays never meet), not a grouped, sorted and assigned frame per replay: pandas' cost per call, not the
    alignment, was most of it (hta_torchrec's 70 replays of 345 kernels)."""
    todo = events["graph_replay"].notna() & (events["attributed_by"] == "none")
    if not steps or not todo.any():
        return events
    out = events.copy()
    for column in COLUMNS:
        out[column] = out[column].astype(object)
    aligner, sources = _Aligner(steps), [_Source(step) for step in steps]
    taken: list[tuple[np.ndarray, int, np.ndarray, float]] = []  # rows, step, its positions, ratio
    op_ids: list[np.ndarray] = []
    for number, rows, tokens in _replays(out, todo):
        pairs, ratio, k = aligner.align(tokens)
        if ratio < MIN_RATIO or not pairs:
            continue
        at = np.array([j for _, j in pairs], np.intp)
        has_op = sources[k].has_op[at]
        rows, at = rows[[i for i, _ in pairs]][has_op], at[has_op]
        taken.append((rows, k, at, ratio))
        op_ids.append(-(number * REPLAY_ID_SCALE + sources[k].op_id[at]))
    if taken:
        rows = np.concatenate([r for r, _, _, _ in taken])
        for column in COLUMNS:
            out.loc[rows, column] = np.concatenate([sources[k].columns[column][at] for _, k, at, _ in taken])
        out.loc[rows, "op_id"] = np.concatenate(op_ids)
        out.loc[rows, "attributed_by"] = method
        out.loc[rows, "graph_attributed"] = True  # their ops are linked by the window's op order (units)
        out.loc[rows, "attribution_confidence"] = np.concatenate([np.full(len(r), ratio) for r, _, _, ratio in taken])
    for column in ("op", "module"):
        out[column] = out[column].astype("string")
    return out


def _replays(events: pd.DataFrame, todo: pd.Series) -> Iterator[tuple[int, np.ndarray, tuple[tuple[str, str], ...]]]:
    """Per replay in ``todo``, by number: its number, its rows' labels in start order (ties in the frame's order)
    and its tokens (``_tokens``)."""
    part = events[todo]
    numbers = part["graph_replay"].to_numpy(dtype=np.int64)
    order, bounds = grouped_in_start_order(numbers, part["start_ns"].to_numpy())  # by number, then start, then row
    labels, numbers = part.index.to_numpy()[order], numbers[order]
    tokens = list(zip(part["kind"].astype(str).to_numpy()[order].tolist(),
                      part["name"].astype(str).str.strip().to_numpy()[order].tolist()))
    for a, b in zip(bounds[:-1], bounds[1:]):
        yield int(numbers[a]), labels[a:b], tuple(tokens[a:b])


class _Source:
    """An eager step's columns as arrays, read once: what its kernels give the replayed kernels aligned to them."""

    def __init__(self, step: pd.DataFrame) -> None:
        self.has_op = step["op"].notna().to_numpy()
        self.columns = {column: step[column].to_numpy(dtype=object) for column in COLUMNS}
        self.op_id = pd.to_numeric(step["op_id"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)


class _Aligner:
    """Replays, in order, aligned to the eager steps. A replay first aligns to what follows the previous replay's
    match in its step: the graphs of one step replay in the step's order, so the pieces of a piecewise graph
    (vLLM's: one per layer, each piece's kernels named as every other's) take their own layer, not the first one
    with those names. Where that part holds too little of it (a new step begins), the replay aligns to each whole
    step and the best is taken."""

    def __init__(self, steps: list[pd.DataFrame]) -> None:
        self.steps = [_tokens(s) for s in steps]
        self.at: tuple[int, int] | None = None  # (step, position) after the previous replay's last matched kernel
        self.whole: dict[tuple[tuple[str, str], ...], tuple[list[tuple[int, int]], float, int]] = {}

    def align(self, tokens: tuple[tuple[str, str], ...]) -> tuple[list[tuple[int, int]], float, int]:
        """The (replay position, step position) pairs, the share of the replay matched, and the step."""
        found: tuple[list[tuple[int, int]], float, int] | None = None
        if self.at is not None:
            k, start = self.at
            pairs, ratio = _pairs(tokens, self.steps[k][start:])
            if ratio >= MIN_RATIO:
                found = ([(i, j + start) for i, j in pairs], ratio, k)
        if found is None:
            if tokens not in self.whole:
                self.whole[tokens] = max(((*_pairs(tokens, t), k) for k, t in enumerate(self.steps)),
                                         key=lambda f: f[1])
            found = self.whole[tokens]
        pairs, ratio, k = found
        self.at = (k, pairs[-1][1] + 1) if pairs and ratio >= MIN_RATIO else None
        return found
