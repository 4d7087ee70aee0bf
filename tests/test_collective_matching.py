"""Collectives matched across ranks by structure (issue 61, point 3): by ``Seq`` where the trace records it, else by
kind, size (``Input Dims``) and end within the transfer time — never by a start's overlap or the position alone —
and a communicator's first collective is start-up only where the window holds the job's start.

On the public 8-rank PARAM DLRM set (one ProfilerStep, #10, of a running job) 6 of 9 collectives matched: a
collective starting in the very µs the previous one ended overlapped that one and was taken for it, and the first
collective of each communicator was dropped as start-up, so no straggler was named. The truth, from the raw files
(``_raw_truth``): rank 7 arrived last, its host launching late, the others waiting up to 7.6 ms for it."""

from __future__ import annotations

import copy
import gzip
import json
import statistics
import warnings
from pathlib import Path

import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.ranks import across_ranks
from fuseprof.analysis.running.sections import shown_tables
from fuseprof.errors import FuseprofError
from scripts.make_rank_set import make_rank_set
from tests.conftest import FIXTURES, FUZZ_RESULTS, SHARED, shared_traces, trace_at

PARAM = "fresh4/param_dlrm_8rank"


def _raw_truth(folder: Path) -> dict[str, object]:
    """Per rank (distributedInfo's), its NCCL kernels in start order with their launch calls' starts, in integer µs
    as written; per collective (the k-th kernel on every rank: one communicator, one order), the last rank, its
    lateness (its start − the median start of the others), its host's lateness (its launch − that median) and the
    longest wait (last start − first start)."""
    kernels: dict[int, list[tuple[int, int, int]]] = {}
    for path in sorted(folder.glob("*.json.gz")):
        trace = json.loads(gzip.open(path).read())
        events = trace["traceEvents"]
        launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
        mine = sorted((e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                      key=lambda e: e["ts"])
        kernels[trace["distributedInfo"]["rank"]] = [(e["ts"], e["ts"] + e["dur"], launch[e["args"]["correlation"]])
                                                     for e in mine]
    count = {len(k) for k in kernels.values()}
    assert count == {8}, count  # every rank holds the same eight collectives
    rows = []
    for k in range(8):
        starts = {r: kernels[r][k][0] for r in kernels}
        ends = [kernels[r][k][1] for r in kernels]
        assert max(ends) - min(ends) <= 7  # ends agree within 7 µs: the k-th kernel is one collective everywhere
        last = max(starts, key=starts.__getitem__)
        median = statistics.median(s for r, s in starts.items() if r != last)
        rows.append({"last": last, "late_us": starts[last] - median, "host_late_us": kernels[last][k][2] - median,
                     "wait_us": max(starts.values()) - min(starts.values())})
    late_by_rank: dict[int, float] = {}
    for row in rows:
        late_by_rank[row["last"]] = late_by_rank.get(row["last"], 0) + row["late_us"]
    return {"rows": rows, "late_by_rank": late_by_rank}


@pytest.mark.shared
def test_the_param_dlrm_set_matches_every_collective_and_names_rank_7_launched_late() -> None:
    folder = shared_traces() / PARAM
    truth = _raw_truth(folder)
    rows = truth["rows"]
    straggler = max(truth["late_by_rank"], key=truth["late_by_rank"].get)
    assert straggler == 7 and rows[0]["wait_us"] == 7_624  # the raw files' word: rank 7, a 7.6 ms wait
    assert truth["late_by_rank"][7] > sum(truth["late_by_rank"].values()) / 2
    assert all(r["host_late_us"] >= r["late_us"] / 2 for r in rows if r["last"] == 7)  # its host launched late
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tables = across_ranks(analyze(sorted(folder.glob("*.json.gz"))))
    found = tables["rank_set"].iloc[0]
    assert (int(found["collectives"]), int(found["matched"]), int(found["not_on_every_rank"])) == (8, 8, 0)
    skew = tables["collectives"]
    assert (skew["phase"] == "steady").all()  # step 10 of a running job: no start-up in the window
    assert skew["last_rank"].astype(int).tolist() == [r["last"] for r in rows]
    assert skew["skew_ns"].astype(int).tolist() == [r["wait_us"] * 1000 for r in rows]
    late = tables["late_arrivals"].set_index("match").loc[[f"#order {k}" for k in range(8)]]
    assert late["late_ns"].astype(int).tolist() == [round(r["late_us"] * 1000) for r in rows]
    named = tables["stragglers"].iloc[0]
    assert (int(named["last_rank"]), named["cause"]) == (7, "host launched late")
    assert int(named["late_ns"]) == round(truth["late_by_rank"][7] * 1000)


def _touching(paths: list[Path]) -> None:
    """Each all-reduce of every rank split in two collectives back to back: the first ends, and the second starts,
    in the same µs on every rank (its own launch call, just after the first's)."""
    for path in paths:
        trace = json.loads(path.read_text())
        events = trace["traceEvents"]
        top = max(e.get("args", {}).get("correlation", 0) for e in events if isinstance(e.get("args"), dict)) + 1
        added = []
        for e in events:
            if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel"):
                launch = next(x for x in events if x.get("cat") in ("cuda_runtime", "cuda_driver")
                              and x.get("args", {}).get("correlation") == e["args"]["correlation"])
                end = round(e["ts"] + e["dur"], 3)
                cut = round(end - 4.0, 3)  # the second: the last 4 µs, starting where the first ends
                second, call = copy.deepcopy(e), copy.deepcopy(launch)
                e["dur"] = round(cut - e["ts"], 3)
                second["ts"], second["dur"] = cut, 4.0
                call["ts"] = round(launch["ts"] + launch.get("dur", 0) + 0.001, 3)
                second["args"]["correlation"] = call["args"]["correlation"] = top
                top += 1
                added += [second, call]
        trace["traceEvents"] = events + added
        path.write_text(json.dumps(trace))


def test_touching_collectives_and_a_start_up_offset_still_name_the_slowed_rank(tmp_path: Path) -> None:
    """Four ranks, rank 3's process started 300 µs late (the job's start is in the window: steps from #1), rank 2's
    GEMMs 1.6× as long every third step, every all-reduce followed by another starting in the µs it ended: every
    collective pairs on every rank, the first is start-up, and rank 2 is named for its GEMMs."""
    paths = make_rank_set(tmp_path / "ranks", ranks=4, steps=18, slow_rank=2, factor=1.6, seed=3,
                          late_start={3: 300.0})
    _touching(paths)
    tables = across_ranks(analyze(paths))
    found = tables["rank_set"].iloc[0]
    collectives = 18 * 2  # an all-reduce a step, each split in two
    assert (int(found["collectives"]), int(found["matched"])) == (collectives, collectives)
    skew = tables["collectives"]
    assert skew["phase"].tolist() == ["start-up"] + ["steady"] * (collectives - 1)
    assert int(skew["last_rank"].iloc[0]) == 3
    named = tables["stragglers"].iloc[0]
    assert (int(named["last_rank"]), named["cause"]) == (2, "computation: GEMM")


def test_a_window_after_the_jobs_start_has_no_start_up_collective(tmp_path: Path) -> None:
    """The same set with its steps renumbered from #40 (a profiler schedule's later window): the first all-reduce
    is a wait like any other, and the rank that came late to it is counted."""
    paths = make_rank_set(tmp_path / "ranks", ranks=4, steps=9, slow_rank=2, factor=1.6, seed=3)
    for path in paths:
        text = path.read_text()
        for n in range(20, 0, -1):
            text = text.replace(f'"ProfilerStep#{n}"', f'"ProfilerStep#{n + 40}"')
        path.write_text(text)
    skew = across_ranks(analyze(paths))["collectives"]
    assert (skew["phase"] == "steady").all()


# ---- hostile rank sets: each case's outcome counted in FUZZ_RESULTS ----

TP2 = sorted((FIXTURES / "tp2").glob("tp_mlp-rank*.json.gz"))


def _write(trace: dict, path: Path) -> Path:
    path.write_text(json.dumps(trace))
    return path


def _load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _nccl(e: dict) -> bool:
    return e.get("cat") == "kernel" and str(e.get("name", "")).startswith("ncclDevKernel")


def _pair(tmp_path: Path, change) -> dict:  # type: ignore[no-untyped-def]
    """The committed tensor-parallel pair with ``change(rank, trace)`` applied to each rank; its across-ranks
    tables (warnings kept)."""
    paths = []
    for rank, path in enumerate(TP2):
        trace = _load(path)
        change(rank, trace)
        paths.append(_write(trace, tmp_path / f"rank{rank}.json"))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return across_ranks(analyze(paths))


def _shift(trace: dict, by_us: float) -> None:
    for e in trace["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M":
            e["ts"] = round(e["ts"] + by_us, 3)


def _outcome(ok: bool, what: str) -> None:
    FUZZ_RESULTS["held" if ok else "silently wrong"] += 1
    assert ok, what


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The pair as committed: what each hostile variant is compared with."""
    return _pair(tmp_path_factory.mktemp("base"), lambda rank, trace: None)


def test_the_committed_pair_matches_every_all_reduce(baseline: dict) -> None:
    found = baseline["rank_set"].iloc[0]
    raw = sum(_nccl(e) for e in _load(TP2[0])["traceEvents"])
    assert (int(found["collectives"]), int(found["matched"])) == (raw, raw)


@pytest.mark.parametrize("by_us", [40.0, -40.0])
def test_hostile_a_40_us_clock_skew_matches_the_same_collectives(tmp_path: Path, baseline: dict, by_us: float) -> None:
    tables = _pair(tmp_path, lambda rank, trace: _shift(trace, by_us) if rank == 1 else None)
    found, before = tables["rank_set"].iloc[0], baseline["rank_set"].iloc[0]
    _outcome(int(found["matched"]) == int(before["matched"]) and
             tables["collectives"]["match"].tolist() == baseline["collectives"]["match"].tolist(), f"skew {by_us}")


def test_hostile_a_rank_with_no_collectives(tmp_path: Path) -> None:
    def drop(rank: int, trace: dict) -> None:
        if rank == 1:
            trace["traceEvents"] = [e for e in trace["traceEvents"] if not _nccl(e)]
    tables = _pair(tmp_path, drop)
    _outcome(int(tables["rank_set"].iloc[0]["matched"]) == 0 and tables["stragglers"].empty, "no collectives")


def test_hostile_mismatched_communicators_pair_nothing(tmp_path: Path) -> None:
    def rename(rank: int, trace: dict) -> None:
        for e in trace["traceEvents"]:
            if rank == 1 and isinstance(e.get("args"), dict) and "Process Group Name" in e["args"]:
                e["args"]["Process Group Name"] = "7"
    found = _pair(tmp_path, rename)["rank_set"].iloc[0]
    _outcome(int(found["matched"]) == 0 and int(found["not_on_every_rank"]) == int(found["collectives"]) > 0,
             "communicators")


def test_hostile_duplicate_seq_ids(tmp_path: Path) -> None:
    """Every kernel says Seq 0 on both ranks: one key for all; refused as no pair (not on every rank once), never a
    straggler from it."""
    def seq(rank: int, trace: dict) -> None:
        for e in trace["traceEvents"]:
            if _nccl(e):
                e["args"]["Seq"] = 0
    tables = _pair(tmp_path, seq)
    _outcome(int(tables["rank_set"].iloc[0]["collectives"]) == 1 and tables["stragglers"].empty, "duplicate seq")


def test_hostile_a_rank_truncated_mid_collective(tmp_path: Path, baseline: dict) -> None:
    """Rank 1's trace stops inside its last all-reduce (the kernel and everything after it gone): that one is not
    on every rank, every earlier one still pairs."""
    def cut(rank: int, trace: dict) -> None:
        if rank == 1:
            last = max(e["ts"] for e in trace["traceEvents"] if _nccl(e))
            trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("ts", 0) < last - 1 or e.get("ph") == "M"]
    found = _pair(tmp_path, cut)["rank_set"].iloc[0]
    _outcome(int(found["matched"]) == int(baseline["rank_set"].iloc[0]["matched"]) - 1 and
             int(found["not_on_every_rank"]) == 1, "truncated")


def test_hostile_a_window_one_collective_later(tmp_path: Path, baseline: dict) -> None:
    """Rank 1's window starts after its first all-reduce: its collectives pair with rank 0's second onward (a shift
    by one), not by position."""
    def later(rank: int, trace: dict) -> None:
        if rank == 1:
            first = min(e["ts"] + e["dur"] for e in trace["traceEvents"] if _nccl(e))
            trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("ts", first + 1) > first or e.get("ph") == "M"]
    found = _pair(tmp_path, later)["rank_set"].iloc[0]
    _outcome(int(found["matched"]) == int(baseline["rank_set"].iloc[0]["matched"]) - 1, "window later")


def test_hostile_a_different_size_on_one_rank_is_no_pair(tmp_path: Path, baseline: dict) -> None:
    def size(rank: int, trace: dict) -> None:
        if rank == 1:
            first = min((e for e in trace["traceEvents"] if _nccl(e)), key=lambda e: e["ts"])
            first["args"]["In msg nelems"] = 12345
    found = _pair(tmp_path, size)["rank_set"].iloc[0]
    _outcome(int(found["matched"]) == int(baseline["rank_set"].iloc[0]["matched"]) - 1, "size")


def test_hostile_ends_that_disagree_are_no_pair(tmp_path: Path, baseline: dict) -> None:
    """One all-reduce of rank 1 moved 5 ms later (its kernel alone): same kind, size and place, but its end is
    nowhere near rank 0's: no pair."""
    def move(rank: int, trace: dict) -> None:
        if rank == 1:
            kernels = sorted((e for e in trace["traceEvents"] if _nccl(e)), key=lambda e: e["ts"])
            kernels[2]["ts"] = round(kernels[2]["ts"] + 5_000.0, 3)
    found = _pair(tmp_path, move)["rank_set"].iloc[0]
    _outcome(int(found["matched"]) == int(baseline["rank_set"].iloc[0]["matched"]) - 1, "ends")


def test_hostile_a_rank_ten_seconds_away_is_apart(tmp_path: Path) -> None:
    tables = _pair(tmp_path, lambda rank, trace: _shift(trace, 10e6) if rank == 1 else None)
    _outcome(tables["rank_set"].iloc[0]["apart"] is not None and tables["stragglers"].empty, "apart")


def test_hostile_an_extra_communicator_on_one_rank(tmp_path: Path, baseline: dict) -> None:
    """Rank 1 alone runs one collective on another communicator: it is that rank's only; the shared ones pair."""
    def extra(rank: int, trace: dict) -> None:
        if rank == 1:
            first = min((e for e in trace["traceEvents"] if _nccl(e)), key=lambda e: e["ts"])
            first["args"]["Process Group Name"] = "9"
    found = _pair(tmp_path, extra)["rank_set"].iloc[0]
    _outcome(int(found["matched"]) == int(baseline["rank_set"].iloc[0]["matched"]) - 1
             and int(found["not_on_every_rank"]) == 2, "extra communicator")


def test_hostile_a_collective_lost_mid_window(tmp_path: Path, baseline: dict) -> None:
    """Rank 1's trace lost its second all-reduce of three (a dropped buffer, a step outside its window): the ones before and
    after it still pair under one clock offset, in order; only the lost one is on one rank."""
    def lose(rank: int, trace: dict) -> None:
        if rank == 1:
            second = sorted((e for e in trace["traceEvents"] if _nccl(e)), key=lambda e: e["ts"])[1]
            trace["traceEvents"].remove(second)
    found = _pair(tmp_path, lose)["rank_set"].iloc[0]
    _outcome(int(found["matched"]) == int(baseline["rank_set"].iloc[0]["matched"]) - 1
             and int(found["not_on_every_rank"]) == 1, "lost mid-window")


# ---- clock exactness: every committed trace on an epoch clock analyses the same ----

def _every_trace() -> list[object]:
    """Every committed trace, and every shared one (marked ``shared``): test_conformance's list."""
    from tests.test_conformance import EVERY_TRACE

    return [pytest.param(n, marks=pytest.mark.shared) if n.startswith(SHARED) else n for n in EVERY_TRACE]


@pytest.mark.parametrize("name", _every_trace())
def test_a_trace_on_an_epoch_clock_analyses_the_same(name: str, tmp_path: Path) -> None:
    """The trace's clock moved to µs since the Unix epoch (PyTorch <= 2.0's clock; 1.7e18 ns, past a float's exact
    integers: 256 ns apart there) gives every table the same, exactly, once the move is taken off the absolute times
    (``*start_ns``, ``*end_ns``). Before: a reindex that left a launch call or an op missing made the linked times
    floats (pandas' Int64 ``to_numpy`` too), moving launch latencies, idle by cause and step spans by up to 128 ns
    and a fusion chain's count by one."""
    import shutil

    import pandas as pd

    from fuseprof.parse.execution_trace import execution_trace_beside
    from tests import trace_forms

    path = trace_at(name)
    rewrite, offset = trace_forms.FORMS["epoch_fraction"]
    original, variant = tmp_path / "original.json.gz", tmp_path / "epoch.json"
    shutil.copy(path, original)  # both alone: a bundle's bench beside the trace is read by the original only
    beside = execution_trace_beside(path)
    if beside is not None:  # the op graph by the same execution trace, beside each
        for copy_of in (original, variant):
            shutil.copy(beside, tmp_path / f"{copy_of.name.split('.')[0]}.et.json.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            (a,) = analyze(original)
        except FuseprofError as refused:  # a trace refused (no GPU work): refused alike on the epoch clock
            with pytest.raises(type(refused)):
                analyze(trace_forms.write(rewrite(trace_forms.load(path)), variant))
            return
        (b,) = analyze(trace_forms.write(rewrite(trace_forms.load(path)), variant))
    for table, x in shown_tables(a).items():
        y = shown_tables(b)[table]
        moved = [c for c in x.columns if c.endswith(("start_ns", "end_ns")) and c in y]
        pd.testing.assert_frame_equal(x, y.assign(**{c: y[c] - offset for c in moved}), check_exact=True, obj=table)
