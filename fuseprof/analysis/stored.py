"""Analyses kept in the trace store (``fuseprof.parse.store``) beside the decoded tables they came from.

An analysis is stored under a key made of the trace's content key and everything that shapes the
answer (the capture trace's key, the GPU named, the window, rows per table, measured roofs and copy
model); the store's version folder already holds fuseprof's own version and source hash. A later
run with the same inputs reads the tables back instead of recomputing them. A stored analysis reads
its (large) ``events`` table only when a caller uses it, so a parent process holding the analyses
of many ranks holds their small tables, not every rank's events.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pandas as pd

from fuseprof.analysis.analyze import Options, TraceAnalysis
from fuseprof.model.roofline import Roof
from fuseprof.parse.store import TraceStore

_PART = "analysis"


def analysis_key(trace_key: str, capture_key: str | None, options: Options) -> str | None:
    """The store key of one analysis, or None when the options cannot be named stably (a user's own op
    registry holds functions, whose text changes from run to run)."""
    if options.registry is not None:
        return None
    text = repr((trace_key, capture_key, options.device, options.top, options.window,
                 sorted((options.measured or {}).items()), options.copy))
    return f"{trace_key}-{hashlib.blake2b(text.encode(), digest_size=8).hexdigest()}"


def save_analysis(store: TraceStore, key: str, result: TraceAnalysis) -> None:
    frames = {**result.tables(), "events": result.events, "collectives": result.collectives}
    meta = {"device": result.device, "roof": dataclasses.asdict(result.roof), "window": result.window,
            "rank": result.rank, "notes": result.notes}
    store.put_frames(key, _PART, frames, meta)


def load_analysis(store: TraceStore, key: str, name: str) -> TraceAnalysis | None:
    """The stored analysis under ``key`` (named ``name``), its events read on first use; None if absent."""
    found = store.get_frames(key, _PART, skip=("events",))
    if found is None:
        return None
    frames, meta = found
    tables: dict[str, Any] = {k: v for k, v in frames.items()}
    result = TraceAnalysis(name=name, device=meta["device"], roof=Roof(**meta["roof"]), events=pd.DataFrame(),
                           window=meta["window"], rank=meta["rank"], notes=list(meta["notes"]), **tables)
    result.defer_events(lambda: _events(store, key))
    return result


def _events(store: TraceStore, key: str) -> pd.DataFrame:
    found = store.get_frames(key, _PART, only=("events",))
    if found is None:
        raise RuntimeError(f"trace store: the events of analysis {key} went missing while in use")
    return found[0]["events"]
