"""Score the run's bound as traced, per trace and per step, against the labels of ``labels_turn4.json``.

    python scripts/score_bound.py [--labels PATH] [--verbose]

The labels (``../shared/thirdparty-traces/labels_turn4.json``, written from the raw traces before fuseprof ran on
them) state their rule in ``meta.fields.idle_verdict``: per ProfilerStep (else the whole window), the gaps in the
union of the GPU intervals of the step's events, each gap wholly 'sync' when a synchronising call is in progress
at its start, 'launch' when the next event's launch call starts at or after its start, else 'other'; the verdict
is the largest of busy, launch, sync and other. fuseprof's ``bound_as_traced`` (the verdict table) and the idle
table's ``verdict_as_traced`` per step are scored (the split ``bound`` and ``verdict`` beside, for comparison); a trace labelled "mixed (...)" counts right with any verdict it
names, and one labelled "n/a" is not scored. Prints one line per trace, then the totals.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT.parent / "shared" / "thirdparty-traces" / "labels_turn4.json"
_WORDS = ("GPU-bound", "host-bound", "sync-bound", "other idle", "data loading", "communication")


def verdicts_in(label: str) -> set[str]:
    """The verdict words a label names ('sync-bound (allocator)' -> sync-bound; 'mixed (step #2 GPU-bound, step #3
    host-bound)' -> both)."""
    return {w for w in _WORDS if re.search(re.escape(w), label, re.IGNORECASE)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    from fuseprof.analysis import analyze

    labels = json.loads(args.labels.read_text())["traces"]
    folder = args.labels.parent
    trace_hits = trace_total = step_hits = step_total = split_hits = split_steps = 0
    for name, label in labels.items():
        idle = label.get("idle_verdict") or {}
        truth = verdicts_in(str(idle.get("verdict", "n/a")))
        if not truth:
            continue
        result = analyze(folder / name)[0]
        got = str(result.frames["verdict"]["bound_as_traced"].iloc[0])
        trace_total += 1
        trace_hits += got in truth
        split = str(result.frames["verdict"]["bound"].iloc[0])  # the split verdict advice reads, beside
        split_hits += split in truth
        per_step = idle.get("per_step") or {}
        table = result.frames["idle"].set_index("step")
        right = 0
        for step, row in per_step.items():
            step_total += 1
            mine = str(table["verdict_as_traced"].get(step, "missing")) if step in table.index else "missing"
            ok = mine in verdicts_in(str(row.get("verdict", "")))
            right += ok
            step_hits += ok
            split_steps += (str(table["verdict"].get(step, "missing")) if step in table.index else "missing") in \
                verdicts_in(str(row.get("verdict", "")))
            if args.verbose and not ok:
                print(f"    {step}: got {mine}, label {row.get('verdict')}")
        print(f"{'ok  ' if got in truth else 'MISS'} {name}: got {got} (split: {split}), label {idle.get('verdict')}; "
              f"steps {right}/{len(per_step)}")
    print(f"bound as traced: {trace_hits}/{trace_total} traces, {step_hits}/{step_total} steps")
    print(f"the split bound (gaps split at the launch call; what advice reads), by the same labels: {split_hits}/"
          f"{trace_total} traces, {split_steps}/{step_total} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
