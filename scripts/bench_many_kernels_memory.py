"""N tiny kernels under a memory limit: ``fuseprof analyze`` on a generated trace, its address space capped.

    python scripts/bench_many_kernels_memory.py [--kernels 5000000] [--limit-gb 4] [--timeout 3600]

Issue 58 found 5 M tiny kernels under a 4 GB limit (``ulimit -v``) ending in a traceback; the CI test
(tests/test_bounded_inputs.py) holds the case at 100,000 kernels with 60 MB left after the imports. This
measures the issue's size. It writes, in a temporary folder, a torch.profiler trace of N kernels of 0.5 µs,
each with its cudaLaunchKernel and one aten op around them all (the test's trace, N times), then runs
``fuseprof analyze TRACE`` in a child process whose RLIMIT_AS is the limit (as ``ulimit -v`` sets it), with
its own trace store in the folder (the default: the store on). Prints the trace's size, the child's exit code,
wall time and peak RSS (``wait4``'s ru_maxrss), and what it ended in: a result, a clear error (exit 2 and one
``fuseprof: error:`` line, printed), a traceback, or a signal.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 20_000  # kernels per write


def write_trace(path: Path, kernels: int) -> None:
    """The trace of ``kernels`` tiny kernels, written a chunk at a time (5 M kernels: 1.9 GB of JSON)."""
    with path.open("w") as out:
        out.write('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0.0, '
                  f'"dur": {2.0 * kernels + 10}, "args": {{"External id": 1}}}}')
        for start in range(0, kernels, CHUNK):
            out.write("".join(
                f', {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
                f'"ts": {1.0 + 2 * i}, "dur": 1.0, "args": {{"correlation": {i + 10}, "External id": 1}}}}'
                f', {{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {1.5 + 2 * i}, "dur": 0.5, '
                f'"args": {{"correlation": {i + 10}, "External id": 1, "stream": 7, "device": 0}}}}'
                for i in range(start, min(start + CHUNK, kernels))))
        out.write("]}\n")


def analyze_limited(trace: Path, limit_bytes: int, store: Path, timeout_s: float
                    ) -> tuple[int | None, float, float, str, str]:
    """``fuseprof analyze TRACE`` under RLIMIT_AS = ``limit_bytes``: (exit code, or None past the timeout; wall
    seconds; peak RSS in GiB; stdout; stderr)."""
    code = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({limit_bytes}, {limit_bytes}))\n"
            "import sys\nfrom fuseprof.cli import main\nsys.exit(main(sys.argv[1:]))")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", code, "analyze", str(trace)], stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL, env={**os.environ, "FUSEPROF_CACHE": str(store)})
        deadline, status, usage = started + timeout_s, None, None
        while status is None and time.perf_counter() < deadline:
            pid, wait_status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(wait_status)
            else:
                time.sleep(0.5)
        wall = time.perf_counter() - started
        if status is None:
            child.kill()
            _, _, usage = os.wait4(child.pid, 0)
        child.returncode = status if status is not None else -9  # reaped here: Popen must not wait for it again
        out.seek(0)
        err.seek(0)
        return status, wall, usage.ru_maxrss / 2**20, out.read(), err.read()


def outcome(status: int | None, stderr: str) -> str:
    if status is None:
        return "hang (past the timeout)"
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    if status < 0:
        return f"killed by signal {-status}"
    errors = [line for line in stderr.splitlines() if line.startswith("fuseprof: error:")]
    if status == 2 and len(errors) == 1:
        return "clear error"
    return "result" if status == 0 else f"exit {status}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=5_000_000, help="tiny kernels in the trace (default 5,000,000)")
    parser.add_argument("--limit-gb", type=float, default=4, help="the child's address space in GiB (default 4)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds the analysis may take (default 3600)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuseprof-many-kernels-") as tmp:
        trace = Path(tmp) / "many.json"
        started = time.perf_counter()
        write_trace(trace, args.kernels)
        print(f"# {args.kernels:,} tiny kernels with their launches: {trace.stat().st_size / 2**30:.2f} GiB of JSON, "
              f"written in {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.2f}", flush=True)
        status, wall, peak, out, err = analyze_limited(trace, int(args.limit_gb * 2**30), Path(tmp) / "store",
                                                       args.timeout)
    print(f"fuseprof analyze under RLIMIT_AS {args.limit_gb:g} GiB: {outcome(status, err)}, exit code {status}, "
          f"{wall:.0f} s, peak RSS {peak:.2f} GiB; load average {os.getloadavg()[0]:.2f}")
    shown = err.strip().splitlines()[-20:] if status != 0 else out.strip().splitlines()[:12]
    print("\n".join(f"  | {line}" for line in shown))


if __name__ == "__main__":
    main()
