"""Verbs over whole-model torch.profiler traces a user already has: analyze, fusion, diff."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fuseprof.commands.base import Command, always, emit, format_option, out_option, wide_option
from fuseprof.commands.paths import input_path
from fuseprof.console import verbatim
from fuseprof.errors import FuseprofError

if TYPE_CHECKING:
    from fuseprof.analysis import TraceAnalysis


def trace_arguments(p: argparse.ArgumentParser, top: int, top_help: str | None, format_help: str | None) -> None:
    """The options every trace command shares; no ``--top`` where ``top_help`` is None (a command that prints
    every row: an option it would ignore is one a user tries in vain), its tables then keeping ``top`` rows."""
    p.add_argument("traces", nargs="+", type=input_path("trace"), metavar="TRACE_OR_BUNDLE",
                   help="torch.profiler traces (.json, .json.gz), bundles or folders of them, or a quoted glob; one "
                        "per rank for a distributed run")
    p.add_argument("--device", help="GPU to judge against when the trace does not name one, or to override it "
                                    "(e.g. 'H100 SXM', 'H200', 'B200'; default: the trace's deviceProperties)")
    if top_help is None:
        p.set_defaults(top=top)
    else:
        p.add_argument("--top", type=int, default=top, help=top_help)
    p.add_argument("--window", help="which GPU work the tables cover: steps (the trace's iterations: its "
                                    "ProfilerStep#N ranges, the default when it has them; else an engine's step "
                                    "ranges or the period of its launch sequence), all (the whole trace: the "
                                    "default otherwise), N or N-M (those iterations)")
    p.add_argument("--graph-capture", type=input_path("trace", "--graph-capture"), metavar="CAPTURE", action="append",
                   help="the trace taken while the graphs were captured: attributes each graph-replayed kernel to "
                        "the op, shapes and module that launched it during capture (found by itself when both "
                        "traces are given, or sit in one folder); give it once per capture trace when the graphs "
                        "were captured in several runs")
    p.add_argument("--eager-twin", type=input_path("trace", "--eager-twin"), metavar="EAGER", action="append",
                   help="without the capture trace: an eager trace of the same model (same shapes); each replay's "
                        "kernels are aligned, in order, to its steps' and take their ops, shapes and modules "
                        "(the integrity table says how much time was attributed so; kernels it cannot align are "
                        "named by their kernel family, module unknown)")
    p.add_argument("--ceilings", type=input_path("any", "--ceilings"), metavar="BUNDLE",
                   help="measured rates to judge against: a `fuseprof ceilings` bundle (DRAM, FP32, BF16 roofs) and/or "
                        "a `fuseprof bench` bundle (the copy model of fused kernels), or a folder of them; default: "
                        "the datasheet of the trace's GPU")
    registry_option(p)
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes decoding and analysing several traces (ranks) at once; each holds one "
                        "trace, this process only the result tables (default: one per core)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a dask.distributed scheduler (tcp://host:8786) to run the per-trace work on; its workers "
                        "need the traces and the trace store ($FUSEPROF_CACHE) at the same paths (pip install "
                        "'fuseprof[dask]'); default: local worker processes")
    if format_help is not None:
        format_option(p, format_help)


def _progress(what: str, done: int, total: int) -> None:
    """'decoded 12/32 traces' on one line of a terminal's stderr (nothing when stderr is a file or pipe)."""
    if total > 1 and sys.stderr.isatty():
        sys.stderr.write(f"\r{what} {done}/{total} traces" + ("\n" if done == total else ""))
        sys.stderr.flush()


def hash_while_importing(paths: list[Path]) -> None:
    """Hash the traces for the trace store on the other core while this process imports pandas."""
    from fuseprof.parse.hashing import default_root, prehash

    if default_root() is not None:
        prehash(paths)


def _positive_top(top: int) -> None:
    if top < 1:
        raise FuseprofError(f"--top {top}: give a positive number of rows")


