"""The ``fuseprof`` command: profile, ingest, ls, show, summary, columns, cases."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fuseprof.errors import FuseprofError

if TYPE_CHECKING:
    import pandas as pd

    from fuseprof.analysis import TraceAnalysis

DEFAULT_TRACES = Path("traces")
SHAPES_HELP = ("comma-separated shapes: MxN (e.g. 128x4096), or as many dimensions as the case takes "
               "(decoder_layer: 1x1x2048)")


def _bool_flag(parser: argparse.ArgumentParser, name: str, default: bool, help_text: str) -> None:
    parser.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=default, help=help_text)


class _HelpfulParser(argparse.ArgumentParser):
    """Every subcommand shows each option's default in --help."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)


def _format_option(p: argparse.ArgumentParser, help_text: str = "output format") -> None:
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help=help_text)


def _trace_arguments(p: argparse.ArgumentParser, top: int, top_help: str, format_help: str) -> None:
    """The arguments of the commands that read whole-model traces (analyze, fusion)."""
    p.add_argument("traces", nargs="+", type=Path, metavar="TRACE_OR_BUNDLE",
                   help="torch.profiler traces (.json, .json.gz) or bundles; one per rank for a distributed run")
    p.add_argument("--device", help="GPU to judge against when the trace does not name one, or to override it "
                                    "(e.g. 'H100 SXM', 'H200', 'B200'; default: the trace's deviceProperties)")
    p.add_argument("--top", type=int, default=top, help=top_help)
    _format_option(p, format_help)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fuseprof", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Measure what fusing GPU kernels buys: capture kernels with torch.profiler and Nsight "
                    "Compute into trace bundles, then read them as one DataFrame on any machine.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_HelpfulParser)

    p = sub.add_parser("profile", help="capture a case on a GPU into a new bundle",
                       description="Check every variant against a float64 reference, time it (CUDA events "
                                   "and CUDA-graph replay, L2 flushed), trace it with torch.profiler and "
                                   "profile it with ncu --clock-control none; write one bundle.")
    p.add_argument("case", help="built-in case name (see `fuseprof cases`) or module:attribute")
    p.add_argument("--variants", help="comma-separated variant names")
    p.add_argument("--shapes", help=SHAPES_HELP)
    p.add_argument("--dtype", help="input dtype, e.g. float16 or bfloat16")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu to run the capture path on CPU ops")
    _bool_flag(p, "ncu", True, "profile with Nsight Compute")
    _bool_flag(p, "copy-baseline", False, "also time a device copy of each shape's nominal bytes (the memory "
                                          "roofline of the call, as in `fuseprof bench`)")
    p.add_argument("--out", type=Path, default=DEFAULT_TRACES, help="folder for the bundle")
    p.add_argument("--name", help="bundle name")
    p.add_argument("--repeats", type=int, default=50, help="timing samples per variant and shape")
    p.add_argument("--ncu-timeout", type=float, default=1800, help="seconds before ncu is stopped")
    p.add_argument("--tensor-precisions", default="auto", metavar="LIST",
                   help="tensor-core FLOP counters to collect: auto (the input dtype's: bf16 for bfloat16, fp16 "
                        "for float16, tf32 for float32), all, none, or a comma list of fp16,bf16,tf32,fp8,fp64,int8. "
                        "Each costs about one more ncu replay pass per kernel")
    p.add_argument("--seed", type=int, default=0, help="seed for the random inputs")
    p.add_argument("--gpus", default="1", help="shard the shapes over N GPUs (or all), one torchrun process per GPU, "
                                               "each with its own ncu; on --device cpu, N processes (gloo)")

    p = sub.add_parser("run", help="capture your own script, its fuseprof.region blocks as the variants",
                       description="Run SCRIPT once under torch.profiler (record_shapes, with_modules) as "
                                   "`python SCRIPT ARGS` would, and on a GPU again under ncu, profiling only the "
                                   "kernels inside its `with fuseprof.region(\"name\"):` blocks; write one bundle.")
    p.add_argument("script", type=Path, help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    p.add_argument("--out", type=Path, default=DEFAULT_TRACES, help="folder for the bundle")
    p.add_argument("--name", help="bundle name (default: run-SCRIPT-device-time)")
    _bool_flag(p, "ncu", True, "profile the regions' kernels with Nsight Compute on a GPU")
    p.add_argument("--tensor-precisions", default="bf16,fp16", metavar="LIST",
                   help="tensor-core FLOP counters for ncu: all, none, or a comma list of fp16,bf16,tf32,fp8,fp64,int8")
    p.add_argument("--ncu-timeout", type=float, default=1800, help="seconds before ncu is stopped")

    p = sub.add_parser("bench", help="time every variant of cases over a shape grid beside a same-bytes copy",
                       description="On a GPU: check each variant against float64, then GPU time (CUDA-graph "
                                   "replay) and as-called time, L2 flushed, beside a device copy of the same "
                                   "number of bytes. Writes one bundle of timings; no profiler, no ncu.")
    p.add_argument("cases", nargs="+", help="built-in case names or module:attribute")
    p.add_argument("--shapes", help=SHAPES_HELP)
    p.add_argument("--dtype", help="input dtype for every case")
    p.add_argument("--variants", help="comma-separated variant names")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu")
    p.add_argument("--out", type=Path, default=DEFAULT_TRACES, help="folder for the bundle")
    p.add_argument("--repeats", type=int, default=50, help="timing samples per variant and shape")
    p.add_argument("--gpus", default="1", help="shard the grid over N GPUs (or all), one torchrun process per GPU; "
                                               "on --device cpu, N processes (gloo). Each process pays its own start "
                                               "(torch, Inductor, first compile: about 8 s on an H200 host), so it pays "
                                               "off on grids that take minutes")

    p = sub.add_parser("ceilings", help="measure this GPU's DRAM, FP32 and BF16 roofs into a bundle",
                       description="A 2 GiB device copy, an FMA-bound kernel and an 8192^3 bf16 matmul; the "
                                   "bundle's manifest holds the rates for the roofline.")
    p.add_argument("--device", default="cuda", help="cuda or cuda:N")
    p.add_argument("--out", type=Path, default=DEFAULT_TRACES, help="folder for the bundle")

    p = sub.add_parser("dashboard", help="open the Streamlit dashboard over a folder of bundles",
                       description="Roofline, occupancy, fusion and launch pages over the bundles in DIR "
                                   "(default: traces). Listens on localhost unless --address says otherwise.")
    p.add_argument("dir", nargs="?", type=Path, default=DEFAULT_TRACES, help="folder of bundles")
    p.add_argument("--address", default="localhost", help="address to listen on")
    p.add_argument("--port", type=int, default=8501, help="port to listen on")

    p = sub.add_parser("compare", help="variants side by side: GPU and as-called time, GB/s, vs copy")
    p.add_argument("dir", nargs="?", type=Path, default=DEFAULT_TRACES, help="bench/capture bundle or folder")
    p.add_argument("--baseline", default="compiled", help="variant to compute speedups against")
    _format_option(p)

    p = sub.add_parser("breakdown", help="per variant and shape: latency, GPU time, kernels and launches per "
                                         "call, GEMM/attention/memory-bound shares, %% of the memory roofline",
                       description="For a capture bundle (fuseprof profile; with --copy-baseline for the roofline "
                                   "columns): one row per variant and shape; `fuseprof columns` gives each "
                                   "column's formula.")
    p.add_argument("bundle", type=Path, help="a bundle written by fuseprof profile")
    _format_option(p)

    p = sub.add_parser("ingest", help="make a bundle from existing traces (no GPU needed)",
                       description="Accepts torch.profiler Chrome traces (.json, .json.gz), ncu raw CSV "
                                   "(--csv --page raw; .csv, .csv.gz) and .ncu-rep reports.")
    p.add_argument("files", nargs="+", type=Path, help="trace, CSV or report files (each once)")
    p.add_argument("--out", type=Path, default=DEFAULT_TRACES, help="folder for the bundle")
    p.add_argument("--name", help="bundle name")

    p = sub.add_parser("reparse", help="rebuild bundles' kernel tables from their raw artifacts",
                       description="Re-run the parsers over each bundle's raw/ folder and replace its "
                                   "kernels.parquet; raw artifacts and timings are kept as they are.")
    p.add_argument("bundles", nargs="+", type=Path, help="bundles, or folders of bundles")

    p = sub.add_parser("analyze", help="whole-model trace: GPU timeline, categories, top ops, per-op roofline",
                       description="For each torch.profiler trace (a .json/.json.gz file, or the trace in a "
                                   "bundle's raw/): the GPU timeline (busy, idle, computation, memcpy, memset, "
                                   "communication; overall and per stream; exact to the ns), time per category, "
                                   "the top kernels and ops with the op and nn.Module that launched them, launch "
                                   "statistics, and a roofline per op from its recorded input shapes (needs "
                                   "record_shapes=True) against the trace's own GPU.")
    _trace_arguments(p, 15, "rows in the top-kernels, top-ops and roofline tables",
                     "table for reading; csv (one long table with 'trace' and 'table' columns) or json "
                     "(trace -> table -> rows) for scripts")

    p = sub.add_parser("fusion", help="rank fusion opportunities in a whole-model trace",
                       description="Chains of memory-bound kernels between GEMM/attention/communication kernels, "
                                   "per stream and profiler step, grouped by their op sequence (one group per "
                                   "repeated chain, e.g. the RMSNorm of every layer and step), with the bytes a "
                                   "fused kernel would move, its predicted time (bytes at the copy rate plus one "
                                   "kernel's floor), the saving as a share of GPU busy time and of the span, and "
                                   "the kernel that already fuses such a chain. Formulas: fuseprof/analysis/fusion.py.")
    _trace_arguments(p, 10, "opportunities to print", "table, or every group in csv/json")

    p = sub.add_parser("diff", help="A/B diff of two traces: totals, categories, ops matched by op and shapes",
                       description="Time and launches per category and per op signature (CPU op + input shapes) in "
                                   "A and B, what appeared and what disappeared, ranked by time delta. Kernels are "
                                   "matched by the op that launched them, not by name (compiled Triton kernels "
                                   "have other names).")
    p.add_argument("a", type=Path, metavar="A", help="trace file or bundle (the baseline)")
    p.add_argument("b", type=Path, metavar="B", help="trace file or bundle (the change)")
    p.add_argument("--top", type=int, default=15, help="op rows to print in the table")
    _format_option(p, "table, or every row in csv/json")

    p = sub.add_parser("ls", help="list bundles in a folder")
    p.add_argument("dir", nargs="?", type=Path, default=DEFAULT_TRACES, help="folder of bundles")

    p = sub.add_parser("show", help="print a bundle's kernel frame (or timings)")
    p.add_argument("bundle", type=Path, help="a bundle, or a folder of bundles")
    _format_option(p)
    p.add_argument("--timings", action="store_true", help="show the timing table instead of kernels")
    p.add_argument("--source", choices=["torch.profiler", "ncu"], help="only rows from this tool")

    p = sub.add_parser("summary", help="launches, bytes and time per case, variant and shape",
                       description="One line per case, variant and shape of the capture bundles in DIR, in human "
                                   "units; bench bundles are summarised by `fuseprof compare`, whole-model traces "
                                   "by `fuseprof analyze`. csv/json carry every column in base units.")
    p.add_argument("dir", nargs="?", type=Path, default=DEFAULT_TRACES, help="bundle or folder of bundles")
    p.add_argument("--case", help="only this case")
    _format_option(p)

    p = sub.add_parser("roofline", help="every ncu-profiled kernel on the roofline: pipe, intensity, %% of roof",
                       description="Each kernel against the ceiling of the pipe that did most of its FLOPs (tensor "
                                   "cores by precision, SIMT FP16/FP32/FP64), on its capture GPU's roof (measured "
                                   "by `fuseprof ceilings` when a ceilings bundle is in DIR, else the datasheet) "
                                   "unless --roof names another. Formulas: `fuseprof columns`.")
    p.add_argument("dir", nargs="?", type=Path, default=DEFAULT_TRACES, help="bundle or folder")
    p.add_argument("--case", help="only this case")
    p.add_argument("--roof", default="capture",
                   help="capture (default: each kernel's own GPU) or a datasheet device: "
                        "'H100 SXM', 'H100 PCIe', 'H200', 'A100 80GB', 'B200'")
    _format_option(p, "table (human units), or csv/json with every column in base units")

    sub.add_parser("columns", help="every column with the raw metric and formula behind it")
    sub.add_parser("cases", help="list the built-in cases")
    return parser


def _emit(frame: pd.DataFrame, fmt: str) -> None:
    import pandas as pd

    if fmt == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif fmt == "json":
        sys.stdout.write(frame.to_json(orient="records", indent=1) + "\n")
    else:  # a terminal table: columns with no value at all are left out (csv and json keep them)
        with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 250,
                               "display.max_colwidth", 60):
            print(frame.dropna(axis=1, how="all").to_string(index=False))


