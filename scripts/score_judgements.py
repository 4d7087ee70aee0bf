"""Score fuseprof's judgements against labelled truth, and list every miss.

    python scripts/score_judgements.py [--labels LABELS.json] [--truth FOLDER] [--verbose]

Truth comes from two places: the shared traces' ``labels.json`` (``../shared/thirdparty-traces/``: what a
careful reader derived from each trace's kernels, shapes, modules and the models' code; a verdict two readings
could decide differently lists both, and either counts) and the ``*.truth.json`` files beside the H200
captures of ``tests/fixtures/truth/`` (models written for it: their truth is known by construction). Scored:

    audit         each catalogue entry's verdict (fused / partly fused / not fused / not present)
    idle          the run's bound as traced (the verdict section's ``bound_as_traced``: GPU-bound, host-bound,
                  sync-bound, data-bound, ...), not ``bound``: see below
    classes       the opportunity classes a capture's truth says are there, or are not
    straggler     per labelled rank pair: the rank named (none where there is no straggler), and its cause

Prints one line per kind (right of total) and the total; ``--verbose`` lists every miss with the truth's why.

Why the idle truth is compared with ``bound_as_traced``: both sources label the trace as it was recorded, with the
profiler in it. labels.json's idle verdicts were read off the raw traces (each ``why`` quotes the profiled step's
own busy and idle times, e.g. "ProfilerStep#6: busy 31,905.473 of 34,892.419 us span"; xdit_sd_3.5's reading
"busy is the largest term"), and no un-profiled time of those public traces is known; the H200 truth files' idle
verdicts (scripts/capture_truth_set.py, by construction) state no rule, and their graph replays' "GPU-bound" or
"other idle" (62-71% busy as traced) is the largest-term reading of the profiled steps, not an 80%-busy one. The
verdict's ``bound`` is the estimate without the profiler, named by the rule of the un-profiled truth
(``tests/fixtures/truth_unprofiled``: GPU-bound at >= 80% busy), and is scored against that truth by
scripts/score_unprofiled.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT.parent / "shared" / "thirdparty-traces" / "labels.json"
TRUTH = ROOT / "tests" / "fixtures" / "truth"

# Label wordings -> the verdict section's words (``fuseprof.analysis.running.sections.verdict``)
_IDLE = {"host-bound (input pipeline / DataLoader)": {"host-bound", "data-bound"}, "data loading": {"data-bound"},
         "other (event wait)": {"event wait", "other idle"}, "mixed: GPU-bound with a large host-bound share": {"GPU-bound"}}
_CAUSES = {"host-side launch delay": {"host launched late"}}  # label wordings -> fuseprof.analysis.facts.ranks' causes


@dataclass
class Case:
    """One trace (or a graph replay with its capture) and what is true of it."""

    name: str
    paths: list[Path]
    audit: dict[str, set[str]] = field(default_factory=dict)
    idle: set[str] = field(default_factory=set)
    classes_present: set[str] = field(default_factory=set)
    classes_absent: set[str] = field(default_factory=set)
    why: dict[str, str] = field(default_factory=dict)


@dataclass
class Miss:
    kind: str
    case: str
    item: str
    got: Any
    truth: Any
    why: str = ""


def _accepted(entry: dict[str, Any]) -> set[str]:
    return {entry["verdict"], *(r["verdict"] for r in entry.get("readings", []))}


def shared_cases(labels: Path) -> tuple[list[Case], dict[str, Any]]:
    data = json.loads(labels.read_text())
    folder = labels.parent
    cases = []
    for name, trace in data["traces"].items():
        path = folder / trace["path"] if (folder / trace["path"]).exists() else folder / "h200_2gpu" / trace["path"]
        paths = [path] + ([folder / trace["graph_capture_pair"]] if "graph_capture_pair" in trace else [])
        idle = trace.get("idle_verdict") or {}
        verdicts = set() if idle.get("verdict") in (None, "n/a") else _accepted(idle)
        cases.append(Case(name, paths, {e: _accepted(a) for e, a in trace["audit"].items()},
                          {v for text in verdicts for v in _IDLE.get(text, {text})},
                          why={**{e: a["why"] for e, a in trace["audit"].items()}, "idle": idle.get("why", "")}))
    return cases, data["pairs"]


def own_cases(folder: Path) -> list[Case]:
    cases = []
    for truth_path in sorted(folder.rglob("*.truth.json")):
        truth = json.loads(truth_path.read_text())
        # beside it, or where its "trace" says (a committed bundle, from the checkout's root)
        trace = ROOT / truth["trace"] if "trace" in truth else \
            truth_path.with_name(truth_path.name.replace(".truth.json", ".json.gz"))
        # a replay's captures: capture-X beside replay-X, or every capture beside it (replay-both)
        captures = sorted(trace.parent.glob("capture-*.json.gz")) if trace.name.startswith("replay-") else []
        mine = [c for c in captures if c.name == trace.name.replace("replay-", "capture-")]
        paths = [trace] + (mine or captures)
        present, absent = set(truth.get("classes_present", [])), set(truth.get("classes_absent", []))
        for key, cls in (("horizontal_gemms", "horizontal GEMM"), ("eager_attention", "eager attention → SDPA")):
            if key in truth:  # the model's sibling GEMMs / its eager attention: that class found, or not
                (present if truth[key] else absent).add(cls)
        cases.append(Case(f"{truth_path.parent.name}/{trace.name}" if truth_path.parent != folder else trace.name, paths,
                          {e: set(v) for e, v in truth.get("audit", {}).items()},
                          {w for text in truth.get("idle_verdict", []) for w in _IDLE.get(text, {text})},
                          present, absent, why={"all": truth.get("what", "")}))
    return cases


def score_case(case: Case, result: Any) -> tuple[dict[str, list[bool]], list[Miss]]:
    """Per kind, whether each judgement of ``result`` (a TraceAnalysis) matches the case's truth."""
    hits: dict[str, list[bool]] = defaultdict(list)
    misses: list[Miss] = []
    verdicts = dict(zip(result.audit["fusion"], result.audit["verdict"])) if not result.audit.empty else {}
    for entry, accepted in case.audit.items():
        got = verdicts.get(entry, "(no such entry)")
        hits["audit"].append(got in accepted)
        if got not in accepted:
            misses.append(Miss("audit", case.name, entry, got, sorted(accepted), case.why.get(entry, case.why.get("all", ""))))
    if case.idle:
        got = str(result.verdict["bound_as_traced"].iloc[0])  # the labels read the trace as recorded (above)
        hits["idle"].append(got in case.idle)
        if got not in case.idle:
            misses.append(Miss("idle", case.name, "bound_as_traced", got, sorted(case.idle), case.why.get("idle", "")))
    found = set(result.fusion["class"]) if not result.fusion.empty else set()
    for cls in case.classes_present | case.classes_absent:
        right = (cls in found) == (cls in case.classes_present)
        hits["classes"].append(right)
        if not right:
            misses.append(Miss("classes", case.name, cls, "found" if cls in found else "not found",
                               "present" if cls in case.classes_present else "absent"))
    return hits, misses


