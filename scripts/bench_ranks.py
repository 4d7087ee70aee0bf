"""Peak memory against the number of ranks: fuseprof's parent process vs loading every rank at once.

    python scripts/bench_ranks.py [--ranks 4,8,16,32] [--steps 300] [--workers 2]

For each N, a rank set made by scripts/make_rank_set.py (N traces of ``steps`` profiler steps, rank
N//2 a GEMM straggler), then, each in a fresh process with an empty trace store:
    at once   every trace decoded into tables and kept (what reading a folder rank after rank in one
              process, all in memory, costs)
    fuseprof  ``fuseprof.analyze(FOLDER's traces, workers=W)``: the parent's own peak RSS (each worker
              holds one trace at a time)
Peak RSS is the process's VmHWM (ru_maxrss would count the RSS of the parent it was forked from);
"+MB" is above the same process's peak after its imports. The
straggler named by fuseprof is printed too (it must be the injected rank and GEMM in every row).

    python scripts/bench_ranks.py --speed [--ranks 128] [--steps 90] [--workers 1] [--repeats 1] [--hta-python PY]

times, instead, each fresh process from outside (CPU: its own and every worker's, from the children's
rusage; wall), in one run on one rank set, ``repeats`` rounds of them one after another (the medians, and the
median of each round's own ratio: this machine's speed drifts by a fifth within minutes, so a ratio is taken
between runs of the same round):
    json.load  every rank's file loaded by ``json.load`` in one process
    cold       ``fuseprof analyze FOLDER --format json --workers W`` into an empty trace store
    warm       the same again: the store answers
    workers 2  cold with ``--workers 2``; dask: cold on a local 2-worker dask.distributed cluster (when dask
               is installed; wall only: the cluster's workers are not the command's children)
    HTA        HolisticTraceAnalysis's TraceAnalysis of the folder and its temporal breakdown, where it imports (in
               this interpreter or the one ``--hta-python`` names)
and prints every side as a multiple of json.load's CPU time (the load-and-drop baseline: each rank's file loaded
and dropped, one after another, in one process; keeping every rank instead costs 3-4x as much, most of it garbage
collection), and dask's wall time over ``--workers 2``'s.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# one process's run, reporting its own peak: `python -c CHILD at_once|fuseprof FOLDER WORKERS` (also used by
# tests/test_many_ranks.py, which runs it under a memory limit)
CHILD = r"""
import json, sys
from pathlib import Path
def peak():  # this process's own high-water mark (ru_maxrss would start from the forking parent's RSS)
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
def main():
    mode, folder, workers = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    from fuseprof.analysis import analyze
    from fuseprof.analysis.facts.ranks import across_ranks
    from fuseprof.parse.trace_events import read_trace_tables
    base = peak()
    out = {}
    if mode == "at_once":
        kept = [read_trace_tables(p) for p in sorted(folder.glob("*.json"))]
        out["events"] = sum(len(t.gpu) + len(t.ops) + len(t.launches) for t in kept)
    else:
        results = analyze(sorted(folder.glob("*.json")), workers=workers)
        top = across_ranks(results)["stragglers"].iloc[0]
        out["straggler"] = [int(top["last_rank"]), str(top["grew_category"])]
    out.update(base_mb=base, peak_mb=peak())
    print(json.dumps(out))
if __name__ == "__main__":
    main()
"""


def measure(mode: str, folder: Path, workers: int, store: Path) -> dict:
    env = {"FUSEPROF_CACHE": str(store), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(folder), str(workers)], capture_output=True,
                          text=True, check=True, cwd=ROOT, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def timed(command: list[str], store: Path) -> tuple[float, float]:
    """(CPU s, wall s) of a fresh process running ``command``: its own CPU time and its workers' (children it
    waited for count in its children's rusage, and so in ours)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                   env={"FUSEPROF_CACHE": str(store), "PATH": "/usr/bin:/bin"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


_HTA = ("import sys, warnings\nwarnings.simplefilter('ignore')\nfrom hta.trace_analysis import TraceAnalysis\n"
        "TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)")


