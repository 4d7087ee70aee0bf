"""The bound as traced (issue 59): each gap read whole, by the rule the labelled traces state. Held two ways:
against an independent reading of a committed raw trace (plain JSON, exact decimals, the rule written here from
``labels_turn4.json``'s ``meta.fields.idle_verdict``), and against the labels of the score-only H200 traces."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from fuseprof.analysis import analyze
from tests.conftest import FIXTURES, shared_traces

_SYNC = re.compile(r"Synchronize|^(?:cuda|hip)Memcpy(?:WithStream)?$|^(?:cuda|hip)(?:Malloc|Free)")
_GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _ns(value: object) -> int:
    return int(Decimal(str(value)) * 1000)


def _read_whole_gaps(path: Path) -> dict[str, dict[str, int]]:
    """Per ProfilerStep: busy and the gaps of the union of its GPU events (an event's step: the ProfilerStep its
    launch call starts in), each gap wholly sync (a synchronising or allocator call in progress at its start, any
    thread), launch (the next event's launch call starts at or after it) or other."""
    events = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
    steps = [(e["name"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
             and "correlation" in e.get("args", {})}
    syncs = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and _SYNC.search(str(e.get("name", "")))]
    out: dict[str, dict[str, int]] = {}
    for name, lo, hi in steps:
        mine = []
        for e in events:
            call = calls.get(e.get("args", {}).get("correlation")) if e.get("cat") in _GPU else None
            if call is not None and lo <= _ns(call["ts"]) < hi:
                mine.append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), _ns(call["ts"])))
        mine.sort()
        totals = {"busy": 0, "launch": 0, "sync": 0, "other": 0}
        reach = None
        for start, end, launched in mine:
            if reach is not None and start > reach:
                cause = "sync" if any(a <= reach < b for a, b in syncs) else "launch" if launched >= reach else "other"
                totals[cause] += start - reach
            totals["busy"] += max(0, end - max(start, reach if reach is not None else start))
            reach = end if reach is None else max(reach, end)
        out[name] = totals
    return out


@pytest.mark.parametrize(("name", "cause"), [("sync_bound", "sync"), ("decode_eager", "launch")])
def test_whole_gaps_equal_an_independent_reading_of_the_raw_trace(name: str, cause: str) -> None:
    path = FIXTURES / "truth" / f"{name}.json.gz"
    expected = _read_whole_gaps(path)
    idle = analyze(path)[0].frames["idle"].set_index("step")
    assert expected and set(expected) <= set(idle.index)
    for step, totals in expected.items():
        row = idle.loc[step]
        got = {"busy": int(row["busy_ns"]), "launch": int(row["traced_launch_ns"]),
               "sync": int(row["traced_sync_ns"]), "other": int(row["traced_other_ns"])}
        assert got == totals, step
    assert sum(t[cause] for t in expected.values()) > 0  # the case holds gaps of the cause it is chosen for


_H200 = ["train_foreach", "train_fused", "train_foreach_mem", "decode_eager", "decode_graph_replay",
         "decode_compiled_ro", "moe_eager", "attn_eager", "attn_sdpa", "fp8_mlp"]


@pytest.mark.shared
@pytest.mark.parametrize("name", _H200)
def test_bound_as_traced_matches_the_labels(name: str) -> None:
    """The score-only H200 traces: per trace and per step (all 32 labelled traces: scripts/score_bound.py)."""
    labels = json.loads((shared_traces() / "labels_turn4.json").read_text())["traces"]
    label = labels[f"h200-turn4/{name}.json.gz"]["idle_verdict"]
    result = analyze(shared_traces() / "h200-turn4" / f"{name}.json.gz")[0]
    assert result.frames["verdict"]["bound_as_traced"].iloc[0] in label["verdict"]  # "mixed (...)" names both
    idle = result.frames["idle"].set_index("step")
    for step, row in label["per_step"].items():
        assert idle.loc[step, "verdict_as_traced"] == row["verdict"], step


@pytest.mark.shared
def test_a_wait_whose_next_work_was_launched_before_the_step_range_is_no_steps() -> None:
    """sglang_Qwen3-8B_decode (labels.json: sync-bound, or event wait; "not host-bound"): its one 463 ms wait ends at
    work launched before SGLang's ``step[DECODE bs=32]`` range began, so by the labels' rule (a step's gaps lie in the
    union of the GPU work launched inside it) it is no step's, and ``bound_as_traced`` reads the step alone. Read
    whole it is launch (its next work's launch call starts after the gap opens, no synchronising call in progress
    then), which would make the window host-bound: what labels.json says it is not. Expected values from the raw
    trace; ``bound`` (the split) names the event wait the label's reading names."""
    path = shared_traces() / "sglang_Qwen3-8B_decode.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
    step = next(e for e in events if e.get("cat") == "user_annotation" and str(e["name"]).startswith("step["))
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"
             and "correlation" in e.get("args", {})}
    syncs = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("cat") == "cuda_runtime" and _SYNC.search(str(e.get("name", "")))]
    gpu = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), _ns(calls[e["args"]["correlation"]]["ts"]))
                 for e in events if e.get("cat") in _GPU)
    gaps, reach = [], gpu[0][1]
    for start, end, launched in gpu[1:]:
        if start > reach:
            gaps.append((reach, start, launched))
        reach = max(reach, end)
    lo, hi, launched = max(gaps, key=lambda g: g[1] - g[0])
    assert hi - lo > 400_000_000 and launched < _ns(step["ts"])  # no step's: launched before the range
    assert launched >= lo and not any(a <= lo < b for a, b in syncs)  # read whole: launch
    result = analyze(path)[0]
    idle = result.frames["idle"].set_index("step")
    assert idle.loc["(between steps)", "traced_launch_ns"] == hi - lo
    verdict = result.frames["verdict"].iloc[0]
    assert verdict["bound_as_traced"] == "GPU-bound" and verdict["bound"] == "event wait"
