"""Many ranks as they come: a partial rank set said as such, ranks from file names where the traces record
none, and collectives paired by order checked by overlap — a misaligned pairing refused, never compared.
Rewrites of the 2-GPU tensor-parallel pair (tests/fixtures/tp2); expected values from the raw files."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.ranks import across_ranks
from fuseprof.analysis.paths.job_path import job_path
from fuseprof.cli import main
from fuseprof.errors import FuseprofWarning
from tests.conftest import FIXTURES, shared_traces

PAIR = sorted((FIXTURES / "tp2").glob("tp_mlp-rank*.json.gz"))


def _raw(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _nccl(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                  key=lambda e: e["ts"])


def _write(trace: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(trace))
    return path


def test_two_ranks_of_a_larger_run_are_said_to_be_two_of_it(tmp_path: Path) -> None:
    paths = []
    for rank, source in zip((5, 77), PAIR):
        trace = _raw(source)
        trace["distributedInfo"] = {**trace.get("distributedInfo", {}), "rank": rank, "world_size": 128}
        paths.append(_write(trace, tmp_path / f"part-{rank}.json"))
    tables = across_ranks(analyze(paths))
    row = tables["rank_set"].iloc[0]
    assert (row["ranks"], row["world_size"], row["missing"]) == (2, 128, "0–4, 6–76, 78–127")
    assert set(tables["ranks"]["rank"]) == {5, 77}


def test_ranks_come_from_file_names_where_the_traces_record_none(tmp_path: Path) -> None:
    """distributedInfo removed, the files given in reverse: rank N is the file named rankN, and the skew of every
    collective is what the recorded ranks give."""
    paths = []
    for rank, source in zip((0, 1), PAIR):
        trace = _raw(source)
        trace.pop("distributedInfo", None)
        paths.append(_write(trace, tmp_path / f"job-rank{rank}.json"))
    named = across_ranks(analyze(list(reversed(paths))))
    recorded = across_ranks(analyze(PAIR))
    assert named["rank_set"].iloc[0]["ranks_from"] == "file names"
    assert named["collectives"][["match", "skew_ns", "last_rank"]].equals(
        recorded["collectives"][["match", "skew_ns", "last_rank"]])


def test_a_rank_whose_trace_misses_the_first_collective_is_realigned(tmp_path: Path) -> None:
    """Rank 1's first all-reduce removed: by plain order rank 0's k-th would pair with rank 1's (k+1)-th, a different
    collective. Shifted by the offset under which the kernels overlap, each pairs with its own: the skew of each is
    the raw pair's (rank 0's (k+1)-th, rank 1's k-th), and the first is on one rank only."""
    ranks = [_raw(p) for p in PAIR]
    first = _nccl(ranks[1])[0]
    ranks[1]["traceEvents"] = [e for e in ranks[1]["traceEvents"] if e is not first]
    nccl0, nccl1 = _nccl(ranks[0]), _nccl(ranks[1])
    paths = [_write(t, tmp_path / f"r{i}.json") for i, t in enumerate(ranks)]
    tables = across_ranks(analyze(paths))
    row = tables["rank_set"].iloc[0]
    assert (row["matched"], row["not_on_every_rank"], row["refused"]) == (len(nccl1), 1, 0)
    want = [abs(round(a["ts"] * 1000) - round(b["ts"] * 1000)) for a, b in zip(nccl0[1:], nccl1)]
    assert tables["collectives"]["skew_ns"].tolist() == want


def test_a_collective_that_overlaps_none_of_the_other_ranks_is_not_paired(tmp_path: Path) -> None:
    """Rank 1's last all-reduce moved 20 ms later, on its own: it overlaps none of rank 0's, so neither it nor
    rank 0's last is paired — each is on one rank only — and the others still are."""
    ranks = [_raw(p) for p in PAIR]
    _nccl(ranks[1])[-1]["ts"] += 20_000.0
    tables = across_ranks(analyze([_write(t, tmp_path / f"r{i}.json") for i, t in enumerate(ranks)]))
    row = tables["rank_set"].iloc[0]
    assert (row["matched"], row["not_on_every_rank"], row["refused"]) == (len(_nccl(ranks[0])) - 1, 2, 0)
    assert len(tables["collectives"]) == len(_nccl(ranks[0])) - 1


def test_collectives_paired_by_order_on_clocks_that_disagree_are_refused(tmp_path: Path) -> None:
    """Every collective of rank 1 moved 0.5 ms later (another host's clock): none overlaps its partner on rank 0
    (their span still overlaps rank 0's), so they are paired by order — and each pair, whose kernels do not
    overlap, is refused: no skew is computed from them."""
    ranks = [_raw(p) for p in PAIR]
    for e in _nccl(ranks[1]):
        e["ts"] += 500.0
    tables = across_ranks(analyze([_write(t, tmp_path / f"r{i}.json") for i, t in enumerate(ranks)]))
    row = tables["rank_set"].iloc[0]
    assert (row["matched"], row["refused"]) == (0, len(_nccl(ranks[0])))
    assert tables["collectives"].empty and tables["stragglers"].empty



