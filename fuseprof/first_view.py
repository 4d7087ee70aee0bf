"""The dashboard's first view, built where an analysis is made: the Model page's top — the caption, the verdict, whether
the window has a picker, and the first window's kernel timeline as Plotly JSON — kept in the trace store beside the
trace's entry, so that ``fuseprof dashboard TRACE`` after ``fuseprof analyze TRACE`` draws it before pandas and the
analysis are imported (issue 58; ``dashboards/first_view.py`` reads and draws it, ``dashboards/model_page.py`` draws
the same top from the analysis and keeps it where it is missing).

The timeline is built here without Plotly (``timeline_json``: a Plotly figure's JSON, less the template, which Plotly
adds where it is drawn; the one builder of the kernel timeline): the table and JSON verbs that write the view import
no plotting library, and the page draws this same JSON in both of its paths, so a chart drawn from the kept view is
the chart drawn from the analysis.

Never stale: the view lives in the entry of the trace's content key (the SHA-256 of its bytes), under the store's
version folder (fuseprof's version and the hash of its source), under a name made of the trace's name (as the
dashboard names it: the file's name) and the rows per top table. Only an analysis made as the dashboard makes its
own keeps one: top ``FIRST_TOP``, no device, window, registry, ceilings or capture trace named, no execution trace
beside the trace. This module imports nothing heavy at its top: the dashboard's first script run imports it
before pandas.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from fuseprof.analysis import TraceAnalysis
    from fuseprof.parse.store import TraceStore

FIRST_TOP = 15  # the Model page's rows per top table unless the URL says otherwise (``fuseprof analyze``'s default)
TIMELINE_BARS = 3000  # GPU events one timeline draws: a step of a large trace stays light in the browser
FIELDS: dict[str, type | tuple[type, ...]] = {"name": str, "caption": str, "verdict": (str, type(None)), "picker": bool,
                                              "figure": str}
HOVER = "%{customdata[0]}<br>%{customdata[1]}: %{x:,.3f} µs from %{customdata[2]:,.3f} µs<extra></extra>"


def part(name: str) -> str:
    """The name the first view of the trace named ``name`` is kept under in its trace's entry."""
    digest = hashlib.blake2b(repr((name, FIRST_TOP)).encode(), digest_size=8).hexdigest()
    return f"dashboard-first-view-{digest}"


def read(store: TraceStore, key: str, name: str) -> dict[str, Any] | None:
    """The view of trace ``key`` named ``name`` kept in ``store``, or None (absent, or a field missing or of the wrong
    type, or a view of another name: then not used)."""
    found = store.get_frames(key, part(name), only=())
    if found is None:
        return None
    view = found[1]
    if any(not isinstance(view.get(field), kind) for field, kind in FIELDS.items()) or view["name"] != name:
        return None
    return view


def save(store: TraceStore, key: str, name: str, view: dict[str, Any]) -> bool:
    """Keep ``view`` (``build``'s, less its name) for trace ``key`` named ``name`` (once: a view already there is the
    same one); whether it is there."""
    if read(store, key, name) is not None:
        return True
    return store.put_frames(key, part(name), {}, {**view, "name": name})


def timeline_json(rows: pd.DataFrame, title: str) -> str:
    """Each GPU event of a window (``analysis.facts.timeline.window_events``) as a bar over time on its stream's row,
    as Plotly JSON built without Plotly: one horizontal bar trace per category (sorted; a missing one is "other"),
    each bar in µs from the window's first start, the kernel, its op ("(no op)" where none) and its start in the
    hover; every string of the trace's as text (``fuseprof.display.plain``, as ``figures.as_text`` makes it). Arrays are plain JSON lists; the
    layout has no template (Plotly gives the one in use where the figure is drawn)."""
    import numpy as np

    from fuseprof.display import plain

    origin = int(rows["start_ns"].min()) if len(rows) else 0
    category = (rows["category"].astype(object).fillna("other") if "category" in rows
                else rows["start_ns"].map(lambda _: "other"))
    data = []
    for name, group in rows.groupby(category, sort=True):
        start_us = (group["start_ns"] - origin).to_numpy(np.float64) / 1e3
        ops = group["op"].astype(object).fillna("(no op)").tolist() if "op" in group else [""] * len(group)
        kernels = group["name"].astype(object).tolist()
        data.append({"base": start_us.tolist(),
                     "customdata": [[plain(k), plain(o), s] for k, o, s in zip(kernels, ops, start_us.tolist(),
                                                                                  strict=True)],
                     "hovertemplate": HOVER, "name": plain(name), "orientation": "h",
                     "x": (group["dur_ns"].to_numpy(np.float64) / 1e3).tolist(),
                     "y": [plain(lane) for lane in group["lane"].astype(object).tolist()], "type": "bar"})
    lanes = rows["lane"].nunique() if len(rows) else 1
    layout = {"bargap": 0.2, "barmode": "overlay", "height": 300 + 40 * int(lanes), "hoverlabel": {"namelength": -1},
              "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
              "title": {"text": plain(title)}, "xaxis": {"title": {"text": "µs from the window's first GPU event"}},
              "yaxis": {"autorange": "reversed"}}
    return json.dumps({"data": data, "layout": layout}, separators=(",", ":"))


def timeline(events: pd.DataFrame, window: str) -> tuple[str, int, int]:
    """The window's timeline as Plotly JSON (``timeline_json``), the events it draws and the events the window
    holds."""
    from fuseprof.analysis.facts.timeline import window_events

    rows, total = window_events(events, window, TIMELINE_BARS)
    return timeline_json(rows, f"GPU timeline: {window}"), len(rows), total


def caption(name: str, result: TraceAnalysis) -> str:
    """The line under the title: the trace, its GPU, the roof, the span and how busy the GPU was."""
    from fuseprof.display import md_text

    whole = result.timeline.iloc[0]
    return (f"{md_text(name)} · {md_text(result.device or 'device unknown')} · roof: {md_text(result.roof.label)}"
            f" · span {whole['span_ns'] / 1e3:,.3f} µs, GPU busy {whole['busy_ns'] / 1e3:,.3f} µs "
            f"({whole['busy_pct']:.1f}%)")


def verdict(result: TraceAnalysis) -> str | None:
    """The verdict box's Markdown (None where the analysis has no verdict): the bound without the profiler and as
    traced, where the time goes, and the first advice with its one saving
    (``fuseprof.analysis.running.sections.verdict.headline``: the words the report and the terminal print)."""
    from fuseprof.analysis.running.sections.verdict import headline
    from fuseprof.display import md_text

    frame = result.frames.get("verdict")
    return None if frame is None or frame.empty else md_text(headline(frame))


def build(name: str, result: TraceAnalysis) -> dict[str, Any]:
    """The first view of ``result`` (the analysis of the trace named ``name``), less its name."""
    from fuseprof.analysis.facts.timeline import timeline_windows

    windows = timeline_windows(result.events)
    return {"caption": caption(name, result), "verdict": verdict(result), "picker": len(windows) > 1,
            "figure": timeline(result.events, windows[0])[0]}


def keep(store: TraceStore, key: str, name: str, result: TraceAnalysis) -> bool:
    """The first view of ``result`` kept for trace ``key`` named ``name`` (built only where none is kept: a stored
    analysis rebuilds its events to build it); whether it is there."""
    if read(store, key, name) is not None:
        return True
    return save(store, key, name, build(name, result))
