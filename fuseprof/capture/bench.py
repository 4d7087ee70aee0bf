"""``fuseprof bench``: correctness, GPU time and as-called time for every variant of several cases
across a shape grid, each shape beside a device copy of the same bytes, in one process and one bundle.

No profiler or ncu here: a benchmark's numbers should come from an undisturbed run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fuseprof.bundle.files import BundleWriter
from fuseprof.bundle.provenance import bundle_name, command_line, git_state, now_utc, versions
from fuseprof.capture import timing
from fuseprof.capture.clock import ItemClock
from fuseprof.capture.correctness import raise_if_wrong
from fuseprof.capture.device_facts import device_facts
from fuseprof.capture.measure import check_and_time
from fuseprof.capture.profile import resolve_device, resolve_dtype
from fuseprof.case import Shape, load_case, select_variants, shape_label
from fuseprof.console import Log, log_to_stderr


def bench_rows(case_specs: Sequence[str], shapes: tuple[Shape, ...], dtype: str | None, device: torch.device,
               repeats: int, seed: int, variants: list[str] | None, log: Log,
               only: set[tuple[str, str]] | None = None,
               done: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Timing rows of each case over ``shapes`` (restricted to the (case spec, shape) pairs in ``only``
    when given: one GPU's share of a sharded run), and the manifest's description of the cases.
    ``done`` hears of each (case, shape) as it finishes."""
    frames: list[pd.DataFrame] = []
    manifest_cases: list[dict[str, Any]] = []
    for spec in case_specs:
        case = load_case(spec)
        chosen = select_variants(case, variants, device.type)
        case_dtype = resolve_dtype(case, dtype)
        mine = tuple(s for s in shapes if only is None or (spec, shape_label(s)) in only)
        manifest_cases.append({"case": case.name, "dtype": case_dtype,
                               "variants": [{"name": v.name, "kind": v.kind, "description": v.description}
                                            for v in chosen]})
        if not mine:
            continue
        log(f"fuseprof bench: {case.name} ({case_dtype}) on {device}: {', '.join(v.name for v in chosen)} x "
            f"{len(mine)} shapes")
        for shape in mine:
            frame, _ = check_and_time(case, chosen, (shape,), case_dtype, device, repeats, seed, log,
                                      keep_calls=False, copy_baseline=device.type == "cuda")
            frames.append(frame)
            if done is not None:
                done(f"{spec} {shape_label(shape)}")
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), manifest_cases


def bench_manifest(manifest_cases: list[dict[str, Any]], shapes: tuple[Shape, ...], facts: dict[str, Any],
                   created: str, repeats: int, seed: int, device_type: str) -> dict[str, Any]:
    return {
        "kind": "bench", "case": ",".join(c["case"] for c in manifest_cases), "cases": manifest_cases,
        "shapes": [shape_label(s) for s in shapes], "device": facts, "created_utc": created,
        "command_line": command_line(), "git": git_state(Path.cwd()), "versions": versions(), "seed": seed,
        "timing": {"repeats": repeats, "warmup_calls": 3,
                   "l2_policy": timing.L2_FLUSH_POLICY if device_type == "cuda" else timing.CPU_POLICY},
        "ncu": {"status": "skipped", "reason": "benchmark run"},
    }


def write_timings_bundle(timings: pd.DataFrame, manifest: dict[str, Any], out_dir: Path, started: float,
                         log: Log) -> Path:
    """A bundle of timing rows named after the manifest's kind (bench, verify), its wall time in the manifest."""
    with BundleWriter(out_dir, bundle_name(manifest["kind"], manifest["device"]["name"],
                                           manifest["created_utc"])) as writer:
        writer.write_timings(timings)
        manifest["wall_s"] = round(time.monotonic() - started, 2)
        writer.write_manifest(manifest)
        path = writer.commit()
    log(f"fuseprof: wrote {path} ({len(timings)} timing rows, {manifest['wall_s']} s)")
    return path


def write_bench_bundle(timings: pd.DataFrame, manifest: dict[str, Any], out_dir: Path, started: float,
                       log: Log) -> Path:
    """One bench bundle; wrong results are reported after it is written (the evidence is kept)."""
    path = write_timings_bundle(timings, manifest, out_dir, started, log)
    raise_if_wrong(timings, path, ("case", "variant", "shape"))
    return path


def run_bench(case_specs: Sequence[str], shapes: tuple[Shape, ...], dtype: str | None, device_name: str,
              out_dir: Path, repeats: int = 50, seed: int = 0, variants: list[str] | None = None,
              log: Log = log_to_stderr) -> Path:
    """Benchmark each case over ``shapes`` in this process; one bundle holding every timing row."""
    started = time.monotonic()
    device = resolve_device(device_name)
    facts = device_facts(device)
    clock = ItemClock()
    timings, manifest_cases = bench_rows(case_specs, shapes, dtype, device, repeats, seed, variants, log,
                                         done=clock.done)
    timings["device"] = facts["name"]
    manifest = bench_manifest(manifest_cases, shapes, facts, now_utc(), repeats, seed, device.type)
    manifest["item_s"] = clock.items  # as each rank of a sharded run records its own
    return write_bench_bundle(timings, manifest, out_dir, started, log)