def _analyze(args: argparse.Namespace) -> int:
    hash_while_importing(args.traces)
    from fuseprof.commands.trace_views import print_analysis, print_ranks, to_json, to_long_frame, width

    if args.out is not None and args.format != "csv":
        raise FuseprofError("--out DIR goes with --format csv (one CSV file per table)")
    results = analyses(args, args.top)
    only = _sections(args.sections, results)
    if args.out is not None:
        from fuseprof.commands.table_files import write_table_files

        written = write_table_files(results, args.out, args.force, only)
        print(f"{args.out}: {len(written)} CSV file(s), one per table: {', '.join(p.name for p in written)}")
    elif args.format == "json":
        sys.stdout.write(to_json(results, only) + "\n")
    elif args.format == "csv":
        with verbatim():  # data: names as the trace holds them
            to_long_frame(results, only).to_csv(sys.stdout, index=False)
    else:
        with width(args.wide):
            for result in results:
                print_analysis(result, only)
            if not only:
                print_ranks(results)
    keep_first_view(args, results)
    return 0


def keep_first_view(args: argparse.Namespace, results: list[TraceAnalysis]) -> bool:
    """The dashboard's first view of the one trace file analysed as ``fuseprof dashboard TRACE`` analyses it (top
    ``FIRST_TOP``; no device, window, registry, ceilings or capture trace named; no execution trace beside it), kept
    in the store beside its analysis (``fuseprof.first_view``): the dashboard opened next draws its first chart
    before it imports pandas and the analysis. Plain JSON, no plotting library imported; on the example trace (its
    first window's 188 bars) 13-15 ms after computing the analysis, 63 ms where the analysis was stored without it
    (its events rebuilt from the stored tables), 2 ms where the view is kept already. Whether one is kept."""
    from fuseprof.first_view import FIRST_TOP, keep
    from fuseprof.parse.execution_trace import execution_trace_beside, is_execution_trace
    from fuseprof.parse.hashing import content_key
    from fuseprof.parse.store import default_store

    if (len(args.traces) != 1 or len(results) != 1 or args.top != FIRST_TOP or args.device or args.window
            or args.registry or args.ceilings or args.graph_capture or args.eager_twin):
        return False
    trace, store = args.traces[0], default_store()
    if (store.root is None or not trace.is_file() or not trace.name.endswith((".json", ".json.gz"))
            or is_execution_trace(trace) or execution_trace_beside(trace) is not None):
        return False
    return keep(store, content_key(trace), trace.name, results[0])


def _analyze_arguments(p: argparse.ArgumentParser) -> None:
    trace_arguments(p, 15, "rows in the top-kernels, top-ops and roofline tables",
                    "table for reading; csv (one long table with 'trace' and 'table' columns, or with --out one file "
                    "per table) or json (trace -> table -> rows) for scripts")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="with --format csv: write each table to DIR/TABLE.csv (every trace's rows, with a 'trace' "
                        "column) instead of one long table on stdout")
    p.add_argument("--force", action="store_true", help="with --out: replace CSV files that exist in DIR")
    p.add_argument("--sections", metavar="NAMES",
                   help="only these tables, comma-separated, in every format (e.g. verdict,worth_doing,categories; "
                        "the names: the keys of --format json, or fuseprof sql --tables); default: every table")


def _sections(text: str | None, results: list[TraceAnalysis]) -> list[str] | None:
    """``--sections``' table names, each checked against the tables the analysis has."""
    if text is None:
        return None
    from fuseprof.analysis.running.sections import shown_tables

    names = [n.strip() for n in text.split(",") if n.strip()]
    known = list(dict.fromkeys(name for r in results for name in shown_tables(r)))
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise FuseprofError(f"--sections {text!r}: {', '.join(unknown) or 'no name'} is no table; the tables: "
                            f"{', '.join(known)}")
    return names


