"""The engine's passes over a trace and a rank set (issue 61): each pass once, and each answer the raw file's.

- A trace's own notes (``fuseprof.parse.trace_notes``: its sync and comms records, Kineto's messages) come from the
  bytes its tables were decoded from, so the integrity check no longer reads and unzips the file a second time: an
  analysis made after the file is gone says what one made beside the file says.
- ``iterations.step_at`` answers by one search over the step starts where steps never overlap, and equals the
  walk it replaced (``trace_link.enclosing``) on every set of ranges, overlapping ones included.
- Per rank, a rank set's analyses (decoded and analysed in one process, one rank after another, as ``analyze``
  runs a folder) hold what each raw rank file says: its steps, its GPU events, its busy time, its collectives.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.iterations import Iterations, step_at
from fuseprof.analysis.running.analyze import analyze_tables
from fuseprof.parse.store import TraceStore, content_key
from fuseprof.parse.text_arrays import python_strings
from fuseprof.parse.trace_events import read_trace_tables
from fuseprof.parse.trace_link import enclosing
from fuseprof.parse.trace_notes import TraceNotes, read_trace_notes
from tests.conftest import FUZZ_RESULTS, ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from make_rank_set import make_rank_set  # noqa: E402

TP2 = ROOT / "tests" / "fixtures" / "tp2" / "tp_mlp-rank0.json.gz"
_NOTE_TABLES = ("syncs", "records", "kernels", "comms")


def _same_notes(a: TraceNotes, b: TraceNotes) -> bool:
    return all(getattr(a, k).equals(getattr(b, k)) and list(getattr(a, k).dtypes) == list(getattr(b, k).dtypes)
               for k in _NOTE_TABLES) and a.log == b.log and a.read == b.read


def _second_read(path: Path) -> TraceNotes:
    with python_strings():  # as the integrity section reads them: inside the analysis
        return read_trace_notes(path)


def test_notes_are_the_decoded_bytes_own() -> None:
    """The notes kept with the tables are what a second read of the file gives, and hold the file's own comms
    records (counted here from the JSON)."""
    tables = read_trace_tables(TP2)
    assert tables.notes is not None
    assert _same_notes(tables.notes, _second_read(TP2))
    events = json.loads(gzip.decompress(TP2.read_bytes()))["traceEvents"]
    comms = [e for e in events if e.get("ph") == "X" and e.get("name") == "record_param_comms"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert len(tables.notes.comms) == len(comms) > 0
    assert len(tables.notes.kernels) == len(kernels)
    assert tables.notes.kernels["ts"].tolist() == [float(e["ts"]) for e in kernels]  # the file's clock, as written


def test_integrity_reads_no_file_again(tmp_path: Path) -> None:
    """Decoded, then the file removed: the analysis's integrity table is the one made beside the file (before, the
    check read the file again and, finding none, could not say whether the profiler lost records)."""
    copy = tmp_path / TP2.name
    shutil.copy(TP2, copy)
    beside = analyze_tables(read_trace_tables(copy)).frames["integrity"]
    tables = read_trace_tables(copy)
    copy.unlink()
    gone = analyze_tables(tables).frames["integrity"]
    pd.testing.assert_frame_equal(gone, beside)
    lost = gone.set_index("check").loc["profiler_lost_records"]
    assert lost["value"] == 0 and bool(lost["ok"])


def test_tables_read_back_from_the_store_read_the_notes(tmp_path: Path) -> None:
    """Tables read back from the store keep no notes (they are not stored): the check reads the file, and the
    analysis is the one the decoding process made."""
    store = TraceStore(tmp_path / "store")
    key = content_key(TP2)
    store.tables(TP2, key)
    stored, _ = TraceStore(tmp_path / "store").tables(TP2, key)
    assert stored.notes is None
    pd.testing.assert_frame_equal(analyze_tables(stored).frames["integrity"],
                                  analyze_tables(read_trace_tables(TP2)).frames["integrity"])


def _hostile(tmp_path: Path, name: str, edit) -> Path:
    trace = json.loads(gzip.decompress(TP2.read_bytes()))
    edit(trace)
    path = tmp_path / name
    path.write_text(json.dumps(trace))
    return path


def _args_not_an_object(trace: dict) -> None:
    for e in trace["traceEvents"]:
        if e.get("name") == "record_param_comms":
            e["args"] = 5


def _log_not_a_list(trace: dict) -> None:
    trace["WARNING"] = {"Dropped 12 activity records": 1}
    trace["ERROR"] = ["CUPTI stopped early? = 1", 7]


def _times_as_text(trace: dict) -> None:
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            e["ts"], e["dur"] = str(e["ts"]), str(e["dur"])


@pytest.mark.parametrize("edit", [_args_not_an_object, _log_not_a_list, _times_as_text])
def test_hostile_notes_equal_a_second_read(tmp_path: Path, edit) -> None:
    """Malformed notes (comms args that are no object, Kineto's log as an object or with a number in it, times as
    text) decode from the shared bytes exactly as a second read of the file does, and the analysis runs."""
    path = _hostile(tmp_path, f"{edit.__name__}.json", edit)
    try:
        tables = read_trace_tables(path)
        analyze_tables(tables)
    except Exception:
        FUZZ_RESULTS["traceback"] += 1
        raise
    same = tables.notes is not None and _same_notes(tables.notes, _second_read(path))
    FUZZ_RESULTS["identical" if same else "silently wrong"] += 1
    assert same


def _brute_step(ranges: pd.DataFrame, t: int) -> str | None:
    """The innermost range around ``t`` by its definition: of those with start <= t < end, the one the walk opens
    last (latest start, the shorter of two starting together, the later of two alike)."""
    rows = [(s, -(s + d), i, n) for i, (s, d, n) in enumerate(zip(ranges["start_ns"], ranges["dur_ns"], ranges["name"]))
            if s <= t < s + d]
    return str(max(rows)[3]) if rows else None


def test_step_at_equals_the_walk_on_every_kind_of_range() -> None:
    """Disjoint steps (the searched path) against the definition; overlapping and nested ranges (the walk's path)
    and zero-length ranges at a step's start against the walk it replaced."""
    rng = np.random.default_rng(61)
    for trial in range(600):
        n = int(rng.integers(1, 7))
        if trial % 2:  # steps one after another, some touching, some with gaps, a zero-length one now and then
            gaps = rng.integers(0, 5, n)
            durs = rng.integers(0, 20, n)
            starts = np.cumsum(gaps + np.concatenate([[0], durs[:-1]]))
        else:
            starts, durs = rng.integers(0, 60, n), rng.integers(-1, 30, n)
        ranges = pd.DataFrame({"name": [f"ProfilerStep#{i}" for i in range(n)], "start_ns": starts.astype(np.int64),
                               "dur_ns": durs.astype(np.int64), "tid": "*"})
        times = pd.Series(rng.integers(-3, 130, 40).astype(float), index=rng.permutation(40) + 100)
        times.iloc[5] = np.nan
        got = step_at(Iterations(ranges, "torch.profiler"), times)
        anchor = pd.DataFrame({"start_ns": times, "tid": "*"}).dropna().astype({"start_ns": np.int64})
        pd.testing.assert_series_equal(got, enclosing(ranges, anchor, None).reindex(times.index))
        if trial % 2:
            want = [None if pd.isna(t) else _brute_step(ranges, int(t)) for t in times]
            assert [None if pd.isna(v) else v for v in got] == want


def test_step_at_zero_length_range_at_a_steps_start() -> None:
    """A zero-length range starting with a step (a marker) overlaps it in the walk's order: the step holds the time."""
    ranges = pd.DataFrame({"name": ["ProfilerStep#1", "mark", "ProfilerStep#2"], "start_ns": [0, 10, 10],
                           "dur_ns": [10, 0, 10], "tid": "*"})
    got = step_at(Iterations(ranges, "torch.profiler"), pd.Series([0.0, 9.0, 10.0, 19.0, 20.0]))
    assert [None if pd.isna(v) else v for v in got] == ["ProfilerStep#1", "ProfilerStep#1", "ProfilerStep#2",
                                                         "ProfilerStep#2", None]


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def test_rank_set_sections_hold_each_raw_files_values(tmp_path: Path) -> None:
    """Four ranks analysed as a folder is: per rank, its steps, GPU events, busy time and collectives are the ones
    its raw file holds (counted and summed here from the JSON, times to the ns)."""
    folder = tmp_path / "ranks"
    paths = make_rank_set(folder, ranks=4, steps=6, slow_rank=2, seed=3)
    results = analyze(paths, workers=1)
    assert [r.rank for r in results] == [0, 1, 2, 3]
    for path, result in zip(paths, results):
        events = json.loads(path.read_text())["traceEvents"]
        gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        steps = [e["name"] for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                 and e.get("name", "").startswith("ProfilerStep#")]  # the host's ranges (the GPU's copies aside)
        ns = [(round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e["dur"] * 1000)) for e in gpu]
        nccl = [e for e in gpu if "nccl" in e["name"].lower()]
        assert result.frames["steps"]["step"].tolist() == steps
        every = result.frames["timeline"].set_index("stream").loc["all"]
        assert int(every["events"]) == len(gpu)
        assert int(every["busy_ns"]) == _union_ns(ns)
        assert len(result.frames["collectives"]) == len(nccl) > 0
        assert int(result.frames["categories"]["count"].sum()) == len(gpu)
