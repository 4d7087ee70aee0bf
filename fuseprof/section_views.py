"""Every view of an analysis from the one table of sections (``fuseprof.analysis.running.sections``): which tables a
trace shows, in order, each as the columns its declaration names, in text (the terminal, the HTML report)
or as numbers in the shown units (the dashboard, sortable), with its title, the failed integrity checks it
rests on, its figure and its summary line. The terminal, the report, a notebook's display and the Model page
call these and nothing section-specific, so a new section appears in all of them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd

from fuseprof.analysis.facts.integrity import failed_for
from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.running.sections import Column, Section, Table, rank_sections, trace_sections
from fuseprof.display import is_identifier, number_text
from fuseprof.model.devices import DEVICES, REFERENCE_DEVICE
from fuseprof.model.roofline import datasheet_roof


@dataclass(frozen=True)
class Shown:
    """One table as a view shows it: its declaration, title, its warnings (``flags``: sentences — the failed
    checks it rests on, percentages above 100), the rows in the shown columns, what draws its figure (or None)
    and the summary sentence (or ''). The figure is drawn when first asked for: the terminal and JSON views
    never ask, so they never import Plotly."""

    section: Section
    table: Table
    title: str
    flags: list[str]
    frame: pd.DataFrame
    draw: Callable[[], Any] | None
    summary: str

    @cached_property
    def figure(self) -> Any:
        """The table's Plotly figure, or None where it has none."""
        return self.draw() if self.draw is not None else None


def _number(value: Any) -> float | None:
    if value is None or value is pd.NA or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _text(value: Any, column: Column) -> str:
    """One cell as a person reads it, by the column's format."""
    fmt = column.format
    if fmt == "okfail":
        return "" if value is None or value is pd.NA else "ok" if bool(value) else "FAILED"
    number = _number(value)
    if fmt.startswith("text") or number is None and fmt != "g4":
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return column.missing
        text = str(value)
        width = int(fmt.split(":")[1]) if fmt.startswith("text:") else 0
        return text if not width or len(text) <= width else text[: width - 1] + "…"
    if number is None:
        return column.missing
    if fmt == "us":
        return number_text(number / 1e3, 3)
    if fmt == "int":
        return str(int(number)) if is_identifier(column.header) else number_text(int(number))
    if fmt == "g4":
        return number_text(number)
    if fmt.startswith("round:"):
        return number_text(number, int(fmt.split(":")[1]))
    if fmt.startswith(("scale:", "fixed:")):
        _, divisor, decimals = fmt.split(":")
        return number_text(number / float(divisor), int(decimals))
    return str(value)


_NUMERIC = ("us", "int", "g4", "round:", "scale:", "fixed:")


def _value(value: Any, column: Column) -> Any:
    """One cell as a number in the shown unit where the format is numeric (the dashboard sorts them; a
    missing number is empty, not a word)."""
    fmt, number = column.format, _number(value)
    if number is None and fmt.startswith(_NUMERIC):
        return None
    if fmt in ("us",) and number is not None:
        return round(number / 1e3, 3)
    if fmt.startswith(("scale:", "fixed:")) and number is not None:
        _, divisor, decimals = fmt.split(":")
        return round(number / float(divisor), int(decimals))
    if fmt.startswith("round:") and number is not None:
        return round(number, int(fmt.split(":")[1]))
    if fmt in ("int", "g4") and number is not None:
        return number if isinstance(value, float) and fmt == "g4" else int(number)
    return _text(value, column)


def shown_frame(table: Table, frame: pd.DataFrame, text: bool = True, rows: int | None = None) -> pd.DataFrame:
    """The declared columns of ``frame`` under their headers, as text (``text``) or as numbers in the shown
    units; ``rows``: at most so many."""
    part = frame.head(rows) if rows is not None else frame
    out: dict[str, list[Any]] = {}
    for column in table.columns:
        if column.source not in part:
            continue
        values = part[column.source]
        if column.optional and values.isna().all():
            continue
        cells = [_text(v, column) if text else _value(v, column) for v in values]
        if column.only_if is not None:
            other, pattern = column.only_if
            keep = part[other].astype(str).str.contains(pattern, regex=True).tolist() if other in part else []
            cells = [c if k else "" if text else None for c, k in zip(cells, keep)]
        out[column.header] = cells
    return pd.DataFrame(out, index=range(len(part)))


_FIGURES = {  # each takes the figures module, the table and the analysis
    "timeline": lambda f, table, result: f.timeline_figure(table),
    "categories": lambda f, table, result: f.categories_figure(table),
    "steps": lambda f, table, result: f.steps_figure(table),
    "phases": lambda f, table, result: f.phases_figure(table),
    "memory": lambda f, table, result: f.memory_figure(result.frames.get("memory_timeline", pd.DataFrame())),
    "roofline": lambda f, table, result: f.roofline_figure(table, [result.roof],
                                                          datasheet_roof(DEVICES[REFERENCE_DEVICE])),
}


