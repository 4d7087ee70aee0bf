"""Analyses kept in the trace store (``fuseprof.parse.store``) beside the decoded tables they came from.

An analysis is stored in its trace's entry (the trace's content key) under a name made of everything
else that shapes the answer (the capture trace's key, the GPU named, the window, rows per table,
measured roofs and copy model); the store's version folder already holds fuseprof's own version and
source hash. A later
run with the same inputs reads the tables back instead of recomputing them. A stored analysis reads
its (large) ``events`` table only when a caller uses it, so a parent process holding the analyses
of many ranks holds their small tables, not every rank's events.
"""

from __future__ import annotations

import dataclasses
import hashlib
from functools import partial
from typing import Any

import pandas as pd

from fuseprof.analysis.analyze import Options, TraceAnalysis
from fuseprof.model.roofline import Roof
from fuseprof.parse.store import TraceStore


def analysis_part(capture_key: str | None, options: Options) -> str | None:
    """The name an analysis is stored under in its trace's entry, or None when the options cannot be
    named stably (a user's own op registry holds functions, whose text changes from run to run)."""
    if options.registry is not None:
        return None
    text = repr((capture_key, options.device, options.top, options.window,
                 sorted((options.measured or {}).items()), options.copy))
    return f"analysis-{hashlib.blake2b(text.encode(), digest_size=8).hexdigest()}"


def save_analysis(store: TraceStore, key: str, part: str, result: TraceAnalysis, background: bool = False) -> bool:
    """Store ``result`` in the entry of trace ``key`` (in the background if asked: ``TraceStore.put_frames``);
    False where the store could not keep it."""
    frames = {**result.tables(), "events": result.events, "collectives": result.collectives}
    meta = {"device": result.device, "roof": dataclasses.asdict(result.roof), "window": result.window,
            "rank": result.rank, "notes": result.notes}
    return store.put_frames(key, part, frames, meta, background)


def load_analysis(store: TraceStore, key: str, part: str, name: str) -> TraceAnalysis | None:
    """The analysis ``part`` of trace ``key`` (named ``name``), its events read on first use; None if absent."""
    found = store.get_frames(key, part, skip=("events",))
    if found is None:
        return None
    frames, meta = found
    tables: dict[str, Any] = {k: v for k, v in frames.items()}
    result = TraceAnalysis(name=name, device=meta["device"], roof=Roof(**meta["roof"]), events=pd.DataFrame(),
                           window=meta["window"], rank=meta["rank"], notes=list(meta["notes"]), **tables)
    result.defer_events(partial(_events, store, key, part))
    return result


def _events(store: TraceStore, key: str, part: str) -> pd.DataFrame:
    found = store.get_frames(key, part, only=("events",))
    if found is None:
        raise RuntimeError(f"trace store: the events of analysis {key} went missing while in use")
    return found[0]["events"]
