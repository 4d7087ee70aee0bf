"""``fuseprof bench --gpus N``: the grid sharded over N torchrun processes (gloo on CPU here; NCCL,
one GPU each, on the device) and merged into one bundle that equals a one-process run, timings aside."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

import fuseprof
from fuseprof.capture.shard import share, work_items
from fuseprof.tables.summary import sort_by_shape
from tests.conftest import FIXTURES, FUSEPROF

KEYS = ["case", "variant", "shape", "dtype", "nominal_bytes", "max_abs_err", "rel_err", "tolerance", "correct"]
ARGS = ["silu_mul", "rmsnorm_swiglu", "--device", "cpu", "--shapes", "4x64,8x64,16x64", "--repeats", "3"]


def _fuseprof(tmp: Path, *argv: str) -> tuple[int, Path | None, str]:
    """``fuseprof ARGV --out TMP`` run from TMP: exit code, the bundle it printed last, stderr."""
    tmp.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([FUSEPROF, *argv, "--out", str(tmp)], capture_output=True, text=True, timeout=600,
                          cwd=tmp)
    lines = done.stdout.strip().splitlines()
    return done.returncode, Path(lines[-1]) if done.returncode == 0 else None, done.stderr


def _bench(tmp: Path, *extra: str) -> tuple[int, Path | None, str]:
    return _fuseprof(tmp, "bench", *extra)


def test_work_is_split_whole_and_balanced() -> None:
    shapes = [f"{m}x{n}" for n in (4096, 8192) for m in (1, 128, 1024, 4096, 8192, 32768)]  # the bench grid
    items = work_items(["a", "b", "c", "d"], shapes)
    parts = [share(items, r, 2) for r in range(2)]
    assert sorted(parts[0] + parts[1]) == sorted(items) and not set(parts[0]) & set(parts[1])
    sizes = [sum(int(s.split("x")[0]) * int(s.split("x")[1]) for _, s in part) for part in parts]
    assert max(sizes) / min(sizes) < 1.05  # within 5% of an even split (round robin: 1 : 1.9)
    # each rank gets a share of every case, and of each case's largest shapes
    for part in parts:
        assert {c for c, _ in part} == {"a", "b", "c", "d"}
        assert len({c for c, s in part if s.startswith("32768x")}) >= 2


def test_measured_item_times_split_evenly_over_two_gpus() -> None:
    """The H200 item times of ten one-GPU runs, replayed through the split: the two ranks' work
    differs by 1.2% of the total on average (LPT over the whole grid by size: 4.0%, worst 6.4%)."""
    runs = pd.read_csv(FIXTURES / "shard_items" / "item_seconds.csv")
    gaps = []
    for _, run in runs.groupby("run"):
        # the first item also paid the process's cold start, which every rank pays once: not the item's cost
        seconds = run["seconds"].where(run["order"] > 0, run["seconds"].median())
        cost = dict(zip(zip(run["case"], run["shape"], strict=True), seconds, strict=True))
        items = list(cost)
        loads = [sum(cost[i] for i in share(items, rank, 2)) for rank in range(2)]
        gaps.append(abs(loads[0] - loads[1]) / sum(loads))
    assert len(gaps) == 10
    assert sum(gaps) / len(gaps) < 0.02 and max(gaps) < 0.04


def test_two_gloo_processes_give_the_rows_of_one(tmp_path: Path) -> None:
    code, one, err = _bench(tmp_path / "one", *ARGS)
    assert code == 0, err[-2000:]
    code, two, err = _bench(tmp_path / "two", *ARGS, "--gpus", "2")
    assert code == 0, err[-2000:]
    a = sort_by_shape(fuseprof.load_timings(one), ["case", "shape", "variant"])
    b = sort_by_shape(fuseprof.load_timings(two), ["case", "shape", "variant"])
    assert len(a) == len(b) == 2 * 3 * 2  # 2 cases x 3 shapes x (eager, compiled) on CPU
    assert a[KEYS].equals(b[KEYS])  # same inputs per shape, same checks: only the timings differ
    assert sorted(b["rank"].unique()) == [0, 1] and a["rank"].isna().all()
    manifest = json.loads((two / "manifest.json").read_text())
    assert manifest["shards"]["world"] == 2 and manifest["shards"]["failed"] == []
    ranks, shards = manifest["device"]["ranks"], manifest["shards"]
    assert len(ranks) == 2 and shards["ranks_work_s"] == [r["wall_s"] for r in ranks]
    # where the time went: each rank's start (after launch), its work, then every part written
    for ready, work in zip(shards["ranks_ready_s"], shards["ranks_work_s"], strict=True):
        assert 0 < ready and ready + work <= shards["parts_s"] + 0.05
    # each (case, shape) item's wall time, as the rank saw it, and as the one-process run saw it
    items = sorted(f"{c} {s}" for c in ("silu_mul", "rmsnorm_swiglu") for s in ("4x64", "8x64", "16x64"))
    assert sorted(i["item"] for r in ranks for i in r["item_s"]) == items
    single = json.loads((one / "manifest.json").read_text())
    assert sorted(i["item"] for i in single["item_s"]) == items
    assert sum(i["s"] for i in single["item_s"]) <= single["wall_s"]


def test_the_parent_of_a_sharded_bench_leaves_torch_to_the_ranks() -> None:
    """torch is imported while the ranks start, not before: the parent's ~1-3 s import is off the critical path."""
    code = ("import sys, fuseprof.cli, fuseprof.capture.sharded_bench, fuseprof_kernels.grid; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_a_failing_rank_is_named_and_the_others_rows_are_kept(tmp_path: Path) -> None:
    (tmp_path / "flaky.py").write_text(
        "from fuseprof_kernels.silu_mul import CASE as BASE\n"
        "import dataclasses\n"
        "def make_inputs(shape, dtype, device, generator):\n"
        "    if shape[0] == 8:\n"
        "        raise RuntimeError('out of memory on this shape')\n"
        "    return BASE.make_inputs(shape, dtype, device, generator)\n"
        "CASE = dataclasses.replace(BASE, make_inputs=make_inputs)\n")
    code, _, err = _bench(tmp_path, str(tmp_path / "flaky.py") + ":CASE", "--device", "cpu", "--shapes",
                          "4x64,8x64", "--repeats", "2", "--gpus", "2")
    assert code == 2
    message = [line for line in err.splitlines() if line.startswith("fuseprof: error:")][-1]
    # the larger shape goes first, to rank 0 (largest-first scheduling): rank 0 fails, rank 1's rows stay
    assert "1 of 2 ranks failed (rank 0: " in message and "flaky.py:5: RuntimeError: out of memory on this shape" in message
    (bundle,) = [p for p in tmp_path.iterdir() if p.name.startswith("bench-")]
    kept = fuseprof.load_timings(bundle)
    assert set(kept["shape"]) == {"4x64"} and set(kept["rank"]) == {1}


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_bad_gpu_counts_are_refused(tmp_path: Path, value: str) -> None:
    code, _, err = _bench(tmp_path, *ARGS, "--gpus", value)
    assert code == 2 and f"--gpus {value!r}" in err


def _profile(tmp: Path, *extra: str) -> tuple[int, Path | None, str]:
    return _fuseprof(tmp, "profile", "silu_mul", "--device", "cpu", "--shapes", "4x64,8x64,16x64", "--no-ncu",
                     "--repeats", "3", *extra)


def test_sharded_profile_gives_the_rows_and_kernels_of_one_process(tmp_path: Path) -> None:
    code, one, err = _profile(tmp_path / "one")
    assert code == 0, err[-2000:]
    code, two, err = _profile(tmp_path / "two", "--gpus", "2")
    assert code == 0, err[-2000:]
    a = sort_by_shape(fuseprof.load_timings(one), ["shape", "variant"])
    b = sort_by_shape(fuseprof.load_timings(two), ["shape", "variant"])
    assert a[KEYS].equals(b[KEYS])
    # largest shape first, to the least loaded rank: 16x64 alone on rank 0, the two smaller on rank 1
    assert dict(zip(b["shape"], b["rank"])) == {"16x64": 0, "8x64": 1, "4x64": 1}
    ka, kb = fuseprof.load(one), fuseprof.load(two)
    assert ka.groupby(["variant", "shape"]).size().equals(kb.groupby(["variant", "shape"]).size())
    assert dict(zip(kb["shape"], kb["rank"])) == {"16x64": 0, "8x64": 1, "4x64": 1}
    assert sorted(p.name for p in (two / "raw").iterdir()) == ["rank0", "rank1"]
    manifest = json.loads((two / "manifest.json").read_text())
    assert [r["shapes"] for r in manifest["device"]["ranks"]] == [["16x64"], ["4x64", "8x64"]]
    # fuseprof reparse rebuilds the same frame from the per-rank raw folders
    from fuseprof.bundle.reparse import reparse

    (two / "kernels.parquet").unlink()
    assert reparse(two) == len(kb)
    assert fuseprof.load(two).equals(kb)


def _rank_processes(token: str) -> list[str]:
    """Command lines of the running processes of this test's sharded run (torchrun and its workers),
    found by a token in their environment: another sharded run on the machine is not ours."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"FUSEPROF_TEST_RUN={token}".encode() not in environ.read_bytes().split(b"\0"):
                continue
            text = environ.with_name("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked, or is not ours to read
            continue
        if "fuseprof.capture.shard" in text or "torchrun" in text:
            found.append(text)
    return found


def test_a_sharded_run_past_its_time_limit_stops_every_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fuseprof.capture.sharded_bench import run_sharded_bench
    from fuseprof.errors import FuseprofError

    token = tmp_path.name
    monkeypatch.setenv("FUSEPROF_TEST_RUN", token)  # inherited by torchrun and every rank
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:  # the scan must see the ranks while they run, or it proves nothing after
        while not done.wait(0.2):
            seen.append(len(_rank_processes(token)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with pytest.raises(FuseprofError, match="the sharded bench ran past 3 s"):
            run_sharded_bench(["silu_mul"], ((4, 64), (8, 64)), None, "cpu", tmp_path, 2, repeats=200, timeout_s=3,
                              log=lambda _: None)
    finally:
        done.set()
        watcher.join()
    assert max(seen) >= 2  # torchrun and its workers were there
    assert not _rank_processes(token)  # torchrun was stopped, and with it its workers
    assert not list(tmp_path.iterdir())  # and no half bundle was written
