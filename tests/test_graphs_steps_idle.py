"""Graph attribution, profiler steps, idle causes and the integrity check on traces with known answers.

``tests/fixtures/h200-graphs`` was captured on the H200 by ``scripts/capture_graph_pair.py``: a
two-layer bf16 block captured into one CUDA graph (``graph-capture``), the graph replayed in three
profiler steps (``graph-replay``), and the same block run eagerly four times with a 3 ms host sleep
(``record_function("host_sleep")``) before its second layer and a ``.item()`` after it
(``idle-causes``). Expected values are counted from the raw JSON in each test.
"""

from __future__ import annotations

import gzip
import json
from itertools import takewhile
from pathlib import Path

import pytest

from fuseprof.analysis import analyze, analyze_trace
from fuseprof.analysis.facts.idle import CAUSES
from tests.conftest import FIXTURES

GRAPHS = FIXTURES / "h200-graphs"
CAPTURE, REPLAY, IDLE = GRAPHS / "graph-capture.json.gz", GRAPHS / "graph-replay.json.gz", GRAPHS / "idle-causes.json.gz"
BERT = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"


def _raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _kernels(events: list[dict]) -> list[dict]:
    return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])


def test_cuda_graph_replays_take_the_ops_of_the_eager_run_kernel_by_kernel() -> None:
    """The eager trace runs the same block: its kernel names and launching ops, per step, are what
    each replay must show (the CUDA capture names no kernels, so this checks the count-and-order
    match from outside)."""
    eager = _raw(IDLE)["traceEvents"]
    ops = {e["args"]["External id"]: e["name"] for e in eager if e.get("cat") == "cpu_op"}
    per_step = len(_kernels(eager)) // 4
    expected = [(e["name"], ops[e["args"]["External id"]]) for e in _kernels(eager)[:per_step]]
    replay = _raw(REPLAY)["traceEvents"]
    launches = [e for e in replay if e.get("name") == "cudaGraphLaunch"]
    assert per_step == 60 and len(launches) == 3 and len(_kernels(replay)) == 180

    result = analyze_trace(REPLAY, graph_capture=CAPTURE)
    events = result.events.sort_values("start_ns")
    for number in (1, 2, 3):
        mine = events[events["graph_replay"] == number]
        assert list(zip(mine["name"], mine["op"])) == expected
    assert result.integrity.set_index("check").loc["graph_kernel_time_attributed_pct", "value"] == 100
    launch = result.launches.set_index("launch_api").loc["cudaGraphLaunch"]
    assert launch["launches"] == 3 and launch["kernels_per_launch"] == 60
    assert "count and order" in " ".join(result.notes)


def test_without_the_capture_graph_kernels_still_get_categories_and_the_check_fails() -> None:
    result = analyze_trace(REPLAY)
    checks = result.integrity.set_index("check")
    assert checks.loc["graph_kernel_time_attributed_pct", "value"] == 0
    assert not checks.loc["graph_kernel_time_attributed_pct", "ok"]
    assert "--graph-capture" in checks.loc["graph_kernel_time_attributed_pct", "detail"]
    assert set(result.categories["category"]) == {"GEMM", "elementwise", "copy/cast", "reduction"}


