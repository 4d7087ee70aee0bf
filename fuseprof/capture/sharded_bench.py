"""``fuseprof bench --gpus N``: start the ranks with torchrun, then merge what they wrote into one bundle."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fuseprof.capture.shard import RankGroup, check_device, failure_message, merge, timeline, timeline_line
from fuseprof.case import Shape, shape_label
from fuseprof.console import Log, log_to_stderr
from fuseprof.errors import FuseprofError


def _parent_imports() -> None:
    """What the parent needs only after the ranks are done (torch among it): imported while they run."""
    import fuseprof.capture.bench  # noqa: F401


def run_sharded_bench(case_specs: Sequence[str], shapes: tuple[Shape, ...], dtype: str | None, device: str,
                      out_dir: Path, gpus: int, repeats: int = 50, seed: int = 0, variants: list[str] | None = None,
                      log: Log = log_to_stderr, timeout_s: float = 3600) -> Path:
    """One bundle from ``gpus`` ranks, each timing its share of the grid on its own GPU."""
    check_device(device)
    started = time.monotonic()
    spec = {"job": "bench", "cases": list(case_specs), "shapes": [shape_label(s) for s in shapes], "dtype": dtype,
            "device": device, "repeats": repeats, "seed": seed, "variants": variants}
    log(f"fuseprof bench: {len(case_specs)} cases x {len(shapes)} shapes over {gpus} "
        f"{'GPUs' if device == 'cuda' else 'processes'} (torchrun)")
    with tempfile.TemporaryDirectory(prefix="fuseprof-shard-") as tmp, \
            RankGroup({**spec, "parts": tmp}, gpus, timeout_s) as ranks:
        _parent_imports()  # while the ranks start
        parts_s = ranks.wait_for_parts()
        rows, statuses, failed = merge(Path(tmp), gpus)
        if not rows.empty:
            path = _write(rows, statuses, failed, shapes, repeats, seed, device, parts_s, started, out_dir, log)
    if rows.empty:
        raise FuseprofError(failure_message(failed, gpus))
    if failed:
        raise FuseprofError(f"{failure_message(failed, gpus)}; {path} holds the others' rows")
    return path


def _write(rows: pd.DataFrame, statuses: list[dict[str, Any]], failed: list[dict[str, Any]],
           shapes: tuple[Shape, ...], repeats: int, seed: int, device: str, parts_s: float, started: float,
           out_dir: Path, log: Log) -> Path:
    """The merged bundle: the ranks' rows in grid order, the device facts of every GPU, the time line."""
    from fuseprof.bundle.provenance import now_utc
    from fuseprof.capture.bench import bench_manifest, write_bench_bundle
    from fuseprof.tables.summary import sort_by_shape

    good = [s for s in statuses if "error" not in s]
    facts = dict(good[0]["device"])
    facts["ranks"] = [{"rank": s["rank"], "gpu": s.get("gpu"), **s["device"], "items": s["items"],
                       "wall_s": s["wall_s"], "item_s": s["item_s"]} for s in good]
    manifest = bench_manifest(good[0]["cases"], shapes, facts, now_utc(), repeats, seed, device)
    manifest["shards"] = {"world": len(statuses), "failed": failed, **timeline(statuses, parts_s)}
    log(f"fuseprof: {timeline_line(manifest['shards'])}")
    rows = sort_by_shape(rows, ["case", "shape"])  # each (case, shape) came whole from one rank, in its order
    return write_bench_bundle(rows, manifest, out_dir, started, log)
