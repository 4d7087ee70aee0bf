"""``fuseprof analyze``'s output: terminal tables in human units (≤ 120 characters a line), or the
same tables as JSON or one long CSV in base units for scripts. Formatting only: no analysis here."""

from __future__ import annotations

import contextlib
import json
import math
import textwrap
from collections.abc import Callable, Collection, Iterator

import msgspec
import pandas as pd

from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.judgements.changes import Changes, unrelated_evidence
from fuseprof.analysis.running.sections import build_across, shown_tables
from fuseprof.commands.base import JSON_SCHEMA_VERSION, emit
from fuseprof.commands.render import WIDTH, cell_text, clean_text, table_text
from fuseprof.display import cells_as_text
from fuseprof.section_views import Shown, rank_views, several_ranks, trace_views


def us(ns: float) -> str:
    """Nanoseconds as microseconds with three decimals: exact, and readable."""
    return "" if ns is None or (isinstance(ns, float) and math.isnan(ns)) else f"{ns / 1e3:,.3f}"


def _short(text: object, width: int) -> str:
    s = cell_text(text)
    return s if len(s) <= width else s[: width - 1] + "…"


_WIDE = [False]  # --wide, for the print_* calls inside ``width(...)``


@contextlib.contextmanager
def width(wide: bool) -> Iterator[None]:
    """Inside, tables print as wide as their content (``wide``) or at most 120 columns."""
    before, _WIDE[0] = _WIDE[0], wide
    try:
        yield
    finally:
        _WIDE[0] = before


def _line(text: str) -> None:
    """A line of prose, wrapped at the table width unless --wide."""
    text = clean_text(text)
    print(text if _WIDE[0] else textwrap.fill(text, WIDTH, subsequent_indent="  "))


def _print(title: str, frame: pd.DataFrame, flags: list[str] | None = None) -> None:
    print()
    _line(title)
    if flags:
        for flag in flags:
            _line(f"  ⚠ {flag}")
    if frame.empty:
        print("  (none)")
        return
    print(table_text(frame, _WIDE[0]))


def _show(shown: Shown) -> None:
    _print(shown.title, shown.frame, shown.flags)
    if shown.summary:
        _line(shown.summary)


def chosen_tables(result: TraceAnalysis, only: Collection[str] | None = None) -> dict[str, pd.DataFrame]:
    """The trace's tables (``shown_tables``), or those named in ``only`` (``analyze --sections``)."""
    tables = shown_tables(result)
    return tables if not only else {name: frame for name, frame in tables.items() if name in only}


def print_analysis(result: TraceAnalysis, only: Collection[str] | None = None) -> None:
    """Every section of one trace (``fuseprof.analysis.running.sections``), in order; only the tables named in ``only``
    where it is given."""
    _line(f"== {result.name}  ({result.device or 'device unknown'}; roof: {result.roof.label}"
          f"{'; rank ' + str(result.rank) if result.rank is not None else ''}; {result.window})")
    for note in result.notes:
        _line(f"note: {note}")
    for shown in trace_views(result):
        if not only or shown.table.name in only:
            _show(shown)


def print_table(result: TraceAnalysis, table: str, rows: int | None = None) -> None:
    """One section table of a trace, as ``analyze`` prints it (``rows``: at most so many of a top-N table)."""
    for shown in trace_views(result, only=table, rows=rows):
        _show(shown)


def print_verification(table: pd.DataFrame, bundle: str) -> None:
    """The verified chains: the finder's prediction per chain beside the replay, eager and compiled."""
    def column(name: str, fmt: Callable[[float], str]) -> pd.Series:
        return table[name].map(lambda v: "" if pd.isna(v) else fmt(v)) if name in table else pd.Series("", table.index)

    _print(f"Predictions checked by running them ({bundle}; per chain; realised = eager − compiled replay, "
           "CUDA graph replay with L2 flushed; fuseprof/verify/table.py)", pd.DataFrame({
               "#": table["fusion_row"], "class": table["chain_class"], "ops in order": table["signature"].map(
                   lambda s: _short(s, 70)),
               "kernels": table["chain_kernels"], "trace µs": column("trace_chain_ns", us),
               "predicted fused µs": column("predicted_fused_ns", us),
               "predicted saving µs": column("predicted_saving_ns", us), "eager µs": column("eager_ns", us),
               "compiled µs": column("compiled_ns", us), "compiled kernels": column("compiled_kernels", lambda v: f"{int(v)}"),
               "realised saving µs": column("realised_saving_ns", us),
               "error %": column("error_pct", lambda v: f"{v:+.0f}"), "fuseprof kernel µs": column("fuseprof_ns", us),
               "its error %": column("fuseprof_error_pct", lambda v: f"{v:+.0f}"), "check": table["verdict"]}), None)
    errors = table["error_pct"].dropna().abs() if "error_pct" in table else pd.Series(dtype=float)
    if not errors.empty:
        _line(f"|error| over {len(errors)} timed chain(s): median {errors.median():.0f}%, worst {errors.max():.0f}%")


def show_verification(table: pd.DataFrame, fmt: str, wide: bool) -> None:
    """A verification table (``fuseprof.verify.table``) as `fusion --verify` and `compare` show it: one
    printed table per bundle, or every row in csv/json."""
    if fmt != "table":
        emit(table, fmt, wide)
        return
    with width(wide):
        for bundle, part in table.groupby("bundle", sort=False):
            print_verification(part, str(bundle))