def _shifted(trace: dict[str, Any], us: float, rank: int) -> dict[str, Any]:
    """``trace`` as if captured ``us`` later by another job's rank ``rank``: every timestamp moved."""
    for event in trace["traceEvents"]:
        if "ts" in event:
            event["ts"] += us
    trace["distributedInfo"] = {**trace.get("distributedInfo", {}), "rank": rank}
    return trace


def test_a_rank_of_another_job_is_left_out_of_every_comparison_in_time(tmp_path: Path) -> None:
    """Rank 1 again, six hours later, as rank 2 (another job's trace): it overlaps neither rank in time, so it is
    said to lie apart and the skew, lateness and straggler tables are the pair's own — not waits of six hours."""
    ranks = [_raw(p) for p in PAIR]
    paths = [_write(t, tmp_path / f"r{i}.json") for i, t in enumerate(ranks)]
    pair = across_ranks(analyze(paths))
    late = _write(_shifted(_raw(PAIR[1]), 6 * 3600e6, 2), tmp_path / "r2.json")
    with pytest.warns(FuseprofWarning, match=r"rank 2: its collectives lie apart in time from the job's"):
        three = across_ranks(analyze([*paths, late]))
    assert three["rank_set"].iloc[0]["apart"] == "2"
    for name in ("collectives", "late_arrivals", "stragglers"):
        pd.testing.assert_frame_equal(three[name], pair[name], check_dtype=False)
    span_ns = 1000 * (max(e["ts"] + e.get("dur", 0) for e in ranks[0]["traceEvents"] if "ts" in e)
                      - min(e["ts"] for e in ranks[0]["traceEvents"] if "ts" in e))
    assert three["collectives"].filter(like="wait_ns").abs().max().max() < span_ns


@pytest.mark.shared
def test_three_jobs_in_one_folder_compare_one_job(capsys) -> None:
    """The shared 2-GPU folder holds three pairs captured one after another: the ranks chain into three groups in
    time; one pair is compared, the other four ranks are said to lie apart, and the set is said to be more than
    its world."""
    folder = shared_traces() / "h200_2gpu"
    assert main(["analyze", str(folder)]) == 0
    out = capsys.readouterr()
    assert "more traces than the world has ranks" in out.out
    said = re.search(r"warning: rank ([\d, –]+): their collectives lie apart in time", out.err)
    assert said and len(said.group(1).replace("–", ", ").split(", ")) == 4  # two runs of two


def test_two_ranks_that_never_overlap_compare_nothing_in_time(tmp_path: Path) -> None:
    ranks = [_raw(PAIR[0]), _shifted(_raw(PAIR[1]), 6 * 3600e6, 1)]
    results = analyze([_write(t, tmp_path / f"r{i}.json") for i, t in enumerate(ranks)])
    with pytest.warns(FuseprofWarning, match="no two ranks' collectives overlap in time"):
        tables = across_ranks(results)
    assert tables["rank_set"].iloc[0]["apart"] == "0–1"
    assert tables["collectives"].empty and tables["stragglers"].empty and job_path(results).empty


def test_two_traces_naming_one_rank_are_numbered_apart_with_a_warning(tmp_path: Path, capsys) -> None:
    """Rank 1's trace saying rank 0: the set is still a rank set (both communicate), numbered by the file names,
    with a warning; its tables are the true pair's."""
    ranks = [_raw(p) for p in PAIR]
    true = across_ranks(analyze([_write(t, tmp_path / f"rank{i}.json") for i, t in enumerate(ranks)]))
    ranks[1]["distributedInfo"] = {**ranks[1].get("distributedInfo", {}), "rank": 0}
    paths = [_write(t, tmp_path / f"dup-rank{i}.json") for i, t in enumerate(ranks)]
    with pytest.warns(FuseprofWarning, match="gives rank 0 to more than one trace"):
        tables = across_ranks(analyze(paths))
    assert tables["rank_set"].iloc[0]["ranks_from"].startswith("file names")
    pd.testing.assert_frame_equal(tables["collectives"], true["collectives"])
    assert main(["analyze", *map(str, paths)]) == 0
    assert "== across 2 ranks" in capsys.readouterr().out


@pytest.mark.parametrize("form,said", [("path", "is given twice"), ("copy", "holds the same bytes"),
                                       ("decompressed", "holds the same collectives, to the ns")])
