"""``fuseprof analyze`` and the launch analysis on the committed whole-model H200 traces (a 4-layer
Llama, one prefill of 256 tokens and 8 decode steps; eager and torch.compile), captured with
``scripts/capture_model_trace.py`` and ingested as bundles."""

from __future__ import annotations

import gzip
import json

import pytest

import fuseprof
from fuseprof.analysis import analyze
from fuseprof.cli import main
from fuseprof.model.launches import lanes, launch_gaps
from tests.conftest import FIXTURES, TRACES, covered_ns

EAGER = TRACES / "llama4l-eager-h200"
COMPILED = TRACES / "llama4l-compiled-h200"


@pytest.fixture(scope="module")
def eager():
    (result,) = analyze(EAGER, ceilings=TRACES)  # the measured H200 roofs of the ceilings bundle there
    return result


def _raw_events(bundle):
    (trace,) = (bundle / "raw").glob("*.json.gz")
    return json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]


def test_every_gpu_event_is_a_row_and_the_totals_are_exact(eager) -> None:
    raw = _raw_events(EAGER)
    by_cat = {c: [e for e in raw if e.get("cat") == c] for c in ("kernel", "gpu_memcpy", "gpu_memset")}
    assert [len(v) for v in by_cat.values()] == [1729, 9, 4]
    events = eager.events
    assert len(events) == 1742
    # exact to the ns: each dur written with three decimals of µs, summed as integers
    exact = sum(round(e["dur"] * 1000) for e in by_cat["kernel"])
    assert events.loc[events["kind"] == "kernel", "dur_ns"].sum() == exact
    timeline = eager.timeline.set_index("stream").loc["all"]
    assert timeline["memcpy_ns"] == sum(round(e["dur"] * 1000) for e in by_cat["gpu_memcpy"])
    assert timeline["memset_ns"] == sum(round(e["dur"] * 1000) for e in by_cat["gpu_memset"])
    # busy and span from the raw intervals in integer ns, merged here by a plain sweep
    intervals = sorted((round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e["dur"] * 1000))
                       for events in by_cat.values() for e in events)
    assert timeline["busy_ns"] == covered_ns(intervals)
    assert timeline["span_ns"] == max(end for _, end in intervals) - intervals[0][0]


