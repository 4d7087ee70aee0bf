"""The analysis of one trace, the object every layer reads and ``fuseprof.analyze`` returns (in a ``Report``).

Its own module, beneath the sections that fill it: the facts, paths and judgements take it as their input's
type, and the sections that build it import them, so it cannot live beside the builder (``analyze``) without an
import circle. Which of its tables the views show, and in what order, is the sections' to say
(``fuseprof.analysis.running.sections.shown_tables``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fuseprof.model.registry import Registry
from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.roofline import Roof


@dataclass
class TraceAnalysis:
    """Every table of one trace, by name (``frames``: the sections' tables, ``fuseprof.analysis.running.sections``;
    each is also an attribute: ``result.fusion``), with the trace's name, GPU, roof, window, rank, the notes
    that say what could not be done, the op registry it was made with and the rows per top table."""

    name: str
    device: str | None
    roof: Roof
    events: pd.DataFrame
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    window: str = ""
    rank: int | None = None
    notes: list[str] = field(default_factory=list)
    world_size: int | None = None  # distributedInfo's: how many ranks the run had
    rank_from: str = "distributedInfo"  # where ``rank`` came from (``ranks.numbered_ranks``; not stored)
    registry: Registry = DEFAULT  # the op knowledge it was made with (not stored: it names the stored entry)
    top: int = 15
    source: Path | None = None  # the trace file it was read from (set by ``analyze``; not stored)

    def defer_events(self, loader: Callable[[], pd.DataFrame]) -> None:
        """Read ``events`` (the largest table) through ``loader`` when first used, not now."""
        self.__dict__.pop("events", None)
        self.__dict__["_events_loader"] = loader

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a dashboard's cache, a worker's answer) with its events: a copy does not depend on
        the store."""
        self.events  # noqa: B018 (reads deferred events)
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __getattr__(self, name: str) -> Any:
        frames = self.__dict__.get("frames", {})
        if name in frames:
            return frames[name]
        loader = self.__dict__.get("_events_loader")
        if name != "events" or loader is None:
            raise AttributeError(name)
        self.events = loader()
        del self.__dict__["_events_loader"]
        return self.events