def to_json(results: list[TraceAnalysis], only: Collection[str] | None = None) -> str:
    """Every table of every trace, keyed by the trace's name (then ``across_ranks`` for a set of ranks), after the
    layout's ``schema_version``."""
    body: dict[str, object] = {"schema_version": JSON_SCHEMA_VERSION}
    for r in results:
        tables = {name: json.loads(cells_as_text(t).to_json(orient="records"))
                  for name, t in chosen_tables(r, only).items()}
        body[str(r.name)] = {"device": r.device, "roof": r.roof.label, "rank": r.rank, "notes": r.notes, **tables}
    if several_ranks(results):
        body["across_ranks"] = {name: json.loads(t.to_json(orient="records")) for name, t in build_across(results).items()}
    return indented_json(body)


def indented_json(body: object) -> str:
    """``json.dumps(body, indent=1)``, byte for byte: the standard library indents in Python (its C encoder only
    writes compact text), a few ms a rank of a rank set's output; encoded compact in C and indented by msgspec's
    formatter, which only moves whitespace. A NaN or infinity (which strict JSON, and so the formatter, has no
    word for) takes the standard library's way."""
    try:
        return msgspec.json.format(json.dumps(body, allow_nan=False), indent=1)
    except ValueError:
        return json.dumps(body, indent=1)


def to_long_frame(results: list[TraceAnalysis], only: Collection[str] | None = None) -> pd.DataFrame:
    parts = [cells_as_text(t).assign(trace=r.name, table=name) for r in results
             for name, t in chosen_tables(r, only).items()]
    frame = pd.concat(parts, ignore_index=True)
    return frame[["trace", "table", *[c for c in frame.columns if c not in ("trace", "table")]]]


def print_ranks(results: list[TraceAnalysis]) -> None:
    """The across-ranks sections (communication per rank, each collective's skew with per-rank waits up to 8
    ranks or all with --wide, the stragglers and the straggler line); nothing for a single process."""
    if not several_ranks(results):
        return
    print(f"\n== across {len(results)} ranks")
    for shown in rank_views(results, build_across(results), wide=_WIDE[0]):
        _show(shown)


def print_job_path(results: list[TraceAnalysis]) -> None:
    """``fuseprof path`` on several ranks: the job's path across them (which rank, and what on it, set each
    step); nothing for a single process."""
    if not several_ranks(results):
        return
    from fuseprof.analysis.running.sections.job_path import SECTION

    print(f"\n== across {len(results)} ranks")
    for shown in rank_views(results, dict(SECTION.build_ranks(results)), wide=_WIDE[0]):  # type: ignore[misc]
        if shown.section is SECTION:
            _show(shown)


def print_diff(a: str, b: str, tables: dict[str, pd.DataFrame], top: int) -> None:
    """``fuseprof diff``: the totals, then categories and the ``top`` op signatures by time delta."""
    print(f"A: {a}\nB: {b}")
    t = tables["totals"].copy()
    times, sizes = t["metric"].str.endswith("_ns"), t["metric"].str.endswith("_bytes")  # each row in its unit
    for column in ("a", "b", "delta"):
        shown = t[column].astype(object).where(~times, t[column].map(us))
        t[column] = shown.where(~sizes, t[column].map(lambda v: f"{v / 1e6:,.1f}"))
    t["metric"] = t["metric"].str.replace(r"_ns$", " µs", regex=True).str.replace(r"_bytes$", " MB", regex=True)\
        .str.replace("_", " ")
    _print("", t.rename(columns={"metric": "total"}))
    for name in ("categories", "ops"):
        d = tables[name].head(top if name == "ops" else len(tables[name]))
        _print("", pd.DataFrame({
            name[:-1] if name == "ops" else "category": d["key"].str.slice(0, 72), "A µs": d["time_ns_a"].map(us),
            "B µs": d["time_ns_b"].map(us), "Δ µs": d["time_delta_ns"].map(us), "A launches": d["launches_a"],
            "B launches": d["launches_b"], "change": d["change"]}))


def print_modules(aligned: Changes, top: int) -> None:
    """``fuseprof diff``'s aligned view: what changed by module (``fuseprof.analysis.judgements.changes``), the ``top``
    modules by time delta, the matched share and the unmatched remainder; 'unrelated' with its evidence."""
    summary = aligned.summary
    d = aligned.modules.head(top)
    _print("by module (aligned by what is computed: module path, op and shapes, order)", pd.DataFrame({
        "module": d["part"].str.slice(-72), "A µs": d["time_ns_a"].map(us), "B µs": d["time_ns_b"].map(us),
        "Δ µs": d["delta_ns"].map(us), "A kernels": d["kernels_a"].round(1), "B kernels": d["kernels_b"].round(1),
        "B launches": d["launches_b"].round(1), "A share %": d["share_a_pct"].round(1), "change": d["change"]}))
    step_a, step_b = int(summary["step_a_ns"]), int(summary["step_b_ns"])  # type: ignore[call-overload]
    print(f"\naligned: {float(summary['matched_a_pct']):.1f}% of A's GPU time (a step: {us(step_a)} µs; B's "  # type: ignore[arg-type]
          f"{us(step_b)} µs) matched to B; unmatched: A {us(int(summary['unmatched_a_ns']))} µs, "  # type: ignore[call-overload]
          f"B {us(int(summary['unmatched_b_ns']))} µs")  # type: ignore[call-overload]
    if not summary["related"]:
        print(f"unrelated: {unrelated_evidence(summary)}")
    for note in summary["notes"]:  # type: ignore[attr-defined]
        print(f"note: {note}")
