"""The walk over a thread's spans (``fuseprof.parse.nesting``): ``innermost`` (the op around a launch, a host segment
of the path) is the last of the spans ``around`` lists, on random spans that nest, overlap without nesting, or
have no length, and points before, inside, at the edges of and after them."""

from __future__ import annotations

import random

from fuseprof.parse.nesting import around, innermost


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
