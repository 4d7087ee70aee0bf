"""Multi-rank traces: the 2-GPU tensor-parallel MLP captured on an nvidia-h200-x2 machine
(scripts/capture_tp_mlp.py under torchrun; bf16, M = 2048; column-parallel gate/up, row-parallel
down, an all-reduce of the output; three profiled steps). Expected values from the raw JSON."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import fuseprof
from fuseprof.analysis import analyze
from fuseprof.analysis.facts.ranks import collective_skew, median_ns, others_medians, rank_summary
from fuseprof.cli import main
from tests.conftest import FIXTURES

TRACES = sorted((FIXTURES / "tp2").glob("tp_mlp-rank*.json.gz"))


def _raw_nccl(path):
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel")]
    return sorted(kernels, key=lambda e: e["ts"])


@pytest.fixture(scope="module")
def results():
    return analyze(TRACES)


def test_each_rank_and_its_allreduces(results) -> None:
    assert [r.rank for r in results] == [0, 1]
    for r, path in zip(results, TRACES):
        raw = _raw_nccl(path)
        mine = r.collectives
        assert len(mine) == len(raw) == 3  # one all-reduce per step
        assert (mine["collective"] == "allreduce").all()
        assert mine["bytes"].tolist() == [e["args"]["In msg nelems"] * 2 for e in raw] == [2048 * 4096 * 2] * 3
        assert mine["dur_ns"].tolist() == [round(e["dur"] * 1000) for e in raw]


def test_skew_is_the_spread_of_arrivals_and_the_last_rank_sets_the_time(results) -> None:
    skew = collective_skew(results)
    raw = [_raw_nccl(p) for p in TRACES]
    for k, row in skew.iterrows():
        starts = [round(ranks[k]["ts"] * 1000) for ranks in raw]
        ends = [round(ranks[k]["ts"] * 1000) + round(ranks[k]["dur"] * 1000) for ranks in raw]
        assert row["skew_ns"] == max(starts) - min(starts)
        assert row["last_rank"] == starts.index(max(starts))
        assert row["transfer_ns"] == max(ends) - max(starts)
    # 16.8 MB over NVLink once both ranks are there: about 75 µs each time, whatever the skew
    assert skew["transfer_ns"].between(50_000, 120_000).all()


def test_exposed_communication_per_rank(results) -> None:
    summary = rank_summary(results).set_index("rank")
    for rank, r in enumerate(results):
        comm = r.events[r.events["kind"] == "communication"]
        assert summary.loc[rank, "communication_ns"] == comm["dur_ns"].sum()  # one stream: no overlap
        # everything runs on one stream: nothing overlaps the all-reduce, all of it is exposed
        assert summary.loc[rank, "exposed_communication_ns"] == summary.loc[rank, "communication_ns"]
    assert summary["communication_share_pct"].between(5, 50).all()


def test_ingest_keeps_the_rank_and_analyze_prints_across_ranks(tmp_path, capsys) -> None:
    assert main(["ingest", *map(str, TRACES), "--out", str(tmp_path)]) == 0
    bundle = capsys.readouterr().out.strip().splitlines()[-1]
    kernels = fuseprof.load(bundle)
    assert sorted(kernels["rank"].dropna().unique().tolist()) == [0, 1]
    assert main(["analyze", *map(str, TRACES)]) == 0
    out = capsys.readouterr().out
    assert "== across 2 ranks" in out and "the last rank to arrive sets the time" in out
    assert main(["analyze", *map(str, TRACES), "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert len(body["across_ranks"]["collectives"]) == 3


def test_sixteen_ranks_sort_numerically(tmp_path, capsys) -> None:
    """Sixteen rank traces made from the two committed ones (rank k is rank k % 2's trace, relabelled, k µs
    later: sixteen copies of two traces would be the same traces given again): the per-rank columns read 0, 1,
    2, …, 15, never 0, 1, 10, 11, …"""
    paths = []
    for k in range(16):
        trace = json.loads(gzip.decompress(TRACES[k % 2].read_bytes()))
        trace["distributedInfo"] = {**trace.get("distributedInfo", {}), "rank": k}
        for event in trace["traceEvents"]:
            if "ts" in event:
                event["ts"] += k
        path = tmp_path / f"rank{k}.json"
        path.write_text(json.dumps(trace))
        paths.append(path)
    results = analyze(list(reversed(paths)))
    skew = collective_skew(results)
    waits = [c for c in skew.columns if c.startswith("wait_ns_rank")]
    assert waits == [f"wait_ns_rank{k}" for k in range(16)]
    assert rank_summary(results)["rank"].tolist() == list(range(16))
    assert main(["analyze", *map(str, paths), "--wide"]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "rank 0 waits" in line)
    positions = [header.index(f"rank {k} waits") for k in range(16)]
    assert positions == sorted(positions)


def test_the_across_ranks_tables_read_the_ranks_as_they_are_now() -> None:
    """The collectives are grouped once per across-ranks build (``ranks.one_rank_set``), never kept beyond it: a
    rank's clock corrected in place after one call is what the next call reads."""
    from fuseprof.analysis.facts.ranks import numbered_ranks
    from fuseprof.analysis.running.sections import build_across

    results = numbered_ranks(analyze([FIXTURES / "tp2"], workers=1))
    before = int(collective_skew(results)["skew_ns"].iloc[0])
    assert int(build_across(results)["collectives"]["skew_ns"].iloc[0]) == before
    results[1].collectives["start_ns"] += 5_000
    results[1].collectives["end_ns"] += 5_000
    assert int(collective_skew(results)["skew_ns"].iloc[0]) == before + 5_000
    assert int(build_across(results)["collectives"]["skew_ns"].iloc[0]) == before + 5_000


def test_each_time_s_median_of_the_others_is_the_median_of_the_others() -> None:
    """``others_medians`` (one sort for every rank of a collective) equals ``median_ns`` of every time but one,
    taken one at a time: 3,000 random collectives of 1 to 60 ranks, on clocks near 0 and µs since the epoch,
    with ties, odd and even counts (rounding half to even from the others' earliest, as median_ns does)."""
    chooser = np.random.default_rng(5)
    for trial in range(3000):
        n = int(chooser.integers(1, 61))
        base = 0 if trial % 2 else 1_733_000_000_000_000_000
        times = base + chooser.integers(0, 50 if trial % 3 == 0 else 10**7, size=n)
        if n == 1:
            with pytest.raises(ValueError):
                others_medians(times)
            continue
        assert others_medians(times) == [median_ns(np.delete(times, i)) for i in range(n)], times
