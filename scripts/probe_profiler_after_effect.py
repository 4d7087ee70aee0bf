"""Does a torch.profiler session leave the process slower once it has ended? (issue 59's truth: h100g/train_foreach
ran 5.65 ms a step before its capture and 7.16 after, and a process that never profiled ran every eager step 20-25%
faster than one that had.)

    python scripts/probe_profiler_after_effect.py [--workloads decode_eager,train_foreach] [--steps 30]

In one process, for each workload of ``capture_unprofiled_truth.py`` named: its un-profiled step (CUDA events at step
boundaries, median of ``--steps``) before any profiler, then after a profiler session of each kind in turn (CPU
activity only; CPU and CUDA; CPU and CUDA with record_shapes, with_stack and with_modules), each session 5 steps and
ended before the next timing. Prints each step median against the first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_unprofiled_truth as truth  # noqa: E402  (the workloads and the loop timing: one definition)

SESSIONS = {"CPU activity": ({"activities": [ProfilerActivity.CPU]}),
            "CPU + CUDA": ({"activities": [ProfilerActivity.CPU, ProfilerActivity.CUDA]}),
            "CPU + CUDA, shapes, stack, modules": ({"activities": [ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                                    "record_shapes": True, "with_stack": True, "with_modules": True})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="decode_eager,train_foreach")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    truth.PROFILE_GRAPH_CAPTURES = False
    chosen = [w for w in truth.workloads(Path("/tmp")) if w.name in args.workloads.split(",")]
    steps = {w.name: w.make("base")[0] for w in chosen}
    print(torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", torch.__version__, flush=True)
    first = {name: statistics.median(truth.step_times(step, args.steps)) for name, step in steps.items()}
    print("before any profiler: " + ", ".join(f"{n} {ms:.3f} ms" for n, ms in first.items()), flush=True)
    for label, options in SESSIONS.items():
        with profile(**options):
            for step in steps.values():
                for _ in range(5):
                    step()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        now = {name: statistics.median(truth.step_times(step, args.steps)) for name, step in steps.items()}
        print(f"after a {label} session: " + ", ".join(f"{n} {ms:.3f} ms ({ms / first[n]:.2f}x)"
                                                       for n, ms in now.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
