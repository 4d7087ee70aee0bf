"""The linked GPU events of a trace (``fuseprof.parse.trace_link``) with a category each."""

from __future__ import annotations

import pandas as pd

from fuseprof.analysis.categories import Rule, categorize
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import link_gpu_events


def categorized_events(tables: TraceTables, rules: list[Rule] | None = None) -> pd.DataFrame:
    events = link_gpu_events(tables)
    events["category"] = categorize(events["kind"], events["op"], events["name"], rules)
    return events
