"""``fuseprof export --perfetto``: re-read as a viewer would, every exported trace holds every original event
exactly as written (numbers compared as their JSON text), every finding, and no two slices on one track overlap;
several ranks merge into one file whose original events come back through the recorded mappings. The
expectations are derived from the raw files (their events, the GPU's busy intervals) and the analysis tables,
not from the exporter."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.cli import main
from fuseprof.errors import FuseprofError, TraceFormatError
from fuseprof.export.annotate import export_perfetto
from fuseprof.export.chrome import FLOW_ID_STRIDE, exact_us, lanes
from tests.conftest import by_name, shared_traces, trace_at
from tests.test_conformance import EVERY_TRACE

_GPU = {"kernel", "gpu_memcpy", "gpu_memset"}  # the categories of GPU work Kineto writes


def _exact(path: Path) -> dict:
    """A trace with every float kept as its text: equality is equality of what the file says."""
    raw = path.read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=lambda s: "num:" + s)
    return data if isinstance(data, dict) else {"traceEvents": data}


def _us(value: str | int) -> Decimal:
    return Decimal(value.removeprefix("num:")) if isinstance(value, str) else Decimal(value)


def _overlaps(events: list[dict]) -> list[str]:
    by_track: dict[tuple, list[tuple[Decimal, Decimal]]] = {}
    for e in events:
        by_track.setdefault((e["pid"], e["tid"]), []).append((_us(e["ts"]), _us(e["ts"]) + _us(e["dur"])))
    bad = []
    for track, spans in by_track.items():
        spans.sort()
        bad += [f"{track}: {a} > {b}" for (_, a), (b, _) in zip(spans, spans[1:]) if a > b]
    return bad


def _busy_gaps(events: list[dict]) -> int:
    """Idle gaps of the GPU from the raw file: GPU events' intervals merged, counted between (within the
    analysis's window: the whole trace where it has no profiler steps)."""
    gpu = sorted((_us(e["ts"]), _us(e["ts"]) + _us(e["dur"])) for e in events if e.get("ph") == "X"
                 and str(e.get("cat", "")).lower() in _GPU and "dur" in e)
    gaps, end = 0, None
    for s, e in gpu:
        if end is not None and s > end:
            gaps += 1
        end = e if end is None else max(end, e)
    return gaps


@pytest.mark.parametrize("name", by_name(*EVERY_TRACE))
def test_every_trace_exports_with_its_events_and_findings(name: str, tmp_path: Path) -> None:
    trace = trace_at(name)
    if not {str(e.get("cat", "")).lower() for e in _exact(trace)["traceEvents"]} & _GPU:
        with pytest.raises(TraceFormatError, match="no GPU kernels"):  # a CPU-only trace: nothing to annotate
            analyze([trace])
        return
    result = analyze([trace])[0]
    done = export_perfetto([result], tmp_path / "out.json.gz")
    original, exported = _exact(trace), _exact(done.path)
    events = original["traceEvents"]
    assert exported["traceEvents"][:len(events)] == events  # untouched, in order, every number's text
    assert {k: v for k, v in exported.items() if k not in ("traceEvents", "fuseprof")} == \
        {k: v for k, v in original.items() if k != "traceEvents"}
    added = exported["traceEvents"][len(events):]
    slices = [e for e in added if e["ph"] == "X"]
    assert all(e["cat"] == "fuseprof" for e in slices) and not _overlaps(slices)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in added if e["name"] == "thread_name"}
    drawn = sorted((names[(e["pid"], e["tid"])].split(" · lane ")[0], e["name"], _us(e["ts"])) for e in slices)
    found = next(iter(done.findings.values()))
    assert drawn == sorted((t, n, Decimal(exact_us(s))) for t, n, s in zip(found["track"], found["name"],
                                                                           found["start_ns"]))
    fusion = [e for e in slices if names[(e["pid"], e["tid"])].startswith("fusion · ")]
    assert len(fusion) == sum(int(c) if len(m) % int(c) == 0 else len(m)
                              for c, m in zip(result.fusion.get("count", []), result.fusion.get("members", [])))
    path = [e for e in slices if names[(e["pid"], e["tid"])].startswith("critical path")]  # the steps, end to end
    assert sum(_us(e["dur"]) for e in path) == Decimal(int(result.critical_path["span_ns"].sum())) / 1000


@pytest.mark.shared
def test_idle_slices_are_the_gpus_gaps_counted_from_the_raw_file(tmp_path: Path) -> None:
    trace = shared_traces() / "sglang_Qwen3-8B_decode.json.gz"
    result = analyze([trace])[0]
    assert result.window == "window: the whole trace"  # its engine step is shown apart; the window is the trace
    done = export_perfetto([result], tmp_path / "out.json")
    slices = [e for e in _exact(done.path)["traceEvents"] if e.get("cat") == "fuseprof"]
    assert sum(1 for e in slices if e["name"].startswith("idle: ")) == _busy_gaps(_exact(trace)["traceEvents"]) > 0


def _unmapped(event: dict, pids: dict, position: int, prefix: str) -> dict:
    """A merged event as its rank's trace wrote it, by the mapping the file records."""
    back = dict(event, pid=pids[event["pid"]])
    if isinstance(event.get("id"), int) and event["ph"] in "stfbenSTFp":
        back["id"] = event["id"] - position * FLOW_ID_STRIDE
    if event["ph"] == "M" and event["name"] == "process_name":
        assert event["args"]["name"].startswith(prefix)
        back["args"] = dict(event["args"], name=event["args"]["name"].removeprefix(prefix))
    return back