def analyses(args: argparse.Namespace, top: int | None = None) -> list[TraceAnalysis]:
    """The traces of a trace verb, analysed with its options."""
    from fuseprof.analysis import analyze

    _positive_top(args.top)
    return analyze(args.traces, args.device, top if top is not None else 15, registry=args.registry, window=args.window,
                   graph_capture=[*(args.graph_capture or ()), *(args.eager_twin or ())] or None, ceilings=args.ceilings,
                   workers=args.workers or os.cpu_count() or 1, scheduler=args.scheduler, progress=_progress)


def _one_table(args: argparse.Namespace, table: str, show: Callable[[TraceAnalysis], None],
               each: Callable[[TraceAnalysis], None] | None = None,
               across: Callable[[list[TraceAnalysis]], None] | None = None) -> int:
    """A verb that shows one table of each trace: ``show`` prints it, csv/json carry every row; ``each`` sees
    every result first, whatever the format; ``across`` prints what the traces show together (several ranks)."""
    hash_while_importing(args.traces)
    import pandas as pd

    from fuseprof.commands.render import clean_text
    from fuseprof.commands.trace_views import width

    results = analyses(args)
    if each is not None and args.format != "table":
        for result in results:
            each(result)
    if args.format != "table":
        frame = pd.concat([getattr(r, table).assign(trace=r.name) for r in results], ignore_index=True)
        emit(frame, args.format, args.wide)
        return 0
    with width(args.wide):
        for result in results:
            print(clean_text(f"== {result.name}  ({result.device or 'device unknown'})")[:120])
            show(result)
        if across is not None:
            across(results)
    return 0


def _fusion(args: argparse.Namespace) -> int:
    from fuseprof.commands.trace_views import print_table

    if args.verify is None:
        return _one_table(args, "fusion", lambda result: print_table(result, "fusion", args.top))
    return _verify(args)


def _verify(args: argparse.Namespace) -> int:
    """``fusion --verify N``: the top-N chains replayed eager and compiled, beside their predictions."""
    from fuseprof.analysis.running.analyze import trace_files
    from fuseprof.commands.trace_views import show_verification
    from fuseprof.verify.chains import chains_to_verify, recorded_strides
    from fuseprof.verify.run import default_device, verify_chains
    from fuseprof.verify.table import verification_table

    if args.verify < 1:
        raise FuseprofError(f"--verify {args.verify}: give a positive number of chains")
    if args.repeats < 1:
        raise FuseprofError(f"--repeats {args.repeats}: give a positive number of timing samples")
    if len(args.traces) != 1:
        raise FuseprofError("--verify replays one trace's chains: give one trace or bundle")
    files = trace_files(args.traces[0])
    if len(files) != 1:
        raise FuseprofError(f"--verify: {args.traces[0]} holds {len(files)} traces; name one trace file")
    result = analyses(args)[0]
    chains = chains_to_verify(result.events, result.fusion, recorded_strides(files[0]), args.verify, result.registry,
                              _op_graph(files[0], result.registry))
    if not chains:
        raise FuseprofError(f"{args.traces[0]}: no fusible chain to verify (see `fuseprof fusion`)")
    timings, bundle = verify_chains(chains, files[0], args.verify_device or default_device(), args.out, result.registry,
                                    args.repeats, log=lambda line: print(line, file=sys.stderr))
    table = verification_table(timings).assign(bundle=str(bundle))
    show_verification(table, args.format, args.wide)
    differ = table.loc[table["verdict"].str.startswith("OUTPUTS DIFFER"), "fusion_row"].tolist()
    if differ:  # the evidence is written and shown; the exit status says it failed
        print(f"fuseprof: outputs differ from the float64 replay for chain(s) {differ} (rel_err in {bundle})",
              file=sys.stderr)
        return 1
    return 0


def _op_graph(trace: Path, registry):  # type: ignore[no-untyped-def]
    """The op graph the analysis read (``analyze_tables``): by the execution trace recorded beside a capture's
    trace, else by shapes."""
    from fuseprof.analysis.facts.opgraph import op_graph
    from fuseprof.parse.execution_trace import execution_trace_beside, read_execution_trace
    from fuseprof.parse.store import default_store

    beside = execution_trace_beside(trace)
    return op_graph(default_store().tables(trace)[0], registry, read_execution_trace(beside) if beside else None)


