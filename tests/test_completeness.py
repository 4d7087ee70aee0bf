"""Issue 63 point 4 (and issue 58's "check exits non-zero on damage"): the completeness report of ``check`` and the
integrity table. Each damage is made in a committed trace (or a shared one, marked ``shared``) by a small rewrite;
``check`` must flag it with the share of GPU time it puts in doubt, computed here from the raw file, and exit 1 at
1% or more (always for zero or repeated kernel timestamps), a note below; capture settings are notes unless
``--require`` names them; the undamaged trace is not flagged. Each hostile case counts its outcome on the fuzz line
(``FUZZ_RESULTS``): 'held' when check flags the damage as it should, 'silently wrong' (and a failed test) if not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fuseprof.cli import main
from tests import trace_rewrite
from tests.conftest import FIXTURES, FUZZ_RESULTS, SHARED, SHARED_FILES, by_name, trace_at

BERT = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"  # 60 kernels, ns, one profiled step
STEPS = FIXTURES / "truth" / "mlp_plain.json.gz"  # three ProfilerSteps
BACKWARD = FIXTURES / "truth" / "lm_head_eager.json.gz"  # autograd backward nodes
COMMS = FIXTURES / "tp2" / "tp_mlp-rank0.json.gz"  # record_param_comms with NCCL metadata
SYNCS = "shared:fresh4/hta_cpa_alexnet_a100.json.gz"  # stream syncs and stream waits with their record ids
GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _check(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    code = main(["check", str(path), "--format", "json", *extra])
    out, err = capsys.readouterr()
    rows = {r["check"]: r for r in json.loads(out)} if code in (0, 1) else {}
    return code, rows, err


def _held(ok: bool, what: str) -> None:
    FUZZ_RESULTS["held" if ok else "silently wrong"] += 1
    assert ok, what


def _events(trace: dict) -> list[dict]:
    return trace["traceEvents"]


def _kernels(trace: dict) -> list[dict]:
    return sorted((e for e in _events(trace) if e.get("cat") == "kernel"), key=lambda e: e["ts"])


def _gpu_us(trace: dict) -> float:
    return sum(e.get("dur", 0) for e in _events(trace) if e.get("cat") in GPU and e.get("ph") == "X")


def _edited(source: Path, tmp: Path, name: str, edit) -> tuple[dict, Path]:  # type: ignore[no-untyped-def]
    trace = trace_rewrite.load(source)
    edit(trace)
    return trace, trace_rewrite.save(trace, tmp / name)


def _new_rows(rows: dict[str, dict[str, Any]]) -> list[str]:
    return [c for c in ("kernel_timestamps_zero", "kernel_timestamps_repeated", "profiler_lost_records",
                        "steps_without_gpu_work", "trace_ends_mid_step", "kernel_before_launch", "stream_wait_ids",
                        "stream_wait_forward", "stream_sync_early", "nccl_metadata", "backward_sequence_shared")
            if not rows[c]["ok"]]


@pytest.mark.parametrize("source", [BERT, STEPS, BACKWARD, COMMS])
def test_an_undamaged_trace_is_not_flagged(source: Path, capsys) -> None:
    code, rows, err = _check(source, capsys)
    assert code == 0 and not _new_rows(rows) and "failed:" not in err, (code, _new_rows(rows), err)


def test_a_zero_kernel_timestamp_always_fails(tmp_path: Path, capsys) -> None:
    """One kernel of 60 written with start = end (CUPTI's zero stamps): its time is unknown, so the share is too,
    and check fails whatever it would be."""
    def edit(trace: dict) -> None:
        _kernels(trace)[30]["dur"] = 0
    _, path = _edited(BERT, tmp_path, "zero.json", edit)
    code, rows, err = _check(path, capsys)
    row = rows["kernel_timestamps_zero"]
    _held(code == 1 and row["value"] == 1 and row["kind"] == "damage" and row["doubt_pct"] is None, str(row))
    assert "kernel_timestamps_zero (unknown share" in err


def test_a_repeated_kernel_timestamp_always_fails_with_its_share(tmp_path: Path, capsys) -> None:
    """Kernel 31 given kernel 30's start (same stream): one stamp for two; its duration is the share in doubt."""
    def edit(trace: dict) -> None:
        kernels = _kernels(trace)
        kernels[31]["ts"] = kernels[30]["ts"]
    trace, path = _edited(BERT, tmp_path, "repeated.json", edit)
    moved = [k for k in _kernels(trace) if k["ts"] == _kernels(trace)[30]["ts"]]
    code, rows, _ = _check(path, capsys)
    row = rows["kernel_timestamps_repeated"]
    _held(code == 1 and row["value"] == 1 and row["kind"] == "damage", str(row))
    assert len(moved) == 2 and any(row["doubt_pct"] == pytest.approx(100 * k["dur"] / _gpu_us(trace), rel=1e-6)
                                   for k in moved)  # the later of the two in the stream's order


def _drop(trace: dict, correlations: set[int], categories: tuple[str, ...]) -> None:
    trace["traceEvents"] = [e for e in _events(trace) if not (
        e.get("cat") in categories and (e.get("args") or {}).get("correlation") in correlations)]


def test_kernels_that_lost_their_launch_inside_the_trace_fail_with_their_share(tmp_path: Path, capsys) -> None:
    """The launch calls of kernels 20–29 removed (kernels kept): their time, over the GPU time, is in doubt."""
    lost: list[dict] = []

    def edit(trace: dict) -> None:
        lost.extend(_kernels(trace)[20:30])
        _drop(trace, {k["args"]["correlation"] for k in lost}, ("cuda_runtime", "cuda_driver"))
    trace, path = _edited(BERT, tmp_path, "no-launch.json", edit)
    share = 100 * sum(k["dur"] for k in lost) / _gpu_us(trace)
    code, rows, _ = _check(path, capsys)
    row = rows["kernels_without_launch"]
    _held(code == (1 if share >= 1 else 0) and row["kind"] == "damage", str(row))
    assert share > 1 and row["doubt_pct"] == pytest.approx(share, rel=1e-6)


def test_launches_that_lost_their_kernel_inside_the_trace_fail_at_the_mean_kernel(tmp_path: Path, capsys) -> None:
    """Kernels 20–25 removed, their launch calls kept: 6 kernels at the mean remaining kernel's duration."""
    def edit(trace: dict) -> None:
        _drop(trace, {k["args"]["correlation"] for k in _kernels(trace)[20:26]}, ("kernel",))
    trace, path = _edited(BERT, tmp_path, "no-kernel.json", edit)
    kernels = _kernels(trace)
    share = 100 * 6 * (sum(k["dur"] for k in kernels) / len(kernels)) / _gpu_us(trace)
    code, rows, _ = _check(path, capsys)
    row = rows["launches_without_gpu_event"]
    _held(code == 1 and row["kind"] == "damage" and row["value"] == 6, str(row))
    assert row["doubt_pct"] == pytest.approx(share, rel=1e-6)


def test_warm_up_kernels_at_the_head_are_an_edge_not_damage(tmp_path: Path, capsys) -> None:
    def edit(trace: dict) -> None:
        _drop(trace, {k["args"]["correlation"] for k in _kernels(trace)[:2]}, ("cuda_runtime", "cuda_driver"))
    _, path = _edited(BERT, tmp_path, "head.json", edit)
    code, rows, err = _check(path, capsys)
    assert code == 0 and rows["kernels_without_launch"]["kind"] == "edge" and "failed:" not in err


@pytest.mark.parametrize(("said", "dropped", "fails"), [
    (("WARNING", "WARNING:2026-01-01 1:1 CuptiActivityApi.cpp:300] Dropped {n} activity records"), "n", None),
    (("INFO", "INFO:2026 CuptiActivityProfiler.cpp:395] Record counts: Out-of-range = 0, Blocklisted runtime = 9, "
              "Invalid ext correlations = 0, CPU GPU out-of-order = 0, Unexpected CUDA events = 0, CUPTI stopped "
              "early? = 1"), None, True),
    (("ERROR", "ERROR:2026 CuptiActivityApi.cpp:208] Exceeded max GPU buffer count (129 > 128) - terminating "
               "tracing"), None, True),
    (("WARNING", "WARNING:2026 CuptiActivityProfiler.cpp:1] Failed to recover relationship between all profiler "
                 "and kineto events"), None, False),
])
def test_the_profilers_own_notes_of_lost_records(said: tuple[str, str], dropped: str | None, fails: bool | None,
                                                 tmp_path: Path, capsys) -> None:
    """Kineto writes the messages it logged while tracing beside traceEvents ("WARNING": [...]): a count of
    dropped records is that many mean GPU events in doubt (1 record: a note; 5: over 1% of 60 kernels'
    time); a stop or a full buffer says no count: fails; another warning is not a loss."""
    for n, expect_fail in ([(1, None), (5, None)] if dropped else [(0, fails)]):
        level, text = said

        def edit(trace: dict) -> None:
            trace[level] = [text.format(n=n)]
        trace, path = _edited(BERT, tmp_path, f"log-{level}-{n}.json", edit)
        code, rows, _ = _check(path, capsys)
        row = rows["profiler_lost_records"]
        if dropped:
            gpu = [e for e in _events(trace) if e.get("cat") in GPU and e.get("ph") == "X"]
            share = 100 * n * (_gpu_us(trace) / len(gpu)) / _gpu_us(trace)
            _held(row["kind"] == "damage" and code == (1 if share >= 1 else 0), f"{n}: {row} {code}")
            assert row["doubt_pct"] == pytest.approx(share, rel=1e-6) and row["value"] == n
        else:
            _held(code == (1 if expect_fail else 0) and row["ok"] is not expect_fail, f"{row} {code}")
            assert not expect_fail or row["doubt_pct"] is None


def _step_gpu(trace: dict, step: int, kinds: tuple[str, ...] = GPU) -> list[dict]:
    """The GPU events (of ``kinds``) whose launch call starts inside ProfilerStep#``step``, in start order."""
    span = next(e for e in _events(trace) if e.get("name") == f"ProfilerStep#{step}" and e.get("ph") == "X"
                and e.get("cat") == "user_annotation")
    launched = {e["args"]["correlation"] for e in _events(trace) if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and span["ts"] <= e["ts"] <= span["ts"] + span["dur"] and "correlation" in e.get("args", {})}
    return sorted((g for g in _events(trace) if g.get("cat") in kinds and g.get("ph") == "X"
                   and g["args"].get("correlation") in launched), key=lambda g: g["ts"])


def _steps(trace: dict) -> list[int]:
    return sorted(int(e["name"].split("#")[1]) for e in _events(trace) if e.get("cat") == "user_annotation"
                  and str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X")


def test_a_step_without_gpu_work_between_busy_steps_is_damage(tmp_path: Path, capsys) -> None:
    """The middle step's kernels removed with their launch calls (the records lost whole): the step holds no GPU
    work, taken as the median step's GPU time."""
    def edit(trace: dict) -> None:
        gone = {k["args"]["correlation"] for k in _step_gpu(trace, _steps(trace)[1])}
        _drop(trace, gone, (*GPU, "cuda_runtime", "cuda_driver"))
    original = trace_rewrite.load(STEPS)
    per_step = [sum(k["dur"] for k in _step_gpu(original, s)) for s in _steps(original)]
    trace, path = _edited(STEPS, tmp_path, "empty-step.json", edit)
    left = [sum(k["dur"] for k in _step_gpu(trace, s)) for s in _steps(trace)]
    median = (left[0] + left[2]) / 2  # the two steps left with GPU work
    code, rows, _ = _check(path, capsys)
    row = rows["steps_without_gpu_work"]
    _held(code == 1 and row["value"] == 1 and row["kind"] == "damage", str(row))
    assert len(per_step) == 3 and left[1] == 0 and row["doubt_pct"] == pytest.approx(100 * median / _gpu_us(trace), rel=1e-6)


def test_a_trace_that_ends_mid_step_is_flagged(tmp_path: Path, capsys) -> None:
    """The last step's last three kernels removed, their launch calls kept (the profiler stopped first): the
    trace's edge for the pair check, but the step's GPU time reads low: three mean kernels in doubt."""
    def edit(trace: dict) -> None:
        last = _step_gpu(trace, _steps(trace)[-1], ("kernel",))[-3:]
        _drop(trace, {k["args"]["correlation"] for k in last}, ("kernel",))
    trace, path = _edited(STEPS, tmp_path, "cut.json", edit)
    kernels = _kernels(trace)
    share = 100 * 3 * (sum(k["dur"] for k in kernels) / len(kernels)) / _gpu_us(trace)
    code, rows, _ = _check(path, capsys)
    row = rows["trace_ends_mid_step"]
    _held(row["value"] == 3 and row["kind"] == "damage" and code == (1 if share >= 1 else 0), f"{row} {code}")
    assert row["doubt_pct"] == pytest.approx(share, rel=1e-6)
    assert rows["launches_without_gpu_event"]["kind"] == "edge"


def test_a_kernel_starting_before_its_launch_is_damage(tmp_path: Path, capsys) -> None:
    """torch's first rule: kernel 40's launch call moved past the kernel's start."""
    def edit(trace: dict) -> None:
        kernel = _kernels(trace)[40]
        launch = next(e for e in _events(trace) if e.get("cat") == "cuda_runtime"
                      and e.get("args", {}).get("correlation") == kernel["args"]["correlation"])
        launch["ts"] = kernel["ts"] + 0.5
        edit.kernel = kernel  # type: ignore[attr-defined]
    trace, path = _edited(BERT, tmp_path, "causality.json", edit)
    code, rows, _ = _check(path, capsys)
    row = rows["kernel_before_launch"]
    share = 100 * edit.kernel["dur"] / _gpu_us(trace)  # type: ignore[attr-defined]
    _held(row["value"] == 1 and row["kind"] == "damage" and code == (1 if share >= 1 else 0), f"{row} {code}")
    assert row["doubt_pct"] == pytest.approx(share, rel=1e-6)


def test_nccl_metadata_missing_is_a_setting_unless_required(tmp_path: Path, capsys) -> None:
    def edit(trace: dict) -> None:
        for e in _events(trace):
            if e.get("name") == "record_param_comms":
                e["args"].pop("Collective name", None)
    _, path = _edited(COMMS, tmp_path, "no-nccl.json", edit)
    code, rows, err = _check(path, capsys)
    row = rows["nccl_metadata"]
    _held(code == 0 and row["kind"] == "setting" and row["value"] == 3 and "nccl_metadata (capture setting" in err,
          f"{row} {code}")
    code, _, err = _check(path, capsys, "--require", "nccl")
    assert code == 1 and "nccl_metadata (--require nccl)" in err


def test_one_sequence_number_with_two_backward_ops_is_damage(tmp_path: Path, capsys) -> None:
    """torch's last rule: one backward node renamed to carry another's sequence number (same forward thread)."""
    def edit(trace: dict) -> None:
        nodes = [e for e in _events(trace) if "autograd::engine::evaluate_function:" in str(e.get("name"))
                 and e.get("ph") == "X" and "Sequence number" in e.get("args", {})]
        first = nodes[0]
        other = next(n for n in nodes if n["name"] != first["name"])
        other["args"]["Sequence number"] = first["args"]["Sequence number"]
        other["args"]["Fwd thread id"] = first["args"].get("Fwd thread id")
    _, path = _edited(BACKWARD, tmp_path, "seq.json", edit)
    code, rows, _ = _check(path, capsys)
    row = rows["backward_sequence_shared"]
    _held(row["value"] == 1 and row["kind"] == "damage" and row["doubt_pct"] is not None, str(row))
    assert code == (1 if row["doubt_pct"] >= 1 else 0)


def test_require_makes_a_missing_setting_fail_and_names_are_checked(tmp_path: Path, capsys) -> None:
    def edit(trace: dict) -> None:
        for e in _events(trace):
            (e.get("args") or {}).pop("Input Dims", None)
            (e.get("args") or {}).pop("Input type", None)
    _, path = _edited(BERT, tmp_path, "no-shapes.json", edit)
    code, rows, err = _check(path, capsys)
    assert code == 0 and rows["shapes_recorded_pct"]["kind"] == "setting" and "record_shapes=True" in err
    code, _, err = _check(path, capsys, "--require", "shapes,modules")
    _held(code == 1 and "shapes_recorded_pct (--require shapes)" in err, err)
    code = main(["check", str(path), "--require", "shapez"])
    err = capsys.readouterr().err
    ok = code == 2 and err.strip().splitlines() == [
        "fuseprof: error: --require 'shapez': name settings among attribution, device, graph-capture, modules, nccl, "
        "ns, one-gpu, shapes, stream-wait-ids or all"]
    FUZZ_RESULTS["clear error" if ok else "silently wrong"] += 1
    assert ok, err


# --- the shared HTA trace with stream syncs and waits -------------------------------------------------------------


def _syncs(trace: dict, kind: str) -> list[dict]:
    return [e for e in _events(trace) if e.get("cat") == "cuda_sync" and e["args"].get("cuda_sync_kind") == kind]


@pytest.mark.parametrize("name", by_name(SYNCS))
def test_stream_wait_ids_negative_forward_or_absent(name: str, tmp_path: Path, capsys) -> None:
    """torch's stream-wait rules: an id of -1 and an id naming a later record are damage that puts no GPU time in
    doubt (notes, exit 0); ids absent from every wait are the older Kineto's way (a setting)."""
    source = trace_at(name)
    code, rows, _ = _check(source, capsys)
    assert code == 0 and rows["stream_wait_ids"]["ok"] and rows["stream_wait_forward"]["ok"]

    def negative(trace: dict) -> None:
        _syncs(trace, "Stream Wait Event")[0]["args"]["wait_on_cuda_event_record_corr_id"] = -1
        later = max((e for e in _events(trace) if e.get("name") == "cudaEventRecord"), key=lambda e: e["ts"])
        _syncs(trace, "Stream Wait Event")[1]["args"]["wait_on_cuda_event_record_corr_id"] = later["args"][
            "correlation"]
    _, path = _edited(source, tmp_path, "waits.json", negative)
    code, rows, err = _check(path, capsys)
    ids, forward = rows["stream_wait_ids"], rows["stream_wait_forward"]
    _held(code == 0 and ids["value"] == 1 and ids["kind"] == "damage" and ids["doubt_pct"] == 0
          and forward["value"] == 1 and "stream_wait_forward (0% of GPU time in doubt" in err, f"{ids} {forward}")

    def absent(trace: dict) -> None:
        for e in _syncs(trace, "Stream Wait Event"):
            e["args"].pop("wait_on_cuda_event_record_corr_id")
    _, path = _edited(source, tmp_path, "no-ids.json", absent)
    code, rows, _ = _check(path, capsys)
    assert code == 0 and rows["stream_wait_ids"]["kind"] == "setting"


@pytest.mark.parametrize("name", by_name(SYNCS))
def test_a_stream_sync_that_returns_while_its_kernel_runs_is_damage(name: str, tmp_path: Path, capsys) -> None:
    """A stream sync moved to start just after a kernel of its stream started and to end at once: it returned
    while the kernel it waits for ran. torch's rule (a sync *starting* inside a kernel) flags it too."""
    def edit(trace: dict) -> None:
        sync = _syncs(trace, "Stream Sync")[0]
        kernel = max((k for k in _kernels(trace) if k["args"]["stream"] == sync["args"]["stream"]),
                     key=lambda k: k["dur"])
        sync["ts"], sync["dur"] = kernel["ts"] + 1, 1
        edit.kernel = kernel  # type: ignore[attr-defined]
    trace, path = _edited(trace_at(name), tmp_path, "sync.json", edit)
    code, rows, _ = _check(path, capsys)
    row = rows["stream_sync_early"]
    share = 100 * edit.kernel["dur"] / _gpu_us(trace)  # type: ignore[attr-defined]
    _held(row["value"] == 1 and row["kind"] == "damage" and code == (1 if share >= 1 else 0), f"{row} {code}")
    assert row["doubt_pct"] == pytest.approx(share, rel=1e-3) and "torch's rule" in row["detail"]


def test_an_empty_first_step_is_an_edge_not_damage(tmp_path: Path, capsys) -> None:
    """The first step's GPU work removed whole (its kernels, sets and launch calls): what a profiler whose first
    step ran nothing leaves, an edge — not a step that lost its records between busy ones."""
    def edit(trace: dict) -> None:
        gone = {k["args"]["correlation"] for k in _step_gpu(trace, _steps(trace)[0])}
        _drop(trace, gone, (*GPU, "cuda_runtime", "cuda_driver"))
    _, path = _edited(STEPS, tmp_path, "empty-first.json", edit)
    code, rows, _ = _check(path, capsys)
    assert code == 0 and rows["steps_without_gpu_work"]["ok"], rows["steps_without_gpu_work"]


@pytest.mark.parametrize("hostile", [
    {"WARNING": 5}, {"WARNING": {"Dropped 9 activity records": 1}}, {"ERROR": [None, 3, ["Dropped 9 activity records"]]},
    {"INFO": "CUPTI stopped early? = 1"},
])
def test_hostile_profiler_notes_are_read_as_nothing(hostile: dict, tmp_path: Path, capsys) -> None:
    """Log lists of the wrong type (a number, an object, a string, a list of non-strings): no message, no traceback."""
    def edit(trace: dict) -> None:
        trace.update(hostile)
    _, path = _edited(BERT, tmp_path, "hostile-log.json", edit)
    code, rows, err = _check(path, capsys)
    _held(code == 0 and rows["profiler_lost_records"]["ok"] and "Traceback" not in err, f"{code} {err}")


@pytest.mark.parametrize("name", by_name(SYNCS))
@pytest.mark.parametrize("args", [None, [], {"cuda_sync_kind": "Stream Wait Event",
                                             "wait_on_cuda_event_record_corr_id": "abc"},
                                  {"cuda_sync_kind": 7, "stream": "x", "device": None}])
def test_hostile_sync_records_give_no_traceback(name: str, args: object, tmp_path: Path, capsys) -> None:
    """A sync record whose args are null, a list, a text id or a number kind: counted as what it says (an id that
    is no number is no id), never a traceback."""
    def edit(trace: dict) -> None:
        _syncs(trace, "Stream Wait Event")[0]["args"] = args
    _, path = _edited(trace_at(name), tmp_path, "hostile-sync.json", edit)
    code, rows, err = _check(path, capsys)
    _held(code in (0, 1) and bool(rows) and "Traceback" not in err, f"{code} {err}")


# the shared traces check cannot analyse at all (exit 2, one line): no GPU work by design
NOT_ANALYSABLE = ("fresh4/hta_cpu_only_rank34_of300_gloo.json.gz", "fresh4/hta_cupti_range_profiler_counters_a100.json.gz")


@pytest.mark.parametrize("name", by_name(*(SHARED + n for n in SHARED_FILES)))
def test_check_passes_every_shared_trace_whose_findings_are_settings(name: str, capsys) -> None:
    """Issue 63's goal: no shared trace holds damage putting 1% of its GPU time in doubt (docs/validation.md's table,
    scripts/check_shared.py), so check exits 0 on each, its settings, edges and window as notes; before, 9 exited 1
    (graph replays without their capture, a long idle gap, kernels on an undescribed device)."""
    code, rows, err = _check(trace_at(name), capsys)
    if name.removeprefix(SHARED) in NOT_ANALYSABLE:
        assert code == 2 and err.startswith("fuseprof: error: "), err
        return
    failed = {c: (r["kind"], r["doubt_pct"]) for c, r in rows.items() if not r["ok"]}
    assert code == 0 and "failed:" not in err, (code, err)
    assert all(kind != "damage" or (share is not None and share < 1) for kind, share in failed.values()), failed


def test_a_zero_start_on_an_epoch_clock_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """A kernel written at ts 0 in a trace whose clock is epoch µs (CUPTI's zero start): the reader refuses the file
    (a timestamp more than a day from the others), exit 2 in one line — never a pass."""
    def edit(trace: dict) -> None:
        _kernels(trace)[30]["ts"] = 0
    _, path = _edited(BERT, tmp_path, "zero-start.json", edit)
    code, _, err = _check(path, capsys)
    lines = [line for line in err.strip().splitlines() if line.startswith("fuseprof: error: ")]
    ok = code == 2 and len(lines) == 1 and "a damaged timestamp?" in lines[0] and "Traceback" not in err
    FUZZ_RESULTS["clear error" if ok else "silently wrong"] += 1
    assert ok, (code, err)


@pytest.mark.parametrize(("name", "header", "said"), [
    ("train_sgd_foreach", {}, "no nn.Module paths (captured without with_stack=True / with_modules=True)"),
    ("train_sgd_foreach", {"with_modules": 1}, "no nn.Module paths (the trace says with_stack or with_modules was "
                                               "on, but no kernel was launched inside an nn.Module's call: a graph "
                                               "replay launches its kernels outside it)"),
    ("train_fused", {}, "no input shapes in the trace (captured without record_shapes=True)"),
    ("train_fused", {"record_shapes": 1}, "no input shapes in the trace (the trace says record_shapes was on, and "
                                          "no launching op recorded one)"),
])
def test_a_missing_column_is_blamed_on_a_setting_only_where_the_trace_does_not_say_it_was_on(
        tmp_path: Path, name: str, header: dict[str, Any], said: str) -> None:
    """h100g/train_sgd_foreach was captured with record_shapes only and h100g/train_fused with activities only (their
    top levels say so): no event carries a module, and in train_fused none a shape. Told the setting was on, the note
    says what the trace says instead of 'captured without' (a `fuseprof run` of a script with no nn.Module records
    with_modules on and no module)."""
    import gzip

    from fuseprof.analysis import analyze

    doc = json.loads(gzip.decompress((FIXTURES / "truth_unprofiled" / "h100g" / f"{name}.json.gz").read_bytes()))
    assert not doc.get("with_stack") and not doc.get("with_modules")
    assert doc.get("record_shapes", 0) == (name == "train_sgd_foreach")
    assert not any(e.get("args", {}).get("Input Dims") for e in doc["traceEvents"]) or name != "train_fused"
    doc.update(header)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    notes = analyze(path)[0].notes
    assert said in " ".join(notes) and sum(said.split(" (")[0] in n for n in notes) == 1
