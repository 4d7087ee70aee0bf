"""The step-level what-if's closed loop on the captured A/B pairs (tests/fixtures/whatif/, captured by
scripts/capture_whatif_pairs.py on an H200): for each pair, B's step predicted from A's trace and the plan B
applies, beside B's traced step and B's step measured apart from the profiler.

    python scripts/whatif_pairs.py [--markdown]

Columns: A's and B's median traced step (µs), the prediction in the trace's time (A's graph replayed with the
plan), its error against B's traced step; A's and B's measured step (ms), the prediction at the measured scale
(the host's time scaled until A's unchanged replay equals A's measured step, then the plan replayed:
``fuseprof.analysis.paths.whatif.calibrated_scale``) and its error against B's measured step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "whatif"


def _medians(path: Path, plan: str | None = None, measured_ms: float | None = None) -> dict[str, float]:
    """The median traced step of ``path`` and, with ``plan`` (a --fuse/--graph option), the replayed one, in the
    trace's time and (with ``measured_ms``) at the measured scale, in µs."""
    from fuseprof.analysis import analyze
    from fuseprof.analysis.paths.path import result_graphs, whatif_table
    from fuseprof.parse.store import default_store

    result = analyze([path])[0]
    tables = default_store().tables(path)[0]
    option, _, value = (plan or "").partition(" ")
    frame = whatif_table(result_graphs(result, tables), result.fusion, tables,
                         fuse=[value] if option == "--fuse" else [], graph_regions=[value] if option == "--graph" else [],
                         step_time_ns=measured_ms * 1e6 if measured_ms is not None else None,
                         compile_regions=[value] if option == "--compile" else [])
    return {c: statistics.median(frame[c]) / 1e3 for c in frame.columns if c.endswith("_ns")}


def pair_rows(folder: Path = HERE) -> list[dict[str, object]]:
    """One row per pair of ``folder``/pairs.json."""
    rows = []
    for p in json.loads((folder / "pairs.json").read_text())["pairs"]:
        a = _medians(folder / p["a"], p["plan"], p["measured_a_ms"])
        b_us = _medians(folder / p["b"])["span_ns"]
        scaled = a["scaled_after_ns"] / 1e3
        rows.append({"pair": p["pair"], "plan": p["plan"], "A traced µs": round(a["span_ns"], 1),
                     "B predicted µs": round(a["after_ns"], 1), "B traced µs": round(b_us, 1),
                     "error vs traced %": round(100 * (a["after_ns"] - b_us) / b_us, 1),
                     "A measured ms": p["measured_a_ms"], "B predicted ms": round(scaled, 4),
                     "B measured ms": p["measured_b_ms"],
                     "error vs measured %": round(100 * (scaled - p["measured_b_ms"]) / p["measured_b_ms"], 1)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", action="store_true", help="a Markdown table (docs/whatif.md)")
    args = parser.parse_args()
    import pandas as pd

    frame = pd.DataFrame(pair_rows())
    if args.markdown:
        print("| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns))
        for row in frame.itertuples(index=False):
            print("| " + " | ".join(str(v) for v in row) + " |")
    else:
        print(frame.to_string(index=False))
    for column in ("error vs traced %", "error vs measured %"):
        print(f"median |{column}|: {frame[column].abs().median():.1f}%", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