def _fusion_arguments(p: argparse.ArgumentParser) -> None:
    trace_arguments(p, 10, "opportunities to print", "table, or every group in csv/json")
    p.add_argument("--verify", type=int, metavar="N",
                   help="run the top N chains: each replayed from its recorded ops (random inputs of the recorded "
                        "shapes, dtypes and strides) eager, under torch.compile and as fuseprof's own kernel where "
                        "one computes the chain, outputs checked against float64, each timed by CUDA graph replay; "
                        "prints predicted beside realised saving and writes a verify bundle (on a CPU: outputs "
                        "checked, nothing timed)")
    p.add_argument("--verify-device", metavar="DEVICE",
                   help="where --verify runs: cuda, cuda:N or cpu (default: cuda when a GPU is visible, else cpu, "
                        "which checks outputs but times nothing)")
    p.add_argument("--repeats", type=int, default=50, help="timing samples per variant for --verify")
    out_option(p)


def _audit(args: argparse.Namespace) -> int:
    from fuseprof.commands.trace_views import print_table

    return _one_table(args, "audit", lambda result: print_table(result, "audit"))


def _check_arguments(p: argparse.ArgumentParser) -> None:
    from fuseprof.model.capture_settings import REQUIRABLE

    trace_arguments(p, 10, None, "table, or csv/json")
    p.add_argument("--require", metavar="SETTINGS", type=_requirements,
                   help="capture settings whose absence fails the check too (comma-separated: "
                        f"{', '.join(REQUIRABLE)}, or all); default: none, each a note")


def _requirements(text: str) -> frozenset[str]:
    from fuseprof.errors import InvalidArgumentError
    from fuseprof.model.capture_settings import REQUIRABLE

    names = {n.strip() for n in text.split(",")}
    wrong = sorted(names - set(REQUIRABLE) - {"all"})
    if wrong or not text.strip():
        raise InvalidArgumentError(f"--require {text!r}: name settings among {', '.join(REQUIRABLE)} or all")
    return frozenset(REQUIRABLE) if "all" in names else frozenset(names)


def _check(args: argparse.Namespace) -> int:
    """The integrity table alone; exit 1 when damage puts 1% or more of a trace's GPU time in doubt, or a
    zero or repeated kernel timestamp is in it (``completeness.fails``): a script's gate before it trusts the
    other tables. Capture settings are notes, unless ``--require`` names them."""
    from fuseprof.analysis.facts.completeness import fails, notes
    from fuseprof.commands.trace_views import print_table

    failed: list[str] = []
    said: list[str] = []

    def show(result: TraceAnalysis) -> None:
        failed.extend(f"{result.name}: {c}" for c in fails(result.integrity, args.require or ()))
        said.extend(f"{result.name}: {c}" for c in notes(result.integrity, args.require or ()))
        if args.format == "table":
            print_table(result, "integrity")

    code = _one_table(args, "integrity", show, each=show)
    if said:
        print(f"note (not damage, or under 1% of GPU time): {'; '.join(said)}", file=sys.stderr)
    if failed:
        print(f"failed: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return code


def _report_arguments(p: argparse.ArgumentParser) -> None:
    trace_arguments(p, 15, "rows in the top tables", None)
    p.add_argument("-o", "--output", type=Path, required=True, metavar="REPORT.html", help="the HTML file to write")
    p.add_argument("--force", action="store_true", help="replace REPORT.html if it exists")


def _ncu_kernels(paths: list[Path], ceilings: Path | None):  # type: ignore[no-untyped-def]
    """ncu's kernels in the bundles among ``paths``, placed on their capture GPU's roof."""
    import pandas as pd

    from fuseprof.bundle.files import is_bundle
    from fuseprof.bundle.loading import load
    from fuseprof.model.roofline import measured_roofs, place

    bundles = [p for p in paths if p.is_dir() and is_bundle(p)]
    if not bundles:
        return None
    kernels = pd.concat([load(b) for b in bundles], ignore_index=True)
    return place(kernels, None, measured_roofs(ceilings) if ceilings else None)


def _report(args: argparse.Namespace) -> int:
    hash_while_importing(args.traces)
    from fuseprof.bundle.files import remove_stale_partials, temporary_name
    from fuseprof.report import report_html

    if args.output.is_dir():
        raise FuseprofError(f"{args.output}: is a folder; name the HTML file to write (e.g. {args.output}/report.html)")
    if args.output.exists() and not args.force:
        raise FuseprofError(f"{args.output}: exists; pass --force to replace it")
    if not args.output.parent.is_dir():
        raise FuseprofError(f"{args.output.parent}: no such folder")
    results = analyses(args, args.top)
    text = report_html(results, placed=_ncu_kernels(args.traces, args.ceilings))
    remove_stale_partials(args.output.parent)  # a report of an earlier run killed with -9
    tmp = args.output.with_name(temporary_name(args.output.name, "tmp"))
    try:  # written whole, then renamed: a stopped run leaves no half report
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, args.output)
    except OSError as exc:
        raise FuseprofError(f"{args.output}: cannot write the report ({exc.strerror or exc})") from None
    finally:
        with contextlib.suppress(OSError):  # a read-only filesystem refuses the clean-up as it refused the write
            tmp.unlink(missing_ok=True)
    print(f"{args.output} ({len(text.encode()) / 1e6:.2f} MB, {len(results)} trace(s))")
    return 0


