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
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
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
    from fuseprof.analysis.ranks import across_ranks
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="4,8,16,32")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
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
                  f"{ours['peak_mb']:>18.0f} {ours['peak_mb'] - ours['base_mb']:>6.0f} | rank {ours['straggler'][0]} {ours['straggler'][1]} (injected: rank {n // 2} GEMM)", flush=True)


if __name__ == "__main__":
    main()
