"""How many replay passes each candidate ncu metric list costs, on the fixture's bf16 GEMM.

    python scripts/ncu_passes.py        (on a GPU with ncu; prints one line per candidate)

fuseprof's metric list should cost as few passes as it can (each pass replays the kernel);
this measures the list before and after a change instead of guessing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fuseprof.capture.ncu_command import NcuRequest, profile_argv
from fuseprof.capture.ncu_run import find_ncu, run_ncu
from fuseprof.parse.ncu_metrics import BASE_METRICS, EXECUTION_METRICS, NCU_METRICS, TENSOR_METRICS, capture_metrics

CANDIDATES = {
    "base list (session 1, no tensor counters)": list(BASE_METRICS),
    "base + execution metrics (waves, instructions)": [*BASE_METRICS, *EXECUTION_METRICS.values()],
    "bfloat16 capture default (base + execution + bf16)": capture_metrics(("bf16",)),
    "base + bf16 + fp16": capture_metrics(("bf16", "fp16")),
    "--tensor-precisions all (base + 6)": list(NCU_METRICS),
    "6 tensor counters only": ["gpu__time_duration.sum", *TENSOR_METRICS.values()],
}


def main() -> None:
    ncu, report = find_ncu(), Path("/tmp/ncu_passes.ncu-rep")
    fixture = str(Path(__file__).with_name("roofline_fixture.py"))
    for name, metrics in CANDIDATES.items():
        argv = profile_argv(NcuRequest(ncu=ncu, report_path=report, range_labels=["roofline_fixture"],
                                       metrics=metrics, target_argv=[sys.executable, fixture]))
        argv[1:1] = ["--launch-count", "2"]
        run = run_ncu(argv, 300)
        print(f"{name:<48} {len(metrics):>3} metrics: passes {[p for _, p in run.passes]}", flush=True)


if __name__ == "__main__":
    main()
