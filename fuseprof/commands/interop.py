"""Verbs that hand fuseprof's findings to the tools people already use: an annotated trace for Perfetto, and SQL."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fuseprof.commands.base import Command, emit, wide_option
from fuseprof.commands.traces import analyses, hash_while_importing, trace_arguments
from fuseprof.errors import FuseprofError


def _export_arguments(p: argparse.ArgumentParser) -> None:
    trace_arguments(p, 15, "(rows of the analysis kept; every finding is drawn)", None)
    p.add_argument("--perfetto", type=Path, required=True, metavar="OUT",
                   help="the file to write: OUT.json.gz or OUT.json (Chrome JSON, which Perfetto and "
                        "chrome://tracing open) or OUT.pftrace (Perfetto's protobuf; pip install 'fuseprof[interop]')")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")


def _export(args: argparse.Namespace) -> int:
    hash_while_importing(args.traces)
    from fuseprof.export.annotate import check_output, export_perfetto

    check_output(args.perfetto, [p for p in args.traces if p.is_file()], args.force)  # said before any analysis
    done = export_perfetto(analyses(args), args.perfetto, args.force)
    counts = ", ".join(f"{label}: {len(found):,} slices" for label, found in done.findings.items())
    print(f"{done.path} ({done.bytes / 1e6:.2f} MB): {done.original_events:,} original events, findings {counts}")
    if done.note:
        print(f"note: {done.note}")
    return 0


def _sql_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", nargs="?", metavar="SQL",
                   help="one SQL statement (DuckDB's dialect), e.g. \"SELECT module, sum(dur_ns) FROM kernels GROUP "
                        "BY module ORDER BY 2 DESC\"; omit it with --tables")
    trace_arguments(p, 15, "rows of the analysis's top tables", None)
    p.add_argument("--tables", action="store_true", help="list the tables and views with their columns and types")
    p.add_argument("--external-access", action="store_true",
                   help="let the query read files and URLs and DuckDB load extensions (off: it sees only the tables)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="how rows are printed")
    wide_option(p)


def _sql(args: argparse.Namespace) -> int:
    if not args.tables and not args.query:
        raise FuseprofError("sql: give a query, or --tables to see what there is to query")
    if args.tables and args.query and Path(args.query).exists():  # `sql --tables TRACE`: the trace is no query
        args.traces, args.query = [Path(args.query), *args.traces], None
    hash_while_importing(args.traces)
    from fuseprof.export.sql import catalog, described, query

    results = analyses(args)
    windows = "; ".join(dict.fromkeys(r.window.removeprefix("window: ") for r in results))
    hint = "" if windows == "the whole trace" else " (--window all: every GPU event)"
    print(f"fuseprof: sql: kernels and the analysis tables hold {windows}{hint}; cpu_ops, runtime_calls, modules "
          "and annotations the whole trace", file=sys.stderr)
    tables = catalog(results)
    frame = described(tables) if args.tables else query(tables, args.query, args.external_access)
    if args.format != "table":
        emit(frame, args.format, args.wide, versioned=bool(args.tables))  # a query's rows have the query's columns
        return 0
    from fuseprof.commands.render import table_text

    print(table_text(frame, args.wide) + ("\n(0 rows)" if frame.empty else ""))  # every column, even an empty one
    return 0


COMMANDS = (
    Command("export", "an annotated trace for Perfetto: the original events plus fuseprof's findings", _export,
            _export_arguments,
            "Writes the traces back as one trace that Perfetto (ui.perfetto.dev) and chrome://tracing open: every "
            "original event exactly as written, plus a process 'fuseprof · …' whose tracks hold the findings — one "
            "slice per fusion chain over its kernels (a track per opportunity class, the predicted saving in its "
            "args), the GPU's idle gaps named by cause, the profiler steps and a training step's phases, and across "
            "ranks each rank's waits for the last rank at every collective. Overlapping slices go on lanes of their track, so none is hidden. "
            "Several ranks merge into one file, each rank's pids and flow ids made its own. Design: "
            "fuseprof/export/chrome.py."),
    Command("sql", "SQL over the analysis tables of traces and ranks (DuckDB)", _sql, _sql_arguments,
            "One SQL statement over the tables of the traces given, every row with its trace and rank. kernels: "
            "each GPU event of the analysed window (--window; by default the profiler steps where the trace has "
            "them, so kernels outside every step are not in it: --window all takes them) with its op, module, "
            "category and step; its kind is 'kernel', 'communication' (NCCL/RCCL collectives: kind = 'kernel' "
            "leaves them out), 'memcpy' or 'memset'. cpu_ops: despite its name, only the CPU ops that launched GPU "
            "work (an op that launched nothing is not in it), over the whole trace. runtime_calls (runtime and "
            "driver calls), modules (nn.Module ranges), annotations (record_function ranges): the whole trace. "
            "Every table of `fuseprof analyze` by name (the window's), and across ranks rank_summary, "
            "collective_skew, late_arrivals, stragglers; views kernel_ops (kernel ↔ op ↔ module) and "
            "gemm_per_step. The window used is said on stderr. Needs DuckDB (pip install 'fuseprof[interop]'). "
            "Columns: --tables; docs/interop.md."),
)
