"""``fuseprof profile``: check, time, trace and ncu-profile a case, then write one bundle.

Order matters: correctness against float64 first (a wrong kernel is never timed silently),
then timing, then torch.profiler in this process, then ncu in a child process. An ncu
failure still leaves a committed bundle with everything before it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fuseprof.bundle.files import RAW, BundleWriter
from fuseprof.bundle.provenance import bundle_name, command_line, git_state, now_utc, versions
from fuseprof.capture import timing
from fuseprof.capture.correctness import raise_if_wrong
from fuseprof.capture.device_facts import device_facts
from fuseprof.capture.measure import check_and_time
from fuseprof.capture.modelled import modelled_rows
from fuseprof.capture.ncu_capture import capture_with_ncu
from fuseprof.capture.ncu_target import target_argv
from fuseprof.capture.torch_profile import UNPROFILED_ROUNDS, record_trace
from fuseprof.case import Case, Shape, Variant, load_case, select_variants, shape_label
from fuseprof.console import Log, log_to_stderr
from fuseprof.errors import InvalidArgumentError, NcuError, NcuPermissionError, NoGPUError
from fuseprof.parse.dispatch import parse_raw_dir
from fuseprof.parse.ncu_metrics import tensor_precisions_for
from fuseprof.ranges import range_label


@dataclass
class ProfileOptions:
    case: str
    variants: list[str] | None = None
    shapes: tuple[Shape, ...] | None = None
    dtype: str | None = None
    device: str = "cuda"
    ncu: bool = True
    out_dir: Path = Path("traces")
    repeats: int = 50
    profiler_repeats: int = 3
    seed: int = 0
    ncu_timeout_s: float = 1800.0
    tensor_precisions: tuple[str, ...] | None = None  # None: the input dtype's (tensor_precisions_for)
    copy_baseline: bool = False
    name: str | None = None
    repo_root: Path = field(default_factory=Path.cwd)


def resolve_device(name: str) -> torch.device:
    if name == "cpu":
        return torch.device("cpu")
    if name != "cuda" and not name.startswith("cuda:"):
        raise InvalidArgumentError(f"--device {name!r}: use cuda, cuda:N or cpu")
    if not torch.cuda.is_available():
        raise NoGPUError(
            "no CUDA GPU is visible to torch (torch.cuda.is_available() is False); run on a GPU machine, "
            "or pass --device cpu to run the capture path on CPU ops (no kernels, no ncu)"
        )
    return torch.device(name)


def resolve_dtype(case: Case, dtype: str | None) -> str:
    dtype = dtype or case.dtypes[0]
    if dtype not in case.tolerances or not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise InvalidArgumentError(f"--dtype {dtype!r}: choose from {', '.join(case.dtypes)}")
    return dtype


def absolute_spec(spec: str) -> str:
    """A ``path/to/file.py:NAME`` spec with an absolute path, for a child process (ncu's target)."""
    source, sep, attr = spec.rpartition(":")
    if sep and (source.endswith(".py") or "/" in source):
        return f"{Path(source).resolve()}:{attr}"
    return spec


def _run_ncu(writer: BundleWriter, case_spec: str, variants: list[str], shapes: tuple[Shape, ...],
             dtype: str, opts: ProfileOptions, log: Log) -> dict[str, Any]:
    """Profile the case's measured calls with ncu in a child process (``fuseprof.capture.ncu_capture``)."""
    labels = [range_label(v, shape_label(s)) for s in shapes for v in variants]
    shapes_arg = ",".join(shape_label(s) for s in shapes)
    target = target_argv(sys.executable, absolute_spec(case_spec), variants, shapes_arg, dtype, opts.seed)
    tensor = opts.tensor_precisions if opts.tensor_precisions is not None else tensor_precisions_for(dtype)
    return capture_with_ncu(writer, labels, target, tensor, opts.ncu_timeout_s, log)


def _manifest(case: Case, variants: tuple[Variant, ...], shapes: tuple[Shape, ...], dtype: str,
              device: torch.device, opts: ProfileOptions) -> dict[str, Any]:
    return {
        "kind": "capture", "case": case.name, "case_spec": opts.case, "description": case.description,
        "variants": [{"name": v.name, "kind": v.kind, "description": v.description} for v in variants],
        "shapes": [shape_label(s) for s in shapes], "dtype": dtype, "device": device_facts(device),
        "created_utc": now_utc(), "command_line": command_line(), "git": git_state(opts.repo_root),
        "versions": versions(), "seed": opts.seed,
        "timing": {"repeats": opts.repeats, "warmup_calls": 3,
                   "l2_policy": timing.L2_FLUSH_POLICY if device.type == "cuda" else timing.CPU_POLICY},
        "profiler": {"repeats_per_range": opts.profiler_repeats, "trace": "raw/profiler_trace.json.gz",
                     "l2_policy": "warm (no flush inside the profiled region)",
                     "unprofiled": f"the traced window run {UNPROFILED_ROUNDS} times without the profiler first "
                                   "(CUDA events, or the host clock on a CPU), in the trace's fuseprof_unprofiled too"},
    }


def run_profile(opts: ProfileOptions, log: Log = log_to_stderr) -> Path:
    """Capture one case into a new bundle under ``opts.out_dir`` and return its path."""
    started = time.monotonic()
    case = load_case(opts.case)
    device = resolve_device(opts.device)
    variants = select_variants(case, opts.variants, device.type)
    shapes = opts.shapes or case.default_shapes
    dtype = resolve_dtype(case, opts.dtype)
    manifest = _manifest(case, variants, shapes, dtype, device, opts)
    writer = BundleWriter(opts.out_dir, opts.name or bundle_name(f"{case.name}-{dtype}", manifest["device"]["name"],
                                                                 manifest["created_utc"]))
    with writer:
        log(f"fuseprof: {case.name} on {manifest['device']['name']}: {len(variants)} variants x {len(shapes)} shapes")
        timings, calls = check_and_time(case, variants, shapes, dtype, device, opts.repeats, opts.seed, log,
                                        copy_baseline=opts.copy_baseline)
        log(f"  torch.profiler: {len(calls)} ranges x {opts.profiler_repeats} calls")
        unprofiled = record_trace(calls, opts.profiler_repeats, writer.raw("profiler_trace.json.gz"),
                                  device.type == "cuda")
        manifest["profiler"]["unprofiled_window_ns"] = unprofiled
        ncu_error: NcuError | None = None
        denied = False
        if opts.ncu and device.type == "cuda":
            try:
                manifest["ncu"] = _run_ncu(writer, opts.case, [v.name for v in variants], shapes, dtype, opts, log)
            except NcuPermissionError as exc:  # counters denied: degrade to a modelled roofline, not a failure
                denied = True
                manifest["ncu"] = {"status": "denied", "error": str(exc), "clock_control": "none",
                                   "roofline": "modelled (fuseprof/capture/modelled.py): analytic FLOPs of the "
                                               "trace's ops, the case's nominal bytes, the GPU time of the timings"}
                (writer.path / "ncu.ncu-rep").unlink(missing_ok=True)
            except NcuError as exc:
                ncu_error = exc
                manifest["ncu"] = {"status": "failed", "error": str(exc), "clock_control": "none"}
                (writer.path / "ncu.ncu-rep").unlink(missing_ok=True)
        else:
            manifest["ncu"] = {"status": "skipped", "reason": "--no-ncu" if not opts.ncu else "CPU device"}
        kernels = parse_raw_dir(writer.path / RAW)
        if denied:
            # the capture's GPU on each modelled row: its roof judges them (a row of no device is judged by none)
            modelled = modelled_rows(writer.raw("profiler_trace.json.gz"), timings, opts.profiler_repeats)
            kernels = pd.concat([kernels, modelled.assign(device=manifest["device"]["name"])], ignore_index=True)
        kernels["case"], kernels["dtype"] = case.name, dtype
        timings["device"] = manifest["device"]["name"]
        manifest["wall_s"] = round(time.monotonic() - started, 2)
        writer.write_kernels(kernels)
        writer.write_timings(timings)
        writer.write_manifest(manifest)
        path = writer.commit()
    log(f"fuseprof: wrote {path} ({len(kernels)} kernel rows, {manifest['wall_s']} s)")
    if denied:
        log("fuseprof: warning: ncu was refused the GPU's performance counters (ERR_NVGPUCTRPERM): the roofline is "
            "modelled (analytic FLOPs, nominal bytes, measured GPU time; source 'model'). To measure, run as root or "
            "set the driver option NVreg_RestrictProfilingToAdminUsers=0")
    if ncu_error is not None:
        raise type(ncu_error)(f"{ncu_error} -- the bundle {path} was saved without ncu metrics")
    raise_if_wrong(timings, path)
    return path
