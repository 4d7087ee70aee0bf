"""Verbs over bundles as files: ingest, reparse, ls, show, and the reference verbs columns and cases."""

from __future__ import annotations

import argparse

from fuseprof.commands.base import Command, emit, folder_argument, format_option, out_option, wide_option
from fuseprof.commands.paths import input_path


def _ingest_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=input_path("file"), help="trace, CSV or report files (each once)")
    out_option(p)
    p.add_argument("--name", help="bundle name")


def _ingest(args: argparse.Namespace) -> int:
    from fuseprof.bundle.ingest import ingest

    print(ingest(args.files, args.out, args.name))
    return 0


def _reparse_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundles", nargs="+", type=input_path("any"), help="bundles, or folders of bundles")


def _reparse(args: argparse.Namespace) -> int:
    from fuseprof.bundle.files import find_bundles
    from fuseprof.bundle.reparse import reparse

    for root in args.bundles:
        for bundle in find_bundles(root):
            rows = reparse(bundle)
            print(f"{bundle}: {rows} kernel rows" if rows is not None else f"{bundle}: no raw/ folder, left as it is")
    return 0


def _ls_arguments(p: argparse.ArgumentParser) -> None:
    folder_argument(p, "folder of bundles")
    wide_option(p)


def _ls(args: argparse.Namespace) -> int:
    import pandas as pd

    from fuseprof.bundle.files import find_bundles, read_manifest

    rows = []
    for path in find_bundles(args.dir):
        m = read_manifest(path)
        variants = [v["name"] for v in m.get("variants", [])]
        variants += [v["name"] for c in m.get("cases", []) for v in c["variants"] if v["name"] not in variants]
        rows.append({"bundle": path.name, "kind": m.get("kind"), "case": m.get("case") or "",
                     "variants": ",".join(variants),
                     "shapes": ",".join(m.get("shapes", [])), "dtype": m.get("dtype") or "",
                     "device": (m.get("device") or {}).get("name"), "ncu": (m.get("ncu") or {}).get("status", ""),
                     "created_utc": m.get("created_utc")})
    if not rows:
        print(f"no bundles in {args.dir}")
        return 0
    emit(pd.DataFrame(rows), "table", args.wide)
    return 0


def _show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=input_path("any"), help="a bundle, or a folder of bundles")
    format_option(p)
    p.add_argument("--timings", action="store_true", help="show the timing table instead of kernels")
    p.add_argument("--source", choices=["torch.profiler", "ncu"], help="only rows from this tool")


def _show(args: argparse.Namespace) -> int:
    from fuseprof.bundle.loading import load, load_timings

    frame = load_timings(args.bundle) if args.timings else load(args.bundle)
    if args.source and not args.timings:
        frame = frame[frame["source"] == args.source]
    if args.format == "table" and not args.timings:
        from fuseprof.commands.table_views import print_kernels

        print_kernels(frame, args.wide)
    else:
        emit(frame, args.format, args.wide)
    return 0


def _columns(args: argparse.Namespace) -> int:
    from fuseprof.bundle.schema import describe_columns
    from fuseprof.model.derived import DERIVED_COLUMNS
    from fuseprof.tables.breakdown import AMDAHL_COLUMNS, BREAKDOWN_COLUMNS
    from fuseprof.verify.table import VERIFICATION_COLUMNS

    emit(describe_columns({"derived": DERIVED_COLUMNS, "breakdown": BREAKDOWN_COLUMNS, "amdahl": AMDAHL_COLUMNS,
                           "verification": VERIFICATION_COLUMNS}),
         "table", args.wide)
    return 0


def _cases(args: argparse.Namespace) -> int:
    import pandas as pd

    from fuseprof.case import builtin_case_summaries

    emit(pd.DataFrame(builtin_case_summaries()), "table", args.wide)
    return 0


COMMANDS = (
    Command("ingest", "make a bundle from existing traces (no GPU needed)", _ingest, _ingest_arguments,
            "Accepts torch.profiler Chrome traces (.json, .json.gz), ncu raw CSV (--csv --page raw; .csv, .csv.gz) "
            "and .ncu-rep reports."),
    Command("reparse", "rebuild bundles' kernel tables from their raw artifacts", _reparse, _reparse_arguments,
            "Re-run the parsers over each bundle's raw/ folder and replace its kernels.parquet; raw artifacts and "
            "timings are kept as they are."),
    Command("ls", "list bundles in a folder", _ls, _ls_arguments),
    Command("show", "print a bundle's kernel frame (or timings)", _show, _show_arguments),
    Command("columns", "every column with the raw metric and formula behind it", _columns, wide_option),
    Command("cases", "list the built-in cases", _cases, wide_option),
)
