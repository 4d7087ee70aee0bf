"""Every trace there is, in every view and format: each shared third-party trace (a graph replay with the capture
beside it, the 2-GPU pairs as rank sets) and each committed trace under traces/ runs through ``analyze`` (table,
csv, json), ``fusion`` and ``audit`` (table, json) with exit 0, and where it has launches at least 95% of its
kernel time is attributed to the op that launched it (graph replays: 99%, through their capture; replays whose
capture is in no trace are flagged, with what to pass)."""

from __future__ import annotations

import csv
import fnmatch
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from fuseprof.cli import main
from tests.conftest import ROOT, SHARED, SHARED_FILES, trace_at

CAPTURES = {  # a replay trace and the capture of its graphs, as their sources pair them (SOURCE.md)
    "vllm_prefilldecode_piecewise_graph_execution.json.gz": "vllm_prefilldecode_piecewise_graph_capture.json.gz",
    "vllm_decode_full_graph_execution.json.gz": "vllm_decode_full_graph_capture.json.gz",
    "sglang_Qwen3-8B_decode.json.gz": "sglang_decode_capture_bs32.json.gz",
}
RANK_SETS = ("ddp_step", "tp_mlp", "tp_mlp_straggle")


def _cases() -> list[Any]:
    """(name, the files given to fuseprof) by name: the shared traces' cases marked `shared`, resolved inside
    the test; the committed bundles under traces/."""
    top = [n for n in SHARED_FILES if "/" not in n and n not in CAPTURES.values()]
    cases = [(n, [SHARED + n, *([SHARED + CAPTURES[n]] if n in CAPTURES else [])]) for n in top]
    cases += [(f"h200_2gpu/{name}", [SHARED + n for n in fnmatch.filter(SHARED_FILES, f"h200_2gpu/{name}_rank*.json.gz")])
              for name in RANK_SETS]
    shared = [pytest.param(name, paths, id=name, marks=pytest.mark.shared) for name, paths in cases]
    bundles = sorted(p for p in (ROOT / "traces").iterdir() if list((p / "raw").glob("*.json*")))
    return shared + [pytest.param(f"traces/{b.name}", [f"traces/{b.name}"], id=f"traces/{b.name}") for b in bundles]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, (args, err[-2000:])
    return out


@pytest.mark.parametrize(("name", "names"), _cases())
def test_every_view_in_every_format_exits_0_and_attributes_the_kernels(name: str, names: list[str],
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    paths = [trace_at(n) for n in names]
    given = [str(p) for p in paths]
    body = json.loads(_run(["analyze", *given, "--format", "json"], capsys))
    assert _run(["analyze", *given], capsys).strip()
    rows = list(csv.DictReader(io.StringIO(_run(["analyze", *given, "--format", "csv"], capsys))))
    assert rows and {"trace", "table"} <= set(rows[0])
    for verb in ("fusion", "audit"):
        assert _run([verb, *given], capsys).strip()
        assert json.loads(_run([verb, *given, "--format", "json"], capsys)) is not None
    traces = {k: v for k, v in body.items() if k not in ("across_ranks", "schema_version")}
    assert traces and (len(paths) < 2 or name.startswith("h200_2gpu/") or len(traces) == 1)
    for trace, tables in traces.items():
        checks = {row["check"]: row for row in tables["integrity"]}
        # no real trace holds a duration or an allocator record no run can have (tests/test_bounded_inputs.py edits them in)
        assert checks["impossible_durations"]["ok"] and checks["memory_records_impossible"]["ok"], (trace, [
            checks[c]["detail"] for c in ("impossible_durations", "memory_records_impossible")])
        graph = checks.get("graph_kernel_time_attributed_pct")
        replays = graph is not None and graph["value"] is not None
        capture_missing = replays and len(paths) == 1 and not _captures_graphs(paths[0])
        if capture_missing and _launches_eagerly(paths[0]):  # c6dd24b: the trace's own eager warm-up steps
            assert graph["value"] >= 99 and "warm-up 0%" not in graph["detail"], (trace, graph)  # name the replays
        elif capture_missing:  # replays of graphs captured before the profiler started: said, with what to pass
            assert not graph["ok"] and "pass it with --graph-capture" in graph["detail"], (trace, graph)
        elif replays:  # the capture is there: every replay attributed
            assert graph["value"] >= 99, (trace, graph)
        gpu_span = {row["step"]: row["span_ns"] for row in tables["steps"]}
        for row in tables.get("critical_path", []):  # the path runs from the step's start to its end, to the ns
            assert row["path_ns"] == row["span_ns"] and row["span_ns"] >= gpu_span.get(row["step"], 0), (trace, row)
        if checks["kernels_without_launch"]["value"] == 0 and not capture_missing:
            assert checks["attributed_kernel_time_pct"]["value"] >= 95, (trace, checks["attributed_kernel_time_pct"])


def _launches_eagerly(path: Path) -> bool:
    """Whether a trace (or a bundle's raw trace) launches kernels one by one as well as by graph launches: eager
    warm-up steps an unattributed replay can be aligned to, counted from its raw runtime calls."""
    files = [path] if path.is_file() else sorted((path / "raw").glob("*.json*"))
    texts = [gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes() for f in files]
    return any(b"GraphLaunch" in t and (b'"cudaLaunchKernel' in t or b'"hipLaunchKernel' in t) for t in texts)


def _captures_graphs(path: Path) -> bool:
    """Whether a trace (or a bundle's raw trace) records a stream capture, counted from its raw text."""
    files = [path] if path.is_file() else sorted((path / "raw").glob("*.json*"))
    return any(b"StreamBeginCapture" in (gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes())
               for f in files)