def test_the_capture_of_another_graph_fails_the_check(tmp_path: Path) -> None:
    """The capture with its ops' names rotated by 7 (in time order): a graph as long, built from other ops. CUDA
    pairs by count and order alone, so every kernel still gets an op — but the replay's GEMM kernels (named so in
    the raw file) now carry other ops, and the check says the capture is another graph's. The true capture
    passes (the test above)."""
    capture = _raw(CAPTURE)
    ops = sorted((e for e in capture["traceEvents"] if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    names = [e["name"] for e in ops]
    for event, name in zip(ops, names[7:] + names[:7]):
        event["name"] = name
    (tmp_path / "other-capture.json").write_text(json.dumps(capture))
    result = analyze_trace(REPLAY, graph_capture=tmp_path / "other-capture.json")
    check = result.integrity.set_index("check").loc["graph_kernel_time_attributed_pct"]
    assert not check["ok"] and "the capture is another graph's" in check["detail"]
    disagree = result.events[result.events["capture_disagrees"]]
    assert len(disagree) and disagree["name"].str.contains("nvjet|cublasLt").all()  # GEMMs by their raw names
    true = analyze_trace(REPLAY, graph_capture=CAPTURE)
    assert not true.events["capture_disagrees"].any()


def test_a_folder_with_both_traces_pairs_them() -> None:
    (result,) = [r for r in analyze(GRAPHS) if r.name.endswith("graph-replay.json.gz")]
    assert result.events["op"].notna().all()
    assert any("graph-capture.json.gz used to attribute" in n for n in result.notes)


def test_profiler_steps_of_the_replay_trace() -> None:
    raw = _raw(REPLAY)["traceEvents"]
    spans = {e["name"]: e for e in raw if e.get("cat") == "gpu_user_annotation"}
    result = analyze_trace(REPLAY, graph_capture=CAPTURE)
    steps = result.steps.set_index("step")
    assert list(steps.index) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    for step in steps.index:
        kernels = [e for e in _kernels(raw) if spans[step]["ts"] <= e["ts"] < spans[step]["ts"] + spans[step]["dur"]]
        ends = [round(e["ts"] * 1000) + round(e["dur"] * 1000) for e in kernels]  # µs with 3 decimals -> ns
        assert steps.loc[step, "events"] == len(kernels) == 60
        assert steps.loc[step, "span_ns"] == max(ends) - round(kernels[0]["ts"] * 1000)
    assert analyze_trace(REPLAY, window="2").steps.equals(result.steps)
    assert len(analyze_trace(REPLAY, window="2-3").events) == 120


def test_a_known_host_sleep_is_found_as_the_cause_of_idle_time() -> None:
    raw = _raw(IDLE)["traceEvents"]
    sleeps = [e for e in raw if e.get("name") == "host_sleep"]
    assert len(sleeps) == 4 and all(e["dur"] >= 3000 for e in sleeps)
    result = analyze_trace(IDLE)
    # no ProfilerStep: a row per iteration of its launch sequence and one for the time between them
    rows = result.idle
    assert rows["step"].tolist()[-1] == "(between steps)" and len(rows) >= 2
    assert result.verdict.iloc[0]["bound"] == "host-bound"
    row = rows.drop(columns=["step", "verdict"]).sum()
    # each sleep leaves the GPU idle, waiting for the next launch, for at least its length
    assert row["idle_launch_ns"] >= sum(e["dur"] for e in sleeps) * 1000
    assert sum(row[f"idle_{c}_ns"] for c in CAUSES) == row["span_ns"] - row["busy_ns"]
    top = result.idle_host.iloc[0]
    assert top["name"] == "host_sleep" and top["kind"] == "range"
    assert top["overlap_ns"] == pytest.approx(sum(e["dur"] for e in sleeps) * 1000, rel=0.02)
    assert row["idle_sync_ns"] > 0  # the .item() of each step: cudaStreamSynchronize while the GPU finished


def test_inside_graph_replay_steps_the_gpu_is_the_bound() -> None:
    idle = analyze_trace(REPLAY, graph_capture=CAPTURE).idle.set_index("step")
    assert (idle.loc[["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"], "verdict"] == "GPU-bound").all()
    steps = analyze_trace(REPLAY, graph_capture=CAPTURE).steps.set_index("step")
    raw = _raw(REPLAY)["traceEvents"]
    begins = {e["name"]: round(e["ts"] * 1000) for e in raw if e.get("cat") == "user_annotation"
              and str(e.get("name", "")).startswith("ProfilerStep#")}
    ends = sorted(round(e["ts"] * 1000) + round(e["dur"] * 1000) for e in _kernels(raw))
    for step in ("ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"):
        causes = idle.loc[step, [f"idle_{c}_ns" for c in CAUSES]].sum()
        # issue 59: the step owns the time from its start (or the end of the GPU's work before, if later) to its
        # first GPU work, beside the gaps inside its GPU span
        first = min(round(e["ts"] * 1000) for e in _kernels(raw) if round(e["ts"] * 1000) >= begins[step])
        before = max([x for x in ends if x <= first], default=first)  # no GPU work before it: no gap
        leading = max(first - max(begins[step], before), 0)
        assert causes == steps.loc[step, "idle_ns"] + leading
        assert idle.loc[step, "span_ns"] == steps.loc[step, "span_ns"] + leading


def _edited(tmp: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    trace = _raw(BERT)
    edit(trace["traceEvents"])
    path = tmp / "edited.json"
    path.write_text(json.dumps(trace))
    return path


def test_integrity_flags_microsecond_rounded_timestamps(tmp_path: Path) -> None:
    def rounded(events: list[dict]) -> None:
        for e in events:
            if isinstance(e, dict) and "ts" in e:
                e["ts"] = float(round(e["ts"]))
                if "dur" in e:
                    e["dur"] = float(round(e["dur"]))
    checks = analyze_trace(_edited(tmp_path, rounded)).integrity.set_index("check")
    assert checks.loc["timestamp_resolution_ns", "value"] == 1000 and not checks.loc["timestamp_resolution_ns", "ok"]
    assert analyze_trace(BERT).integrity.set_index("check").loc["timestamp_resolution_ns", "value"] == 1


def test_integrity_counts_kernels_whose_launch_is_missing(tmp_path: Path) -> None:
    raw = _raw(BERT)["traceEvents"]
    dropped = {e["args"]["correlation"] for e in _kernels(raw)[:5]}

    def drop(events: list[dict]) -> None:
        events[:] = [e for e in events if not (e.get("cat") == "cuda_runtime"
                                              and e.get("args", {}).get("correlation") in dropped)]
    result = analyze_trace(_edited(tmp_path, drop), window="all")
    checks = result.integrity.set_index("check")
    assert checks.loc["kernels_without_launch", "value"] == 5 and not checks.loc["kernels_without_launch", "ok"]


def test_integrity_measures_kernels_that_overlap_on_one_stream() -> None:
    """B200 trace: its kernels' durations sum to 69,278 ns more than the union of their intervals
    on its one compute stream (tests/test_thirdparty_traces.py derives that from the raw file); all of it is
    programmatic dependent launch (tests/test_dependent_launch.py), so the check passes and says so."""
    checks = analyze_trace(FIXTURES / "thirdparty" / "b200_eager.json.gz").integrity.set_index("check")
    assert checks.loc["overlapping_kernel_ns", "value"] == 69_278 and checks.loc["overlapping_kernel_ns", "ok"]
    assert "programmatic dependent launch" in checks.loc["overlapping_kernel_ns", "detail"]


def _union_ns(kernels: list[dict]) -> int:
    """The busy time of raw kernel events (µs with three decimals, so exact in ns), by a sweep of their own."""
    busy, end = 0, None
    for start, stop in sorted((round(k["ts"] * 1000), round((k["ts"] + k["dur"]) * 1000)) for k in kernels):
        if end is None or start > end:
            busy, end = busy + stop - start, stop
        elif stop > end:
            busy, end = busy + stop - end, stop
    return busy


def test_a_kernel_written_twice_under_one_launch_fails_its_check_and_flags_the_timeline(tmp_path: Path) -> None:
    """BERT's longest kernel copied, correlation id and all, 1 ms after the trace's last kernel: a launch runs one
    kernel, so the check counts the copy and the timeline, which counts it, says so."""
    def copy_one(events: list[dict]) -> None:
        kernels = _kernels(events)
        again = dict(max(kernels, key=lambda k: k["dur"]))
        again["ts"] = max(k["ts"] + k["dur"] for k in kernels) + 1000.0
        events.append(again)
    result = analyze_trace(_edited(tmp_path, copy_one))
    checks = result.integrity.set_index("check")
    assert checks.loc["kernels_written_twice", "value"] == 1 and not checks.loc["kernels_written_twice", "ok"]
    assert analyze_trace(BERT).integrity.set_index("check").loc["kernels_written_twice", "ok"]
    from fuseprof.analysis.facts.integrity import failed_for
    from fuseprof.analysis.running.sections import table_spec
    assert failed_for(table_spec("timeline").rests_on, result.integrity) == ["kernels_written_twice (1)"]


def test_two_gpus_numbering_their_streams_alike_are_two_streams(tmp_path: Path) -> None:
    """One process driving two GPUs: every other BERT kernel moved to device 1, stream ids kept. The timeline has
    a row per GPU and stream, each busy for the union of its own kernels (from the raw file); nothing overlaps on
    a stream; the check says two GPUs."""
    moved: list[dict] = []

    def alternate(events: list[dict]) -> None:
        for i, kernel in enumerate(sorted(_kernels(events), key=lambda k: k["ts"])):
            if i % 2:
                kernel["args"]["device"] = 1
                moved.append(kernel)
    result = analyze_trace(_edited(tmp_path, alternate), window="all")
    checks = result.integrity.set_index("check")
    assert checks.loc["gpus_in_trace", "value"] == 2 and not checks.loc["gpus_in_trace", "ok"]
    assert checks.loc["overlapping_kernel_ns", "ok"]
    rows = result.timeline.set_index("stream")
    stream = moved[0]["args"]["stream"]
    on_one = [k for k in moved if k["args"]["stream"] == stream]
    assert rows.loc[f"1:{stream}", "busy_ns"] == _union_ns(on_one)
    assert rows.loc[f"1:{stream}", "events"] == len(on_one)


def test_two_processes_merged_in_one_file_with_agreeing_clocks_fail_their_check(tmp_path: Path) -> None:
    """BERT's trace merged with a copy of itself from another process (another pid, its ids offset, its kernels
    on another stream, the same clock: nothing overlaps and no gap betrays it): the host_processes check fails,
    counting the raw file's host pids, and the timeline says it rests on it; BERT alone passes."""
    def merged(events: list[dict]) -> None:
        copies = []
        for event in events:
            if event.get("ph") != "X":
                continue
            copy = json.loads(json.dumps(event))
            copy["pid"] = copy["pid"] + 1000 if isinstance(copy["pid"], int) else f"{copy['pid']}-b"
            args = copy.get("args", {})
            for key in ("correlation", "External id"):
                if isinstance(args.get(key), int):
                    args[key] += 10**6
            if "stream" in args:
                args["stream"] += 100
                copy["tid"] = args["stream"]
            copies.append(copy)
        events.extend(copies)
    path = _edited(tmp_path, merged)
    raw = json.loads(path.read_text())["traceEvents"]
    host = {e["pid"] for e in raw if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver")}
    result = analyze_trace(path, window="all")
    checks = result.integrity.set_index("check")
    assert checks.loc["host_processes", "value"] == len(host) == 2 and not checks.loc["host_processes", "ok"]
    assert checks.loc["overlapping_kernel_ns", "ok"] and checks.loc["largest_gpu_gap_ns", "ok"]
    from fuseprof.analysis.facts.integrity import failed_for
    from fuseprof.analysis.running.sections import table_spec
    assert failed_for(table_spec("timeline").rests_on, result.integrity) == ["host_processes (2)"]
    assert analyze_trace(BERT).integrity.set_index("check").loc["host_processes", "ok"]


def test_an_ops_category_is_that_of_the_kernels_holding_most_of_its_time(tmp_path: Path) -> None:
    """A memset launched by an aten::addmm ahead of its GEMM kernel: the op stays a GEMM."""
    raw = _raw(BERT)["traceEvents"]
    ops = {e["args"]["External id"]: e for e in raw if e.get("cat") == "cpu_op"}
    gemm = next(e for e in _kernels(raw) if ops[e["args"]["External id"]]["name"] == "aten::addmm")

    def add_memset(events: list[dict]) -> None:
        events.append({**gemm, "cat": "gpu_memset", "name": "Memset (Device)", "ts": gemm["ts"] - 1.0, "dur": 0.5})
    result = analyze_trace(_edited(tmp_path, add_memset))
    rows = result.top_ops[result.top_ops["op"] == "aten::addmm"]
    assert set(rows["category"]) == {"GEMM"}


def test_events_a_chosen_window_leaves_out_are_what_was_asked_not_a_failure(capsys) -> None:
    """The graph pair with --window 2-3 (the README's example): the events outside are counted and said, and
    `check` passes; the whole trace leaves none out."""
    from fuseprof.cli import main

    pair = [str(GRAPHS / "graph-replay.json.gz"), "--graph-capture", str(GRAPHS / "graph-capture.json.gz")]
    assert main(["check", *pair, "--window", "2-3"]) == 0
    # the row with its detail's wrapped lines (the kind and in-doubt columns, e4b8943, narrowed the detail column)
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("events_outside_window"))
    wrapped = [lines[at], *takewhile(lambda x: x[:1] == " " and x.strip(), lines[at + 1:])]
    line = " ".join(x.strip() for x in wrapped)
    assert line.split()[1] == "60" and " ok " in line and "as --window 2-3 asks" in line
    assert main(["check", *pair, "--window", "all"]) == 0
    assert next(x for x in capsys.readouterr().out.splitlines() if x.startswith("events_outside_window")).split()[1] == "0"
