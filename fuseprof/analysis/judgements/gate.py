"""A regression gate over two traces (``fuseprof diff A B --fail-on RULES``): each rule names a quantity
and how much it may grow from A to B; a rule broken by more than A's own step-to-step noise fails.

Rules, comma-separated (``busy:+5%,op:aten::mm:+10%,category:GEMM:+3%,kernels:+0``):

    busy | span | idle             the window's GPU busy, span or idle time
    kernels                        GPU kernel launches
    op:NAME                        GPU time of the kernels NAME launched (an op name, e.g. aten::mm; a name
                                   holding a comma is written in double quotes: op:"my op, v2":+5%)
    category:NAME                  GPU time of a category (GEMM, attention, elementwise, …)
    module:PATH                    GPU time of an nn.Module and those under it, as the aligned comparison
                                   counts it (``fuseprof.analysis.judgements.changes``: a compiled or graphed B's kernels
                                   take the module of the eager work they align to); ``module:*`` judges every
                                   module one by one, with a noise floor (``fuseprof.analysis.judgements.module_gate``)
    memory                         peak allocated device memory (bytes; the allocator's records in the trace,
                                   profile_memory=True: ``fuseprof.analysis.facts.memory``; the largest device's)
    LIMIT                          +N% (relative to A) or +N (absolute: ns for times, a count for kernels)

It fails closed: anything it cannot compare faithfully is an error (exit 2), never a pass — a rule it
cannot parse, an empty rule list, one rule given twice, an op or category that neither trace has (a typo, or a
category of neither, would read "no change"), a rule whose value it cannot compute (no value on a side, a NaN:
a memory rule whose records all fall outside B's steps), one trace with profiler steps and the other without
(a whole window against one step), records the profiler dropped from inside either trace (a kernel launch call
without its kernel, a kernel without its launch call: ``integrity.dropped_records``; not what the trace's edges
cut off, nor kernels a code change removed, which take their launch calls with them: the lighter trace would
look faster), and traces of different models (no model structure shared: under half of A's GPU time in module
paths B also has, of its GEMM, attention, convolution and communication time in op signatures — op and input
shapes — that B also has, and of its anchors aligned to B anchors of the same op, module or kernel;
``fuseprof.analysis.judgements.changes``), a module rule over a path neither trace has. ``--fail-on`` may be given several times:
every rule of every one is evaluated.

Values are per profiler step when both traces have steps — the **median** over the steps, which one
outlier step (a warm-up, a checkpoint) cannot move — else whole-window totals. Noise: with ≥ 3 steps in
A, the band is ±2 robust standard errors of A's per-step values, 1.4826 · MAD / √n (the median absolute
deviation scaled to a standard deviation for normal noise); a change inside it reads "within noise".
With fewer steps the result says the noise is unknown.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.integrity import dropped, unlaunched_in
from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.facts.steps import OUTSIDE
from fuseprof.analysis.judgements.module_gate import check_target, module_rows, normal_path
from fuseprof.analysis.judgements.noise import robust_noise_pct
from fuseprof.errors import InvalidArgumentError, TraceFormatError

_QUANTITY = r"busy|span|idle|kernels|memory|(?:op|module):(?:\"[^\"]+\"|[^\"]+?)|category:[^\",]+?"
_RULE = re.compile(rf"^({_QUANTITY}):\+(\d+(?:\.\d+)?)(%?)$")
_SPLIT = re.compile(r",(?=\s*(?:busy|span|idle|kernels|memory|op:|module:|category:))")


@dataclass(frozen=True)
class Rule:
    text: str
    quantity: str  # busy, span, idle, kernels, memory, op, category, module
    target: str | None
    limit: float
    relative: bool


def _split(text: str) -> list[str]:
    """The rules of a --fail-on string: split at commas that start a rule, outside double quotes."""
    parts, quoted, start = [], False, 0
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted and _SPLIT.match(text, i):
            parts.append(text[start:i])
            start = i + 1
    return [p.strip() for p in [*parts, text[start:]]]


def parse_rules(given: str | Sequence[str]) -> list[Rule]:
    """The rules of one --fail-on string or of each given (``--fail-on`` repeated: every rule of every one is
    evaluated); InvalidArgumentError for an empty string, an empty rule, one that does not parse, or one rule
    given twice (a copy-paste slip whose other half was meant to say something else)."""
    texts = [given] if isinstance(given, str) else list(given)
    if not texts:
        raise InvalidArgumentError("--fail-on: no rule given; write e.g. busy:+5%")
    rules: list[Rule] = []
    for text in texts:
        if not text.strip():
            raise InvalidArgumentError("--fail-on '': no rule given (an unset variable?); write e.g. busy:+5%")
        for part in _split(text):
            match = _RULE.match(part)
            if match is None:
                raise InvalidArgumentError(f"--fail-on {part!r}: write QUANTITY:+LIMIT, e.g. busy:+5%, "
                                           "op:aten::mm:+10%, category:GEMM:+3%, kernels:+0 (an op name with a comma "
                                           "in double quotes)")
            quantity, _, target = match.group(1).partition(":")
            target = normal_path(target.strip('"')) if quantity == "module" else target.strip('"')
            rule = Rule(part, quantity, target or None, float(match.group(2)), match.group(3) == "%")
            if any(_same(rule, given) for given in rules):  # module:a/b and module:a / b are one rule
                raise InvalidArgumentError(f"--fail-on {part!r}: given twice; give each rule once")
            rules.append(rule)
    return rules


def _same(one: Rule, other: Rule) -> bool:
    """Whether two rules say the same thing, however each was written."""
    return (one.quantity, one.target, one.limit, one.relative) == (other.quantity, other.target, other.limit,
                                                                   other.relative)


def _check_targets(rules: list[Rule], a: TraceAnalysis, b: TraceAnalysis, parts: set[str]) -> None:
    """Every op, category and module a rule names exists in A or B, else an error that suggests the nearest
    name: a rule over nothing would always read 'no change'."""
    for rule in rules:
        if rule.quantity == "module":
            check_target(rule.text, str(rule.target), parts)
            continue
        if rule.quantity == "memory":
            for side, result in (("A", a), ("B", b)):
                if result.frames.get("memory", pd.DataFrame()).empty:
                    raise TraceFormatError(f"--fail-on {rule.text!r}: {side} ({result.name}) has no memory records; "
                                           "capture both with torch.profiler(profile_memory=True)")
            continue
        if rule.quantity == "category":  # those the traces have: a category of neither would read "no change"
            known = sorted({str(c) for result in (a, b) for c in result.events["category"].dropna()})
        elif rule.quantity == "op":
            known = sorted(set(a.events["op"].dropna().astype(str)) | set(b.events["op"].dropna().astype(str)))
        else:
            continue
        if rule.target in known:
            continue
        near = difflib.get_close_matches(str(rule.target), known, n=3, cutoff=0.5)
        near += [k for k in known if k.lower() == str(rule.target).lower() and k not in near]
        hint = f"; did you mean {', '.join(near)}?" if near else (
            f"; the traces' categories: {', '.join(known)}" if rule.quantity == "category" else "")
        raise InvalidArgumentError(f"--fail-on {rule.text!r}: {rule.quantity} {rule.target!r} is in neither trace"
                                   f"{hint}")


def _check_comparable(a: TraceAnalysis, b: TraceAnalysis, summary: dict[str, object]) -> None:
    """Refuse what the gate cannot compare: lost kernel records, steps on one side only, unrelated traces."""
    for side, result in (("A", a), ("B", b)):
        lost = dropped(result)
        if lost.kernels or lost.launches:
            raise TraceFormatError(
                f"{side} ({result.name}): the profiler dropped records inside the trace — {lost.launches:,} kernel "
                f"launch call(s) without their kernel, {lost.kernels:,} GPU event(s) ({lost.kernel_ns / 1e3:,.3f} µs) "
                "without their launch call — so every time table reads low; the gate does not compare a trace with "
                "dropped records (capture it again, with fewer steps per trace)")
    _check_launching_ops(a, b)
    steps_a, steps_b = _steps(a), _steps(b)
    if bool(steps_a) != bool(steps_b):
        has, lacks = ("A", "B") if steps_a else ("B", "A")
        raise TraceFormatError(f"{has} has {len(steps_a or steps_b)} profiler step(s) and {lacks} none: the gate "
                               "compares step with step; capture both with torch.profiler's schedule (or neither)")
    from fuseprof.analysis.judgements.changes import unrelated_evidence

    if not summary["related"]:  # the aligned comparison's evidence (fuseprof.analysis.judgements.changes)
        raise TraceFormatError(f"{a.name} and {b.name} look unrelated: {unrelated_evidence(summary)}; compare traces "
                               "of the same model")


def _check_launching_ops(a: TraceAnalysis, b: TraceAnalysis) -> None:
    """Refuse B where ops that always launched GPU work in A launched none in B: kernels lost with their launch
    calls (``integrity.unlaunched_in``), which no pairing of records shows and which would read as B being faster."""
    if a.source is None or b.source is None:
        return
    from fuseprof.parse.store import default_store

    store = default_store()
    lost = unlaunched_in(store.tables(a.source)[0], store.tables(b.source)[0])
    if lost.ops:
        raise TraceFormatError(
            f"B ({b.name}): {lost.ops:,} of its {lost.of:,} ops whose name, shapes and dtypes always launched GPU work "
            f"in A launched none (e.g. {lost.example}): the profiler dropped their kernels with the launch calls, so "
            "B's time tables read low; the gate does not compare it (capture B again, with fewer steps per trace)")


def _steps(result: TraceAnalysis) -> list[str]:
    return sorted(str(s) for s in result.events["profiler_step"].dropna().unique())


def _step_parts(result: TraceAnalysis) -> list[tuple[pd.DataFrame, dict[str, int]]]:
    """Each profiler step's events with its timeline totals, computed once for every rule."""
    from fuseprof.analysis.facts.timeline import breakdown

    events = result.events[result.events["profiler_step"].notna()]
    return [(part, breakdown(part)) for _, part in events.groupby("profiler_step")]