@pytest.mark.shared
def test_ranks_merge_into_one_file_whose_events_map_back(tmp_path: Path) -> None:
    pair = sorted((shared_traces() / "h200_2gpu").glob("tp_mlp_straggle_rank*.json.gz"))
    results = analyze(pair)
    done = export_perfetto(results, tmp_path / "merged.json.gz")
    merged = _exact(done.path)
    info = merged["fuseprof"]
    start = 0
    for position, (path, rank) in enumerate(zip(pair, info["ranks"])):
        events = _exact(path)["traceEvents"]
        mine = merged["traceEvents"][start:start + len(events)]
        start += len(events) + rank["added_after"]  # each rank's events, then names and order of its processes
        pids = {v: json.loads(k) for k, v in rank["pids"].items()}
        back = [_unmapped(e, pids, position, rank["process_name_prefix"]) for e in mine]
        assert back == events
    pids_of_ranks = [set(r["pids"].values()) for r in info["ranks"]]
    assert not pids_of_ranks[0] & pids_of_ranks[1]
    waits = [e for e in merged["traceEvents"] if e.get("cat") == "fuseprof" and e["name"].startswith("waits for")]
    from fuseprof.analysis.facts.ranks import collective_skew

    table = collective_skew(results)
    expected = sum(int((table[c] > 0).sum()) for c in table.columns if c.startswith("wait_ns_rank"))
    assert len(waits) == expected > 0


def test_eight_ranks_merge_into_one_file(tmp_path: Path) -> None:
    import sys

    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_rank_set import make_rank_set

    paths = make_rank_set(tmp_path / "ranks", ranks=8, steps=9, slow_rank=3)
    results = analyze(paths)
    done = export_perfetto(results, tmp_path / "eight.json.gz")
    merged = _exact(done.path)
    assert len(merged["fuseprof"]["ranks"]) == 8 == len(merged["fuseprof"]["findings"])
    assert merged["fuseprof"]["original_events"] == [len(_exact(p)["traceEvents"]) for p in sorted(paths)]
    pids = [set(r["pids"].values()) for r in merged["fuseprof"]["ranks"]]
    assert sum(map(len, pids)) == len(set().union(*pids))
    assert not _overlaps([e for e in merged["traceEvents"] if e.get("cat") == "fuseprof"])


def test_lanes_never_overlap_and_use_the_deepest_overlap() -> None:
    starts, ends = [0, 1, 2, 10, 3, 11], [5, 4, 12, 12, 9, 13]
    lane = lanes(starts, ends)
    for k in set(lane):
        spans = sorted((s, e) for s, e, n in zip(starts, ends, lane) if n == k)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    depth = max(sum(a <= s < b for a, b in zip(starts, ends)) for s in starts)
    assert max(lane) + 1 == depth == 4  # 0-5, 1-4, 2-12, 3-9 overlap at 3; 10-12 and 11-13 reuse freed lanes


def test_times_are_exact_decimals_of_integer_ns() -> None:
    assert exact_us(1682725898236567123) == "1682725898236567.123"
    assert exact_us(5) == "0.005" and exact_us(-1500) == "-1.500"


@pytest.mark.shared
def test_export_refuses_to_lose_a_file(tmp_path: Path, capsys) -> None:
    trace = shared_traces() / "torch_compile_triton.json.gz"
    out = tmp_path / "t.json.gz"
    out.write_text("mine")
    assert main(["export", str(trace), "--perfetto", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_text() == "mine"
    assert main(["export", str(trace), "--perfetto", str(tmp_path / "t.txt")]) == 2
    with pytest.raises(FuseprofError, match="which this command reads"):
        export_perfetto(analyze([trace]), trace)
    assert main(["export", str(trace), "--perfetto", str(out), "--force"]) == 0
    assert pd.DataFrame(_exact(out)["traceEvents"]).shape[0] > 0


@pytest.mark.parametrize("name", by_name("shared:torch_compile_triton.json.gz", "shared:mi300_Qwen1.5-0.5B.json.gz",
                                          "tests/fixtures/truth/train_foreach.json.gz"))
def test_pftrace_holds_every_slice_and_finding_at_exact_ns(name: str, tmp_path: Path) -> None:
    pytest.importorskip("perfetto")
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    trace = trace_at(name)
    done = export_perfetto(analyze([trace]), tmp_path / "out.pftrace")
    parsed = Trace()
    parsed.ParseFromString(done.path.read_bytes())
    begins = [(p.timestamp, p.track_event.name) for p in parsed.packet
              if p.HasField("track_event") and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN]
    ends = sum(1 for p in parsed.packet if p.HasField("track_event") and p.track_event.type == TrackEvent.TYPE_SLICE_END)
    raw = [e for e in _exact(trace)["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    found = next(iter(done.findings.values()))
    expected = sorted([(int(_us(e["ts"]) * 1000), str(e.get("name", ""))) for e in raw] +
                      [(int(s), str(n)) for s, n in zip(found["start_ns"], found["name"])])
    assert sorted(begins) == expected and ends == len(expected)
    flows = sum(len(p.track_event.flow_ids) for p in parsed.packet if p.HasField("track_event"))
    starts = {(json.dumps(e.get("pid")), json.dumps(e.get("tid")), _us(e["ts"])) for e in raw}
    arrows = [e for e in _exact(trace)["traceEvents"] if e.get("ph") == "s"]
    assert flows == sum((json.dumps(e.get("pid")), json.dumps(e.get("tid")), _us(e["ts"])) in starts
                        for e in arrows) > 0
