"""The sharded bench's speed-up and where its time went: ``python scripts/shard_speedup.py WORK LABEL...``.

``scripts/h200.sh shardbench`` runs ``fuseprof bench`` with ``--gpus 1`` and ``--gpus 2`` into
``WORK/shard-LABEL/`` and writes each run's wall time (as the shell saw it) to ``WORK/wall-LABEL``;
a label is ``<cache state>-<gpus>`` (``cold-1``, ``warm-2``). This prints, per run, the wall time and
its parts from the manifest (each process's first item pays the cold start), then for each cache
state the speed-up of 2 GPUs over 1 and how far the per-shape ratios to the copy moved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

import fuseprof
from fuseprof.tables.compare import compare_variants


class Run(NamedTuple):
    """One run's bundle, its manifest and its wall time as the shell saw it: read once."""

    label: str
    bundle: Path
    manifest: dict[str, Any]
    wall: float


def _read(work: Path, label: str) -> Run:
    (bundle,) = (work / f"shard-{label}").glob("bench-*")
    return Run(label, bundle, json.loads((bundle / "manifest.json").read_text()),
               float((work / f"wall-{label}").read_text()))


def _describe(run: Run) -> str:
    shards = run.manifest.get("shards")
    if shards is None:
        items = run.manifest["item_s"]
        return (f"{run.label}: {run.wall:.1f} s ({len(items)} items, {sum(i['s'] for i in items):.1f} s; "
                f"first {items[0]['item']} {items[0]['s']:.1f} s)")
    ranks = run.manifest["device"]["ranks"]
    firsts = "; ".join(f"rank {r['rank']} first {r['item_s'][0]['item']} {r['item_s'][0]['s']:.1f} s" for r in ranks)
    return (f"{run.label}: {run.wall:.1f} s (ranks ready after {shards['ranks_ready_s']} s, worked "
            f"{shards['ranks_work_s']} s, every part written after {shards['parts_s']} s; {firsts})")


def _ratio_drift(one: Run, two: Run) -> str:
    a, b = (compare_variants(fuseprof.load_timings(run.bundle)) for run in (one, two))
    joined = a.merge(b, on=["case", "shape", "variant"], suffixes=("_1", "_2"))
    drift = (joined["time_over_copy_2"] - joined["time_over_copy_1"]).abs()
    return (f"time_over_copy {two.label} vs {one.label}, {len(joined)} rows: median |diff| {drift.median():.3f}, "
            f"p90 {drift.quantile(0.9):.3f}, max {drift.max():.3f}")


def _fixed_cost(one: Run, two: Run) -> str:
    """The work W that N GPUs can share (the one-GPU run's items, its first item counted as a median one:
    the rest of it is the process's cold start) and the fixed cost F outside it, of 1 GPU and of 2."""
    items = pd.Series([i["s"] for i in one.manifest["item_s"]])
    shared = items.iloc[1:].sum() + items.median()
    return (f"work W {shared:.1f} s; fixed cost 1 GPU {one.wall - shared:.1f} s, 2 GPUs {two.wall - shared / 2:.1f} s; "
            f"1.8x needs a fixed cost <= W/8 = {shared / 8:.1f} s")


def main(work: Path, labels: list[str]) -> None:
    runs = {label: _read(work, label) for label in labels}
    for run in runs.values():
        print(_describe(run))
    for state in dict.fromkeys(label.split("-")[0] for label in labels):
        one, two = runs.get(f"{state}-1"), runs.get(f"{state}-2")
        if one and two:
            print(f"{state}: 1 GPU {one.wall:.1f} s, 2 GPUs {two.wall:.1f} s, speed-up {one.wall / two.wall:.2f}x")
            print(f"{state}: {_fixed_cost(one, two)}")
            print(f"{state}: {_ratio_drift(one, two)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