def registry_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry", type=input_path("file", "--registry"), metavar="FILE",
                   help="a TOML file of op families, op roles and catalogue entries that extends fuseprof's op "
                        "registry (your engine's kernels and ops; format: docs/registry.md)")


def _one_trace(path: Path, registry: Path | None) -> TraceAnalysis:
    from fuseprof.analysis import analyze

    results = analyze([path], registry=registry)
    if len(results) != 1:
        raise FuseprofError(f"{path}: holds {len(results)} traces; give one trace file")
    return results[0]


def _diff_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=input_path("trace"), metavar="A", help="trace file or bundle (the baseline)")
    p.add_argument("b", type=input_path("trace"), metavar="B", help="trace file or bundle (the change)")
    p.add_argument("--top", type=int, default=15, help="op rows to print in the table")
    registry_option(p)
    p.add_argument("--fail-on", metavar="RULES", action="append",
                   help="a regression gate (repeatable: every rule given is evaluated): exit 1 when B breaks a rule, "
                        "e.g. 'busy:+5%%,op:aten::mm:+10%%,"
                        "category:GEMM:+3%%,kernels:+0,memory:+10%%' (memory: peak allocated, from profile_memory records; per profiler step when both traces have steps; a change "
                        "inside A's step-to-step noise passes); 'module:PATH:+10%%' one nn.Module's aligned time, "
                        "'module:*:+10%%' every module one by one (under 1%% of the step: not judged). Traces that "
                        "share no model structure are an error")
    p.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table",
                   help="table, every row in csv/json, or with --fail-on a markdown summary for a pull request")
    wide_option(p)


def _diff(args: argparse.Namespace) -> int:
    hash_while_importing([args.a, args.b])
    import pandas as pd

    from fuseprof.analysis.judgements.changes import changes, summary_table
    from fuseprof.analysis.judgements.diff import diff_by_category, diff_by_op, diff_totals
    from fuseprof.commands.trace_views import print_diff, print_modules, width

    if args.fail_on is not None:
        from fuseprof.analysis.judgements.gate import parse_rules

        parse_rules(args.fail_on)  # a malformed rule is said before two traces are read
    a, b = _one_trace(args.a, args.registry), _one_trace(args.b, args.registry)
    if args.fail_on is not None:
        return _gate(a, b, args)
    if args.format == "markdown":
        raise FuseprofError("--format markdown goes with --fail-on (a gate's summary)")
    aligned = changes(a, b)
    tables = {"totals": diff_totals(a, b), "categories": diff_by_category(a, b), "ops": diff_by_op(a, b),
              "modules": aligned.modules, "module_ops": aligned.ops, "alignment": summary_table(aligned.summary)}
    if args.format != "table":
        emit(pd.concat([t.assign(table=name) for name, t in tables.items()], ignore_index=True), args.format, args.wide)
    else:
        with width(args.wide):
            print_diff(a.name, b.name, tables, args.top)
            print_modules(aligned, args.top)
    return 0


