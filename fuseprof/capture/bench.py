"""``fuseprof bench``: correctness, GPU time and as-called time for every variant of several cases
across a shape grid, each shape beside a device copy of the same bytes, in one process and one bundle.

No profiler or ncu here: a benchmark's numbers should come from an undisturbed run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fuseprof.bundle import BundleWriter
from fuseprof.capture import timing
from fuseprof.capture.device_facts import device_facts
from fuseprof.capture.measure import check_and_time
from fuseprof.capture.profile import resolve_device, resolve_dtype
from fuseprof.capture.provenance import bundle_name, command_line, git_state, now_utc, versions
from fuseprof.case import Shape, load_case, select_variants, shape_label
from fuseprof.console import Log, log_to_stderr
from fuseprof.errors import CorrectnessError


def run_bench(case_specs: Sequence[str], shapes: tuple[Shape, ...], dtype: str | None, device_name: str,
              out_dir: Path, repeats: int = 50, seed: int = 0, variants: list[str] | None = None,
              log: Log = log_to_stderr) -> Path:
    """Benchmark each case over ``shapes``; one bundle holding every timing row."""
    started = time.monotonic()
    device = resolve_device(device_name)
    facts = device_facts(device)
    frames: list[pd.DataFrame] = []
    manifest_cases: list[dict[str, Any]] = []
    case_names: list[str] = []
    for spec in case_specs:
        case = load_case(spec)
        chosen = select_variants(case, variants, device.type)
        case_dtype = resolve_dtype(case, dtype)
        log(f"fuseprof bench: {case.name} ({case_dtype}): {', '.join(v.name for v in chosen)} x {len(shapes)} shapes")
        frame, _ = check_and_time(case, chosen, shapes, case_dtype, device, repeats, seed, log, keep_calls=False,
                                  copy_baseline=device.type == "cuda")
        frames.append(frame)
        case_names.append(case.name)
        manifest_cases.append({"case": case.name, "dtype": case_dtype,
                               "variants": [{"name": v.name, "kind": v.kind, "description": v.description}
                                            for v in chosen]})
    timings = pd.concat(frames, ignore_index=True)
    timings["device"] = facts["name"]
    created = now_utc()
    manifest = {
        "kind": "bench", "case": ",".join(case_names), "cases": manifest_cases,
        "shapes": [shape_label(s) for s in shapes], "device": facts, "created_utc": created,
        "command_line": command_line(), "git": git_state(Path.cwd()), "versions": versions(), "seed": seed,
        "timing": {"repeats": repeats, "warmup_calls": 3,
                   "l2_policy": timing.L2_FLUSH_POLICY if device.type == "cuda" else timing.CPU_POLICY},
        "ncu": {"status": "skipped", "reason": "benchmark run"},
    }
    with BundleWriter(out_dir, bundle_name("bench", facts["name"], created)) as writer:
        writer.write_timings(timings)
        manifest["wall_s"] = round(time.monotonic() - started, 2)
        writer.write_manifest(manifest)
        path = writer.commit()
    log(f"fuseprof: wrote {path} ({len(timings)} timing rows, {manifest['wall_s']} s)")
    wrong = timings[timings["correct"].eq(False)]
    if not wrong.empty:
        pairs = ", ".join(f"{c} {v} {s}" for c, v, s in wrong[["case", "variant", "shape"]].itertuples(index=False))
        raise CorrectnessError(f"wrong results from: {pairs} (see rel_err in {path}/timings.parquet)")
    return path
