"""Thirty-two ranks made from the committed two-GPU H200 trace, one of them a known straggler: analysed in
worker processes under a memory limit that loading every rank at once exceeds, on a 2-worker Dask
cluster with the same answer, and the straggler named with its cause in every run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.ranks import across_ranks
from fuseprof.analysis.paths.job_path import job_path
from fuseprof.analysis.running.sections import shown_tables
from fuseprof.cli import main
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from bench_ranks import CHILD  # noqa: E402
from make_rank_set import make_rank_set  # noqa: E402


def _under_limit(mode: str, folder: Path, store: Path, limit_mb: float | None) -> dict:
    """Run the child; with ``limit_mb``, kill it (like a container's OOM killer) if its RSS goes above."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(folder), "2"], stdout=subprocess.PIPE, text=True,
                             cwd=ROOT, env={"FUSEPROF_CACHE": str(store), "PATH": "/usr/bin:/bin"})
    killed = threading.Event()

    def watch() -> None:
        process = psutil.Process(child.pid)
        while child.poll() is None:
            try:
                if limit_mb is not None and process.memory_info().rss / 2**20 > limit_mb:
                    killed.set()
                    child.kill()
            except psutil.NoSuchProcess:
                return
            time.sleep(0.005)
    threading.Thread(target=watch, daemon=True).start()
    out, _ = child.communicate(timeout=600)
    return {"killed": killed.is_set(), "rc": child.returncode, **(json.loads(out.splitlines()[-1]) if out else {})}


