"""Which spans of one thread are around a point in time: the walk the op links, module paths and ranges use.

Spans on one host thread nest (a CPU op inside its parent, a launch call inside its op), so one walk in time
order with a stack of the spans still open finds, for every point, the spans around it. Spans are half-open,
[start, end): a point at a span's end is after it.

The spans around a point are those with start <= point < end (the walk pops a span only once a point or a later
span's start has reached its end), so every point between two neighbouring span edges has the same ones:
``around_times`` walks once per such stretch that holds a point, not once per point (a trace's hundreds of
thousands of kernels against its few dozen steps).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np


def _walk(spans: Iterable[tuple[int | float, int | float, Any]], points: Iterable[tuple[int | float, Any]]
          ) -> Iterator[tuple[int | float, Any, list[tuple[int | float, Any]]]]:
    """Per point (time, key), in time order (ties in the order given): its time, its key and the stack of (end,
    value) of the spans started by then, outermost first, whose top has not ended by it (entries below may
    have: spans that overlap without nesting)."""
    ordered = sorted(spans, key=lambda x: (x[0], -x[1]))
    stack: list[tuple[int | float, Any]] = []
    k = 0
    for t, key in sorted(points, key=lambda x: x[0]):
        while k < len(ordered) and ordered[k][0] <= t:
            while stack and stack[-1][0] <= ordered[k][0]:
                stack.pop()
            stack.append((ordered[k][1], ordered[k][2]))
            k += 1
        while stack and stack[-1][0] <= t:
            stack.pop()
        yield t, key, stack


def around(spans: Iterable[tuple[int | float, int | float, Any]],
           points: Iterable[tuple[int | float, Any]]) -> Iterator[tuple[Any, list[Any]]]:
    """For each point (time, key) with spans (start, end, value) around it: its key and those spans' values,
    outermost first. Points are visited in time order (ties in the order given)."""
    for t, key, stack in _walk(spans, points):
        live = [value for end, value in stack if end > t]
        if live:
            yield key, live


def innermost(spans: Iterable[tuple[int | float, int | float, Any]],
              points: Iterable[tuple[int | float, Any]]) -> dict[Any, Any]:
    """Per point (time, key), the value of the innermost span around it, where one is: the top of the walk's stack
    (``around``'s last, without its list per point)."""
    return {key: stack[-1][1] for _, key, stack in _walk(spans, points) if stack}


def around_times(spans: Sequence[tuple[int, int, Any]], times: np.ndarray) -> tuple[np.ndarray, list[list[Any]]]:
    """``around`` for integer ``times`` (an int64 array; spans of Python ints): per time, the position in the list
    returned of the values of the spans around it, outermost first (an empty list: none). The lists are shared
    by every time of one stretch between span edges (the module docstring), and are not to be changed."""
    if not spans or not len(times):
        return np.zeros(len(times), np.intp), [[]]
    edges = np.unique(np.fromiter((x for s, e, _ in spans for x in (s, e)), np.int64, 2 * len(spans)))
    stretch, at = np.unique(np.searchsorted(edges, times, side="right") - 1, return_inverse=True)
    found = dict(around(spans, ((int(edges[s]), i) for i, s in enumerate(stretch.tolist()) if s >= 0)))
    return at.reshape(-1), [found.get(i, []) for i in range(len(stretch))]
