"""Fit the profiler's cost on real steps on top of the unit-loop table (issue 59): scale and per-step cost.

    python scripts/fit_profiler_cost.py [FOLDER...] [--out PATH]

FOLDER (default: tests/fixtures/truth_unprofiled/h100, the FITTING set; h100b is kept for scoring only) holds plain
torch.profiler captures with ``<name>.truth.json`` (the un-profiled step measured by CUDA events in the same
process). For each trace whose truth says the host is the step's critical path (bound ``host-bound`` or
``sync-bound``: there the profiler's host time lengthens the step one for one; on a GPU-bound step it hides under
the GPU, on a data-bound one under the loader's wait), the profiler's cost per step is the traced step (the mean
``ProfilerStep`` span) less the measured un-profiled median, and the table's prediction is Σ count × the unit-loop
cost (``fuseprof.model.profiler_cost``, scale 1, nothing per step). The fit is

    cost per step = host speed × (per_step + scale × table's prediction)

(the per-step cost only on steps with eager kernel launches: a step of graph replays alone showed none of it;
host speed: the trace's median traced kernel-launch call over the fitted traces' median of those — the profiler's
cost is host CPU time, and a faster host pays less; ``unprofiled.host_speed``) by least squares on the relative error (each trace weighs 1 / its cost: a 0.4 ms step counts as much as a 7 ms
one). It prints each trace's residual and its leave-one-out residual (the fit without that trace), and writes the
two numbers with the residuals to ``--out`` (``fuseprof/model/profiler_cost.py`` embeds them; a test checks the two
agree).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from fuseprof.analysis.facts.unprofiled import COUNTS, KINDS, median_launch_us, removed_ns
from fuseprof.analysis.running.runner import analyze
from fuseprof.model.profiler_cost import SETTINGS, Calibration
from fuseprof.parse.trace_events import read_trace_tables

ROOT = Path(__file__).resolve().parents[1]
FITTING = ROOT / "tests" / "fixtures" / "truth_unprofiled" / "h100"
HOST_CRITICAL = ("host-bound", "sync-bound")
UNIT_LOOPS = Calibration(scale=1.0, per_step_us=0.0)


def point(truth_path: Path) -> dict[str, Any]:
    """One trace's per-step cost (traced − measured, µs) and the unit-loop table's prediction (µs)."""
    truth = json.loads(truth_path.read_text())
    trace = truth_path.parent / truth["trace"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = analyze(trace)[0].frames["unprofiled"]
        launch_us = median_launch_us(read_trace_tables(trace))
    counts = u.rename(columns={COUNTS[k]: k for k in KINDS})
    # the setting analyze used: its table's line starts with that setting's words (the longest that fits)
    setting = max((k for k, words in SETTINGS.items() if str(u["setting"].iloc[0]).startswith(words)),
                  key=lambda k: len(SETTINGS[k]))
    table_us = float(removed_ns(counts, setting, UNIT_LOOPS).mean()) / 1e3
    traced_us = float(u["span_ns"].mean()) / 1e3
    measured_us = 1e3 * truth["unprofiled_step"]["median_ms"]
    return {"trace": f"{truth_path.parent.name}/{truth['name']}", "bound": truth["bound"], "setting": setting,
            "steps": len(u), "counts": {k: float(counts[k].mean()) for k in KINDS}, "traced_us": traced_us,
            "measured_us": measured_us, "cost_us": traced_us - measured_us, "table_us": table_us,
            "launch_us": launch_us}


def reference_launch_us(points: list[dict[str, Any]]) -> float:
    """The fitted traces' host speed: the median of their median kernel-launch calls (µs)."""
    return float(np.median([p["launch_us"] for p in points if p["launch_us"] is not None]))


def speed(p: dict[str, Any], reference: float) -> float:
    """A trace's host against the fit's, as ``unprofiled.host_speed`` takes it."""
    return 1.0 if p["launch_us"] is None else float(np.clip(p["launch_us"] / reference, 0.25, 4.0))


def fit(points: list[dict[str, Any]], reference: float) -> tuple[float, float]:
    """(per_step_us, scale) by least squares on the relative error, each trace's prediction × its host speed."""
    cost = np.array([p["cost_us"] for p in points])
    speeds = np.array([speed(p, reference) for p in points])
    design = np.c_[speeds * [p["counts"]["launch"] > 0 for p in points], speeds * np.array([p["table_us"] for p in points])] / cost[:, None]
    (per_step, scale), *_ = np.linalg.lstsq(design, np.ones(len(points)), rcond=None)
    return float(per_step), float(scale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path, default=[FITTING])
    parser.add_argument("--out", type=Path, help="write the fit here (JSON)")
    args = parser.parse_args(argv)
    every = [point(t) for f in args.folders for t in sorted(f.glob("*.truth.json"))]
    used = [p for p in every if p["bound"] in HOST_CRITICAL]
    if len(used) < 3:
        parser.error("fewer than 3 host-critical traces with truth to fit on")
    reference = reference_launch_us(used)
    per_step, scale = fit(used, reference)
    print(f"fit on {len(used)} of {len(every)} traces: cost per step = host speed × ({per_step:.1f} µs + "
          f"{scale:.3f} × table); host speed = median kernel-launch call / {reference:.2f} µs")
    print(f"{'trace':26} {'setting':10} {'cost µs':>9} {'table µs':>9} {'fit µs':>9} {'resid':>7} {'loo':>7}")
    for p in every:
        eager = p["counts"]["launch"] > 0  # the per-step cost only with eager launches (unprofiled.removed_ns)
        p["fit_us"] = speed(p, reference) * (per_step * eager + scale * p["table_us"])
        p["residual"] = p["fit_us"] / p["cost_us"] - 1 if p["cost_us"] > 0 else None
        if p in used:
            others = fit([q for q in used if q is not p], reference)
            p["loo_residual"] = speed(p, reference) * (others[0] + others[1] * p["table_us"]) / p["cost_us"] - 1
        loo = f"{p['loo_residual']:+7.1%}" if "loo_residual" in p else "   (not fitted: " + p["bound"] + ")"
        resid = f"{p['residual']:+7.1%}" if p["residual"] is not None else "    n/a"
        print(f"{p['trace']:26} {p['setting']:10} {p['cost_us']:9.1f} {p['table_us']:9.1f} {p['fit_us']:9.1f} "
              f"{resid} {loo}")
    if args.out:
        args.out.write_text(json.dumps({"per_step_us": round(per_step, 1), "scale": round(scale, 3),
                                        "reference_launch_us": round(reference, 2),
                                        "model": "cost per step = host speed x (per_step_us + scale x sum(count x "
                                                 "unit-loop cost)); host speed = the trace's median kernel-launch "
                                                 "call / reference_launch_us",
                                        "fitted_on": [p["trace"] for p in used], "points": every}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