@pytest.fixture(scope="module")
def rank_set(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ranks")
    make_rank_set(folder, ranks=32, steps=300, slow_rank=17, slow_category="GEMM", factor=1.5, seed=0)
    return folder


def test_32_ranks_in_workers_stay_under_a_limit_that_loading_them_at_once_exceeds(rank_set: Path,
                                                                                    tmp_path: Path) -> None:
    at_once = _under_limit("at_once", rank_set, tmp_path / "a", None)
    # the limit: halfway between the process after its imports and the process holding every rank's tables
    limit = at_once["base_mb"] + (at_once["peak_mb"] - at_once["base_mb"]) / 2
    assert at_once["peak_mb"] - at_once["base_mb"] > 150  # 32 ranks of 300 steps: loading them all costs
    again = _under_limit("at_once", rank_set, tmp_path / "b", limit)
    assert again["killed"]  # the limit bites: loading every rank at once does not fit under it
    ours = _under_limit("fuseprof", rank_set, tmp_path / "c", limit)
    assert not ours["killed"] and ours["rc"] == 0, ours
    assert ours["peak_mb"] < limit
    assert ours["straggler"] == [17, "GEMM"]


@pytest.mark.parametrize("slow_rank, category, factor, seed", [(17, "GEMM", 1.5, 1), (5, "elementwise", 4.0, 2),
                                                                (30, "GEMM", 1.2, 3)])
def test_the_injected_straggler_and_what_grew_on_it_are_named(tmp_path: Path, slow_rank: int, category: str,
                                                              factor: float, seed: int) -> None:
    folder = tmp_path / "ranks"
    make_rank_set(folder, ranks=32, steps=30, slow_rank=slow_rank, slow_category=category, factor=factor, seed=seed)
    results = analyze(sorted(folder.glob("*.json")))
    tables = across_ranks(results)
    top = tables["stragglers"].iloc[0]
    assert (int(top["last_rank"]), top["grew_category"]) == (slow_rank, category)
    # the job's critical path: every step whose work grew on the slowed rank (every third: the generator's rule) is
    # set by that rank, and no other step is set by it more than by chance
    path = job_path(results)
    slowed = path.iloc[1::3]
    assert (slowed["rank"] == slow_rank).all(), slowed
    assert (path.drop(index=slowed.index)["rank"] == slow_rank).mean() < 0.5, path
    # every third step grew on it: those ten collectives it came last to, the others waiting for it
    late = tables["late_arrivals"]
    assert (late.head(10)["last_rank"] == slow_rank).all() and (late.head(10)["grew_category"] == category).all()
    assert int(top["collectives"]) >= 10


@pytest.mark.parametrize("factor, slow_rank", [(1.5, 2), (1.0, None)])
def test_a_late_started_rank_is_start_up_skew_not_the_straggler(tmp_path: Path, factor: float,
                                                                 slow_rank: int | None) -> None:
    """Rank 0's process starts 1 s after the others: the first all-reduce waits 1 s for it. That is the
    traces' start offset, reported apart; the straggler is the rank slowed on purpose, or none at all."""
    folder = tmp_path / "ranks"
    make_rank_set(folder, ranks=4, steps=30, slow_rank=2, factor=factor, seed=5, late_start={0: 1_000_000.0})
    tables = across_ranks(analyze(sorted(folder.glob("*.json"))))
    first = tables["collectives"].iloc[0]
    assert (first["phase"], int(first["last_rank"])) == ("start-up", 0) and first["skew_ns"] >= 1e9 * 0.99
    culprits = tables["stragglers"]
    if slow_rank is None:
        assert culprits.empty, culprits
    else:
        assert (int(culprits["last_rank"].iloc[0]), culprits["cause"].iloc[0]) == (slow_rank, "computation: GEMM")


def test_a_two_worker_dask_cluster_gives_the_single_process_answer(tmp_path: Path, capsys, monkeypatch) -> None:
    """Every table as the single-process run makes it, with the traces sent as tasks of several (a task of three
    and a task of one: each answer back in its call's place)."""
    import fuseprof.analysis.running.cluster as cluster

    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(cluster, "batches", lambda count, threads: [
        group for group in (range(0, min(count, 3)), range(min(count, 3), count)) if len(group)])
    folder = tmp_path / "ranks"
    make_rank_set(folder, ranks=4, steps=12, slow_rank=2, seed=4)
    traces = sorted(folder.glob("*.json"))
    alone = analyze(traces, workers=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        on_cluster = analyze(traces, scheduler=cluster.scheduler_address)
        assert main(["analyze", *map(str, traces), "--scheduler", cluster.scheduler_address, "--format", "json"]) == 0
    assert [r.name for r in on_cluster] == [r.name for r in alone]
    for a, b in zip(alone, on_cluster):
        for name, table in shown_tables(a).items():
            pd.testing.assert_frame_equal(table, shown_tables(b)[name], check_exact=True)
    for name, table in across_ranks(alone).items():
        pd.testing.assert_frame_equal(table, across_ranks(on_cluster)[name], check_exact=True)
    assert json.loads(capsys.readouterr().out)["across_ranks"]["stragglers"][0]["last_rank"] == 2


def test_local_workers_and_the_store_give_the_single_process_answer(tmp_path: Path, monkeypatch) -> None:
    """The three ways an analysis reaches the caller give the same one, every table to the dtype: made in this
    process, handed back by a worker (its tables pickled: ``runner.Handed``), and read back from the store (a
    second run finds every analysis there)."""
    folder = tmp_path / "ranks"
    make_rank_set(folder, ranks=4, steps=12, slow_rank=2, seed=4)
    traces = sorted(folder.glob("*.json"))
    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    alone = analyze(traces, workers=1)
    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "store"))
    handed, stored = analyze(traces, workers=2), analyze(traces, workers=2)
    for other in (handed, stored):
        assert [r.name for r in other] == [r.name for r in alone]
        for a, b in zip(alone, other):
            assert (b.device, b.roof, b.window, b.rank, b.world_size, b.notes, b.top) == \
                (a.device, a.roof, a.window, a.rank, a.world_size, a.notes, a.top)
            assert list(b.frames) == list(a.frames)
            for name, table in a.frames.items():
                pd.testing.assert_frame_equal(table, b.frames[name], check_exact=True)
            pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)  # rebuilt from the stored tables
        for name, table in across_ranks(alone).items():
            pd.testing.assert_frame_equal(table, across_ranks(other)[name], check_exact=True)


