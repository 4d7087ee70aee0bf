"""Which spans of one thread are around a point in time: the walk the op links, module paths and ranges use.

Spans on one host thread nest (a CPU op inside its parent, a launch call inside its op), so one walk in time
order with a stack of the spans still open finds, for every point, the spans around it. Spans are half-open,
[start, end): a point at a span's end is after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


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