def _tensor_precisions(text: str) -> tuple[str, ...] | None:
    from fuseprof.errors import InvalidArgumentError
    from fuseprof.parse.ncu_metrics import TENSOR_PRECISIONS

    if text == "auto":
        return None
    if text == "all":
        return TENSOR_PRECISIONS
    chosen = tuple(p.strip() for p in text.split(",") if p.strip() and p.strip() != "none")
    unknown = [p for p in chosen if p not in TENSOR_PRECISIONS]
    if unknown:
        raise InvalidArgumentError(f"--tensor-precisions: unknown {', '.join(unknown)}; choose auto, all, none or "
                                   f"from {', '.join(TENSOR_PRECISIONS)}")
    return chosen


def _cmd_profile(args: argparse.Namespace) -> int:
    from fuseprof.capture.profile import ProfileOptions, run_profile
    from fuseprof.capture.shard import gpu_count
    from fuseprof.capture.sharded_profile import run_sharded_profile
    from fuseprof.case import parse_shapes

    opts = ProfileOptions(
        case=args.case, variants=args.variants.split(",") if args.variants else None,
        shapes=parse_shapes(args.shapes) if args.shapes else None, dtype=args.dtype, device=args.device,
        ncu=args.ncu, out_dir=args.out, name=args.name, repeats=args.repeats, ncu_timeout_s=args.ncu_timeout,
        seed=args.seed, tensor_precisions=_tensor_precisions(args.tensor_precisions), copy_baseline=args.copy_baseline,
    )
    gpus = gpu_count(args.gpus, args.device)
    print(run_sharded_profile(opts, gpus) if gpus > 1 else run_profile(opts))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from fuseprof.capture.run import RunOptions, run_script
    from fuseprof.parse.ncu_metrics import TENSOR_PRECISIONS

    tensor = _tensor_precisions(args.tensor_precisions)
    print(run_script(RunOptions(script=args.script, args=list(args.args), out_dir=args.out, name=args.name,
                                ncu=args.ncu, tensor_precisions=TENSOR_PRECISIONS if tensor is None else tensor,
                                ncu_timeout_s=args.ncu_timeout)))
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from fuseprof_kernels._grid import BENCH_SHAPES

    from fuseprof.capture.shard import gpu_count
    from fuseprof.case import parse_shapes

    shapes = parse_shapes(args.shapes) if args.shapes else BENCH_SHAPES
    variants = args.variants.split(",") if args.variants else None
    gpus = gpu_count(args.gpus, args.device)
    if gpus > 1:  # the parent leaves torch unimported until the ranks run
        from fuseprof.capture.sharded_bench import run_sharded_bench

        path = run_sharded_bench(args.cases, shapes, args.dtype, args.device, args.out, gpus, args.repeats,
                                 variants=variants)
    else:
        from fuseprof.capture.bench import run_bench

        path = run_bench(args.cases, shapes, args.dtype, args.device, args.out, args.repeats, variants=variants)
    from fuseprof.compare import compare_variants
    from fuseprof.loading import load_timings

    _emit(compare_variants(load_timings(path)).drop(columns=["bundle"]), "table")
    print(path)
    return 0