@pytest.mark.parametrize("where", ["nothing listening", "not an address", "a silent server"])
def test_an_unreachable_scheduler_is_one_line(where: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """Nothing at the port, an address Dask cannot parse, or a server that accepts and never answers the
    handshake (Dask alone waits forever): one line, exit 2, within the answer time."""
    import socket

    import fuseprof.analysis.running.cluster as cluster

    pytest.importorskip("distributed")
    folder = tmp_path / "ranks"
    make_rank_set(folder, ranks=2, steps=3)
    monkeypatch.setattr(cluster, "ANSWER_S", 3.0)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()  # accepts in the kernel's backlog, reads nothing, writes nothing
    address = {"nothing listening": "tcp://127.0.0.1:9", "not an address": "not a url",
               "a silent server": f"tcp://127.0.0.1:{server.getsockname()[1]}"}[where]
    try:
        assert main(["analyze", str(folder), "--scheduler", address]) == 2
    finally:
        server.close()
    err = capsys.readouterr().err.strip()
    assert "cannot reach a Dask scheduler there" in err and len(err.splitlines()) == 1


def test_a_cluster_without_a_shared_store_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    folder = tmp_path / "ranks"
    make_rank_set(folder, ranks=2, steps=3)
    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    assert main(["analyze", str(folder), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "set FUSEPROF_CACHE to a folder every worker and this process share" in capsys.readouterr().err


def test_a_quoted_glob_of_rank_traces_is_expanded(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "ranks"
    make_rank_set(folder, ranks=3, steps=3)
    assert main(["analyze", str(folder / "rank-0[02].json"), "--format", "json"]) == 0
    assert [k for k in json.loads(capsys.readouterr().out) if k not in ("across_ranks", "schema_version")] == ["rank-00.json", "rank-02.json"]
    assert main(["analyze", str(folder / "nothing-*.json")]) == 2
    assert "matches no file" in capsys.readouterr().err


def test_workers_that_die_end_the_run_with_one_error(monkeypatch) -> None:
    """A task that kills its worker: with a nanny, Dask restarts the worker and retries until it gives up
    (one error naming the dead workers); a worker without a nanny leaves the cluster with none, where Dask alone
    waits forever (one error after the answer time)."""
    import os
    import subprocess
    import sys
    import time

    import fuseprof.analysis.running.cluster as cluster
    from fuseprof.errors import FuseprofError

    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        # the default answer time: between tries the nanny's restart leaves the cluster with no worker, for
        # seconds on a loaded 2-core machine, and that must not read as a cluster left with none
        with pytest.raises(FuseprofError, match="the workers died on every try at one of the traces"):
            cluster.run_on_cluster(local.scheduler_address, os._exit, [(3,)], None, "traces")
        # the nanny restarts the last killed worker; closing the cluster mid-restart is Dask's own race
        # ("can only join a started process", seen once on a loaded machine), so wait for the worker first
        with distributed.Client(local.scheduler_address) as client:
            client.wait_for_workers(1, timeout=60)
    monkeypatch.setattr(cluster, "ANSWER_S", 3.0)
    with distributed.LocalCluster(n_workers=0, dashboard_address=None) as local:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", local.scheduler_address,
                                   "--no-nanny", "--nthreads", "1", "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with distributed.Client(local.scheduler_address) as client:
                client.wait_for_workers(1, timeout=60)
            started = time.monotonic()
            with pytest.raises(FuseprofError, match=r"the cluster has no worker left for 3 s \(0 of 1 traces done\)"):
                cluster.run_on_cluster(local.scheduler_address, os._exit, [(3,)], None, "traces")
            assert time.monotonic() - started < 30
        finally:
            worker.kill()
            worker.wait()


def test_a_scheduler_that_dies_mid_run_is_one_error(capfd) -> None:
    """The scheduler killed while its worker runs a task: Dask cancels every future (and logs tracebacks);
    the run ends at once with one error, and nothing else on stderr."""
    import socket
    import subprocess
    import sys
    import threading
    import time

    import fuseprof.analysis.running.cluster as cluster
    from fuseprof.errors import FuseprofError

    distributed = pytest.importorskip("distributed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", str(port),
                                  "--no-dashboard"], **quiet)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                               "--no-dashboard"], **quiet)
    try:
        with distributed.Client(address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=60)
        threading.Timer(3, scheduler.kill).start()
        started = time.monotonic()
        with pytest.raises(FuseprofError, match=r"the connection to the scheduler was lost \(0 of 1 traces done\)"):
            cluster.run_on_cluster(address, time.sleep, [(60,)], None, "traces")
        assert time.monotonic() - started < 30
        assert "Traceback" not in capfd.readouterr().err
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait()


@pytest.mark.parametrize("threads", [0, 1, 2, 8, 64])
@pytest.mark.parametrize("count", [0, 1, 2, 7, 8, 9, 128, 1000])
def test_cluster_batches_cover_every_call_once_largest_first(count: int, threads: int) -> None:
    """The tasks of a cluster run: every call once and in order, never an empty task, groups never growing, and
    once fewer calls are left than four per thread, one call a task (the workers finish together)."""
    from fuseprof.analysis.running.cluster import batches

    groups = batches(count, threads)
    assert [k for group in groups for k in group] == list(range(count))
    sizes = [len(group) for group in groups]
    assert all(s >= 1 for s in sizes) and sizes == sorted(sizes, reverse=True)
    left = count
    for size in sizes:
        if left < 4 * max(threads, 1):
            assert size == 1
        left -= size
    if count >= 128 and 1 <= threads <= 2:
        assert len(groups) <= count // 3  # the point of it: far fewer tasks than calls
    if threads == 0:  # no worker yet: the cluster's size is unknown, one call a task
        assert sizes == [1] * count
