"""Many tiny kernels under a memory limit (issue 58: "5 M tiny kernels under a 4 GB limit" ended in a traceback).
The issue's size is measured by scripts/bench_many_kernels_memory.py (docs/measurements/
bench-many-kernels-memory-20261206.txt: a clear error at 1 M and 5 M kernels under 4 GiB, a result at 500,000);
here, at a test's size, the error line names the limit the process ran into, and the script's own plumbing
tells a result from an error. Hostile cases count into the fuzz line (tests/conftest.py's FUZZ_RESULTS)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import FUZZ_RESULTS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_many_kernels_memory import analyze_limited, outcome, write_trace  # noqa: E402

# the imports first, then an address space of what they took and 60 MB more: the decode runs out past the read
_TIGHT = ("import resource, sys\nfrom fuseprof.cli import main\nimport fuseprof.analysis.running.runner, pandas, pyarrow\n"
          "size = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmSize')) * 1024\n"
          "limit = size + 60 * 2**20\nprint(limit, flush=True)\n"
          "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\nsys.exit(main(sys.argv[1:]))")


def test_out_of_memory_names_the_limit_it_ran_into(tmp_path: Path) -> None:
    """100,000 tiny kernels (a 31 MB trace) with 60 MB of address space left after the imports: one line that
    says the process's limit in GiB and that it is ``ulimit -v``'s (before: "the limit this process runs
    under, or the machine's", no size)."""
    trace = tmp_path / "many.json"
    write_trace(trace, 100_000)
    done = subprocess.run([sys.executable, "-c", _TIGHT, "analyze", str(trace)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "FUSEPROF_CACHE": "off"})
    said = outcome(done.returncode, done.stderr)
    FUZZ_RESULTS[said if said in ("clear error", "traceback") else "silently wrong"] += 1
    limit = int(done.stdout.split()[0])
    assert said == "clear error", (done.returncode, done.stderr[-600:])
    assert re.search(rf"analyze: out of memory: it outgrew this process's memory limit, {limit / 2**30:,.1f} GiB "
                     r"\(ulimit -v\)", done.stderr), done.stderr


def test_the_script_tells_a_result_and_measures_its_peak(tmp_path: Path) -> None:
    """The measuring script's child at 2,000 kernels under 4 GiB: a result (exit 0, the verdict printed), its
    peak RSS above the 50 MB the interpreter and pandas alone take and under the limit."""
    trace = tmp_path / "few.json"
    write_trace(trace, 2_000)
    text = trace.read_text()
    assert text.count('"cat": "kernel"') == 2_000 and text.count("cudaLaunchKernel") == 2_000
    status, _, peak_gib, out, err = analyze_limited(trace, 4 * 2**30, tmp_path / "store", timeout_s=300)
    assert outcome(status, err) == "result", err[-600:]
    assert "Verdict" in out and 0.05 < peak_gib < 4


def test_the_outcome_of_each_ending() -> None:
    """What the script calls each ending: a timeout, a traceback, a signal, one error line with exit 2."""
    assert outcome(None, "") == "hang (past the timeout)"
    assert outcome(1, "Traceback (most recent call last):\n  ...\nMemoryError") == "traceback"
    assert outcome(-9, "") == "killed by signal 9"
    assert outcome(2, "fuseprof: error: analyze: out of memory: ...\n") == "clear error"
    assert outcome(0, "") == "result"
