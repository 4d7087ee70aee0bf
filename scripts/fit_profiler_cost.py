"""Fit the profiler's share of the host's time on real steps on top of the unit-loop table (issue 59): its scale.

    python scripts/fit_profiler_cost.py [FOLDER...] [--out PATH]

FOLDER (default: tests/fixtures/truth_unprofiled/h100h and h100i, the FITTING sets, whose truth was timed before
their process ran any profiler) holds plain torch.profiler captures with ``<name>.truth.json`` (the un-profiled step
measured by CUDA events). For each trace whose truth says the host is the step's critical path (bound ``host-bound``
or ``sync-bound``: there the profiler's host time lengthens the step one for one; on a GPU-bound step it hides under
the GPU, on a data-bound one under the loader's wait), the profiler's measured cost per step is the traced step (the
mean ``ProfilerStep`` span) less the measured un-profiled median, and fuseprof's removed host time
(``unprofiled.host_removed_ns``: the share × the host's own time, and on a step with DataLoader ranges their events'
cost) is what the model predicts. The removal is the
share scale × a ratio of the table, so each trace implies a scale:

    scale_i = SHARE_SCALE × measured cost / removed

and the fit is their median (robust to a host that drifted between its truth and its trace: one H100 host's eager
step ran 1.76 → 3.14 ms within a minute). It prints each trace's residual and its leave-one-out residual (the median
without that trace), and writes the scale with the residuals to ``--out`` (``fuseprof/model/profiler_cost.py``
embeds it; a test checks the two agree).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

from fuseprof.analysis.running.runner import analyze
from fuseprof.model.profiler_cost import SHARE_SCALE

ROOT = Path(__file__).resolve().parents[1]
FITTING = [ROOT / "tests" / "fixtures" / "truth_unprofiled" / name for name in ("h100h", "h100i")]
HOST_CRITICAL = ("host-bound", "sync-bound")


def point(truth_path: Path) -> dict[str, Any]:
    """One trace's per-step cost (traced − measured, µs), fuseprof's removed host time (µs) and the scale they imply."""
    truth = json.loads(truth_path.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = analyze(truth_path.parent / truth["trace"])[0].frames["unprofiled"]
    traced_us = float(u["span_ns"].mean()) / 1e3
    measured_us = 1e3 * truth["unprofiled_step"]["median_ms"]
    removed_us = float(u["host_removed_ns"].mean()) / 1e3
    cost_us = traced_us - measured_us
    return {"trace": f"{truth_path.parent.name}/{truth['name']}", "bound": truth["bound"], "steps": len(u),
            "traced_us": traced_us, "measured_us": measured_us, "cost_us": cost_us, "removed_us": removed_us,
            "scale": SHARE_SCALE * cost_us / removed_us if removed_us > 0 else None}


def fit(points: list[dict[str, Any]]) -> float:
    """The median of the scales the points imply."""
    return float(statistics.median(p["scale"] for p in points))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path, default=FITTING)
    parser.add_argument("--out", type=Path, help="write the fit here (JSON)")
    args = parser.parse_args(argv)
    every = [point(t) for f in args.folders for t in sorted(f.glob("*.truth.json"))]
    used = [p for p in every if p["bound"] in HOST_CRITICAL and p["scale"] is not None and p["cost_us"] > 0]
    if len(used) < 3:
        parser.error("fewer than 3 host-critical traces with truth to fit on")
    scale = fit(used)
    print(f"fit on {len(used)} of {len(every)} traces: the profiler's share = {scale:.3f} × the table's "
          f"(the model now holds {SHARE_SCALE})")
    print(f"{'trace':26} {'bound':12} {'cost µs':>9} {'fit µs':>9} {'resid':>7} {'loo':>7}")
    for p in every:
        p["fit_us"] = p["removed_us"] * scale / SHARE_SCALE
        p["residual"] = p["fit_us"] / p["cost_us"] - 1 if p["cost_us"] > 0 else None
        if p in used:
            p["loo_residual"] = p["removed_us"] * fit([q for q in used if q is not p]) / SHARE_SCALE / p["cost_us"] - 1
        loo = f"{p['loo_residual']:+7.1%}" if "loo_residual" in p else "   (not fitted: " + p["bound"] + ")"
        resid = f"{p['residual']:+7.1%}" if p["residual"] is not None else "    n/a"
        print(f"{p['trace']:26} {p['bound']:12} {p['cost_us']:9.1f} {p['fit_us']:9.1f} {resid} {loo}")
    if args.out:
        args.out.write_text(json.dumps({"share_scale": round(scale, 3),
                                        "model": "removed per step = share_scale x sum(count x cost) / sum(count x "
                                                 "(cost + time without the profiler)) x the host's own time in the "
                                                 "step; share_scale = the median over host-critical traces of the "
                                                 "scale each implies",
                                        "fitted_on": [p["trace"] for p in used], "points": every}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