def speed(n: int, steps: int, workers: int, repeats: int = 1, hta: str | None = None) -> None:
    """The --speed table (the module docstring) for one rank set of ``n`` ranks; ``hta``: an interpreter that
    imports HTA, timed beside."""
    from statistics import median

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ranks"
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_rank_set.py"), str(folder), "--ranks", str(n),
                        "--steps", str(steps), "--slow-rank", str(n // 2)], check=True, capture_output=True)
        files = sorted(str(p) for p in folder.glob("*.json"))
        size = sum(Path(f).stat().st_size for f in files) / 1e6
        analyze = [sys.executable, "-m", "fuseprof.cli", "analyze", str(folder), "--format", "json"]
        names = ["json.load", f"cold, {workers} w", f"warm, {workers} w", "cold, 2 w"] + (["HTA"] if hta else [])
        rounds: list[dict[str, tuple[float, float]]] = []
        for r in range(repeats):
            stores = [Path(tmp) / f"store-{r}-{k}" for k in range(3)]
            times = {"json.load": timed([sys.executable, "-c", "import json, sys\nfor p in sys.argv[1:]:\n"
                                         "    json.load(open(p))", *files], Path(tmp) / "unused")}
            times[names[1]] = timed([*analyze, "--workers", str(workers)], stores[0])
            times[names[2]] = timed([*analyze, "--workers", str(workers)], stores[0])
            times[names[3]] = timed([*analyze, "--workers", "2"], stores[1])
            if hta:
                times["HTA"] = timed([hta, "-c", _HTA, str(folder)], Path(tmp) / "unused")
            times["dask"] = _dask(analyze, stores[2])
            rounds.append(times)
        print(f"{n} ranks, {size:.0f} MB of JSON ({size / n:.1f} MB a rank), {steps} steps each"
              + (f"; medians of {repeats} rounds" if repeats > 1 else "") + "; CPU x: to json.load, load-and-drop, "
              "in the same round" + ("" if hta else "; HTA: not installed"))
        print(f"{'':>12} {'CPU s':>7} {'wall s':>7} {'CPU x json.load':>16}")
        for name in names:
            cpu, wall = (median(t[name][i] for t in rounds) for i in (0, 1))
            ratio = median(t[name][0] / t["json.load"][0] for t in rounds)
            print(f"{name:>12} {cpu:>7.1f} {wall:>7.1f} {ratio:>16.2f}", flush=True)
        if math.isnan(rounds[0]["dask"][1]):
            print("dask: not installed (pip install 'fuseprof[dask]')")
            return
        wall = median(t["dask"][1] for t in rounds)
        ratio = median(t["dask"][1] / t["cold, 2 w"][1] for t in rounds)
        print(f"{'cold, dask 2':>12} {'':>7} {wall:>7.1f}   wall x --workers 2: {ratio:.2f}")


def _dask(analyze: list[str], store: Path) -> tuple[float, float]:
    """``timed`` of the command on a local 2-worker Dask cluster (wall; CPU: the command's alone); NaN without
    dask."""
    try:
        from dask.distributed import LocalCluster
    except ImportError:
        return math.nan, math.nan
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        return timed([*analyze, "--scheduler", cluster.scheduler_address], store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default=None, help="rank counts, comma-separated (default 4,8,16,32; --speed 128)")
    parser.add_argument("--steps", type=int, default=None, help="profiler steps per rank (default 300; --speed 90)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default 2; --speed 1)")
    parser.add_argument("--speed", action="store_true", help="time cold and warm runs against json.load instead")
    parser.add_argument("--repeats", type=int, default=1, help="--speed: rounds, one after another (medians)")
    parser.add_argument("--hta-python", default=None, help="--speed: an interpreter with HolisticTraceAnalysis")
    args = parser.parse_args()
    if args.speed:
        from bench_trace_parse import hta_python  # beside this script: one way to find HTA for both benches

        for n in (int(r) for r in (args.ranks or "128").split(",")):
            speed(n, args.steps or 90, args.workers or 1, max(args.repeats, 1), hta_python(args.hta_python))
        return
    args.ranks, args.steps, args.workers = args.ranks or "4,8,16,32", args.steps or 300, args.workers or 2
    print(f"{'ranks':>5} {'JSON MB':>8} | {'at once peak MB':>15} {'+MB':>6} | {'fuseprof parent MB':>18} {'+MB':>6} "
          f"| straggler")
    for n in (int(r) for r in args.ranks.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "ranks"
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_rank_set.py"), str(folder), "--ranks", str(n),
                            "--steps", str(args.steps), "--slow-rank", str(n // 2)], check=True, capture_output=True)
            size = sum(p.stat().st_size for p in folder.glob("*.json")) / 1e6
            once = measure("at_once", folder, args.workers, Path(tmp) / "store-a")
            ours = measure("fuseprof", folder, args.workers, Path(tmp) / "store-b")
            print(f"{n:>5} {size:>8.0f} | {once['peak_mb']:>15.0f} {once['peak_mb'] - once['base_mb']:>6.0f} | "
                  f"{ours['peak_mb']:>18.0f} {ours['peak_mb'] - ours['base_mb']:>6.0f} | rank {ours['straggler'][0]} "
                  f"{ours['straggler'][1]} (injected: rank {n // 2} GEMM)", flush=True)


if __name__ == "__main__":
    main()
