"""Score fuseprof's bound and first advice against truth measured apart from the profiler (issue 59's "Done when").

    python scripts/score_unprofiled.py [FOLDER...] [--json PATH]

FOLDER (default: every folder under tests/fixtures/truth_unprofiled/) holds plain torch.profiler captures with
``<name>.truth.json`` beside each, written by scripts/capture_unprofiled_truth.py before fuseprof read the trace.
For each, ``fuseprof analyze TRACE --format json`` is run and read:

- **bound**: the verdict's ``bound`` (the estimate without the profiler, what advice acts on) against the truth's
  ``bound`` (GPU-bound when the un-profiled GPU busy is >= 80% of the un-profiled step; else the largest idle cause);
  ``bound_as_traced`` is shown beside, not scored (it answers for the trace's own gaps).
- **first advice**: the first "worth doing" row is mapped to the candidate change it names (CUDA graphs, compile,
  fused optimizer, syncs removed, syncs removed and then CUDA graphs, data loading, a fusion; the host's work between graph replays, whose measured
  saving is at most the un-profiled step's idle) and its saving per step (``saving_ns`` over the window's
  steps) compared with the un-profiled saving the truth measured for that change: right when within 25% of it, or
  within the measured spread where that is wider. Advice for a change the truth marks ``n/a`` (graphs on a
  graph replay or on a loop calling ``.item()``, a fused optimizer on a fused one) is wrong; no advice is right when
  no measured change saves more than 5% of the step or its spread. A fusion row is compared with the fusion the
  truth measured (its ``fusion_is``, else every eager RMSNorm as F.rms_norm), which may not be the chain advised:
  the table says which; where the truth also measured ``fusion_norm`` (every RMSNorm as F.rms_norm beside another
  fusion), an RMSNorm chain's row is compared with that.

``--calibration PATH`` also writes, per capture, the calibration table (issue 59's closing note): the step traced,
without the profiler as fuseprof estimates it (with its range) and as measured (median, p10-p90), the profiler's cost
per step predicted (traced − estimate) against measured (traced − measured), and for every change the truth measured,
the saving fuseprof's "worth doing" rows predict for it (the first row naming that change; "-" where none of the rows
shown names it; a fusion row, as the score reads it, may not be the fusion the truth measured) against the measured
saving, the change each row shown names (a graph replay must have no ``graphs`` among them), and, where the truth
recorded it, the host's speed around the capture against the timed rounds (``host_drift``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TRUTH = ROOT / "tests" / "fixtures" / "truth_unprofiled"
# the first words that name a change, checked in order on the advice's "what"
# a fusion row (its text begins "fuse:") is checked first: its ops' names hold any word ("_backward_data", "sync")
CHANGES = (("fusion", ("fuse:",)), ("host_idle", ("between graph replays",)),
           ("graphs_after_no_syncs", ("synchronisations, then",)),
           ("graphs", ("cuda graph", "host-bound gaps", "reduce-overhead")),
           ("no_syncs", ("sync",)), ("data_prefetched", ("data", "loader")),
           ("fused_optimizer", ("optimizer",)), ("compile", ("compile",)))
NORM_OPS = ("aten::pow", "aten::mean", "aten::rsqrt")  # an eager RMSNorm's chain


# the truth's words for a bound and fuseprof's for the same one (the truth files are never edited to match)
SAME_BOUND = {"data loading": "data-bound"}


def same_bound(truth: str, got: str | None) -> bool:
    return SAME_BOUND.get(truth, truth) == SAME_BOUND.get(str(got), str(got))


def change_of(what: str, truth: dict[str, Any] | None = None) -> str | None:
    """The candidate change an advice row names; a fusion of an RMSNorm chain (its ops hold pow, mean and rsqrt) is
    the truth's ``fusion_norm`` where it measured that apart from its ``fusion`` (prefill_eager: SDPA)."""
    text = what.lower()
    change = next((change for change, words in CHANGES if any(w in text for w in words)), None)
    norm = change == "fusion" and all(op in text for op in NORM_OPS)
    return "fusion_norm" if norm and truth is not None and "fusion_norm" in truth["changes"] else change


def analyze(trace: Path) -> dict[str, Any]:
    """fuseprof's JSON for one trace (the CLI, as a user runs it)."""
    done = subprocess.run([sys.executable, "-c", "import sys; from fuseprof.cli import main; sys.exit(main())",
                           "analyze", str(trace), "--format", "json"],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"rc {done.returncode}")
    data = json.loads(done.stdout)
    return next(v for k, v in data.items() if k != "schema_version" and isinstance(v, dict))