def test_a_trace_given_twice_is_an_error(form: str, said: str, tmp_path: Path, capsys) -> None:
    second = {"path": PAIR[0], "copy": tmp_path / "copy.json.gz", "decompressed": tmp_path / "rank0.json"}[form]
    if form == "copy":
        second.write_bytes(PAIR[0].read_bytes())
    elif form == "decompressed":
        second.write_bytes(gzip.decompress(PAIR[0].read_bytes()))
    assert main(["analyze", str(PAIR[0]), str(second)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err, err


def _nccl_ends(path: Path) -> list[int]:
    """The ends of a rank's NCCL kernels in ns, from the raw file (µs with three decimals: exact in ns)."""
    import gzip

    events = json.loads(gzip.open(path).read())["traceEvents"]
    return sorted(round(e["ts"] * 1000) + round(e["dur"] * 1000) for e in events
                  if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("ncclDevKernel"))


@pytest.mark.parametrize("pair", ["tp_mlp_straggle", "ddp_step"])
@pytest.mark.shared
def test_the_jobs_path_names_the_labelled_straggler_as_setting_the_steady_steps(pair: str) -> None:
    """Across ranks, the job's critical path (the last rank's path, followed at every steady-state collective into
    the rank that arrived last) is held by the rank labels.json names the straggler in every step after the first
    (whose collective is the start-up offset); the GEMM-slowed rank's largest work there is a GEMM, the rank whose
    host launched late holds host time, no kernel."""
    from fuseprof.analysis.paths.job_path import job_path

    shared = shared_traces()
    truth = json.loads((shared / "labels.json").read_text())["pairs"][pair]["straggler"]
    results = analyze(sorted((shared / "h200_2gpu").glob(f"{pair}_rank*.json.gz")))
    table = job_path(results).set_index("step").sort_index()
    assert (table["rank"].iloc[1:] == truth["rank"]).all(), table
    kernels = set(results[truth["rank"]].events["name"].astype(str))
    if truth["cause"].startswith("computation"):
        assert (table["top_op"].iloc[1:] == "aten::mm").all(), table
    else:
        assert table["top_what"].iloc[1:].astype(bool).all() and not set(table["top_what"].iloc[1:]) & kernels, table


@pytest.mark.shared
def test_the_jobs_path_of_a_gpu_bound_tensor_parallel_step_runs_from_all_reduce_to_all_reduce() -> None:
    """Both ranks of the tensor-parallel MLP run their GPU back to back, one all-reduce a step: each steady step's
    job path runs from the previous all-reduce's end (on the rank the walk ends on) to this one's on the rank that
    ended last, on the job's clock: each rank's clock moved by the median of its steady all-reduces' ends less
    the ranks' median end (from the raw files; within 1 ns, the median's rounding)."""
    from fuseprof.analysis.paths.job_path import job_path

    files = sorted((shared_traces() / "h200_2gpu").glob("tp_mlp_straggle_rank*.json.gz"))
    raw = np.array([_nccl_ends(f) for f in files], dtype=np.int64)
    middle = np.median(raw, axis=0)
    ends = [r - round(float(np.median(r[1:] - middle[1:]))) for r in raw]  # the first all-reduce is start-up
    table = job_path(analyze(files)).set_index("step").sort_index()
    for k, (step, row) in enumerate(table.iloc[1:].iterrows(), start=1):
        last = max(range(len(ends)), key=lambda r: ends[r][k])
        assert min(abs(int(row["path_ns"]) - int(ends[last][k] - e[k - 1])) for e in ends) <= 1, (step, row)


def test_the_jobs_path_ends_when_two_communicators_collectives_cross() -> None:
    """Two ranks whose collectives on two communicators start in opposite orders (rank 0: C1 then C2; rank 1 reached
    C1 after C2): walking back, each hand-over would lead to the other rank's later point and back again. The walk
    only hands over to an earlier time, so it ends (an alarm fails the test instead of hanging it)."""
    import signal

    import pandas as pd

    from fuseprof.analysis.paths.job_path import LEG_COLUMNS, _walk

    def legs(rows: list[tuple[int, int, int, int]]) -> list[object]:  # a rank's legs, as rows in end order
        frame = pd.DataFrame([("s", a, b, c, d, "work", "aten::mm", "", b - a) for a, b, c, d in rows],
                             columns=LEG_COLUMNS)
        return list(frame.sort_values("end_ns").itertuples(index=False))

    walked_legs = {0: legs([(0, 10, 30, 10), (30, 40, 60, 40)]), 1: legs([(0, 45, 58, 45)])}
    arrivals = {(0, 40): (1, 50), (1, 45): (0, 55), (0, 10): (0, 10)}  # C2 waits for rank 1, C1 "for" rank 0 later
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("the walk did not end")))
    signal.alarm(5)
    try:
        walked = _walk(walked_legs, arrivals, 0)
    finally:
        signal.alarm(0)
    assert walked and {p.rank for p in walked} == {0, 1}
