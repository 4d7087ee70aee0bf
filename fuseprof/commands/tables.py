"""Verbs that print tables over capture bundles: compare, breakdown, summary, roofline."""

from __future__ import annotations

import argparse

from fuseprof.commands.base import DEFAULT_TRACES, Command, emit, folder_argument, format_option
from fuseprof.commands.paths import input_path
from fuseprof.errors import FuseprofError


def _compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="*", type=input_path("any"), metavar="DIR",
                   help=f"a bench/capture bundle or folder (default: {DEFAULT_TRACES}); two: compare A with B, per "
                        "case, variant, shape and dtype")
    p.add_argument("--baseline", help="variant to compute speedups against (one folder; default: compiled, where "
                                      "the bundles hold it)")
    format_option(p)


def _compare(args: argparse.Namespace) -> int:
    from fuseprof.bundle.loading import load_timings
    from fuseprof.tables.compare import compare_variants

    if len(args.dirs) > 2:
        raise FuseprofError(f"compare: give one folder, or two (A and B); got {len(args.dirs)}")
    if len(args.dirs) == 2:
        return _compare_two(args)
    args.dir = args.dirs[0] if args.dirs else DEFAULT_TRACES
    timings = load_timings(args.dir)
    if timings.empty:
        raise FuseprofError(f"{args.dir}: no timings to compare (compare reads bundles from `fuseprof profile` or "
                            "`fuseprof bench`); for a trace you did not capture use `fuseprof analyze`, or "
                            "`fuseprof diff A B` for two of them")
    if timings["fusion_row"].notna().any():  # a `fuseprof fusion --verify` bundle: prediction beside realisation
        from fuseprof.commands.trace_views import show_verification
        from fuseprof.verify.table import verification_table

        show_verification(verification_table(timings[timings["fusion_row"].notna()]), args.format, args.wide)
        return 0
    if args.baseline is not None and args.baseline not in set(timings["variant"]):
        raise FuseprofError(f"--baseline {args.baseline!r}: no such variant in {args.dir}; variants: "
                            f"{', '.join(sorted(timings['variant'].dropna().unique()))}")
    emit(compare_variants(timings, args.baseline or "compiled"), args.format, args.wide)
    return 0


def _compare_two(args: argparse.Namespace) -> int:
    """``compare A B``: the same case, variant, shape and dtype in two capture folders."""
    from fuseprof.tables.compare_runs import compare_runs, readable

    a, b = args.dirs
    if args.baseline is not None:
        raise FuseprofError("--baseline compares variants within one folder; with two folders B is compared with A")
    for label, folder in (("A", a), ("B", b)):
        if not folder.exists():
            raise FuseprofError(f"{label} = {folder}: no such folder")
    table = compare_runs(a, b)
    if args.format != "table":
        emit(table, args.format, args.wide)
        return 0
    print(f"A: {a}\nB: {b}")
    emit(readable(table), "table", args.wide)
    counts = table["change"].value_counts()
    kinds = ("slower", "faster", "within noise", "not comparable", "only in A", "only in B")
    print("; ".join(f"{int(counts[c])} {c}" for c in kinds if c in counts)
          + " (B against A, beyond half the larger p10–p90 spread)")
    return 0


def _breakdown_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=input_path("any"), help="a bundle written by fuseprof profile")
    format_option(p)


def _breakdown(args: argparse.Namespace) -> int:
    from fuseprof.tables.breakdown import variant_breakdown

    frame = variant_breakdown(args.bundle)
    if args.format == "table":  # microseconds and percentages to the digit that the noise allows
        frame = frame.drop(columns=["case", "dtype"]).round(
            {c: 1 for c in frame.columns if c.endswith(("_us", "_call", "roofline"))}
            | {c: 3 for c in frame.columns if c.endswith("_share")})
    emit(frame, args.format, args.wide)
    return 0


def _summary_arguments(p: argparse.ArgumentParser) -> None:
    folder_argument(p)
    p.add_argument("--case", help="only this case")
    format_option(p)


