"""Analyses kept in the trace store (``fuseprof.parse.store``) beside the decoded tables they came from.

An analysis is stored in its trace's entry (the trace's content key) under a name made of everything
else that shapes the answer (the capture trace's key, the GPU named, the window, rows per table,
measured roofs and copy model, and the op registry's fingerprint: a registry a user extended never gets
an answer made with another); the store's version folder already holds fuseprof's own version and
source hash. A later
run with the same inputs reads the tables back instead of recomputing them. The (large) ``events``
table is not stored: the trace's decoded tables are, and a stored analysis rebuilds its events from
them when a caller first uses them (diff, gate, report), so a parent holding the analyses of many
ranks holds their small tables, not every rank's events.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pandas as pd

from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.running.analyze import Options
from fuseprof.model.registry import Registry
from fuseprof.model.roofline import Roof
from fuseprof.parse.store import TraceStore


def analysis_part(capture_key: str | None, options: Options, execution_trace_key: str | None = None) -> str:
    """The name an analysis is stored under in its trace's entry (with the capture trace's and the
    execution trace's content keys, when they shaped it)."""
    text = repr((capture_key, options.device, options.top, options.window,
                 sorted((options.measured or {}).items()), options.copy, options.registry.fingerprint(),
                 *([execution_trace_key] if execution_trace_key else [])))
    return f"analysis-{hashlib.blake2b(text.encode(), digest_size=8).hexdigest()}"


def analysis_meta(result: TraceAnalysis) -> dict[str, Any]:
    """What the store keeps of an analysis beside its tables, as the store gives it back: through JSON (a tuple
    comes back a list), so an analysis handed over in memory equals one read back."""
    return json.loads(json.dumps({"device": result.device, "roof": dataclasses.asdict(result.roof),
                                  "window": result.window, "rank": result.rank, "world_size": result.world_size,
                                  "notes": result.notes, "top": result.top}))


def save_analysis(store: TraceStore, key: str, part: str, result: TraceAnalysis, background: bool = False) -> bool:
    """Store ``result`` in the entry of trace ``key`` (in the background if asked: ``TraceStore.put_frames``);
    False where the store could not keep it."""
    return store.put_frames(key, part, dict(result.frames), analysis_meta(result), background)  # events: rebuilt


def analysis_from(frames: dict[str, pd.DataFrame], meta: dict[str, Any], name: str,
                  events: Callable[[], pd.DataFrame], registry: Registry) -> TraceAnalysis:
    """The analysis of ``frames`` and ``meta`` (``analysis_meta``'s), named ``name``, its events from ``events``
    when first used: rebuilt from the stored tables (``analyze.windowed_events``, a fraction of the analysis),
    not stored twice."""
    result = TraceAnalysis(name=name, device=meta["device"], roof=Roof(**meta["roof"]), events=pd.DataFrame(),
                           frames=frames, window=meta["window"], rank=meta["rank"], world_size=meta.get("world_size"),
                           notes=list(meta["notes"]), registry=registry, top=int(meta["top"]))
    result.defer_events(events)
    return result


def load_analysis(store: TraceStore, key: str, part: str, name: str, events: Callable[[], pd.DataFrame],
                  registry: Registry) -> TraceAnalysis | None:
    """The analysis ``part`` of trace ``key`` (named ``name``; ``analysis_from``); None if absent."""
    found = store.get_frames(key, part)
    return None if found is None else analysis_from(*found, name, events, registry)
