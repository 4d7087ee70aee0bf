"""``fuseprof dashboard PATH`` on what a user has: a trace file, a folder of traces, an ingested trace's bundle,
capture bundles — the pages offered are those the input has something for, the Model page's timeline is the
trace's own kernels over time — and paths that hold nothing to show, refused in one line before the server
starts (issue 58, "the first hour")."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from fuseprof.cli import main
from tests.conftest import FIXTURES, FUZZ_RESULTS, ROOT, SEED_BUNDLE
from tests.test_dashboard import _values

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
APP = str(ROOT / "dashboards" / "app.py")
EXAMPLE = ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"


def _raw(trace: Path) -> tuple[list[dict], list[dict]]:
    """The trace's GPU events (kernels, memcpys, memsets) and GPU annotation ranges in time order, by json."""
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return gpu, sorted((e for e in events if e.get("cat") == "gpu_user_annotation"), key=lambda e: e["ts"])


def _app(path: Path, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    monkeypatch.setenv("FUSEPROF_TRACES", str(path))
    at = AppTest.from_file(APP, default_timeout=90)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _spec(at: AppTest, index: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def test_a_trace_file_is_the_model_page_alone_with_one_step_of_kernels_over_time(monkeypatch) -> None:
    """The committed trace file, not ingested: one page; its timeline's bars are the first step's GPU events as
    the raw file has them (names, start offsets and durations in µs, on stream 7)."""
    gpu, ranges = _raw(EXAMPLE)
    first = ranges[0]
    inside = sorted((e for e in gpu if first["ts"] <= e["ts"] <= first["ts"] + first["dur"]), key=lambda e: e["ts"])
    at = _app(EXAMPLE, monkeypatch)
    assert at.radio(key="choice-page").options == ["Model"]
    assert not at.error and not at.info and not at.warning
    spec = _spec(at)
    assert spec["layout"]["title"]["text"] == f"GPU timeline: {first['name']}"
    bars = sorted(((c[0], b, x, y) for t in spec["data"] for c, b, x, y in
                   zip(t["customdata"], _values(t["base"]), _values(t["x"]), t["y"])), key=lambda bar: bar[1])
    assert len(bars) == len(inside) == 188
    origin = inside[0]["ts"]
    for (name, base, width, lane), event in zip(bars, inside):
        assert name == event["name"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert base == pytest.approx(event["ts"] - origin, abs=1e-3) and width == pytest.approx(event["dur"], abs=1e-3)
        assert lane == f"stream {event['args']['stream']}"


def test_the_url_chooses_the_window_the_section_and_the_rows(monkeypatch) -> None:
    gpu, ranges = _raw(EXAMPLE)
    fifth = ranges[5]
    at = _app(EXAMPLE, monkeypatch, window="decode_step #4", section="tops", top="5")
    assert at.selectbox(key="choice-window").value == "decode_step #4"
    spec = _spec(at)
    assert spec["layout"]["title"]["text"] == "GPU timeline: decode_step #4"
    assert sum(len(_values(t["x"])) for t in spec["data"]) == sum(fifth["ts"] <= e["ts"] <= fifth["ts"] + fifth["dur"]
                                                         for e in gpu)
    top_kernels = next(d.value for d in at.dataframe if "kernel" in d.value.columns)
    assert len(top_kernels) == 5
    assert at.query_params["window"] == "decode_step #4" and at.query_params["top"] == "5"
    at.selectbox(key="choice-window").select("prefill").run()
    assert at.query_params["window"] == "prefill"


def test_a_window_past_the_bar_limit_draws_its_first_events_and_says_so() -> None:
    from fuseprof.analysis import analyze
    from fuseprof.analysis.facts.timeline import ALL_WINDOW, window_events

    events = analyze(EXAMPLE)[0].events
    rows, total = window_events(events, ALL_WINDOW, 100)
    gpu, _ = _raw(EXAMPLE)
    assert total == len(gpu) == 1742 and len(rows) == 100
    assert rows["start_ns"].is_monotonic_increasing
    assert rows["start_ns"].iloc[-1] == sorted(round(e["ts"] * 1000) for e in gpu)[99]


def test_an_ingested_trace_offers_launches_and_model_and_captures_their_own_pages(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """An ingested trace: Launches and Model (four pages were info boxes); the seed capture bundle: every
    capture page; both in one folder: all six."""
    assert main(["ingest", str(EXAMPLE), "--out", str(tmp_path / "ingested")]) == 0
    at = _app(tmp_path / "ingested", monkeypatch)
    assert at.radio(key="choice-page").options == ["Launches", "Model"]
    captures = tmp_path / "captures"
    shutil.copytree(SEED_BUNDLE, captures / SEED_BUNDLE.name)
    at = _app(captures, monkeypatch)
    assert at.radio(key="choice-page").options == ["Roofline", "Occupancy", "Fusion", "Launches", "Model", "Layer"]
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "eager.json.gz")
    shutil.copy(FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz", folder / "bert.json")
    (folder / "notes.txt").write_text("not a trace")
    at = _app(folder, monkeypatch, trace="eager.json.gz")
    assert at.radio(key="choice-page").options == ["Model", "Diff"]  # two traces: the Diff page compares them
    assert at.selectbox(key="choice-trace").options == ["bert.json", "eager.json.gz"]
    assert _spec(at)["layout"]["title"]["text"] == "GPU timeline: prefill"


def _refused(path: Path, capsys: pytest.CaptureFixture[str], says: str) -> None:
    """``fuseprof dashboard PATH`` exits 2 with one line naming the path, before any server starts."""
    code = main(["dashboard", str(path), "--port", "1"])
    err = capsys.readouterr().err
    clear = code == 2 and err.count("\n") == 1 and err.startswith("fuseprof: error:") and says in err \
        and "Traceback" not in err
    FUZZ_RESULTS["clear error" if clear else "traceback" if "Traceback" in err else "silently wrong"] += 1
    assert clear, (code, err)


def test_paths_with_nothing_to_show_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """Six inputs: an empty folder, a folder of other files, a CSV, a FIFO named like a trace (no hang: it is not
    read), an execution trace alone, a trace file name with a terminal escape in it that is not a trace."""
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(empty, capsys, "holds no torch.profiler trace")
    others = tmp_path / "others"
    others.mkdir()
    (others / "notes.txt").write_text("x")
    (others / "kernels.csv").write_text("a,b\n")
    _refused(others, capsys, "holds no torch.profiler trace")
    _refused(others / "kernels.csv", capsys, "not a torch.profiler trace")
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    _refused(fifo, capsys, "not a torch.profiler trace")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(EXAMPLE, alone / "step.et.json.gz")
    (alone / "step.et.json.gz").write_text('{"schema": "1.0.1", "pid": 1, "nodes": []}')
    _refused(alone, capsys, "holds no torch.profiler trace")
    escape = tmp_path / "x\x1b[31mred.txt"
    escape.write_text("{}")
    code = main(["dashboard", str(escape), "--port", "1"])
    err = capsys.readouterr().err
    held = code == 2 and "\x1b" not in err
    FUZZ_RESULTS["held" if held else "unsafe"] += 1
    assert held, (code, err)
