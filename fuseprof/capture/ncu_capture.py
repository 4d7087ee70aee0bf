"""ncu over a child program, limited to fuseprof's NVTX ranges, into a bundle's raw/ folder.

Shared by ``fuseprof profile`` (the child runs each case variant once per range) and ``fuseprof
run`` (the child is the user's own script, its ``fuseprof.region`` ranges the filter).
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from typing import Any

from fuseprof.bundle.files import BundleWriter
from fuseprof.capture.ncu_command import NcuRequest, profile_argv
from fuseprof.capture.ncu_run import find_ncu, run_ncu_known_metrics
from fuseprof.console import Log
from fuseprof.parse.ncu_import import import_csv_argv, run_capture_output
from fuseprof.parse.ncu_metrics import capture_metrics


def capture_with_ncu(writer: BundleWriter, labels: Sequence[str], target: Sequence[str],
                     tensor_precisions: tuple[str, ...], timeout_s: float, log: Log) -> dict[str, Any]:
    """Run ``target`` under ncu, profiling the kernels inside ``labels``; leaves raw/ncu_raw.csv.gz and
    raw/ncu.log in the bundle and returns the manifest's ncu facts (argv, metrics, passes, wall time)."""
    ncu = find_ncu()
    report = writer.path / "ncu.ncu-rep"
    requested = capture_metrics(tensor_precisions)
    log(f"  ncu: replaying kernels of {len(labels)} ranges ({len(requested)} metrics, tensor counters "
        f"{', '.join(tensor_precisions) or 'none'}; --clock-control none)")
    run, argv, metrics, dropped = run_ncu_known_metrics(
        lambda kept: profile_argv(NcuRequest(ncu=ncu, report_path=report, range_labels=list(labels), metrics=kept,
                                             target_argv=list(target))),
        requested, timeout_s, log)
    writer.raw("ncu.log").write_text(run.log)
    csv_text = run_capture_output(import_csv_argv(ncu, report))
    with gzip.open(writer.raw("ncu_raw.csv.gz"), "wt", compresslevel=9) as fh:
        fh.write(csv_text)
    report.unlink()  # tens of MB for PyTorch's kernels: the CSV keeps every metric asked for
    passes = [p for _, p in run.passes]
    # ncu 2025.3 accepts some unknown names without an error and simply leaves them out
    absent = [m for m in metrics if f'"{m}"' not in csv_text]
    if absent:
        log(f"  ncu: these metrics are absent from the report (their columns stay null): {', '.join(absent)}")
    return {"status": "ok", "argv": argv, "metrics": metrics, "dropped_metrics": dropped + absent,
            "tensor_precisions": list(tensor_precisions), "clock_control": "none", "cache_control": "all",
            "wall_s": round(run.wall_s, 2), "kernels_profiled": len(passes),
            "replay_passes_per_kernel": sorted(set(passes)),
            "version": run_capture_output([ncu, "--version"]).strip().splitlines()[-1]}
