"""Where a long run's time went: the wall time of each (case, shape) item, in the order they ran.

A bench or a rank of a sharded run records it in its manifest, so that a slow run can be read:
the first item of a process also pays its cold start (CUDA context, Inductor import, first compile)."""

from __future__ import annotations

import time
from typing import Any


class ItemClock:
    """``done(item)`` after each item; ``items`` holds ``{"item", "s"}`` for each."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._last = self.started
        self.items: list[dict[str, Any]] = []

    def done(self, item: str) -> None:
        now = time.monotonic()
        self.items.append({"item": item, "s": round(now - self._last, 2)})
        self._last = now

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 2)