def _gate(a: TraceAnalysis, b: TraceAnalysis, args: argparse.Namespace) -> int:
    """Exit 1 when a rule is broken beyond A's noise; the verdict as a table, csv, json or markdown."""
    from fuseprof.analysis.judgements.gate import evaluate, markdown, parse_rules

    verdict = evaluate(a, b, parse_rules(args.fail_on))
    if args.format == "markdown":
        sys.stdout.write(markdown(a, b, verdict))
    elif args.format != "table":
        emit(verdict, args.format, args.wide)
    else:
        print(f"A: {a.name}\nB: {b.name}")
        shown = verdict.assign(a=verdict["a"].round(0), b=verdict["b"].round(0),
                               **{"change %": verdict["change_pct"].round(2),
                                  "noise ±%": verdict["noise_pct"].astype("float64").round(2)})
        emit(shown[["rule", "a", "b", "change %", "noise ±%", "status", "basis"]], "table", args.wide)
        broken = verdict[verdict["status"] == "BROKEN"]
        for row in broken.itertuples():
            print(f"BROKEN {row.rule}: {row.a:,.0f} -> {row.b:,.0f} ({row.change_pct:+.2f}%)")
        if verdict["noise_pct"].isna().all():
            print("noise unknown: A has fewer than 3 profiler steps")
    return 1 if (verdict["status"] == "BROKEN").any() else 0


def _store_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--clear", action="store_true", help="remove every stored trace and analysis (of every version)")


def _store(args: argparse.Namespace) -> int:
    from fuseprof.commands.answers import PART
    from fuseprof.parse.store import ENV, code_version, default_store

    store = default_store()
    if store.root is None:
        print(f"the trace store is off ({ENV}=off): every run decodes its traces")
        return 0
    entries = store.entries()
    answers = [e for e in entries if (e / PART).is_dir()]  # a kept answer's entry (fuseprof.commands.answers)
    if args.clear:
        store.clear()
        print(f"{store.root}: removed {len(entries) - len(answers)} stored trace(s) and {len(answers)} kept answer(s)")
        return 0
    size = sum(f.stat().st_size for e in entries for f in e.rglob("*") if f.is_file())
    current = sum(1 for e in entries if e.parents[1].name == code_version() and e not in answers)
    print(f"{store.root} (set {ENV} to move it, {ENV}=off to turn it off)\n"
          f"{len(entries) - len(answers)} stored trace(s) and {len(answers)} kept answer(s), {size / 1e6:,.1f} MB; "
          f"{current} trace(s) for this fuseprof ({code_version()}), the rest for other versions "
          f"(`fuseprof store --clear` removes all)")
    return 0