def _figure(name: str, table: pd.DataFrame, result: TraceAnalysis | None) -> Any:
    """The figure called ``name`` of one table. Plotly is imported here, when a view draws one."""
    from fuseprof import figures

    return _FIGURES[name](figures, table, result)


def _is_percentage(source: str) -> bool:
    """A column of a percentage of a whole or of a limit (the tables' naming: ``*_pct``, ``pct_of_*``): above 100
    it is no measurement."""
    return source.endswith("_pct") or source.startswith("pct_of_")


def _flags(table: Table, frame: pd.DataFrame, result: TraceAnalysis | None) -> list[str]:
    """What a view says above a table, as sentences: the failed integrity checks it rests on, and each
    percentage column holding values above 100 — a share larger than its whole, a rate above its roof, which
    means the model's FLOPs or bytes, or the trace's times, are off in those rows."""
    failed = failed_for(table.rests_on, result.integrity) if result is not None and table.rests_on else []
    out = [f"rests on failed integrity checks: {', '.join(failed)}"] if failed else []
    for column in table.columns:
        if _is_percentage(column.source) and column.source in frame:
            over = int((pd.to_numeric(frame[column.source], errors="coerce") > 100.0 + 1e-9).sum())
            if over:
                out.append(f"{column.header}: {over} row(s) above 100%, which no measurement reaches (a share "
                           "beyond its whole, a rate above its roof): the FLOPs or bytes modelled, or the trace's "
                           "times, are off there")
    return out


def _shown(section: Section, table: Table, frame: pd.DataFrame, result: TraceAnalysis | None, text: bool,
           rows: int | None) -> Shown:
    flags = _flags(table, frame, result)
    name = table.figure
    draw = (lambda: _figure(name, frame, result)) if name and not frame.empty else None
    return Shown(section, table, table.heading(frame, result), flags, shown_frame(table, frame, text, rows), draw,
                 table.summary(frame) if table.summary is not None else "")


def trace_views(result: TraceAnalysis, text: bool = True, only: str | None = None,
                rows: int | None = None) -> Iterator[Shown]:
    """Each shown table of one trace, in section order (``only``: that table alone; ``rows``: at most so
    many rows of a table limited to the top N, which is the analysis's own ``top`` otherwise)."""
    for section in trace_sections():
        for table in section.tables:
            if not table.shown or (only is not None and table.name != only):
                continue
            frame = result.frames.get(table.name, pd.DataFrame())
            if table.hide_empty and frame.empty:
                continue
            limit = (rows or result.top) if table.rows == "top" else None
            yield _shown(section, table, frame, result, text, limit)


def rank_views(results: list[TraceAnalysis], tables: dict[str, pd.DataFrame], text: bool = True,
               wide: bool = False) -> Iterator[Shown]:
    """The across-ranks tables (``tables``: ``fuseprof.analysis.running.sections.build_across``), with each rank's
    wait per collective beside the skew up to 8 ranks (or all, ``wide``)."""
    for section in rank_sections():
        for table in section.tables:
            frame = tables.get(table.name, pd.DataFrame())
            if not table.shown or (table.hide_empty and frame.empty):
                continue
            shown = _shown(section, table, _most(table, frame), None, text, 10 if table.name == "stragglers" else None)
            yield _with_waits(shown, frame, text, wide) if table.name == "collectives" else shown


def _most(table: Table, frame: pd.DataFrame) -> pd.DataFrame:
    """The 15 collectives of most skew, in order, when there are more."""
    if table.name == "collectives" and len(frame) > 15:
        return frame.nlargest(15, "skew_ns").sort_values("seq")
    return frame


def _with_waits(shown: Shown, frame: pd.DataFrame, text: bool, wide: bool) -> Shown:
    waits = sorted((c for c in frame.columns if re.fullmatch(r"wait_ns_rank\d+", c)),
                   key=lambda c: int(c.removeprefix("wait_ns_rank")))
    if len(waits) > 8 and not wide:
        return shown
    part = _most(shown.table, frame)
    extra = shown_frame(Table("waits", "", tuple(Column(f"rank {c.removeprefix('wait_ns_rank')} waits µs", c, "us")
                                                  for c in waits)), part, text)
    return Shown(shown.section, shown.table, shown.title, shown.flags, pd.concat([shown.frame, extra], axis=1),
                 shown.draw, shown.summary)


def several_ranks(results: list[TraceAnalysis]) -> bool:
    """Traces of two or more ranks of one distributed run: the across-ranks sections apply. Two or more traces that
    communicate are such a set too, whether they name the same rank or none (no ``distributedInfo``: ranks by file
    name, ``ranks.numbered_ranks`` numbers them and says how), not single runs."""
    ranked = [r for r in results if r.rank is not None]
    return len({r.rank for r in ranked}) > 1 or sum(not r.collectives.empty for r in results) > 1
