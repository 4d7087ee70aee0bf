"""Verbs over a step's dependency graph: its critical path, and what a plan would make of it."""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from fuseprof.commands.base import Command, emit
from fuseprof.commands.paths import input_path
from fuseprof.commands.traces import _one_table, analyses, trace_arguments
from fuseprof.errors import InvalidArgumentError

if TYPE_CHECKING:  # pandas loads with the analysis: a wrong path is said before it (tests/test_first_hour.py)
    import pandas as pd


def _path(args: argparse.Namespace) -> int:
    from fuseprof.commands.trace_views import print_job_path, print_table

    def show(result) -> None:  # type: ignore[no-untyped-def]
        print_table(result, "critical_path")
        print_table(result, "path_top", args.top)

    return _one_table(args, "critical_path", show, across=print_job_path)


PLAN_BYTES = 2**20  # a plan names a few fusions and regions: a larger file is not one


def _plan(args: argparse.Namespace) -> tuple[list[str], list[str], list[str]]:
    """The plan's fusions, graph regions and compiled regions: from --fuse/--graph/--compile and a --plan file
    ({"fuse": [...], "graph": [...], "compile": [...]})."""
    fuse, graph, compiled = list(args.fuse or ()), list(args.graph or ()), list(args.compile or ())
    if args.plan is not None:
        from fuseprof.parse.textio import read_settings

        text = read_settings(Path(args.plan), f"--plan {args.plan}", PLAN_BYTES)
        try:
            given = json.loads(text)
        except ValueError as exc:
            raise InvalidArgumentError(f"--plan {args.plan}: not valid JSON ({exc})") from None
        except RecursionError:
            raise InvalidArgumentError(f"--plan {args.plan}: JSON nested too deeply for a plan") from None
        if not isinstance(given, dict) or set(given) - {"fuse", "graph", "compile"} or \
                not all(isinstance(v, list) for v in given.values()):
            raise InvalidArgumentError(f"--plan {args.plan}: give a JSON object of 'fuse', 'graph' and/or 'compile' lists")
        fuse += [str(x) for x in given.get("fuse", [])]
        graph += [str(x) for x in given.get("graph", [])]
        compiled += [str(x) for x in given.get("compile", [])]
    for option, given in (("--fuse", fuse), ("--graph", graph), ("--compile", compiled)):
        empty = [g for g in given if not g.strip()]
        if empty:  # an unset variable: '' would match every row, a plan the user never gave
            raise InvalidArgumentError(f"{option} {empty[0]!r}: an empty plan entry (an unset variable?); give "
                                       + ("top:N, all or a class" if option == "--fuse" else "step or a region's name"))
    if not fuse and not graph and not compiled and not args.overlap_communication and args.not_late is None:
        raise InvalidArgumentError("whatif: give a plan: --fuse top:N|all|CLASS, --graph step|REGION, "
                                   "--compile step|REGION, --overlap-communication, --not-late RANK or --plan FILE")
    return fuse, graph, compiled


def _whatif(args: argparse.Namespace) -> int:
    from fuseprof.analysis.facts.unprofiled import host_scale
    from fuseprof.analysis.paths.path import result_graphs, whatif_table
    from fuseprof.parse.store import default_store

    fuse, graph, compiled = _plan(args)
    if args.step_time is not None and not (math.isfinite(args.step_time) and args.step_time > 0):
        raise InvalidArgumentError(f"--step-time {args.step_time}: give the measured step time in ms, a finite "
                                   "number > 0")
    results = analyses(args)
    waits = _waits(results, args.not_late)
    for result in results:
        if args.not_late is not None and result.rank == args.not_late:
            continue  # the late rank itself runs as it did; the others stop waiting for it
        if result.source is None:
            raise InvalidArgumentError(f"whatif: {result.name}: the trace file is not known")
        tables = default_store().tables(result.source)[0]
        graphs = result_graphs(result, tables)
        frame = whatif_table(graphs, result.fusion, tables, fuse, graph,
                             args.step_time * 1e6 if args.step_time is not None else None, compiled,
                             args.overlap_communication, waits.get(result.rank) if result.rank is not None else None,
                             host_scale(result.frames["unprofiled"]) if "unprofiled" in result.frames else 1.0,
                             result.registry)
        if args.format != "table":
            emit(frame.assign(trace=result.name), args.format, args.wide)
            continue
        said = ["fuse " + f for f in fuse] + ["graph " + g for g in graph] + ["compile " + c for c in compiled] + \
            (["overlap communication"] if args.overlap_communication else []) + \
            ([f"rank {args.not_late} not late"] if args.not_late is not None else [])
        print(f"== {result.name}: {', '.join(said)}")
        shown = frame.assign(**{c: frame[c] / 1e3 for c in frame.columns if c.endswith("_ns")})
        scaled = "measured-scale" if args.step_time is not None else "without profiler"
        emit(shown.rename(columns={"span_ns": "span µs", "after_ns": "after µs", "step_saving_ns": "step saving µs",
                                   "step_saving_pct": "step saving %", "scaled_before_ns": f"{scaled} µs",
                                   "scaled_after_ns": f"after, {scaled} µs"}).round(2), "table", args.wide)
        change = frame.attrs.get("path_change")
        if change is not None and len(change):
            scale = " at the measured scale" if args.step_time is not None else ""
            print(f"The critical path by bound, all steps, before and after{scale} (µs):")
            emit((change / 1e3).round(1).rename_axis("bound").reset_index().rename(
                columns={"before_ns": "before µs", "after_ns": "after µs"}), "table", args.wide)
        before, after = statistics.median(frame["span_ns"]), statistics.median(frame["after_ns"])
        gpu = frame.attrs.get("gpu_saving_ns")
        line = f"median step {before / 1e3:,.1f} µs → {after / 1e3:,.1f} µs in the trace"
        if gpu is not None and frame.attrs.get("rows"):
            line += (f"; step saving {(before - after) * len(frame) / 1e3:,.1f} µs over {len(frame)} steps beside the "
                     f"fusion table's GPU saving {gpu / 1e3:,.1f} µs for its {frame.attrs['rows']} rows")
        print(line)
        for note in frame.attrs.get("in_place", []):
            print(f"note: {note}")
        _without_profiler(frame, args.step_time is None)
        if args.step_time is not None:
            predicted = statistics.median(frame["scaled_after_ns"]) / 1e6
            print(f"with the step measured at {args.step_time:g} ms apart from the profiler: predicted {predicted:.4g} ms "
                  f"(the host's time ×{frame.attrs['host_scale']:.3f}, which makes the unchanged replay {args.step_time:g} ms)")
    return 0


