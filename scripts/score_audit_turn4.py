"""Score the audit on the score-only set: ``fresh4/`` and ``h200-turn4/`` against ``labels_turn4.json``.

    python scripts/score_audit_turn4.py [--labels PATH] [--verbose]

The labels (``../shared/thirdparty-traces/labels_turn4.json``, written from the raw traces and the models' code before
fuseprof ran on them; ``LABELS_turn4.md`` reads them) give each trace's catalogue verdicts; a verdict is right when it
is the label's ``verdict`` or, for a debatable one, any of its ``readings``. Each column is scored against the
catalogue entry of its name; ``cross-entropy``, where the catalogue has none (before 15e4cb9), against ``linear
cross-entropy``. A rank
set's verdicts (``rank_sets``: PARAM's 8 ranks, the 2-of-128 pair) count once per entry, right when every rank's
audit is. The graph replay is scored twice: alone, and with its capture trace (``--graph-capture``); the pooled
score is printed both ways. These traces are never used to write rules (``labels.json``'s are): this script only
reads them.

Prints one line per trace (right / scored, then each miss), then the pooled totals.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT.parent / "shared" / "thirdparty-traces" / "labels_turn4.json"
ENTRY = {"cross-entropy": "linear cross-entropy"}  # a label's column -> the entry scored where none has its name
REPLAY, CAPTURE = "h200-turn4/decode_graph_replay.json.gz", "h200-turn4/decode_graph_capture.json.gz"


@dataclass
class Row:
    """One scored trace (or rank set): its verdicts right, scored, and the misses (entry, got, accepted)."""

    name: str
    right: int
    scored: int
    misses: list[tuple[str, str, list[str]]]


def accepted(label: dict[str, Any]) -> set[str]:
    """The verdicts a label accepts: its own, and where it is debatable, every reading's."""
    return {label["verdict"], *(r["verdict"] for r in label.get("readings", []) if label.get("debatable"))}


def verdicts_of(paths: list[Path], capture: Path | None = None) -> list[dict[str, str]]:
    """Per trace of ``paths``, the audit's verdict per catalogue entry; a trace fuseprof refuses as holding no GPU
    work (a CPU-only or counters-only capture: one clear error) has no fusion present, and reads so (an empty dict)."""
    from fuseprof.analysis import analyze
    from fuseprof.errors import TraceFormatError

    try:
        results = analyze(paths, workers=1, graph_capture=capture)
    except TraceFormatError as exc:
        if not any(words in str(exc) for words in ("no GPU kernels", "no kernel events")):
            raise
        return [{}] * len(paths)
    return [dict(zip(r.audit["fusion"], r.audit["verdict"])) if not r.audit.empty else {} for r in results]


def score(name: str, labels: dict[str, Any], per_rank: list[dict[str, str]]) -> Row:
    """A trace's (or rank set's) row: each labelled entry right when every rank's verdict is accepted."""
    misses, right = [], 0
    for entry, label in labels.items():
        if entry == "same_as":
            continue
        ok = accepted(label)
        got = [verdicts.get(entry, verdicts.get(ENTRY.get(entry, ""), "(no such entry)")) if verdicts else "not present"
               for verdicts in per_rank]
        if all(g in ok for g in got):
            right += 1
        else:
            misses.append((entry, "/".join(sorted(set(got))), sorted(ok)))
    return Row(name, right, right + len(misses), misses)


def rows(labels_path: Path) -> tuple[list[Row], Row]:
    """Every scored row (the replay alone among them), and the replay scored with its capture."""
    data = json.loads(labels_path.read_text())
    folder = labels_path.parent
    out, with_capture = [], None
    for name, trace in data["traces"].items():
        audit = trace.get("audit") or {}
        if "same_as" in audit:
            continue  # a rank of a set: scored with the set
        out.append(score(name, audit, verdicts_of([folder / name])))
        if name == REPLAY:
            with_capture = score(f"{name} + capture", audit, verdicts_of([folder / REPLAY], folder / CAPTURE))
    for name, ranks in data.get("rank_sets", {}).items():
        out.append(score(name, ranks["audit"], verdicts_of([folder / f for f in ranks["files"]])))
    assert with_capture is not None, f"{REPLAY} is not in {labels_path}"
    return out, with_capture


def report(scored: list[Row], with_capture: Row, verbose: bool) -> str:
    lines = []
    for row in [*scored, with_capture]:
        lines.append(f"{row.right:3d}/{row.scored:<3d} {row.name}")
        if verbose:
            lines += [f"          MISS {entry}: got {got!r}, accepted {ok}" for entry, got, ok in row.misses]
    for label, pool in (("replay alone", scored),
                        ("replay with its capture", [with_capture if r.name == REPLAY else r for r in scored])):
        right, total = sum(r.right for r in pool), sum(r.scored for r in pool)
        lines.append(f"pooled ({label}): {right}/{total} right ({100 * right / total:.1f}%)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    scored, with_capture = rows(args.labels)
    print(report(scored, with_capture, args.verbose))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
