"""The regression gate (``fuseprof diff A B --fail-on RULES``): exit codes on an eager/compiled pair in
both directions, a trace against itself, unrelated traces; the noise band from A's profiler steps. The
expected values are counted from the raw traces here."""

from __future__ import annotations

import gzip
import json

import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.gate import evaluate, parse_rules
from fuseprof.cli import main
from tests.conftest import FIXTURES, TRACES, shared_traces

EAGER, COMPILED = TRACES / "llama4l-eager-h200", TRACES / "llama4l-compiled-h200"
RULES = "busy:+5%,op:aten::mm:+10%,category:GEMM:+3%,kernels:+0"


def _kernels(bundle) -> int:  # type: ignore[no-untyped-def]
    (trace,) = (bundle / "raw").glob("*.json.gz")
    return sum(e.get("cat") == "kernel" for e in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"])


def test_compiled_against_eager_passes_and_eager_against_compiled_fails(capsys) -> None:
    assert main(["diff", str(EAGER), str(COMPILED), "--fail-on", RULES]) == 0
    capsys.readouterr()
    assert main(["diff", str(COMPILED), str(EAGER), "--fail-on", RULES]) == 1
    out = capsys.readouterr().out
    broken = [line for line in out.splitlines() if line.startswith("BROKEN")]
    assert len(broken) == 2  # more busy time and more kernels; the GEMMs stay within their limits
    assert f"BROKEN kernels:+0: {_kernels(COMPILED):,} -> {_kernels(EAGER):,}" in out
    assert "busy:+5%" in broken[0] and "noise unknown" in out


def test_a_trace_against_itself_is_no_change(capsys) -> None:
    assert main(["diff", str(EAGER), str(EAGER), "--fail-on", RULES, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["status"] for r in rows} == {"no change"} and len(rows) == 4


def test_unrelated_traces_are_an_error(capsys) -> None:
    assert main(["diff", str(EAGER), str(FIXTURES / "thirdparty" / "b200_eager.json.gz"), "--fail-on", "busy:+5%"]) == 2
    err = capsys.readouterr().err
    assert "look unrelated" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("rules", ["busy:5%", "busy:+x%", "gpu:+5%", "op:+5%", ","])
def test_a_malformed_rule_is_one_line(rules: str, capsys) -> None:
    assert main(["diff", str(EAGER), str(COMPILED), "--fail-on", rules]) == 2
    err = capsys.readouterr().err
    assert "--fail-on" in err and len(err.strip().splitlines()) == 1


def test_markdown_summary_for_a_pull_request(capsys) -> None:
    assert main(["diff", str(COMPILED), str(EAGER), "--fail-on", RULES, "--format", "markdown"]) == 1
    text = capsys.readouterr().out
    assert text.startswith("**fuseprof gate: FAILED** — 2 of 4 rules broken")
    assert "| `kernels:+0` |" in text and "noise unknown" in text


def test_a_change_inside_the_step_to_step_noise_passes() -> None:
    """The ResNet trace has 3 profiler steps: A is all three, B only the busiest of them. B's busy time
    per step is above A's mean, by less than A's band of 2 standard errors."""
    trace = shared_traces() / "mi300_resnet_act_checkpoint.json.gz"
    (a,) = analyze(trace)
    per_step = a.steps.set_index("step")["busy_ns"].drop("(outside the profiled steps)")
    busiest = per_step.idxmax()
    (b,) = analyze(trace, window=busiest.removeprefix("ProfilerStep#"))
    (row,) = evaluate(a, b, parse_rules("busy:+0%")).to_dict("records")
    assert row["a"] == pytest.approx(per_step.mean()) and row["b"] == per_step.max()
    assert 0 < row["change_pct"] <= row["noise_pct"] and row["status"] == "within noise"
    assert row["noise_pct"] == pytest.approx(100 * 2 * per_step.std(ddof=1) / per_step.mean() / 3 ** 0.5)
