"""Score the run's bound as traced, per trace and per step, against the labels of ``labels_turn4.json``.

    python scripts/score_bound.py [--labels PATH] [--verbose]

The labels (``../shared/thirdparty-traces/labels_turn4.json``, written from the raw traces before fuseprof ran on
them) state their rule in ``meta.fields.idle_verdict``: per ProfilerStep (else the whole window), the gaps in the
union of the GPU intervals of the step's events, each gap wholly 'sync' when a synchronising call is in progress
at its start, 'launch' when the next event's launch call starts at or after its start, else 'other'; the verdict
is the largest of busy, launch, sync and other. fuseprof's ``bound_as_traced`` (the verdict table) and the idle
table's ``verdict_as_traced`` per step are scored; beside them the split verdict, profiler included (the idle
table's ``verdict`` per step, and over the trace ``idle.verdict_of`` of its steps' sums) and the verdict section's
``bound`` (without the profiler: what advice reads). A trace labelled "mixed (...)" counts right with any verdict
it names, and one labelled "n/a" is not scored. Two gradings: strict (the label's own ``verdict``) and the labels'
(LABELS_turn4.md, "How to grade": where ``debatable`` is true, any verdict its ``readings`` name is right too; a
reading that names steps, "step #3", holds for those steps only). Label wordings are read by ``verdicts_in``.
Prints one line per trace, then the totals.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT.parent / "shared" / "thirdparty-traces" / "labels_turn4.json"
# The verdict words, each with the label wordings that name it ("comm-wait", "comm/host-bound", TraceLens's
# "MEMORY_ALLOC", "sync-bound (allocator)")
_WORDS = {"GPU-bound": r"GPU-bound", "host-bound": r"host-bound", "sync-bound": r"sync-bound",
          "other idle": r"other idle", "data-bound": r"data loading|data-bound",
          "communication-bound": r"communication|\bcomm\b|comm[-/]", "allocator": r"allocator|MEMORY_ALLOC"}


def verdicts_in(label: str) -> set[str]:
    """The verdict words a label names ('sync-bound (allocator)' -> sync-bound and allocator; 'mixed (step #2
    GPU-bound, step #3 host-bound)' -> both; 'host-bound / comm-wait' -> host-bound and communication-bound)."""
    return {word for word, pattern in _WORDS.items() if re.search(pattern, label, re.IGNORECASE)}


def accepted(idle: dict, step: str | None = None, readings: bool = True) -> set[str]:
    """The verdicts right for a trace (``step`` None) or one of its steps: its label's, and where the label is
    debatable and ``readings`` is on, its readings' (those naming steps only for those steps)."""
    label = (idle.get("per_step") or {}).get(step, {}).get("verdict", "") if step else idle.get("verdict", "n/a")
    out = verdicts_in(str(label))
    if readings and idle.get("debatable"):
        for reading in idle.get("readings", []):
            named = re.findall(r"step #(\d+)", str(reading.get("reading", "")))
            if not named or (step is not None and step.rsplit("#", 1)[-1] in named):
                out |= verdicts_in(str(reading.get("verdict", "")))
    return out


def split_over(idle: pd.DataFrame) -> str:
    """The split verdict of the trace, profiler included: ``idle.verdict_of`` the sums of its steps' rows (the
    gaps between steps only where it has no steps)."""
    from fuseprof.analysis.facts.idle import TERMS, verdict_of

    rows = idle[idle["step"].astype(str) != "(between steps)"] if len(idle) > 1 else idle
    return verdict_of({k: float(rows[k].sum()) for k in TERMS if k in rows}) if len(rows) else "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    from fuseprof.analysis import analyze

    labels = json.loads(args.labels.read_text())["traces"]
    folder = args.labels.parent
    scores: dict[str, list[int]] = {}  # name -> [right, total]

    def score(name: str, got: str, right: set[str]) -> bool:
        tally = scores.setdefault(name, [0, 0])
        tally[0] += got in right
        tally[1] += 1
        return got in right

    for name, label in labels.items():
        idle = label.get("idle_verdict") or {}
        if not verdicts_in(str(idle.get("verdict", "n/a"))):
            continue
        result = analyze(folder / name)[0]
        verdict, table = result.frames["verdict"].iloc[0], result.frames["idle"]
        got, bound, split = str(verdict["bound_as_traced"]), str(verdict["bound"]), split_over(table)
        for grading, readings in (("strict", False), ("labels", True)):
            right = accepted(idle, readings=readings)
            for kind, value in (("traced", got), ("split", split), ("bound", bound)):
                score(f"{kind} {grading} traces", value, right)
        rows = table.set_index(table["step"].astype(str))
        steps_right = 0
        for step in (idle.get("per_step") or {}):
            for grading, readings in (("strict", False), ("labels", True)):
                right = accepted(idle, step, readings)
                for kind, column in (("traced", "verdict_as_traced"), ("split", "verdict")):
                    mine = str(rows[column].get(step, "missing"))
                    ok = score(f"{kind} {grading} steps", mine, right)
                    steps_right += ok and kind == "traced" and grading == "strict"
                    if args.verbose and not ok:
                        print(f"    {step} ({kind}, {grading}): got {mine}, right: {sorted(right)}")
        print(f"{'ok  ' if got in accepted(idle, readings=False) else 'MISS'} {name}: got {got} (split: {split}; "
              f"bound: {bound}), label {idle.get('verdict')}; steps {steps_right}/{len(idle.get('per_step') or {})}")
    for kind, what in (("traced", "bound as traced"), ("split", "the split verdict, profiler included (idle table)"),
                       ("bound", "the verdict section's bound (without the profiler: what advice reads)")):
        for grading in ("strict", "labels"):
            traces, steps = scores.get(f"{kind} {grading} traces", [0, 0]), scores.get(f"{kind} {grading} steps")
            per_step = f", {steps[0]}/{steps[1]} steps" if steps else ""
            print(f"{what}, {grading}: {traces[0]}/{traces[1]} traces{per_step}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
