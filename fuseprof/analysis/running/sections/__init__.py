"""The table of analysis sections: what ``fuseprof analyze`` computes for a trace, and how each view shows it.

A section is one module of this package that defines ``SECTION``: its tables, how to build them from the
trace (``build``, given a ``Context``: the trace's events and what the sections before it built), and how
each table is shown (``Table``: title, the columns a person reads with their format, a figure by name, the
integrity checks it rests on). Every view is generated from this table — the terminal (``fuseprof
analyze``), JSON and CSV (every column, base units), the HTML report, a notebook's display and the
dashboard's Model page — so a new section is one new module here and nothing else (docs/sections.md has a
worked example), and every view shows every section (tests/test_sections.py checks the four).

Sections are found by listing this package; ``order`` places them, ``needs`` names the tables a section
reads from others (they are built first). A section whose ``scope`` is ``ranks`` is built from several
ranks' analyses (``build_ranks``), once, for the views' across-ranks part.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from fuseprof.analysis.facts.iterations import NONE as NO_ITERATIONS
from fuseprof.analysis.facts.iterations import Iterations
from fuseprof.parse.text_arrays import python_strings

if TYPE_CHECKING:
    from fuseprof.analysis.facts.opgraph import OpGraph
    from fuseprof.analysis.facts.result import TraceAnalysis
    from fuseprof.analysis.facts.units import Units
    from fuseprof.analysis.judgements.fusion import CopyModel
    from fuseprof.analysis.paths.critical_path import StepGraph
    from fuseprof.model.registry import Registry
    from fuseprof.model.roofline import Roof
    from fuseprof.parse.trace_events import TraceTables

# How a column is shown: "text" (as is), "text:N" (cut to N characters), "us" (ns as µs, 3 decimals, thousands
# separated), "round:N" (N decimals at most), "scale:D:N" (divided by D, rounded to N decimals: bytes as MB is
# scale:1e6:3), "fixed:D:N" (divided by D, exactly N decimals, thousands separated), "okfail" (a bool as ok /
# FAILED), "g4" (4 significant digits, integers whole), "int".
Format = str


@dataclass(frozen=True)
class Column:
    """One column a person reads: its ``header`` (with its unit), the table's ``source`` column and its
    ``format``; ``missing`` is shown for a null (``unknown``: the model could not say); ``only_if`` = (column,
    regex): blank unless that column matches; ``optional``: left out when it has no value at all."""

    header: str
    source: str
    format: Format = "text"
    missing: str = ""
    only_if: tuple[str, str] | None = None
    optional: bool = False


@dataclass(frozen=True)
class Table:
    """One result table: its ``name`` (the key in JSON/CSV and ``shown_tables``), its ``title``
    (a text, or a function of the table and its analysis, for one that says its rates), the ``columns`` shown,
    a ``summary`` sentence after it, a ``figure``
    (a name in ``fuseprof.figures.FIGURES``), the integrity checks it ``rests_on``, whether the views show
    it when empty (``hide_empty``), how many rows they show (``rows``: ``top`` — the analysis's top N —, or
    all), and whether it is shown at all (``shown``: a table other sections read, like collectives)."""

    name: str
    title: str | Callable[[pd.DataFrame, Any], str]
    columns: tuple[Column, ...] = ()
    figure: str | None = None
    rests_on: tuple[str, ...] = ()
    hide_empty: bool = False
    rows: Literal["top", "all"] = "all"
    shown: bool = True
    summary: Callable[[pd.DataFrame], str] | None = None  # a sentence the views print after the table

    def heading(self, frame: pd.DataFrame, result: Any = None) -> str:
        """The title (a title function gets the table and the analysis it belongs to, or None across ranks)."""
        return self.title(frame, result) if callable(self.title) else self.title


@dataclass
class Context:
    """What a section builds from: the decoded trace, its linked and classified GPU events (``every``) and
    those of the window (``events``), the options' op registry and rows per table, the roof and copy model
    judged against, the op graph (by the execution trace where one was recorded, else by shapes), the trace's
    iterations, the window the user asked for, and the tables built so far."""

    tables: TraceTables
    every: pd.DataFrame
    events: pd.DataFrame
    mask: pd.Series
    registry: Registry
    top: int
    roof: Roof
    copy: CopyModel
    graph: OpGraph | None = None
    iterations: Iterations = NO_ITERATIONS
    window_asked: str | None = None  # the --window the user gave (None: the default window)
    built: dict[str, pd.DataFrame] = field(default_factory=dict)
    _units: Units | None = field(default=None, repr=False)
    _step_graphs: list[StepGraph] | None = field(default=None, repr=False)

    def units(self) -> Units:
        """The window's units on the op graph (``fuseprof.analysis.facts.units``), built once for every section."""
        if self._units is None:
            from fuseprof.analysis.facts.units import window_units

            self._units = window_units(self.events, self.graph, self.registry, self._regions())
        return self._units

    def _regions(self) -> tuple[str, ...]:
        """The names of the user annotations that started in the window: its steps' ranges (a step's last range
        may launch nothing and start after its last kernel ended), else its GPU events' span."""
        spans, events = self.tables.annotations, self.events
        if events.empty:
            return ()
        start, end = int(events["start_ns"].min()), int(events["end_ns"].max())
        if self.iterations.found and "profiler_step" in events:
            steps = self.iterations.ranges[self.iterations.ranges["name"].astype(str).isin(
                set(events["profiler_step"].dropna().astype(str).tolist()))]
            if len(steps):
                start = min(start, int(steps["start_ns"].min()))
                end = max(end, int((steps["start_ns"] + steps["dur_ns"]).max()))
        inside = ((spans["start_ns"] >= start) & (spans["start_ns"] < end)).to_numpy(bool)
        return tuple(spans.loc[inside, "name"].astype(str))

    def step_graphs(self) -> list[StepGraph]:
        """Each step's dependency graph (``fuseprof.analysis.paths.critical_path``), built once for every section."""
        if self._step_graphs is None:
            from fuseprof.analysis.paths.critical_path import step_graphs

            self._step_graphs = step_graphs(self.events, self.tables, self.registry, self.iterations)
        return self._step_graphs