def steps_in(result: dict[str, Any]) -> int:
    named = [s for s in result.get("steps") or [] if not str(s.get("step", "")).startswith("(")]
    return max(len(named), 1)


def score_advice(truth: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    step_ms = truth["unprofiled_step"]["median_ms"]
    advice = result.get("worth_doing") or []
    measured = {c: v for c, v in truth["changes"].items() if isinstance(v, dict)}
    if not advice:
        best = max(measured.values(), key=lambda v: v["saving_ms"], default=None)
        ok = best is None or best["saving_ms"] <= max(0.05 * step_ms, best["saving_spread_ms"])
        return {"advice": "(none)", "change": "", "claimed_ms": 0.0, "measured_ms": best and best["saving_ms"],
                "ok": ok, "why": "no advice" + ("" if ok else f": {best and best['variant']} saves more")}
    first = advice[0]
    claimed = float(first["saving_ns"]) / 1e6 / steps_in(result)
    change = change_of(str(first["what"]), truth)
    row = {"advice": str(first["what"])[:70], "change": change or "?", "claimed_ms": claimed}
    entry = truth["changes"].get(change or "", "not a candidate change of this workload")
    if change == "host_idle":  # the host's work between replays: at most all the idle of the un-profiled step
        base = truth["unprofiled_step"]
        entry = {"saving_ms": truth["idle_ms"], "saving_spread_ms": base["p90_ms"] - base["p10_ms"]}
    if not isinstance(entry, dict):
        return {**row, "measured_ms": None, "ok": False, "why": str(entry)[:60]}
    saving, spread = entry["saving_ms"], entry["saving_spread_ms"]
    allowed = max(0.25 * abs(saving), spread)
    ok = abs(claimed - saving) <= allowed
    return {**row, "measured_ms": saving, "allowed_ms": allowed, "ok": ok,
            "why": f"{claimed / saving:.2f}x the measured saving" if saving > 0 else "the change saves nothing"}


def calibration(truth: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Predicted against measured, per step (ms): the step without the profiler (mean over the ``unprofiled``
    table's steps, with its range) and each measured change's saving (the first ``worth_doing`` row naming it)."""
    steps = [r for r in result.get("unprofiled") or [] if r.get("span_ns") is not None]

    def mean(key: str) -> float:
        return sum(float(r[key]) for r in steps) / len(steps) / 1e6 if steps else float("nan")

    predicted: dict[str, float] = {}
    advised = [change_of(str(row["what"]), truth) or "?" for row in result.get("worth_doing") or []]
    for row, change in zip(result.get("worth_doing") or [], advised):
        if change not in predicted:
            predicted[change] = float(row["saving_ns"]) / 1e6 / steps_in(result)
    measured = {c: v for c, v in truth["changes"].items() if isinstance(v, dict)}
    base = truth["unprofiled_step"]
    return {"traced_ms": mean("span_ns"), "estimate_ms": mean("step_unprofiled_ns"),
            "estimate_low_ms": mean("step_unprofiled_low_ns"), "estimate_high_ms": mean("step_unprofiled_high_ns"),
            "source": str(steps[0]["source"]).split(":")[0] if steps else "", "advised": advised,
            "measured_ms": base["median_ms"], "measured_p10_ms": base["p10_ms"], "measured_p90_ms": base["p90_ms"],
            "changes": {c: {"predicted_ms": predicted.get(c), "measured_ms": v["saving_ms"],
                            "spread_ms": v["saving_spread_ms"]} for c, v in measured.items()}}


def host_drift(truth: dict[str, Any]) -> str:
    """The host's speed around the capture over its median across the timed rounds (``host_reference_ms``'s fixed
    work: above 1, the host was slower while the trace was taken), for each reference; blank where not recorded.
    Diagnostic only: the score compares with the measured truth as it is."""
    ref = truth.get("host_reference_ms") or {}
    if not ref.get("rounds") or not ref.get("before_capture"):
        return ""
    around = ref["before_capture"] + ref.get("after_capture", [])
    return ", ".join(f"{kind} {statistics.mean(r[kind] for r in around) / statistics.median(r[kind] for r in ref['rounds']):.2f}"
                     for kind in ref["rounds"][0])


def score(truth_path: Path) -> dict[str, Any]:
    truth = json.loads(truth_path.read_text())
    result = analyze(truth_path.parent / truth["trace"])
    verdict = (result.get("verdict") or [{}])[0]
    return {"trace": f"{truth_path.parent.name}/{truth['name']}", "card": truth["card"]["gpu"],
            "calibration": calibration(truth, result), "host_drift": host_drift(truth),
            "settings": "+".join(k.replace("record_", "").replace("with_", "").replace("profile_", "")
                                 for k in ("record_shapes", "with_modules", "with_stack", "profile_memory")
                                 if truth["profiler"].get(k)) or "activities",
            "step_ms": truth["unprofiled_step"]["median_ms"], "busy_pct": truth["busy_pct"],
            "truth_bound": truth["bound"], "bound": verdict.get("bound"), "bound_as_traced": verdict.get("bound_as_traced"),
            "bound_ok": same_bound(truth["bound"], verdict.get("bound")), **score_advice(truth, result)}


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'trace':28} {'settings':22} {'step ms':>8} {'busy%':>6} {'truth':12} {'fuseprof':12} {'as traced':12} "
            f"{'b':1} {'first advice -> change':34} {'claimed':>8} {'measured':>8} {'a':1}  why")
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['trace']:28} ERROR {r['error']}")
            continue
        measured = "n/a" if r["measured_ms"] is None else f"{r['measured_ms']:.3f}"
        lines.append(f"{r['trace']:28} {r['settings']:22} {r['step_ms']:8.3f} {r['busy_pct']:6.1f} "
                     f"{r['truth_bound']:12} {str(r['bound']):12} {str(r['bound_as_traced']):12} "
                     f"{'Y' if r['bound_ok'] else 'n'} {(r['advice'][:24] + ' -> ' + r['change'])[:34]:34} "
                     f"{r['claimed_ms']:8.3f} {measured:>8} {'Y' if r['ok'] else 'n'}  {r['why']}")
    scored = [r for r in rows if "error" not in r]
    lines.append(f"bound right {sum(r['bound_ok'] for r in scored)}/{len(scored)}; first advice's saving per step "
                 f"within 25% (or the spread) {sum(r['ok'] for r in scored)}/{len(scored)}"
                 + (f"; {len(rows) - len(scored)} not analysed" if len(rows) > len(scored) else ""))
    return "\n".join(lines)


def calibration_table(rows: list[dict[str, Any]]) -> str:
    """The calibration rows as Markdown: one line per capture (ms per step)."""
    lines = ["| capture | settings | traced | without profiler: estimated (range) | measured (p10–p90) | est/meas | "
             "profiler cost: predicted / measured | change: predicted / measured saving | rows advised | "
             "host at capture / in rounds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['trace']} | error: {r['error']} | | | | | | | | |")
            continue
        c = r["calibration"]
        changes = "; ".join(f"{name} {'-' if v['predicted_ms'] is None else format(v['predicted_ms'], '.3f')} / "
                            f"{v['measured_ms']:.3f} ±{v['spread_ms']:.3f}" for name, v in c["changes"].items())
        lines.append(
            f"| {r['trace']} | {r['settings']} | {c['traced_ms']:.3f} | {c['estimate_ms']:.3f} "
            f"({c['estimate_low_ms']:.3f}–{c['estimate_high_ms']:.3f}) | {c['measured_ms']:.3f} "
            f"({c['measured_p10_ms']:.3f}–{c['measured_p90_ms']:.3f}) | {c['estimate_ms'] / c['measured_ms']:.2f} | "
            f"{c['traced_ms'] - c['estimate_ms']:.3f} / {c['traced_ms'] - c['measured_ms']:.3f} | {changes} | "
            f"{', '.join(c['advised']) or '(none)'} | {r.get('host_drift', '')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--calibration", type=Path, help="also write the calibration table here (Markdown)")
    args = parser.parse_args(argv)
    folders = args.folders or sorted(p for p in TRUTH.iterdir() if p.is_dir())
    truths = [t for f in folders for t in sorted(f.glob("*.truth.json"))]
    if not truths:
        parser.error("no *.truth.json in " + ", ".join(map(str, folders)))
    rows = []
    for path in truths:
        try:
            rows.append(score(path))
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            rows.append({"trace": f"{path.parent.name}/{path.name}", "error": str(exc)[:200]})
        print(f"scored {rows[-1]['trace']}", file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    if args.calibration:
        args.calibration.write_text(calibration_table(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
