"""Training steps on the H200 captures of known truth (a 4-layer Llama-style step, bf16 autocast; foreach and
fused AdamW, activation checkpointing, profile_memory) and a shared MI300 trace with memory records: phases,
the optimizer step as an opportunity, memory by op. Expectations are computed from the raw files here — the
backward runs, launch calls and memory records as the trace wrote them — not by the code under test."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.cli import main
from tests.conftest import FIXTURES, by_name, shared_traces, trace_at

TRUTH = FIXTURES / "truth"
BACKWARD = "autograd::engine::evaluate_function: "


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _ns(us: float) -> int:
    return round(us * 1000)


def _inside(spans: list[tuple], tid: object, t: int) -> tuple | None:
    """The innermost span (tid, start, end, …) around ``t`` on ``tid``."""
    hits = [s for s in spans if s[0] == tid and s[1] <= t < s[2]]
    return min(hits, key=lambda s: s[2] - s[1]) if hits else None


def _kernel_launches(events: list[dict]) -> list[tuple[dict, tuple]]:
    """Each kernel with its launch call's (tid, start ns), by correlation."""
    calls = {e["args"]["correlation"]: (e["tid"], _ns(e["ts"])) for e in events
             if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    return [(e, calls[e["args"]["correlation"]]) for e in events if e.get("ph") == "X"
            and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and e.get("args", {}).get("correlation") in calls]


def _forward_module(events: list[dict], runs: list[tuple], sequence: int) -> str | None:
    """The nn.Module path around the forward op autograd numbered ``sequence`` (outside every backward run)."""
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and not e["name"].startswith(BACKWARD)
           and e.get("args", {}).get("Sequence number") == sequence and not _inside(runs, e["tid"], _ns(e["ts"]))]
    if not ops:
        return None
    op = min(ops, key=lambda e: e["ts"])
    t = _ns(op["ts"])
    around = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "python_function"
                     and e["name"].startswith("nn.Module: ") and e["tid"] == op["tid"]
                     and _ns(e["ts"]) <= t < _ns(e["ts"]) + _ns(e["dur"])), key=lambda e: (e["ts"], -e["dur"]))
    return " / ".join(e["name"].removeprefix("nn.Module: ") for e in around) or None