def score_pairs(pairs: dict[str, Any], folder: Path) -> tuple[list[bool], list[Miss]]:
    from fuseprof.analysis import analyze
    from fuseprof.analysis.running.sections import build_across

    hits, misses = [], []
    for name, pair in pairs.items():
        if "straggler" not in pair:
            continue
        results = analyze([folder / "h200_2gpu" / f for f in pair["files"]], workers=1)
        culprits = build_across(results)["stragglers"]
        truth = pair["straggler"]
        named = None if culprits.empty else int(culprits["last_rank"].iloc[0])
        hits.append(named == truth["rank"])
        if named != truth["rank"]:
            misses.append(Miss("straggler", name, "rank", named, truth["rank"], truth["why"]))
        if truth["rank"] is not None and named == truth["rank"]:  # the cause, of the right rank
            cause = str(culprits["cause"].iloc[0])
            hits.append(cause in _CAUSES.get(truth["cause"], {truth["cause"]}))
            if not hits[-1]:
                misses.append(Miss("straggler", name, "cause", cause, truth["cause"], truth["why"]))
    return hits, misses


def score(labels: Path = LABELS, truth: Path = TRUTH) -> tuple[dict[str, list[bool]], list[Miss]]:
    from fuseprof.analysis import analyze

    hits: dict[str, list[bool]] = defaultdict(list)
    misses: list[Miss] = []
    cases = own_cases(truth)
    pairs: dict[str, Any] = {}
    if labels.is_file():
        shared, pairs = shared_cases(labels)
        cases = shared + cases
    for case in cases:
        (result,) = analyze(case.paths, workers=1)
        got, missed = score_case(case, result)
        for kind, values in got.items():
            hits[kind] += values
        misses += missed
    if pairs:
        got_pairs, missed = score_pairs(pairs, labels.parent)
        hits["straggler"] += got_pairs
        misses += missed
    return hits, misses


def report(hits: dict[str, list[bool]], misses: list[Miss], verbose: bool) -> str:
    lines = [f"{kind:10s} {sum(v)}/{len(v)} right ({100 * sum(v) / len(v):.1f}%)" for kind, v in hits.items() if v]
    every = [x for v in hits.values() for x in v]
    lines.append(f"{'total':10s} {sum(every)}/{len(every)} right ({100 * sum(every) / len(every):.1f}%)")
    if verbose:
        lines += [f"MISS {m.kind} {m.case} :: {m.item}: got {m.got!r}, truth {m.truth!r}" + (f" — {m.why[:160]}" if m.why
                                                                                             else "") for m in misses]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--truth", type=Path, default=TRUTH)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    hits, misses = score(args.labels, args.truth)
    print(report(hits, misses, args.verbose))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
