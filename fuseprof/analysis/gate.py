"""A regression gate over two traces (``fuseprof diff A B --fail-on RULES``): each rule names a quantity
and how much it may grow from A to B; a rule broken by more than A's own step-to-step noise fails.

Rules, comma-separated (``busy:+5%,op:aten::mm:+10%,category:GEMM:+3%,kernels:+0``):

    busy | span | idle             the window's GPU busy, span or idle time
    kernels                        GPU kernel launches
    op:NAME                        GPU time of the kernels NAME launched (an op name, e.g. aten::mm)
    category:NAME                  GPU time of a category (GEMM, attention, elementwise, …)
    LIMIT                          +N% (relative to A) or +N (absolute: ns for times, a count for kernels)

Values are per profiler step when both traces have steps (traces of 3 and of 5 steps compare), else
whole-window totals. Noise: when A has ≥ 3 profiler steps, the quantity's spread across them gives a
band of ±2 standard deviations of the per-step mean; a change inside it is "within noise". With fewer
steps the result says the noise is unknown. Traces whose ops do not match (under half of A's GEMM,
attention, convolution and communication time in op signatures — op and input shapes — that B also has)
are refused: a gate over unrelated traces would mean nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fuseprof.analysis.analyze import TraceAnalysis
from fuseprof.analysis.diff import signature
from fuseprof.errors import InvalidArgumentError, TraceFormatError

_RULE = re.compile(r"^(busy|span|idle|kernels|op:.+|category:.+):\+(\d+(?:\.\d+)?)(%?)$")


@dataclass(frozen=True)
class Rule:
    text: str
    quantity: str  # busy, span, idle, kernels, op, category
    target: str | None
    limit: float
    relative: bool


def parse_rules(text: str) -> list[Rule]:
    rules = []
    for part in (p.strip() for p in re.split(r",(?=\s*(?:busy|span|idle|kernels|op:|category:))", text) if p.strip()):
        match = _RULE.match(part)
        if match is None:
            raise InvalidArgumentError(f"--fail-on {part!r}: write QUANTITY:+LIMIT, e.g. busy:+5%, op:aten::mm:+10%, "
                                       "category:GEMM:+3%, kernels:+0")
        quantity, _, target = match.group(1).partition(":")
        rules.append(Rule(part, quantity, target or None, float(match.group(2)), match.group(3) == "%"))
    if not rules:
        raise InvalidArgumentError("--fail-on: no rule given")
    return rules


def matched_share(a: TraceAnalysis, b: TraceAnalysis) -> float:
    """Share of A's anchor time (GEMM, attention, convolution, communication: the model's skeleton, which
    fusing the rest leaves alone) in op signatures — op and input shapes — that B also has; all of A's time
    where A has no anchor."""
    anchors = a.events["role"] == "anchor"
    events = a.events[anchors] if anchors.any() else a.events
    sig_a, sig_b = signature(events), set(signature(b.events))
    total = events["dur_ns"].sum()
    return float(events.loc[sig_a.isin(sig_b), "dur_ns"].sum() / total) if total else 0.0


def _steps(result: TraceAnalysis) -> list[str]:
    return sorted(s for s in result.events["profiler_step"].dropna().unique() if str(s).startswith("ProfilerStep#"))


def _step_parts(result: TraceAnalysis) -> list[tuple[pd.DataFrame, dict[str, int]]]:
    """Each profiler step's events with its timeline totals, computed once for every rule."""
    from fuseprof.analysis.timeline import breakdown

    events = result.events[result.events["profiler_step"].notna()]
    return [(part, breakdown(part)) for _, part in events.groupby("profiler_step")]


def _value(events: pd.DataFrame, rule: Rule, totals: dict[str, int]) -> float:
    if rule.quantity in ("busy", "span", "idle"):
        return float(totals[f"{rule.quantity}_ns"])
    if rule.quantity == "kernels":
        return float(events["kind"].isin(["kernel", "communication"]).sum())
    column = "op" if rule.quantity == "op" else "category"
    return float(events.loc[events[column].astype("string") == rule.target, "dur_ns"].sum())


def evaluate(a: TraceAnalysis, b: TraceAnalysis, rules: list[Rule]) -> pd.DataFrame:
    """One row per rule: rule, a, b (per step where both have steps), change, change_pct, noise_pct, status."""
    share = matched_share(a, b)
    if share < 0.5:
        raise TraceFormatError(f"{a.name} and {b.name} look unrelated: only {100 * share:.1f}% of A's GEMM/attention "
                               "time is in ops of the same shapes in B (the gate needs at least half); compare traces "
                               "of the same model")
    from fuseprof.analysis.timeline import breakdown

    steps_a, steps_b = _steps(a), _steps(b)
    per_step = bool(steps_a) and bool(steps_b)
    totals_a, totals_b = breakdown(a.events), breakdown(b.events)
    parts_a = _step_parts(a) if len(steps_a) >= 3 else []
    rows = []
    for rule in rules:
        va = _value(a.events, rule, totals_a) / (len(steps_a) if per_step else 1)
        vb = _value(b.events, rule, totals_b) / (len(steps_b) if per_step else 1)
        change = vb - va
        change_pct = 100 * change / va if va else (math.inf if change > 0 else 0.0)
        noise = None
        if parts_a:
            values = np.array([_value(part, rule, totals) for part, totals in parts_a], dtype="float64")
            mean = float(np.mean(values))
            noise = 100 * 2 * float(np.std(values, ddof=1)) / mean / math.sqrt(len(values)) if mean else 0.0
        over = change_pct > rule.limit if rule.relative else change > rule.limit
        status = ("no change" if change == 0 else "ok" if not over else
                  "within noise" if noise is not None and change_pct <= noise else "BROKEN")
        rows.append({"rule": rule.text, "a": va, "b": vb, "change": change, "change_pct": change_pct,
                     "noise_pct": noise, "status": status,
                     "basis": "per profiler step" if per_step else "whole window"})
    return pd.DataFrame(rows)


def markdown(a: TraceAnalysis, b: TraceAnalysis, verdict: pd.DataFrame) -> str:
    """A summary for a pull-request comment."""
    broken = verdict[verdict["status"] == "BROKEN"]
    head = (f"**fuseprof gate: {'FAILED' if len(broken) else 'passed'}** — {len(broken)} of {len(verdict)} rules "
            f"broken ({verdict['basis'].iloc[0]})\n\nA: `{a.name}`  \nB: `{b.name}`\n")
    noise = "A has fewer than 3 profiler steps: noise unknown" if verdict["noise_pct"].isna().all() else \
        "noise: ±2 standard errors of A's per-step values"
    lines = ["| rule | A | B | change | noise | status |", "|---|---|---|---|---|---|"]
    for r in verdict.itertuples():
        band = "" if r.noise_pct is None or pd.isna(r.noise_pct) else f"±{r.noise_pct:.2f}%"
        lines.append(f"| `{r.rule}` | {r.a:,.0f} | {r.b:,.0f} | {r.change_pct:+.2f}% | {band} | {r.status} |")
    return f"{head}\n" + "\n".join(lines) + f"\n\n{noise}; times in ns.\n"