def _without_profiler(frame: pd.DataFrame, estimated: bool) -> None:
    """The plan's step saving with the host's time the profiler added taken off (``analysis.unprofiled``): the
    saving a user acts on; a plan that changes nothing there says so."""
    if not estimated or "scaled_before_ns" not in frame:
        return
    before, after = statistics.median(frame["scaled_before_ns"]), statistics.median(frame["scaled_after_ns"])
    print(f"without the profiler (estimated: the host's time ×{frame.attrs['host_scale']:.3f}, "
          f"fuseprof/analysis/facts/unprofiled.py): median step {before / 1e3:,.1f} µs → {after / 1e3:,.1f} µs, step saving "
          f"{(frame['scaled_before_ns'] - frame['scaled_after_ns']).sum() / 1e3:,.1f} µs over {len(frame)} steps")
    if after >= before:
        print("note: the plan removes no step time without the profiler")


def _waits(results, late: int | None) -> dict[int, dict[int, int]]:  # type: ignore[no-untyped-def]
    """Per rank, how long each of its collectives waited for rank ``late`` beyond the others (``--not-late``)."""
    if late is None:
        return {}
    from fuseprof.analysis.facts.ranks import waits_for

    ranks = {r.rank for r in results}
    if late not in ranks or len(ranks) < 2:
        raise InvalidArgumentError(f"--not-late {late}: give the traces of several ranks, that one among them "
                                   f"(ranks given: {', '.join(str(r) for r in sorted(ranks, key=str))})")
    return waits_for(results, late)


def _whatif_arguments(p: argparse.ArgumentParser) -> None:
    trace_arguments(p, 15, "rows of the fusion table the analysis keeps (--fuse top:N reads them)",
                    "table, or csv/json (one row per step)")
    p.add_argument("--fuse", action="append", metavar="ROWS",
                   help="fuse these fusion-table rows: top:N, all, or a class (optimizer, attention, horizontal, "
                        "memory-bound, RMSNorm, ...); repeatable")
    p.add_argument("--graph", action="append", metavar="REGION",
                   help="capture a region as one CUDA graph: step (the whole step) or the name of a record_function "
                        "range or nn.Module; repeatable")
    p.add_argument("--compile", action="append", metavar="REGION",
                   help="compile a region (as torch.compile does): its memory-bound chains fused and the host's "
                        "Python and dispatch between its launches gone: step or a range or module name; repeatable")
    p.add_argument("--overlap-communication", action="store_true",
                   help="the work after each collective no longer waits for it on its stream (it overlaps)")
    p.add_argument("--not-late", type=int, metavar="RANK",
                   help="with several ranks' traces: rank RANK arrives at each collective with the last of the others "
                        "(every other rank's steps replayed without the wait for it)")
    p.add_argument("--plan", type=input_path("file", "--plan"), metavar="FILE",
                   help='a JSON plan: {"fuse": ["top:5"], "graph": ["step"], "compile": ["Attention"]}')
    p.add_argument("--step-time", type=float, metavar="MS",
                   help="the step's time measured apart from the profiler (ms): the host's time is scaled until the "
                        "unchanged replay takes that long (the profiler slows the host), and the plan is replayed so too")


COMMANDS = (
    Command("path", "the critical path of each step: its time by bound, and what lies on it with its slack", _path,
            lambda p: trace_arguments(p, 15, "rows of the on-path table", "table, or csv/json (the per-step table)"),
            "Each step as a dependency graph — host calls in their threads' order (and autograd's hand-overs), "
            "launch → kernel, stream order, stream waits, synchronisations — and its critical path, walked back "
            "along the dependency that bound each start: its length is the step's span to the ns. Per step its time "
            "by bound (GPU kernel, launch/host, sync, allocator, communication, data loading); over the steps the "
            "things on it, each with the step time saved if it took no time (the steps replayed). Given several "
            "ranks, the table view also prints the job's path across them: which rank, and what on it, set each "
            "step (in JSON: `fuseprof analyze --format json`, across_ranks.job_path). Graph: "
            "fuseprof/analysis/paths/critical_path.py; across ranks: fuseprof/analysis/paths/job_path.py."),
    Command("whatif", "replay the steps with a plan: fuse rows, capture or compile a region", _whatif,
            _whatif_arguments,
            "Applies a plan to each step's dependency graph and replays it: fused chains become one kernel at the "
            "fusion table's predicted time with one launch (the others' launches and their host time gone); a region "
            "captured as a CUDA graph keeps one launch and runs its kernels as graph nodes; a compiled region has its "
            "memory-bound chains fused and no host time between its launches. Prints each step's time "
            "before and after, the step saving beside the fusion table's GPU saving, and with --step-time the "
            "prediction at the measured scale. Model: fuseprof/analysis/paths/whatif.py; accuracy on captured A/B pairs: "
            "docs/whatif.md."),
)
