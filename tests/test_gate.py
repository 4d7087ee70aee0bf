"""The regression gate (``fuseprof diff A B --fail-on RULES``): exit codes on an eager/compiled pair in
both directions, a trace against itself, unrelated traces; the noise band from A's profiler steps. The
expected values are counted from the raw traces here."""

from __future__ import annotations

import gzip
import json

import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.judgements.gate import evaluate, parse_rules
from fuseprof.cli import main
from tests import trace_rewrite
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


@pytest.mark.shared
def test_a_change_inside_the_step_to_step_noise_passes() -> None:
    """The ResNet trace has 3 profiler steps: A is all three, B only the busiest of them. B's busy time
    per step is above A's median, by less than A's band of 2 robust standard errors."""
    trace = shared_traces() / "mi300_resnet_act_checkpoint.json.gz"
    (a,) = analyze(trace)
    per_step = a.steps.set_index("step")["busy_ns"].drop("(outside the profiled steps)")
    busiest = per_step.idxmax()
    (b,) = analyze(trace, window=busiest.removeprefix("ProfilerStep#"))
    (row,) = evaluate(a, b, parse_rules("busy:+0%")).to_dict("records")
    assert row["a"] == per_step.median() and row["b"] == per_step.max()
    assert 0 < row["change_pct"] <= row["noise_pct"] and row["status"] == "within noise"
    mad = (per_step - per_step.median()).abs().median()
    assert row["noise_pct"] == pytest.approx(100 * 2 * 1.4826 * mad / per_step.median() / 3 ** 0.5)


# --- The gate fails closed: B is truly 10% slower in each way below, and no way passes it. --------------

BERT = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"


@pytest.fixture(scope="module")
def six_steps(tmp_path_factory):
    """A (the H100 BERT trace's profiled step, six times over) and B (the same with every GPU event 10%
    longer: busy and GEMM time per step +10%), as files."""
    folder = tmp_path_factory.mktemp("gate")
    a = trace_rewrite.repeat_steps(trace_rewrite.load(BERT), 6)
    b = trace_rewrite.stretch_gpu(a, 1.10)
    return folder, a, b, trace_rewrite.save(a, folder / "a.json"), trace_rewrite.save(b, folder / "b.json")


def _gate(a, b, rules: str, capsys) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(["diff", str(a), str(b), "--fail-on", rules])
    out, err = capsys.readouterr()
    return code, out, err


def test_ten_percent_slower_fails(six_steps, capsys) -> None:
    _, _, _, a, b = six_steps
    code, out, _ = _gate(a, b, "busy:+5%,category:GEMM:+5%", capsys)
    broken = [line for line in out.splitlines() if line.startswith("BROKEN ")]
    assert code == 1 and len(broken) == 2 and "median per profiler step (6 in A, 6 in B)" in out


@pytest.mark.parametrize(("rules", "said"), [
    ("op:aten::adddmm:+5%", "is in neither trace; did you mean aten::addmm"),  # a typo
    ("category:GEMMs:+5%", "is in neither trace; did you mean GEMM"),
    ("category:gemm:+5%", "did you mean GEMM"),  # lower case
    ("op:aten::mm, aten::addmm:+5%", "is in neither trace"),  # a comma inside an unquoted op name
    ("", "no rule given"),  # an unset CI variable
    ("  ", "no rule given"),
    ("busy:+5%,", "write QUANTITY:+LIMIT"),
    ("busy:+5%,,kernels:+0", "write QUANTITY:+LIMIT"),
])
def test_a_rule_that_means_nothing_is_an_error_not_a_pass(rules: str, said: str, six_steps, capsys) -> None:
    _, _, _, a, b = six_steps
    code, _, err = _gate(a, b, rules, capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1


def test_a_quoted_op_name_may_hold_a_comma(six_steps, capsys) -> None:
    _, _, _, a, b = six_steps
    code, out, _ = _gate(a, b, 'op:"aten::addmm":+5%', capsys)
    assert code == 1 and 'BROKEN op:"aten::addmm":+5%' in out


def test_b_without_profiler_steps_is_compared_by_its_iterations(six_steps, capsys) -> None:
    """B's ProfilerStep#N ranges removed: its iterations come from its launch sequence (six copies of one step's
    launches), so the 10% slower B still breaks the rule, median against median."""
    folder, _, b, a_path, _ = six_steps
    no_steps = trace_rewrite.save(trace_rewrite.drop_steps(b), folder / "b-no-steps.json")
    code, out, _ = _gate(a_path, no_steps, "busy:+5%", capsys)
    assert code == 1 and "BROKEN busy:+5%" in out
    found = analyze(no_steps)[0].steps["step"].tolist()
    assert "median per profiler step (6 in A, %d in B)" % sum(s.startswith("iteration #") for s in found) in out


def test_an_outlier_step_in_a_does_not_hide_the_regression(six_steps, capsys) -> None:
    """A's first step 4× slower: its mean per step is above B's, its median is not."""
    folder, a, _, _, b_path = six_steps
    outlier = trace_rewrite.stretch_gpu(a, 4.0, copies={0})
    a_path = trace_rewrite.save(outlier, folder / "a-outlier.json")
    (ra,), (rb,) = analyze(a_path), analyze(b_path)
    busy_a = ra.steps.set_index("step")["busy_ns"].filter(like="ProfilerStep")
    assert busy_a.mean() > rb.steps.set_index("step")["busy_ns"].filter(like="ProfilerStep").median()
    code, out, _ = _gate(a_path, b_path, "busy:+5%", capsys)
    assert code == 1 and "BROKEN busy:+5%" in out


def test_b_with_lost_kernel_records_is_an_error(six_steps, capsys) -> None:
    """30% of B's kernels dropped: B would look faster; the gate refuses it."""
    folder, _, b, a_path, _ = six_steps
    lossy = trace_rewrite.save(trace_rewrite.drop_gpu(b, 0.30), folder / "b-lossy.json")
    code, _, err = _gate(a_path, lossy, "busy:+5%", capsys)
    assert code == 2 and "kernel launch call(s) without their kernel" in err