def _summary(args: argparse.Namespace) -> int:
    from fuseprof.bundle.loading import load, load_timings
    from fuseprof.tables.summary import summarize

    kernels = load(args.dir)
    table = summarize(kernels, load_timings(args.dir))
    if args.case:
        if args.case not in set(table["case"].dropna()):
            raise FuseprofError(f"no bundle in {args.dir} holds case {args.case!r}; cases: "
                                f"{', '.join(sorted(table['case'].dropna().unique()))}")
        table = table[table["case"] == args.case]
    if args.format != "table":
        emit(table, args.format, args.wide)
        return 0
    from fuseprof.commands.table_views import print_summary

    print_summary(table, kernels, args.dir, args.wide)
    return 0


def _roofline_arguments(p: argparse.ArgumentParser) -> None:
    from fuseprof.model.devices import DEVICES

    folder_argument(p, "bundle or folder")
    p.add_argument("--case", help="only this case")
    p.add_argument("--roof", default="capture", help="capture (default: each kernel's own GPU) or a datasheet "
                                                     f"device: {', '.join(repr(d) for d in DEVICES)}")
    format_option(p, "table (human units), or csv/json with every column in base units")


def _roofline(args: argparse.Namespace) -> int:
    from fuseprof.bundle.loading import load
    from fuseprof.commands.table_views import print_roofline
    from fuseprof.model.devices import DEVICES
    from fuseprof.model.roofline import datasheet_roof, measured_roofs, place

    if args.roof != "capture" and args.roof not in DEVICES:
        raise FuseprofError(f"--roof {args.roof!r}: use capture or one of {', '.join(DEVICES)}")
    kernels = load(args.dir)
    if args.case:
        kernels = kernels[kernels["case"] == args.case]
    roof = None if args.roof == "capture" else datasheet_roof(DEVICES[args.roof])
    placed = place(kernels, roof, measured_roofs(args.dir))
    if placed.empty:
        raise FuseprofError(f"{args.dir}: no ncu-profiled kernels{' of case ' + args.case if args.case else ''}")
    if args.format != "table":
        emit(placed, args.format, args.wide)
    else:
        print_roofline(placed, args.wide)
    return 0


COMMANDS = (
    Command("compare", "variants side by side: GPU and as-called time, GB/s, vs copy", _compare, _compare_arguments,
            "For bench and capture bundles: each variant's GPU and as-called time beside the baseline's. For a "
            "`fuseprof fusion --verify` bundle: each chain's predicted saving beside the realised one (eager minus "
            "compiled replay) and the prediction error; formulas in fuseprof/verify/table.py. Given two folders A "
            "and B (two runs, two machines, before and after a change): per case, variant, shape and dtype, each "
            "side's GPU time and bytes, B/A, each side's spread and whether the change stands above it; formulas "
            "in fuseprof/tables/compare_runs.py."),
    Command("breakdown", "per variant and shape: latency, GPU time, kernels and launches per call, "
                         "GEMM/attention/memory-bound shares, %% of the memory roofline", _breakdown,
            _breakdown_arguments,
            "For a capture bundle (fuseprof profile; with --copy-baseline for the roofline columns): one row per "
            "variant and shape; `fuseprof columns` gives each column's formula."),
    Command("summary", "launches, bytes and time per case, variant and shape", _summary, _summary_arguments,
            "One line per case, variant and shape of the capture bundles in DIR, in human units; bench bundles are "
            "summarised by `fuseprof compare`, whole-model traces by `fuseprof analyze`. csv/json carry every "
            "column in base units."),
    Command("roofline", "every ncu-profiled kernel on the roofline: pipe, intensity, %% of roof", _roofline,
            _roofline_arguments,
            "Each kernel against the ceiling of the pipe that did most of its FLOPs (tensor cores by precision, "
            "SIMT FP16/FP32/FP64), on its capture GPU's roof (measured by `fuseprof ceilings` when a ceilings "
            "bundle is in DIR, else the datasheet) unless --roof names another. Formulas: `fuseprof columns`."),
)