def test_categories_modules_and_steps_of_the_llama_trace(eager) -> None:
    cats = eager.categories.set_index("category")
    # 4 layers x 9 steps x (QKV, O, gate, up, down) + the LM head per step = 189 GEMMs, + the 32 ...
    assert cats.loc["GEMM", "count"] == 221
    assert cats.loc["attention", "count"] > 0 and cats.loc["memset", "count"] == 4
    raw = [e for e in _raw_events(EAGER) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    total_ns = sum(round(e["dur"] * 1000) for e in raw)
    memsets = sum(round(e["dur"] * 1000) for e in raw if e["cat"] == "gpu_memset")
    assert cats.loc["memset", "share_pct"] == pytest.approx(100 * memsets / total_ns)
    events = eager.events
    rms = events[events["module"].fillna("").str.contains("RMSNorm")]
    assert set(rms["op"]) >= {"aten::pow", "aten::mean", "aten::rsqrt", "aten::mul", "aten::add", "aten::copy_"}
    assert set(events["step"].dropna()) == {"prefill", *(f"decode_step #{i}" for i in range(8))}


def test_per_op_roofline_from_recorded_shapes(eager) -> None:
    roof = eager.op_roofline.set_index("signature")
    assert eager.roof.label == "NVIDIA H200 (measured)"  # named with ceilings=
    # the decode-step gate projection: x (1, 1, 2048) through F.linear -> aten::mm (1, 2048) x (2048, 5632)
    gate = roof[roof.index.str.startswith("aten::mm [[1, 2048], [2048, 5632]]")].iloc[0]
    assert gate["flops"] == 2 * 1 * 2048 * 5632
    assert gate["dram_bytes"] == (1 * 2048 + 2048 * 5632 + 1 * 5632) * 2
    assert gate["bound"] == "memory" and gate["roof_pipe"] == "tensor_bf16"
    assert 0 < gate["pct_of_roof"] < 100


def test_launch_analysis_groups_a_trace_without_variants_by_step_and_stream() -> None:
    kernels = fuseprof.load(EAGER)
    assert kernels["variant"].isna().all()
    assert lanes(kernels) == ["step", "stream"]
    gaps = launch_gaps(kernels[kernels["step"].fillna("").str.startswith("decode_step")])
    assert len(gaps) == 8  # eight decode steps, one stream
    assert gaps["kernels"].nunique() == 1  # the same ops every step
    # each decode step's span and busy time from its rows
    for step, row in gaps.set_index("step").iterrows():
        rows = kernels[kernels["step"] == step]
        assert row["span_ns"] == (rows["start_ns"] + rows["duration_ns"]).max() - rows["start_ns"].min()
        assert row["gpu_busy_ns"] == covered_ns(list(zip(rows["start_ns"], rows["start_ns"] + rows["duration_ns"])))
    assert (gaps["gap_ns"] > 5 * gaps["gpu_busy_ns"]).all()  # batch-1 decode: the GPU waits on the host


def test_compiled_trace_launches_fewer_kernels() -> None:
    (eager_r,), (compiled_r,) = analyze(EAGER), analyze(COMPILED)
    assert (compiled_r.events["kind"] == "kernel").sum() < (eager_r.events["kind"] == "kernel").sum() / 2


def test_analyze_command_formats(capsys) -> None:
    assert main(["analyze", str(EAGER), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "GPU timeline" in out and "Per-op roofline" in out
    assert max(len(line) for line in out.splitlines()) <= 160
    assert main(["analyze", str(EAGER), "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body.pop("schema_version") == 1
    (trace,) = body.values()
    assert trace["timeline"][0]["stream"] == "all" and trace["device"] == "NVIDIA H200"
    assert main(["analyze", str(EAGER), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("trace,table,")


@pytest.mark.parametrize(("args", "message"), [
    (["analyze", "no/such/trace.json"], "no such file"),
    (["analyze", str(TRACES)], "it holds bundles: name one of them"),
    (["analyze", str(EAGER), "--top", "0"], "--top 0"),
    (["compare", str(EAGER)], "no timings to compare"),
])
def test_analyze_and_compare_errors_are_one_line(args, message, capsys) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_ncu_measurements_stand_beside_the_analytic_per_op_numbers() -> None:
    # `fuseprof run examples/region_demo.py --steps 2` on the H200: torch.profiler with shapes, then ncu
    bundle = TRACES / "run-region_demo-h200-20261129t160959z"
    (result,) = analyze(bundle)
    roof = result.op_roofline.set_index("op")
    ncu = fuseprof.load(bundle).query("source == 'ncu'")
    silu = ncu[(ncu["variant"] == "gate") & ncu["kernel"].str.contains("silu", case=False)]
    assert len(silu) == 2  # two steps
    measured = (silu["dram_read_bytes"] + silu["dram_write_bytes"]).mean()
    assert roof.loc["aten::silu", "ncu_dram_bytes"] == pytest.approx(measured)
    assert roof.loc["aten::silu", "dram_bytes"] == 2 * 256 * 4096 * 2  # analytic: read x, write silu(x), bf16
    # every op that launched kernels inside a region has its ncu numbers; none outside the regions
    inside = result.events[result.events["ranges"].fillna("").str.contains("fuseprof:")]
    assert inside["ncu_flops"].notna().all() and result.events.loc[~result.events.index.isin(inside.index),
                                                                        "ncu_flops"].isna().all()


@pytest.mark.parametrize("keep, reason", [
    (lambda e: str(e.get("cat", "")).lower() not in ("kernel", "gpu_memcpy", "gpu_memset"),
     "CUDA/HIP runtime calls but none of their GPU work"),
    (lambda e: e.get("ph") != "X" or str(e.get("cat", "")).lower() == "cpu_op", "CPU ops and no GPU runtime call"),
])
def test_a_trace_without_gpu_work_is_refused_with_what_it_holds(keep, reason: str, tmp_path, capsys) -> None:
    """A real trace with its GPU events cut (the GPU activity not recorded), or with only its CPU ops (a CPU-only
    run): one line saying which, with the count of what it does hold, from the raw file."""
    raw = json.loads(gzip.open(FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz").read())
    raw["traceEvents"] = [e for e in raw["traceEvents"] if keep(e)]
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(raw))
    held = [e for e in raw["traceEvents"] if e.get("ph") == "X" and str(e.get("cat", "")).lower() in
            (("cuda_runtime", "cuda_driver") if reason.startswith("CUDA") else ("cpu_op",))]
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"it holds {len(held):,} {reason}" in err and "\n" not in err, err


@pytest.mark.parametrize("workers", [1, 2])
def test_a_folder_says_every_trace_s_warnings_before_one_of_them_fails(workers: int, tmp_path, capsys,
                                                                      monkeypatch) -> None:
    """Pass 1 analyses each trace while its tables are held; a trace whose analysis fails there (a CPU-only run)
    still fails where it always did: after every trace was decoded, their warnings said (a GPU event written
    twice) and the folder's checks made (a copy of a trace given twice is named as such, not the CPU-only one)."""
    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "store"))
    raw = json.loads(gzip.open(FIXTURES / "tp2" / "tp_mlp-rank0.json.gz").read())
    kernel = next(e for e in raw["traceEvents"] if e.get("cat") == "kernel")
    raw["traceEvents"].append(dict(kernel))  # written twice: one warning
    cpu = json.loads(gzip.open(FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz").read())
    cpu["traceEvents"] = [e for e in cpu["traceEvents"] if e.get("ph") != "X" or e.get("cat") == "cpu_op"]
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "a_twice.json").write_text(json.dumps(raw))
    (folder / "b_cpu.json").write_text(json.dumps(cpu))
    assert main(["analyze", str(folder), "--workers", str(workers)]) == 2
    err = capsys.readouterr().err
    assert err.index("1 GPU events appear twice") < err.index("b_cpu.json: no GPU kernels"), err
    (folder / "c_copy.json").write_text(json.dumps(raw))  # the same bytes as a_twice.json
    assert main(["analyze", str(folder), "--workers", str(workers)]) == 2
    assert "c_copy.json holds the same bytes as" in capsys.readouterr().err


def test_progress_counts_every_trace_analysed() -> None:
    """The analyses pass 1 made count among the analysed: a progress bar reaches its end."""
    seen: list[tuple[str, int, int]] = []
    analyze([FIXTURES / "tp2"], workers=1, progress=lambda what, done, total: seen.append((what, done, total)))
    assert [s for s in seen if s[0] == "decoded"][-1] == ("decoded", 2, 2)
    assert [s for s in seen if s[0] == "analysed"] == [("analysed", 1, 2), ("analysed", 2, 2)]
