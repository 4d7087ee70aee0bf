"""Instructions, not seconds: one cold ``fuseprof analyze`` under callgrind, before and after a change.

    python scripts/bench_instructions.py --before REV [--cases rank,ranks2,decode16]

On a shared 2-core machine the same command's CPU time moves ±30% between runs, so a change of a few percent
cannot be read from timings. Valgrind's callgrind counts the instructions a process executes: the same count
for the same code, inputs and environment, whatever else the machine is doing. This script checks out REV in a
temporary worktree, compiles both trees' modules to bytecode (a tree without ``__pycache__`` pays for
compiling every module on each run: PYTHONDONTWRITEBYTECODE is set on these machines), and runs each case once
per tree, from the tree itself (``python -m`` puts the working folder first on the path) with an empty trace
store and ``PYTHONHASHSEED=0``, printing the instructions and the ratio after / before. Cases:

    rank      one rank of scripts/make_rank_set.py's set (90 steps, 2 MB)
    ranks2    two such ranks, --workers 1 (what a rank set adds: pass 1's analysis, the across-ranks tables)
    decode16  scripts/bench_trace_parse.py's Llama decode trace at 16 MB
    imports   the imports alone (what every cold command pays before reading a byte)

Needs valgrind (Debian's package) and git; each case takes 1–3 minutes under callgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORTS = ("import fuseprof.cli, fuseprof.commands.trace_views, fuseprof.analysis.running.runner, fuseprof.analysis.running.sections;"
           " fuseprof.analysis.running.sections.sections()")


def instructions(tree: Path, argv: list[str], store: Path) -> int:
    """What callgrind counted for ``python argv`` run in ``tree``."""
    shutil.rmtree(store, ignore_errors=True)
    env = {**os.environ, "PYTHONHASHSEED": "0", "FUSEPROF_CACHE": str(store)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *argv],
                          cwd=tree, env=env, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{tree}: {' '.join(argv)} failed ({done.returncode}): {done.stderr[-1500:]}")
    return int(found.group(1))


def cases(tmp: Path) -> dict[str, list[str]]:
    """Each case's inputs, made once: the argv after ``python``."""
    ranks = tmp / "ranks"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_rank_set.py"), str(ranks), "--ranks", "2",
                    "--steps", "90", "--slow-rank", "1"], check=True, capture_output=True)
    one = tmp / "rank"
    one.mkdir()
    shutil.copy(sorted(ranks.glob("*.json"))[0], one / "rank-00.json")
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_trace_parse import build

    decode = tmp / "decode16.json"
    build(16, decode)
    analyze = ["-m", "fuseprof.cli", "analyze"]
    return {"rank": [*analyze, str(one / "rank-00.json"), "--format", "json"],
            "ranks2": [*analyze, str(ranks), "--format", "json", "--workers", "1"],
            "decode16": [*analyze, str(decode), "--format", "json"],
            "imports": ["-c", IMPORTS]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the revision to compare the working tree with")
    parser.add_argument("--cases", default="rank,ranks2,decode16,imports", help="comma-separated (default: all)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        before = tmp / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            for tree in (before, ROOT):
                subprocess.run([sys.executable, "-m", "compileall", "-q", "fuseprof"], cwd=tree, check=True,
                               capture_output=True)
            made = cases(tmp)
            print(f"{'case':>10} {'before':>15} {'after':>15} {'after/before':>13}   (instructions, callgrind)")
            for name in args.cases.split(","):
                old = instructions(before, made[name], tmp / "store")
                new = instructions(ROOT, made[name], tmp / "store")
                print(f"{name:>10} {old:>15,} {new:>15,} {new / old:>13.3f}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)


if __name__ == "__main__":
    main()