@pytest.mark.parametrize("name", ["train_foreach", "train_checkpoint"])
def test_every_backward_kernel_has_its_phase_and_forward_module(name: str) -> None:
    path = TRUTH / f"{name}.json.gz"
    events = _events(path)
    runs = [(e["tid"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["args"].get("Sequence number")) for e in events
            if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["name"].startswith(BACKWARD)]
    expected = {}
    for kernel, (tid, t) in _kernel_launches(events):
        run = _inside(runs, tid, t)
        if run is not None:
            expected[_ns(kernel["ts"])] = _forward_module(events, runs, run[3])
    result = analyze([path])[0]
    got = result.events[result.events["phase"].isin(["backward", "recomputation"])]
    window = set(result.events["start_ns"].astype(int))
    assert {int(s): None if pd.isna(m) else str(m) for s, m in zip(got["start_ns"], got["forward_module"])} == \
        {k: v for k, v in expected.items() if k in window}  # every backward kernel, with its forward module
    assert got["forward_module"].notna().mean() > 0.95
    truth = json.loads((TRUTH / f"{name}.truth.json").read_text())
    assert ("recomputation" in set(result.phases["phase"])) == truth["checkpointing"]
    assert set(result.phases["phase"]) >= set(truth["phases"])


def _optimizer_gpu_ns(path: Path) -> int:
    """GPU time of the kernels launched inside the Optimizer.step# ranges, from the raw file."""
    events = _events(path)
    steps = [(e["tid"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.step#")]
    return sum(_ns(k["dur"]) for k, (tid, t) in _kernel_launches(events) if _inside(steps, tid, t))


def test_the_optimizer_step_is_a_top_opportunity_that_predicts_the_fused_step() -> None:
    foreach, fused = TRUTH / "train_foreach.json.gz", TRUTH / "train_fused.json.gz"
    measured = _optimizer_gpu_ns(foreach) - _optimizer_gpu_ns(fused)
    result = analyze([foreach])[0]
    rows = result.fusion.reset_index(drop=True)
    position = rows.index[rows["class"] == "optimizer step"]
    assert len(position) == 1 and position[0] < 3
    predicted = float(rows.loc[position[0], "saving_ns"])
    assert abs(predicted - measured) / measured <= 0.25, (predicted, measured)
    parameters = json.loads((TRUTH / "train_foreach.truth.json").read_text())["parameters"]
    assert f"({parameters:,} elements)" in rows.loc[position[0], "signature"]
    audit = {n: v for n, v in zip(result.audit["fusion"], result.audit["verdict"])}
    assert audit["optimizer step"] == "not fused"
    assert result.audit.set_index("fusion").loc["optimizer step", "predicted_saving_ns"] == pytest.approx(predicted)
    fused_result = analyze([fused])[0]
    assert dict(zip(fused_result.audit["fusion"], fused_result.audit["verdict"]))["optimizer step"] == "fused"
    assert "optimizer step" not in set(fused_result.fusion["class"])


def _memory_peaks(path: Path) -> dict[str, int]:
    """Per ProfilerStep range, the largest Total Allocated among the GPU's [memory] records inside it."""
    events = _events(path)
    steps = [(e["name"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    peaks: dict[str, int] = {}
    for e in events:
        if e.get("name") == "[memory]" and e["args"].get("Device Type") in (1, 6):
            t = _ns(e["ts"])
            for name, start, end in steps:
                if start <= t < end:
                    peaks[name] = max(peaks.get(name, 0), int(e["args"]["Total Allocated"]))
    return peaks


@pytest.mark.parametrize("where", by_name("tests/fixtures/truth/train_foreach_memory.json.gz",
                                           "shared:mi300_bert_small_uncased.json.gz"))
def test_peak_memory_per_step_and_its_top_holder(where: str) -> None:
    path = trace_at(where)
    result = analyze([path])[0]
    memory = result.memory
    assert dict(zip(memory["step"], memory["peak_allocated_bytes"])) == _memory_peaks(path) != {}
    holders = result.memory_holders
    made = holders[~holders["op"].str.startswith("(allocated before")]
    top = made.iloc[0]
    assert isinstance(top["module"], str) and top["module"], top.to_dict()
    assert holders["bytes"].sum() <= memory["peak_allocated_bytes"].max()


def test_the_gate_fails_on_a_larger_memory_peak(tmp_path: Path, capsys) -> None:
    a = TRUTH / "train_foreach_memory.json.gz"
    data = json.loads(gzip.decompress(a.read_bytes()))
    for e in data["traceEvents"]:
        if e.get("name") == "[memory]":
            e["args"]["Total Allocated"] = int(e["args"]["Total Allocated"] * 1.1)
    b = tmp_path / "bigger.json.gz"
    b.write_bytes(gzip.compress(json.dumps(data).encode()))
    assert main(["diff", str(a), str(b), "--fail-on", "memory:+5%"]) == 1
    assert "BROKEN memory:+5%" in capsys.readouterr().out
    assert main(["diff", str(a), str(a), "--fail-on", "memory:+5%"]) == 0
    assert main(["diff", str(TRUTH / "train_foreach.json.gz"), str(a), "--fail-on", "memory:+5%"]) == 2
    assert "no memory records" in capsys.readouterr().err


def _between_backward_and_step_gpu_ns(path: Path, leave_out: tuple[str, ...]) -> int:
    """GPU time of the kernels launched after each step's last gradient accumulation and before its
    Optimizer.step# range (clipping and the grad scaler run there), less those launched inside a CPU op named
    in ``leave_out`` — from the raw file."""
    events = _events(path)
    accumulate = sorted(_ns(e["ts"]) + _ns(e["dur"]) for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                        and e["name"] == BACKWARD + "torch::autograd::AccumulateGrad")
    steps = sorted(_ns(e["ts"]) for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and e["name"].startswith("Optimizer.step#"))
    windows = [(max(a for a in accumulate if a < s), s) for s in steps if any(a < s for a in accumulate)]
    left_out = [(e["tid"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events if e.get("ph") == "X"
                and e.get("cat") == "cpu_op" and e["name"] in leave_out]
    return sum(_ns(k["dur"]) for k, (tid, t) in _kernel_launches(events)
               if any(a <= t < s for a, s in windows) and not _inside(left_out, tid, t))


def test_clipping_zero_grad_and_the_grad_scaler_are_rows_of_their_own() -> None:
    """fp16 training steps with a GradScaler, unfused (clipping per gradient, foreach AdamW, zero_grad writing
    zeros) and fused (clipping foreach, fused AdamW, zero_grad to None): the audit's verdicts are the truth files';
    the clipping row's predicted GPU saving is within 35% of what the fused capture's clipping saved (both from the
    raw files), and the zero-grad row's saving is the time of the kernels inside its range."""
    unfused, fused = TRUTH / "train_hygiene_unfused.json.gz", TRUTH / "train_hygiene_fused.json.gz"
    scaler = ("aten::_amp_foreach_non_finite_check_and_unscale_", "aten::item")
    measured = _between_backward_and_step_gpu_ns(unfused, scaler) - _between_backward_and_step_gpu_ns(fused, scaler)
    results = {p: analyze([p])[0] for p in (unfused, fused)}
    for path, result in results.items():
        truth = json.loads(path.with_name(path.name.replace(".json.gz", ".truth.json")).read_text())["audit"]
        verdicts = dict(zip(result.audit["fusion"], result.audit["verdict"]))
        assert {k: verdicts[k] for k in truth} == {k: v[0] for k, v in truth.items()}, path.name
    rows = results[unfused].fusion.set_index("class")
    predicted = float(rows.loc["gradient clipping", "saving_ns"])
    assert abs(predicted - measured) / measured <= 0.35, (predicted, measured)
    events = _events(unfused)
    zero = [(e["tid"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events if e.get("ph") == "X"
            and e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.zero_grad#")]
    written = sum(_ns(k["dur"]) for k, (tid, t) in _kernel_launches(events) if _inside(zero, tid, t))
    assert written > 0 and float(rows.loc["zero-grad", "saving_ns"]) == written
    assert not {"gradient clipping", "zero-grad"} & set(results[fused].fusion["class"])


def _gpu_ns(path: Path, gemm_ops: bool | None = None) -> int:
    """GPU time of a raw trace's kernels, memcpys and memsets: all (``None``), or only those whose launch sits
    inside (``True``) or outside (``False``) an ``aten::mm``/``aten::addmm`` CPU op."""
    events = _events(path)
    gemms = [(e["tid"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events if e.get("ph") == "X"
             and e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm")]
    return sum(_ns(k["dur"]) for k, (tid, t) in _kernel_launches(events)
               if gemm_ops is None or bool(_inside(gemms, tid, t)) == gemm_ops)


def _peak_allocated(path: Path) -> int:
    return max(e["args"]["Total Allocated"] for e in _events(path) if e.get("name") == "[memory]")


def test_the_lm_heads_cross_entropy_is_a_class_whose_loss_side_saving_liger_realises() -> None:
    """The LM head and its loss over a 32k vocabulary, eager and as Liger's fused linear cross-entropy: the audit
    and the class are the truth files'; the row's predicted saving — the loss's side: the head's GEMMs kept —
    is within 10% of what Liger's kernel saved there (the GPU time outside the GEMM ops, eager − Liger, from the
    raw files); the N × V writes it names are the logits' shape from the raw GEMM's inputs."""
    eager, liger = TRUTH / "lm_head_eager.json.gz", TRUTH / "lm_head_liger.json.gz"
    results = {p: analyze([p])[0] for p in (eager, liger)}
    for path, result in results.items():
        truth = json.loads(path.with_name(path.name.replace(".json.gz", ".truth.json")).read_text())
        assert dict(zip(result.audit["fusion"], result.audit["verdict"]))["linear cross-entropy"] == \
            truth["audit"]["linear cross-entropy"][0]
        assert ("linear cross-entropy" in set(result.fusion["class"])) == bool(truth["classes_present"])
    row = results[eager].fusion.set_index("class").loc["linear cross-entropy"]
    measured = _gpu_ns(eager, gemm_ops=False) - _gpu_ns(liger, gemm_ops=False)
    assert abs(float(row["saving_ns"]) - measured) / measured <= 0.10, (row["saving_ns"], measured)
    (head,) = {tuple(map(tuple, e["args"]["Input Dims"][:2])) for e in _events(eager) if e.get("cat") == "cpu_op"
               and e["name"] == "aten::mm" and e["args"]["Input Dims"][1][-1] == 32000}
    logits = head[0][0] * head[1][1]
    assert f"{logits * (2 + 5 * 4) / 1e6:,.1f} MB" in row["signature"]  # the bf16 logits, then 5 float writes
    # what the fusion costs and buys here: the head's GEMMs, chunked, ran slower; the peak fell by the buffers
    assert _gpu_ns(liger, gemm_ops=True) > _gpu_ns(eager, gemm_ops=True)
    assert _peak_allocated(eager) - _peak_allocated(liger) > 2 * logits * 4


@pytest.mark.shared
def test_diff_prints_the_memory_peak_in_megabytes(capsys) -> None:
    """`diff` of two traces with the allocator's records: the peak row is in MB (it was printed as µs, the
    bytes divided by 1000), each side the raw file's largest 'Total Allocated'."""
    from fuseprof.cli import main

    a, b = (shared_traces() / f"{gpu}_bert_small_uncased.json.gz" for gpu in ("h100", "mi300"))
    assert main(["diff", str(a), str(b)]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("peak allocated MB"))
    assert row.split()[3:5] == [f"{_peak_allocated(a) / 1e6:,.1f}", f"{_peak_allocated(b) / 1e6:,.1f}"]
