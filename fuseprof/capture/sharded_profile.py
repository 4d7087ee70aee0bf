"""``fuseprof profile --gpus N``: each rank captures its share of the shapes (correctness, timing,
torch.profiler and ncu on its own GPU) into a part bundle; the parts become one bundle, each rank's
raw artifacts under ``raw/rank<r>/`` so that ``fuseprof reparse`` rebuilds the same frame."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from fuseprof.bundle.files import RAW, BundleWriter, read_manifest
from fuseprof.bundle.loading import load_timings
from fuseprof.bundle.provenance import bundle_name, command_line, now_utc
from fuseprof.capture.correctness import raise_if_wrong
from fuseprof.capture.profile import ProfileOptions
from fuseprof.capture.shard import RankGroup, check_device, failure_message, read_statuses, timeline
from fuseprof.case import load_case, select_variants, shape_label
from fuseprof.console import Log, log_to_stderr
from fuseprof.errors import FuseprofError
from fuseprof.parse.dispatch import parse_raw_dir

# ProfileOptions fields a rank takes from the parent as they are (the rest: its shapes, device, part folder)
_PASSED = ("case", "variants", "dtype", "ncu", "repeats", "profiler_repeats", "seed", "ncu_timeout_s",
           "tensor_precisions", "copy_baseline")


def run_sharded_profile(opts: ProfileOptions, gpus: int, log: Log = log_to_stderr, timeout_s: float = 7200) -> Path:
    """One capture bundle from ``gpus`` ranks, each profiling its share of the shapes on its own GPU."""
    check_device(opts.device)
    started = time.monotonic()
    case = load_case(opts.case)  # refuse a bad case, variant or shape here, not once per rank
    select_variants(case, opts.variants, opts.device)
    shapes = [shape_label(s) for s in (opts.shapes or case.default_shapes)]
    options: dict[str, Any] = {name: getattr(opts, name) for name in _PASSED}
    spec = {"job": "profile", "cases": [opts.case], "shapes": shapes, "device": opts.device, "options": options}
    log(f"fuseprof profile: {case.name}, {len(shapes)} shapes over {gpus} "
        f"{'GPUs' if opts.device == 'cuda' else 'processes'} (torchrun)")
    with tempfile.TemporaryDirectory(prefix="fuseprof-shard-") as tmp, \
            RankGroup({**spec, "parts": tmp}, gpus, timeout_s) as ranks:
        parts, parts_s = Path(tmp), ranks.wait_for_parts()
        statuses = read_statuses(parts, gpus)
        done = [s for s in statuses if (parts / f"rank{s['rank']}" / "manifest.json").exists()]
        if not done:
            raise FuseprofError("no rank wrote a bundle: " + failure_message(statuses, gpus))
        path = _merge(parts, done, {"world": gpus, **timeline(statuses, parts_s)}, shapes, opts, started)
    failed = [s for s in statuses if "error" in s]
    log(f"fuseprof: wrote {path} (shapes from {len(done)} of {gpus} ranks, {time.monotonic() - started:.1f} s)")
    if failed:
        raise FuseprofError(f"{failure_message(failed, gpus)}; {path} holds what the ranks wrote")
    raise_if_wrong(load_timings(path), path)
    return path


def _merge(parts: Path, statuses: list[dict[str, Any]], shards: dict[str, Any], shapes: list[str],
           opts: ProfileOptions, started: float) -> Path:
    manifests = {s["rank"]: read_manifest(parts / f"rank{s['rank']}") for s in statuses}
    first = manifests[statuses[0]["rank"]]
    manifest = {**first, "shapes": shapes, "created_utc": now_utc(), "command_line": command_line()}
    manifest["device"] = {**first["device"], "ranks": [
        {"rank": s["rank"], "gpu": s.get("gpu"), **manifests[s["rank"]]["device"],
         "shapes": manifests[s["rank"]]["shapes"], "wall_s": s.get("wall_s")} for s in statuses]}
    manifest["ncu"] = {**first["ncu"], "ranks": [{"rank": r, **m["ncu"]} for r, m in manifests.items()]}
    manifest["shards"] = {**shards, "ranks_with_results": [s["rank"] for s in statuses],
                          "failed": [{"rank": s["rank"], "error": s["error"]} for s in statuses if "error" in s]}
    name = opts.name or bundle_name(f"{first['case']}-{first['dtype']}", first["device"]["name"],
                                    manifest["created_utc"])
    with BundleWriter(opts.out_dir, name) as writer:
        timings = []
        for status in statuses:
            part = parts / f"rank{status['rank']}"
            shutil.copytree(part / RAW, writer.path / RAW / f"rank{status['rank']}")
            timings.append(load_timings(part).drop(columns=["bundle"]).assign(gpu=status.get("gpu"),
                                                                               rank=status["rank"]))
        kernels = parse_raw_dir(writer.path / RAW)
        kernels["case"], kernels["dtype"] = first["case"], first["dtype"]
        writer.write_kernels(kernels)
        order = {s: i for i, s in enumerate(shapes)}
        merged = pd.concat(timings, ignore_index=True)
        writer.write_timings(merged.sort_values("shape", key=lambda c: c.map(order), kind="stable"))
        manifest["wall_s"] = round(time.monotonic() - started, 2)
        writer.write_manifest(manifest)
        return writer.commit()