COMMANDS = (
    Command("analyze", "whole-model trace: GPU timeline, categories, top ops, per-op roofline", _analyze,
            _analyze_arguments,
            "For each torch.profiler trace (a .json/.json.gz file, or the trace in a bundle's raw/): the GPU "
            "timeline (busy, idle, computation, memcpy, memset, communication; overall and per stream; exact to "
            "the ns), time per category, the top kernels and ops with the op and nn.Module that launched them, "
            "launch statistics, and a roofline per op from its recorded input shapes (needs record_shapes=True) "
            "against the trace's own GPU.", kept=lambda args: args.out is None),
    Command("fusion", "rank fusion opportunities in a whole-model trace", _fusion,
            _fusion_arguments,
            "Chains of memory-bound kernels between GEMM/attention/communication kernels, per stream and profiler "
            "step, grouped by their op sequence (one group per repeated chain, e.g. the RMSNorm of every layer and "
            "step), with the bytes a fused kernel would move, its predicted time (bytes at the copy rate plus one "
            "kernel's floor), the saving as a share of GPU busy time and of the span, and the kernel that already "
            "fuses such a chain. Formulas: fuseprof/analysis/judgements/fusion.py. --verify N runs the top N chains to check "
            "the prediction: fuseprof/verify/.", kept=lambda args: args.verify is None),
    Command("audit", "is each fusion of the catalogue done in this trace? fused, not fused, not present", _audit,
            lambda p: trace_arguments(p, 10, None, "table, or csv/json"),
            "For each fusion of the catalogue (add+RMSNorm, SiLU·mul, QKV, gate/up, GEMM epilogue, RoPE + KV-cache "
            "write, flash attention, dequant + GEMM, sampling, optimizer step, gradient clipping, zero-grad, grad "
            "scaler, linear cross-entropy, cross-entropy), found by its dataflow pattern in the "
            "op graph: fused (the unit that does it), not fused (the time now and the predicted saving), partly "
            "fused, or not present, with the evidence. Answers 'is my engine's fusion active for my model?'. "
            "Catalogue: fuseprof/model/registry_data.py; patterns: fuseprof/analysis/judgements/patterns.py; accuracy on "
            "labelled traces: docs/accuracy.md.", kept=always),
    Command("check", "the integrity checks alone: can this trace's tables be trusted? exit 1 if not", _check,
            _check_arguments,
            "The checks every other table rests on — kernel time with a launching op, graph replays attributed, "
            "launches whose kernel is missing, steps and shapes recorded — and the completeness report: zero or "
            "repeated kernel timestamps, records the profiler said it lost, steps without GPU work, a trace "
            "ending mid-step, torch's own trace-validator rules; each failed check is damage, a capture setting, "
            "the trace's edge or the window, with the share of GPU time it puts in doubt. Exit status 1 when "
            "damage puts 1% or more of a trace's GPU time in doubt or any kernel timestamp is zero or repeated "
            "(0 otherwise, the rest printed as notes; 2 for an unreadable trace): a script's gate before it "
            "trusts the other tables. --require makes a missing capture setting a failure. Checks: "
            "fuseprof/analysis/facts/integrity.py, completeness.py, torch_rules.py; docs/validation.md.", kept=always),
    Command("report", "one self-contained HTML report of traces, to attach to a pull request", _report,
            _report_arguments,
            "A verdict (what bounds the run; the three things worth doing, with predicted savings), then the integrity "
            "check, profiler steps, timeline, categories, top ops with modules, the per-op roofline on the capture GPU "
            "with the H100 beside it, fusion opportunities and audit, slow ops, and across ranks the communication "
            "tables. Plotly is inlined: the file opens without a network. Sections: fuseprof/report.py."),
    Command("store", "where decoded traces and analyses are kept, how much, and --clear", _store, _store_arguments,
            "The first analysis of a trace keeps its decoded tables and the analysis (Arrow, one file an entry) "
            "under the hash of the file's bytes, in $FUSEPROF_CACHE (default: $XDG_CACHE_HOME/fuseprof or "
            "~/.cache/fuseprof on Linux, ~/Library/Caches/fuseprof on macOS, %LOCALAPPDATA%\\fuseprof\\Cache on "
            "Windows; FUSEPROF_CACHE=off turns it off); later "
            "runs read them instead of the JSON. Entries are per fuseprof version and checked on every read; a "
            "damaged one is rebuilt. Design: fuseprof/parse/store.py."),
    Command("diff", "A/B diff of two traces: totals, categories, ops matched by op and shapes, and each module "
                    "aligned by what it computes (what changed, by part)", _diff,
            _diff_arguments,
            "Time and launches per category and per op signature (CPU op + input shapes) in A and B, what appeared "
            "and what disappeared, ranked by time delta. Kernels are matched by the op that launched them, not by "
            "name (compiled Triton kernels have other names)."),
)