@dataclass(frozen=True)
class Section:
    """A section (the module docstring): its name, a description (what it answers, where its formulas
    are), its tables, and how to build them."""

    name: str
    description: str
    tables: tuple[Table, ...]
    order: int
    build: Callable[[Context], Mapping[str, pd.DataFrame]] | None = None
    build_ranks: Callable[[list[TraceAnalysis]], Mapping[str, pd.DataFrame]] | None = None
    needs: tuple[str, ...] = ()
    scope: Literal["trace", "ranks"] = "trace"


@lru_cache(maxsize=1)
def sections() -> tuple[Section, ...]:
    """Every section of this package, in display order."""
    found = [importlib.import_module(f"{__name__}.{m.name}").SECTION for m in pkgutil.iter_modules(__path__)
             if not m.name.startswith("_")]
    return tuple(sorted(found, key=lambda s: s.order))


def trace_sections() -> tuple[Section, ...]:
    return tuple(s for s in sections() if s.scope == "trace")


def rank_sections() -> tuple[Section, ...]:
    return tuple(s for s in sections() if s.scope == "ranks")


def table_spec(name: str, scope: Literal["trace", "ranks"] = "trace") -> Table:
    """The declaration of the table called ``name`` (of a trace's sections, or of the across-ranks ones)."""
    return next(t for s in sections() if s.scope == scope for t in s.tables if t.name == name)


def build_order() -> tuple[Section, ...]:
    """The trace sections in an order that builds every table a section needs before it."""
    done: set[str] = set()
    ordered: list[Section] = []
    pending = list(trace_sections())
    while pending:
        ready = next((s for s in pending if set(s.needs) <= done), None)
        if ready is None:
            raise RuntimeError(f"sections {[s.name for s in pending]} need tables no section builds")
        ordered.append(ready)
        done |= {t.name for t in ready.tables}
        pending.remove(ready)
    return tuple(ordered)


def build_all(context: Context) -> dict[str, pd.DataFrame]:
    """Every trace section's tables (in ``context.built`` as they come, for the sections after)."""
    for section in build_order():
        assert section.build is not None, section.name
        context.built.update(section.build(context))
    return context.built


def shown_tables(result: TraceAnalysis) -> dict[str, pd.DataFrame]:
    """The tables the views show, in section order (JSON, CSV, a report's list; those other sections read alone
    are left out): a table the analysis lacks is an empty frame, so every view lists every section."""
    return {t.name: result.frames.get(t.name, pd.DataFrame()) for s in trace_sections() for t in s.tables if t.shown}


@python_strings()
def build_across(results: list[TraceAnalysis]) -> dict[str, pd.DataFrame]:
    """The across-ranks sections' tables for several ranks' analyses (their collectives grouped and matched once
    for all of them: ``ranks.one_rank_set``)."""
    from fuseprof.analysis.facts.ranks import one_rank_set

    out: dict[str, pd.DataFrame] = {}
    with one_rank_set(results):
        for section in rank_sections():
            assert section.build_ranks is not None, section.name
            out.update(section.build_ranks(results))
    return out

