"""The unprofiled table's per-step counts (``fuseprof.analysis.facts.unprofiled.step_counts``, counted on arrays since
issue 61's speed work): on a trace of three ProfilerSteps with a DataLoader range, each step's ops, launches, ranges,
modules and frames are the raw JSON's events that start inside that step's ``ProfilerStep#N`` range, counted here
from the file with the calibration's kinds (``tests/test_unprofiled._raw_counts``' rules), not by the code under
test."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from fuseprof.analysis import analyze
from tests.conftest import FIXTURES

TRACE = FIXTURES / "truth" / "dataloader_wait.json.gz"
_LAUNCH = re.compile(r"Launch\w*Kernel|LaunchKernelEx|LaunchCooperativeKernel|Memcpy\w*Async|Memset\w*Async|"
                     r"MemcpyPeerAsync")
_SYNC = re.compile(r"Synchronize|^(?:cuda|hip)Memcpy(?:WithStream)?$|^cuMemcpy[DH]to[DH](?:_v2)?$")


def _kind(event: dict) -> str | None:
    cat, name = event.get("cat"), str(event.get("name", ""))
    if cat == "cpu_op":
        return "ops"
    if cat == "user_annotation":
        return "ranges"
    if cat == "python_function":
        return "modules" if name.startswith("nn.Module: ") else "frames"
    if cat in ("cuda_runtime", "cuda_driver"):
        return "graph_launches" if "GraphLaunch" in name else "syncs" if _SYNC.search(name) else \
            "launches" if _LAUNCH.search(name) else None
    return None


def _raw_step_counts(path: Path) -> dict[str, dict[str, int]]:
    """Per ProfilerStep#N range of the raw trace, its events by kind (an event is the step's if it starts in it)."""
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    steps = {e["name"]: (float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
             if e.get("cat") == "user_annotation" and str(e["name"]).startswith("ProfilerStep#")}
    counts = {s: dict.fromkeys(("ops", "launches", "graph_launches", "syncs", "ranges", "modules", "frames"), 0)
              for s in steps}
    for e in events:
        kind = _kind(e)
        inside = [s for s, (a, b) in steps.items() if a <= float(e["ts"]) < b]
        if kind is not None and inside:
            counts[inside[0]][kind] += 1
    return counts


def test_each_steps_counts_are_the_raw_events_that_start_in_its_range() -> None:
    expected = _raw_step_counts(TRACE)
    assert len(expected) == 3 and all(c["launches"] > 0 and c["ranges"] > 0 for c in expected.values())
    table = analyze(TRACE)[0].frames["unprofiled"]
    got = {row["step"]: {k: int(row[k]) for k in ("ops", "launches", "ranges", "modules", "frames")}
           for _, row in table.iterrows()}
    assert got == {s: {k: c[k] for k in ("ops", "launches", "ranges", "modules", "frames")}
                   for s, c in expected.items()}
