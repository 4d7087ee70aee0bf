"""Iterations without ProfilerStep (fuseprof/analysis/facts/iterations.py), scored against the profiler's own steps:
every real trace with two or more ``ProfilerStep#N`` ranges is read again without them, and the iterations found
from its launch sequence must have the true step's length and the true step's launches. Engine step ranges
(SGLang, vLLM) are counted from the raw files."""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.iterations import find_iterations, step_at
from fuseprof.analysis.running.analyze import windowed_events
from fuseprof.cli import main
from fuseprof.model.registry import IterationRange
from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.registry_schema import load_registry
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, ROOT, by_name, shared_traces, trace_at

TRUTH = FIXTURES / "truth"
STEPPED = [str(p.relative_to(ROOT)) for p in sorted([*TRUTH.glob("*.json.gz"), *(TRUTH / "decode_graph").glob("replay*.json.gz")])
           if ".et." not in p.name] + ["shared:mi300_resnet_act_checkpoint.json.gz"]


def _launch_units(events: pd.DataFrame) -> pd.Series:
    """Per event, the launch it belongs to (a graph launch's kernels together), counted apart from the module."""
    return events["graph_replay"].astype("string").radd("g").fillna(
        "e" + pd.Series(events.index, index=events.index).astype("string"))


def _launched(events: pd.DataFrame) -> collections.Counter[tuple[str, ...]]:
    """What the events' launches launched: per launch, its kernels' names in order."""
    return collections.Counter(tuple(part["name"]) for _, part in events.groupby(_launch_units(events), sort=False))


@pytest.mark.parametrize("name", by_name(*STEPPED))
def test_iterations_from_the_launch_sequence_are_the_profilers_steps(name: str) -> None:
    tables = read_trace_tables(trace_at(name))
    steps = tables.annotations[tables.annotations["name"].str.match(r"^ProfilerStep#\d+$")]
    assert len(steps) >= 2
    events = windowed_events(tables).every
    anchor = events["op_start_ns"].fillna(events["launch_start_ns"])
    middle = steps.sort_values("start_ns").iloc[len(steps) // 2]
    in_middle = events[(anchor >= middle["start_ns"]) & (anchor <= middle["start_ns"] + middle["dur_ns"])]
    true_launches = _launch_units(in_middle).nunique()

    bare = dataclasses.replace(tables, annotations=tables.annotations.drop(steps.index))
    found = find_iterations(bare, events, DEFAULT)
    assert f"a period of {true_launches} launches" in found.source
    assert len(steps) - 1 <= len(found.ranges) <= len(steps)  # a found iteration may start elsewhere in the loop
    # each found iteration launches what one profiler step launched (the same kernels, maybe in rotation)
    label = step_at(found, anchor)
    want = _launched(in_middle)
    for name, part in events[label.notna()].groupby(label[label.notna()]):
        assert _launched(part) == want, name


@pytest.mark.parametrize("name", ["h100_bert_small_uncased.json.gz", "mi300_Qwen1.5-0.5B.json.gz",
                                  "xdit_sd_3.5_profile.json.gz"])
@pytest.mark.shared
def test_a_single_forward_pass_has_no_iterations_from_its_repeating_layers(name: str) -> None:
    """One profiled step of one forward: its layers repeat, its embedding and head do not — no loop."""
    tables = read_trace_tables(shared_traces() / name)
    steps = tables.annotations["name"].str.match(r"^ProfilerStep#\d+$")
    bare = dataclasses.replace(tables, annotations=tables.annotations[~steps])
    assert not find_iterations(bare, windowed_events(tables).every, DEFAULT).found


def _raw_annotation(path: Path, prefix: str) -> tuple[str, float, float, list[dict]]:
    trace = json.loads(gzip.decompress(path.read_bytes()))
    events = trace["traceEvents"]
    (step,) = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith(prefix)]
    return step["name"], step["ts"], step["ts"] + step["dur"], events


@pytest.mark.parametrize(("name", "prefix", "source"), [
    ("sglang_Qwen3-8B_decode.json.gz", "step[DECODE", "SGLang"),
    ("sglang_qwen3_8b_prefilldecode.json.gz", "step[EXTEND", "SGLang"),
    ("vllm_decode_full_graph_execution.json.gz", "execute_", "vLLM"),
])
@pytest.mark.shared
def test_an_engines_own_step_range_is_an_iteration(name: str, prefix: str, source: str, capsys) -> None:
    path = shared_traces() / name
    label, start, end, events = _raw_annotation(path, prefix)
    # the GPU events whose launch call (by correlation) started inside the engine's step range
    launched = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"
                and start <= e["ts"] <= end and "correlation" in e.get("args", {})}
    inside = sum(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"].get("correlation") in launched
                 for e in events)
    (result,) = analyze(path)
    assert result.window == "window: the whole trace"  # an engine's steps are shown, the tables keep the trace
    row = result.steps.set_index("step").loc[f"{label} #1"]
    assert row["events"] == inside
    (windowed,) = analyze(path, window="steps")
    assert len(windowed.events) == inside and windowed.window == f"window: the iterations of {source} (#1)"


def test_a_users_iteration_range_comes_from_the_registry(tmp_path: Path) -> None:
    """A range the default registry does not know (TRT-LLM's, a user's own) named in a registry file."""
    path = TRUTH / "mlp_plain.json.gz"
    tables = read_trace_tables(path)
    renamed = tables.annotations.assign(name=tables.annotations["name"].str.replace("ProfilerStep#", "decode-",
                                                                                    regex=False))
    bare = dataclasses.replace(tables, annotations=renamed)
    file = tmp_path / "mine.toml"
    file.write_text('[[iteration_range]]\nsource = "my engine"\nranges = "^decode-\\\\d+$"\n')
    registry = load_registry(file, DEFAULT)
    assert registry.iteration_ranges[0] == IterationRange("my engine", r"^decode-\d+$")
    found = find_iterations(bare, windowed_events(tables).every, registry)
    assert found.source == "my engine"
    assert found.ranges["start_ns"].tolist() == sorted(tables.annotations.loc[
        tables.annotations["name"].str.startswith("ProfilerStep#"), "start_ns"])


@pytest.mark.shared
def test_window_steps_without_any_iteration_is_one_line(capsys) -> None:
    path = shared_traces() / "torch_compile_triton.json.gz"
    assert main(["analyze", str(path), "--window", "steps"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no iterations" in err[0]