def _value(events: pd.DataFrame, rule: Rule, totals: dict[str, int]) -> float:
    if rule.quantity in ("busy", "span", "idle"):
        return float(totals[f"{rule.quantity}_ns"])
    if rule.quantity == "kernels":
        return float(events["kind"].isin(["kernel", "communication"]).sum())
    column = "op" if rule.quantity == "op" else "category"
    return float(events.loc[events[column].astype("string") == rule.target, "dur_ns"].sum())


def _peaks(result: TraceAnalysis, per_step: bool) -> np.ndarray:
    """Peak allocated bytes per step (the largest device's), or of the whole trace."""
    memory = result.frames["memory"]
    peaks = memory.groupby("step", sort=False)["peak_allocated_bytes"].max()
    if per_step:
        peaks = peaks[[s not in ("all", OUTSIDE) for s in peaks.index]]
        return peaks.sort_index().to_numpy(dtype="float64")
    return np.array([float(peaks.max())])


def evaluate(a: TraceAnalysis, b: TraceAnalysis, rules: list[Rule]) -> pd.DataFrame:
    """One row per rule: rule, a, b (the median per step where both have steps, else window totals),
    change, change_pct, noise_pct, status. Errors (see the module docstring) instead of a verdict that
    could pass a regression."""
    from fuseprof.analysis.facts.timeline import breakdown
    from fuseprof.analysis.judgements.changes import changes
    from fuseprof.analysis.judgements.changes import per_step as by_step

    aligned = changes(a, b)
    _check_comparable(a, b, aligned.summary)
    _check_targets(rules, a, b, set(aligned.alignment.units["part"]))

    per_step = bool(_steps(a))
    parts_a = _step_parts(a) if per_step else [(a.events, breakdown(a.events))]
    parts_b = _step_parts(b) if per_step else [(b.events, breakdown(b.events))]
    rows, unevaluable = [], []
    basis = f"median per profiler step ({len(parts_a)} in A, {len(parts_b)} in B)" if per_step else "whole window"
    for rule in rules:
        if rule.quantity == "module":
            rows += module_rows(rule.text, str(rule.target), rule.limit, rule.relative,
                                by_step(aligned.alignment.units, ["part"], aligned.alignment.steps), basis)
            continue
        if rule.quantity == "memory":
            values_a, values_b = _peaks(a, per_step), _peaks(b, per_step)
        else:
            values_a = np.array([_value(part, rule, totals) for part, totals in parts_a], dtype="float64")
            values_b = np.array([_value(part, rule, totals) for part, totals in parts_b], dtype="float64")
        why = _unevaluable(rule, values_a, values_b)
        if why:
            unevaluable.append(f"{rule.text!r} ({why})")
            continue
        va, vb = float(np.median(values_a)), float(np.median(values_b))
        change = vb - va
        change_pct = 100 * change / va if va else (math.inf if change > 0 else 0.0)
        noise = robust_noise_pct(values_a) if len(values_a) >= 3 else None
        over = change_pct > rule.limit if rule.relative else change > rule.limit
        status = ("no change" if change == 0 else "ok" if not over else
                  "within noise" if noise is not None and change_pct <= noise else "BROKEN")
        rows.append({"rule": rule.text, "module": None, "a": va, "b": vb, "change": change, "change_pct": change_pct,
                     "noise_pct": noise, "status": status,
                     "basis": f"median per profiler step ({len(values_a)} in A, {len(values_b)} in B)" if per_step
                     else "whole window"})
    if unevaluable:
        raise TraceFormatError(f"--fail-on: {len(unevaluable)} rule(s) could not be evaluated, and the gate does not "
                               f"pass what it cannot evaluate: {'; '.join(unevaluable)}")
    return pd.DataFrame(rows)


