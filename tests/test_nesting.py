"""The walk over a thread's spans (``fuseprof.parse.nesting``): ``innermost`` (the op around a launch, a host segment
of the path) is the last of the spans ``around`` lists, on random spans that nest, overlap without nesting, or
have no length, and points before, inside, at the edges of and after them."""

from __future__ import annotations

import random

import numpy as np

from fuseprof.parse.nesting import around, around_times, innermost


def test_innermost_is_the_last_span_around_each_point() -> None:
    rng = random.Random(0)
    checked = 0
    for _ in range(3000):
        spans = []
        for i in range(rng.randint(0, 30)):
            start = rng.randint(0, 100)
            spans.append((start, start + rng.choice([0, 1, rng.randint(0, 50)]), f"span {i}"))
        points = [(rng.randint(-5, 160), j) for j in range(rng.randint(0, 40))]
        expected = {key: live[-1] for key, live in around(spans, points)}
        assert innermost(spans, points) == expected
        checked += len(expected)
    assert checked > 10_000


def test_a_point_at_a_span_end_is_after_it() -> None:
    spans = [(0, 10, "outer"), (2, 5, "inner")]
    assert innermost(spans, [(5, "at inner's end"), (4, "inside inner"), (10, "at outer's end")]) == \
        {"at inner's end": "outer", "inside inner": "inner"}


def test_around_times_gives_each_time_the_spans_the_walk_finds() -> None:
    """The walk once per stretch between span edges (``around_times``) against the walk once per point
    (``around``), on the same random spans: the same values, in the same order, for every time."""
    rng = random.Random(1)
    checked = 0
    for _ in range(2000):
        spans = []
        for i in range(rng.randint(0, 30)):
            start = rng.randint(0, 100) + 1_700_000_000_000_000_000  # ns on an epoch clock: past float precision
            spans.append((start, start + rng.choice([0, 1, rng.randint(0, 50)]), f"span {i}"))
        times = [rng.randint(-5, 160) + 1_700_000_000_000_000_000 for _ in range(rng.randint(0, 40))]
        expected = dict(around(spans, [(t, j) for j, t in enumerate(times)]))
        at, lives = around_times(spans, np.array(times, dtype=np.int64))
        assert [lives[k] for k in at.tolist()] == [expected.get(j, []) for j in range(len(times))]
        checked += len(expected)
    assert checked > 5_000
