"""A trace whose every kernel has its own name (what a JIT that names kernels by shape, or a generated
benchmark, writes), through the whole ``fuseprof analyze`` command against a plain ``json.load``:

    python scripts/bench_many_names.py [--kernels 100000] [--repeats 3]

Each kernel is launched by its own ``aten::add`` through ``cudaLaunchKernel`` (correlation and External
ids joined one to one), 10 µs apart on one stream. Per side, interleaved ``repeats`` times, a fresh process
timed from outside (start-up and imports included), into an empty trace store:

    json.load  python -c 'json.load(open(f))'
    analyze    fuseprof analyze f --window all --format json

It prints the medians of CPU time (user + system of the child) and wall time, and the ratio of the two
sides (one run on one machine: compare the ratio)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(kernels: int, out: Path) -> None:
    """Write a trace of ``kernels`` kernels, each with a name of its own, to ``out``."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]
    for i in range(kernels):
        t = 10.0 * i
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": t, "dur": 5.0,
                       "args": {"External id": i + 1, "Input Dims": [[1024], [1024]],
                                "Input type": ["float", "float"]}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t + 1.0, "dur": 2.0, "args": {"correlation": i + 1, "External id": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": f"elementwise_kernel_{i}", "pid": 0, "tid": 7,
                       "ts": t + 4.0, "dur": 3.0, "args": {"correlation": i + 1, "External id": i + 1,
                                                           "device": 0, "stream": 7}})
    out.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))


def run(argv: list[str], store: Path) -> tuple[float, float]:
    """CPU seconds (the child's user + system) and wall seconds of a fresh process running ``argv``."""
    before = os.times()
    start = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "FUSEPROF_CACHE": str(store)})
    wall = time.monotonic() - start
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=100_000, help="kernels, each named apart (default 100000)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of each side (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "many_names.json"
        build(args.kernels, trace)
        sides = {"json.load": [sys.executable, "-c", f"import json; json.load(open({str(trace)!r}))"],
                 "analyze": [sys.executable, "-m", "fuseprof.cli", "analyze", str(trace), "--window", "all",
                             "--format", "json"]}
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        for k in range(args.repeats):
            for side, argv in sides.items():
                times[side].append(run(argv, Path(tmp) / f"store-{side}-{k}"))
                print(f"  run {k + 1}/{args.repeats} {side}: {times[side][-1][0]:.2f} s CPU", file=sys.stderr)
    cpu = {side: statistics.median(t[0] for t in runs) for side, runs in times.items()}
    wall = {side: statistics.median(t[1] for t in runs) for side, runs in times.items()}
    print(f"{args.kernels:,} kernels of distinct names, {trace.name} ({args.repeats} interleaved runs, medians)")
    for side in sides:
        print(f"  {side:<10} CPU {cpu[side]:7.2f} s   wall {wall[side]:7.2f} s")
    print(f"  analyze ÷ json.load: CPU {cpu['analyze'] / cpu['json.load']:.1f}×, wall "
          f"{wall['analyze'] / wall['json.load']:.1f}×")


if __name__ == "__main__":
    main()