def _unevaluable(rule: Rule, values_a: np.ndarray, values_b: np.ndarray) -> str | None:
    """Why a rule's values cannot be compared (no value on a side, or one not finite), else None."""
    what = "memory records inside its profiler steps" if rule.quantity == "memory" else "value"
    for side, values in (("A", values_a), ("B", values_b)):
        if not len(values):
            return f"{side} has no {what}"
        if not np.isfinite(values).all():
            return f"{side}'s {rule.quantity} is not a finite number in {int((~np.isfinite(values)).sum())} of " \
                   f"{len(values)} step(s)"
    return None


def markdown(a: TraceAnalysis, b: TraceAnalysis, verdict: pd.DataFrame) -> str:
    """A summary for a pull-request comment."""
    broken = verdict[verdict["status"] == "BROKEN"]
    head = (f"**fuseprof gate: {'FAILED' if len(broken) else 'passed'}** — {len(broken)} of {len(verdict)} rules "
            f"broken ({verdict['basis'].iloc[0]})\n\nA: `{a.name}`  \nB: `{b.name}`\n")
    noise = "A has fewer than 3 profiler steps: noise unknown" if verdict["noise_pct"].isna().all() else \
        "noise: ±2 robust standard errors (1.4826 · MAD / √n) of A's per-step values"
    lines = ["| rule | A | B | change | noise | status |", "|---|---|---|---|---|---|"]
    for r in verdict.itertuples():
        band = "" if r.noise_pct is None or pd.isna(r.noise_pct) else f"±{r.noise_pct:.2f}%"
        lines.append(f"| `{r.rule}` | {r.a:,.0f} | {r.b:,.0f} | {r.change_pct:+.2f}% | {band} | {r.status} |")
    return f"{head}\n" + "\n".join(lines) + f"\n\n{noise}; times in ns.\n"