def _cmd_ceilings(args: argparse.Namespace) -> int:
    from fuseprof.capture.ceilings import write_ceilings_bundle

    print(write_ceilings_bundle(args.device, args.out))
    return 0


def dashboard_app() -> Path:
    """app.py of the installed dashboard package (``dashboards/`` in a checkout)."""
    import importlib.util

    spec = importlib.util.find_spec("fuseprof_dashboards")
    if spec is None or spec.origin is None:
        raise FuseprofError("the dashboard package (fuseprof_dashboards) is not installed; reinstall fuseprof")
    return Path(spec.origin).with_name("app.py")


def _cmd_dashboard(args: argparse.Namespace) -> int:
    import os

    if not args.dir.is_dir():
        raise FuseprofError(f"{args.dir}: no such folder; give a folder of bundles")
    from fuseprof.bundle import find_bundles  # no pandas: this process is about to become the Streamlit server

    if not find_bundles(args.dir):
        raise FuseprofError(f"{args.dir}: holds no fuseprof bundle to show")
    argv = [sys.executable, "-m", "streamlit", "run", str(dashboard_app()), "--server.address", args.address,
            "--server.port", str(args.port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--", "--traces", str(args.dir.resolve())]
    print(f"fuseprof dashboard: http://{args.address}:{args.port}  (Ctrl-C stops it)", file=sys.stderr, flush=True)
    # Become the server rather than wait on a child: SIGTERM and SIGINT then reach Streamlit itself,
    # and no server outlives the command (a child survived its parent's SIGTERM before).
    os.execv(sys.executable, argv)
    return 0  # not reached


def _cmd_breakdown(args: argparse.Namespace) -> int:
    from fuseprof.analysis.breakdown import variant_breakdown

    frame = variant_breakdown(args.bundle)
    if args.format == "table":  # microseconds and percentages to the digit that the noise allows
        frame = frame.drop(columns=["case", "dtype"]).round(
            {c: 1 for c in frame.columns if c.endswith(("_us", "_call", "roofline"))}
            | {c: 3 for c in frame.columns if c.endswith("_share")})
    _emit(frame, args.format)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from fuseprof.compare import compare_variants
    from fuseprof.loading import load_timings

    timings = load_timings(args.dir)
    if timings.empty:
        raise FuseprofError(f"{args.dir}: no timings to compare (compare reads bundles from `fuseprof profile` or "
                            "`fuseprof bench`); for a trace you did not capture use `fuseprof analyze`, or "
                            "`fuseprof diff A B` for two of them")
    if args.baseline not in set(timings["variant"]):
        raise FuseprofError(f"--baseline {args.baseline!r}: no such variant in {args.dir}; variants: "
                            f"{', '.join(sorted(timings['variant'].dropna().unique()))}")
    _emit(compare_variants(timings, args.baseline), args.format)
    return 0


def _cmd_ingest(args: argparse.Namespace) -> int:
    from fuseprof.ingest import ingest

    print(ingest(args.files, args.out, args.name))
    return 0


def _cmd_reparse(args: argparse.Namespace) -> int:
    from fuseprof.bundle import find_bundles
    from fuseprof.reparse import reparse

    for root in args.bundles:
        for bundle in find_bundles(root):
            rows = reparse(bundle)
            print(f"{bundle}: {rows} kernel rows" if rows is not None else f"{bundle}: no raw/ folder, left as it is")
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    from fuseprof.analysis import analyze
    from fuseprof.analysis.report import print_analysis, print_ranks, to_json, to_long_frame

    if args.top < 1:
        raise FuseprofError(f"--top {args.top}: give a positive number of rows")
    results = analyze(args.traces, args.device, args.top)
    if args.format == "json":
        sys.stdout.write(to_json(results) + "\n")
    elif args.format == "csv":
        to_long_frame(results).to_csv(sys.stdout, index=False)
    else:
        for result in results:
            print_analysis(result)
        print_ranks(results)
    return 0


def _one_trace(path: Path, device: str | None) -> TraceAnalysis:
    from fuseprof.analysis import analyze

    results = analyze([path], device)
    if len(results) != 1:
        raise FuseprofError(f"{path}: holds {len(results)} traces; give one trace file")
    return results[0]


def _cmd_fusion(args: argparse.Namespace) -> int:
    import pandas as pd

    from fuseprof.analysis import analyze
    from fuseprof.analysis.report import print_fusion

    if args.top < 1:
        raise FuseprofError(f"--top {args.top}: give a positive number of rows")
    results = analyze(args.traces, args.device)
    if args.format != "table":
        frame = pd.concat([r.fusion.assign(trace=r.name) for r in results], ignore_index=True)
        _emit(frame, args.format)
        return 0
    for result in results:
        print(f"== {result.name}  ({result.device or 'device unknown'})")
        print_fusion(result, args.top)
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    import pandas as pd

    from fuseprof.analysis.diff import diff_by_category, diff_by_op, diff_totals
    from fuseprof.analysis.report import us

    a, b = _one_trace(args.a, None), _one_trace(args.b, None)
    tables = {"totals": diff_totals(a, b), "categories": diff_by_category(a, b), "ops": diff_by_op(a, b)}
    if args.format != "table":
        _emit(pd.concat([t.assign(table=name) for name, t in tables.items()], ignore_index=True), args.format)
        return 0
    print(f"A: {a.name}\nB: {b.name}")
    t = tables["totals"]
    times = t["metric"] != "events"
    for column in ("a", "b", "delta"):
        t[column] = t[column].astype(object).where(~times, t[column].map(us))
    _emit(t.rename(columns={"metric": "total (µs; events a count)"}), "table")
    for name in ("categories", "ops"):
        d = tables[name].head(args.top if name == "ops" else len(tables[name]))
        print()
        _emit(pd.DataFrame({name[:-1] if name == "ops" else "category": d["key"].str.slice(0, 72),
                            "A µs": d["time_ns_a"].map(us), "B µs": d["time_ns_b"].map(us),
                            "Δ µs": d["time_delta_ns"].map(us), "A launches": d["launches_a"],
                            "B launches": d["launches_b"], "change": d["change"]}), "table")
    return 0


def _cmd_ls(args: argparse.Namespace) -> int:
    import pandas as pd

    from fuseprof.bundle import find_bundles, read_manifest

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
    _emit(pd.DataFrame(rows), "table")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from fuseprof.loading import load, load_timings

    frame = load_timings(args.bundle) if args.timings else load(args.bundle)
    if args.source and not args.timings:
        frame = frame[frame["source"] == args.source]
    _emit(frame, args.format)
    return 0


def _cmd_summary(args: argparse.Namespace) -> int:
    import pandas as pd

    from fuseprof.loading import load, load_timings
    from fuseprof.summary import summarize

    kernels = load(args.dir)
    table = summarize(kernels, load_timings(args.dir))
    if args.case:
        if args.case not in set(table["case"].dropna()):
            raise FuseprofError(f"no bundle in {args.dir} holds case {args.case!r}; cases: "
                                f"{', '.join(sorted(table['case'].dropna().unique()))}")
        table = table[table["case"] == args.case]
    if args.format != "table":
        _emit(table, args.format)
        return 0
    captured = table[table["case"].notna() & (table["kernels_per_call"].notna() | table["profiler_kernels"].notna())]
    if captured.empty:
        raise FuseprofError(f"{args.dir}: no capture bundle (fuseprof profile) to summarise")
    mb = (lambda c: (captured[c] / 1e6).round(2))  # noqa: E731
    _emit(pd.DataFrame({
        "case": captured["case"], "variant": captured["variant"], "shape": captured["shape"],
        "dtype": captured["dtype"], "kernels": captured["kernels_per_call"], "GPU µs": (captured["gpu_median_ns"] / 1e3).round(2),
        "called µs": (captured["as_called_median_ns"] / 1e3).round(2), "DRAM MB": mb("dram_bytes"),
        "L2 MB": mb("l2_bytes"), "nominal MB": mb("nominal_bytes"),
        "DRAM/nominal": captured["dram_bytes_over_nominal"].round(2), "GFLOP": (captured["flops"] / 1e9).round(3),
        "ok": captured["correct"].map({True: "yes", False: "WRONG"})}), "table")
    # timing-only rows: bench bundles, and the copy rows of a capture run with --copy-baseline
    timed_only = table[table["case"].notna() & table["kernels_per_call"].isna() & table["profiler_kernels"].isna()]
    benches = timed_only[~timed_only["bundle"].isin(captured["bundle"])]
    if not benches.empty:
        print(f"\n+ {benches['bundle'].nunique()} bench bundle(s), {len(benches)} rows: `fuseprof compare {args.dir}`")
    if len(timed_only) > len(benches):
        print(f"+ {len(timed_only) - len(benches)} same-bytes copy rows of captures: `fuseprof breakdown BUNDLE`")
    traces = kernels[kernels["case"].isna()]["bundle"].nunique()
    if traces:
        print(f"+ {traces} trace bundle(s) without cases: `fuseprof analyze BUNDLE`")
    return 0


def _cmd_roofline(args: argparse.Namespace) -> int:
    import pandas as pd

    from fuseprof.loading import load
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
        _emit(placed, args.format)
        return 0
    table = pd.DataFrame({
        "case": placed["case"], "variant": placed["variant"], "shape": placed["shape"],
        "kernel": placed["kernel_short"].str.slice(0, 40), "pipe": placed["roof_pipe"],
        "GFLOP": (placed["flops"] / 1e9).round(3), "DRAM MB": (placed["dram_bytes"] / 1e6).round(2),
        "µs": (placed["duration_ns"] / 1e3).round(2), "FLOP/B": placed["arithmetic_intensity"].round(2),
        "TFLOP/s": (placed["achieved_flops_per_s"] / 1e12).round(2),
        "TB/s": (placed["achieved_bytes_per_s"] / 1e12).round(2), "% roof": placed["pct_of_roof"].round(1),
        "bound": placed["bound"], "L2": placed["l2_resident"].map({True: "L2", False: ""})})
    _emit(table, "table")
    print(f"roof: {', '.join(sorted(placed['roof'].unique()))}")
    return 0


def _cmd_columns(args: argparse.Namespace) -> int:
    from fuseprof.analysis.breakdown import AMDAHL_COLUMNS, BREAKDOWN_COLUMNS
    from fuseprof.model.derived import DERIVED_COLUMNS
    from fuseprof.schema import describe_columns

    _emit(describe_columns({"derived": DERIVED_COLUMNS, "breakdown": BREAKDOWN_COLUMNS, "amdahl": AMDAHL_COLUMNS}),
          "table")
    return 0


def _cmd_cases(args: argparse.Namespace) -> int:
    import pandas as pd

    from fuseprof.case import builtin_case_summaries

    _emit(pd.DataFrame(builtin_case_summaries()), "table")
    return 0


_COMMANDS = {"profile": _cmd_profile, "run": _cmd_run, "bench": _cmd_bench, "ceilings": _cmd_ceilings, "dashboard": _cmd_dashboard, "compare": _cmd_compare, "breakdown": _cmd_breakdown, "ingest": _cmd_ingest, "reparse": _cmd_reparse, "analyze": _cmd_analyze, "fusion": _cmd_fusion, "diff": _cmd_diff, "ls": _cmd_ls, "show": _cmd_show,
             "summary": _cmd_summary, "roofline": _cmd_roofline, "columns": _cmd_columns, "cases": _cmd_cases}


def _warn_in_one_line(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
    print(f"fuseprof: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    args = _build_parser().parse_args(argv)
    warnings.showwarning = _warn_in_one_line
    try:
        return _COMMANDS[args.command](args)
    except FuseprofError as exc:
        print(f"fuseprof: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fuseprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
