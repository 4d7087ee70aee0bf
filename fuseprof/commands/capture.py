"""Verbs that run code on a GPU (or on CPU ops) and write a new bundle: profile, run, bench, ceilings."""

from __future__ import annotations

import argparse

from fuseprof.commands.base import SHAPES_HELP, Command, bool_flag, emit, out_option
from fuseprof.commands.paths import input_path
from fuseprof.errors import InvalidArgumentError

_PRECISIONS_HELP = "tensor-core FLOP counters for ncu: all, none, or a comma list of fp16,bf16,tf32,fp8,fp64,int8"
_GPUS_HELP = "shard over N GPUs (or all), one torchrun process per GPU; on --device cpu, N processes (gloo)"


def tensor_precisions(text: str) -> tuple[str, ...] | None:
    """``--tensor-precisions``: None for auto (the input dtype's), else the chosen counters."""
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


def _case_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variants", help="comma-separated variant names")
    p.add_argument("--shapes", help=SHAPES_HELP)
    p.add_argument("--dtype", help="input dtype, e.g. float16 or bfloat16")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu to run the capture path on CPU ops")
    out_option(p)
    p.add_argument("--repeats", type=int, default=50, help="timing samples per variant and shape")


def _profile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("case", help="built-in case name (see `fuseprof cases`) or module:attribute")
    _case_options(p)
    bool_flag(p, "ncu", True, "profile with Nsight Compute")
    bool_flag(p, "copy-baseline", False, "also time a device copy of each shape's nominal bytes (the memory "
                                         "roofline of the call, as in `fuseprof bench`)")
    p.add_argument("--name", help="bundle name")
    p.add_argument("--ncu-timeout", type=float, default=1800, help="seconds before ncu is stopped")
    p.add_argument("--tensor-precisions", default="auto", metavar="LIST",
                   help="tensor-core FLOP counters to collect: auto (the input dtype's: bf16 for bfloat16, fp16 "
                        "for float16, tf32 for float32), all, none, or a comma list of fp16,bf16,tf32,fp8,fp64,int8. "
                        "Each costs about one more ncu replay pass per kernel")
    p.add_argument("--seed", type=int, default=0, help="seed for the random inputs")
    p.add_argument("--gpus", default="1", help=f"{_GPUS_HELP}; each rank runs its own ncu")


def _profile(args: argparse.Namespace) -> int:
    from fuseprof.capture.profile import ProfileOptions, run_profile
    from fuseprof.capture.shard import gpu_count
    from fuseprof.capture.sharded_profile import run_sharded_profile
    from fuseprof.case import parse_shapes

    opts = ProfileOptions(
        case=args.case, variants=args.variants.split(",") if args.variants else None,
        shapes=parse_shapes(args.shapes) if args.shapes else None, dtype=args.dtype, device=args.device,
        ncu=args.ncu, out_dir=args.out, name=args.name, repeats=args.repeats, ncu_timeout_s=args.ncu_timeout,
        seed=args.seed, tensor_precisions=tensor_precisions(args.tensor_precisions), copy_baseline=args.copy_baseline,
    )
    gpus = gpu_count(args.gpus, args.device)
    print(run_sharded_profile(opts, gpus) if gpus > 1 else run_profile(opts))
    return 0


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("script", type=input_path("file"), help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    out_option(p)
    p.add_argument("--name", help="bundle name (default: run-SCRIPT-device-time)")
    bool_flag(p, "ncu", True, "profile the regions' kernels with Nsight Compute on a GPU")
    p.add_argument("--tensor-precisions", default="bf16,fp16", metavar="LIST", help=_PRECISIONS_HELP)
    p.add_argument("--ncu-timeout", type=float, default=1800, help="seconds before ncu is stopped")
    p.add_argument("--unprofiled-steps", type=_whole_number, default=0, metavar="K",
                   help="with the script calling fuseprof.step() at the end of each step of its loop: run K steps "
                        "after the first, timed, before the profiler starts, and write their times into the trace "
                        "(analyze then uses them, not its estimate of the profiler's cost)")


def _whole_number(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number, 0 or more")
    return int(text)


def _run(args: argparse.Namespace) -> int:
    from fuseprof.capture.run import RunOptions, run_script
    from fuseprof.parse.ncu_metrics import TENSOR_PRECISIONS

    tensor = tensor_precisions(args.tensor_precisions)
    print(run_script(RunOptions(script=args.script, args=list(args.args), out_dir=args.out, name=args.name,
                                ncu=args.ncu, tensor_precisions=TENSOR_PRECISIONS if tensor is None else tensor,
                                ncu_timeout_s=args.ncu_timeout, unprofiled_steps=args.unprofiled_steps)))
    return 0


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("cases", nargs="+", help="built-in case names or module:attribute")
    _case_options(p)
    p.add_argument("--gpus", default="1", help=f"{_GPUS_HELP}. Each process pays its own start (torch, Inductor, "
                                               "first compile: about 8 s on an H200 host), so it pays off on grids "
                                               "that take minutes")


def _bench(args: argparse.Namespace) -> int:
    from fuseprof_kernels.grid import BENCH_SHAPES

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
    from fuseprof.bundle.loading import load_timings
    from fuseprof.tables.compare import compare_variants

    emit(compare_variants(load_timings(path)).drop(columns=["bundle"]), "table")
    print(path)
    return 0


def _ceilings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda", help="cuda or cuda:N")
    out_option(p)


def _ceilings(args: argparse.Namespace) -> int:
    from fuseprof.capture.ceilings import write_ceilings_bundle

    print(write_ceilings_bundle(args.device, args.out))
    return 0


COMMANDS = (
    Command("profile", "capture a case on a GPU into a new bundle", _profile, _profile_arguments,
            "Check every variant against a float64 reference, time it (CUDA events and CUDA-graph replay, L2 "
            "flushed), trace it with torch.profiler and profile it with ncu --clock-control none; write one bundle."),
    Command("run", "capture your own script, its fuseprof.region blocks as the variants", _run, _run_arguments,
            "Run SCRIPT once under torch.profiler (record_shapes, with_modules) as `python SCRIPT ARGS` would, and "
            "on a GPU again under ncu, profiling only the kernels inside its `with fuseprof.region(\"name\"):` "
            "blocks; write one bundle."),
    Command("bench", "time every variant of cases over a shape grid beside a same-bytes copy", _bench,
            _bench_arguments,
            "On a GPU: check each variant against float64, then GPU time (CUDA-graph replay) and as-called time, "
            "L2 flushed, beside a device copy of the same number of bytes. Writes one bundle of timings; no "
            "profiler, no ncu."),
    Command("ceilings", "measure this GPU's DRAM, FP32 and BF16 roofs into a bundle", _ceilings, _ceilings_arguments,
            "A 2 GiB device copy, an FMA-bound kernel and an 8192^3 bf16 matmul; the bundle's manifest holds the "
            "rates for the roofline."),
)
