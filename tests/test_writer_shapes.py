"""Every valid writer's shape read right (issue 63 points 2 and 3): duration events as begin/end pairs on the CPU and
the GPU, a byte-order mark (and UTF-16), times written as strings, a metadata event at ts 0 in an epoch-µs trace,
ranks named only by their file names, a trace of CUPTI range-profiler counters, torch 2.13's Python exporter, files
known by their content whatever their name, a Perfetto protobuf trace, and Nsight Systems' files; then hostile
variants of each shape (counted in the fuzz line).

Expected values come from the raw JSON with plain arithmetic (begin and end times as written, in integer ns) or from
the same trace in Kineto's own form, never from fuseprof's output for the shape under test.

The torch 2.13 samples (tests/fixtures/writers/) are one CPU profile (a 3-layer MLP's forward and backward, three
times, under record_function, record_shapes and with_modules) exported by Kineto (``torch213_cpu_kineto.gz``) and by
the Python exporter (``export_chrome_trace(path, use_python_export=True)``: ``torch213_cpu_python_export.gz``), and a
second profile exported as ``x.pftrace``, which the 2.13 wheel writes as Chrome JSON text
(``torch213_cpu_named.pftrace``, gzipped here). The Perfetto protobuf files are built in the test by
``tests/perfetto_encoding.py`` from the wire format, independently of fuseprof's ``.pftrace`` writer: no torch wheel
here writes protobuf (Kineto's Perfetto-SDK writer is behind a build flag).
"""

from __future__ import annotations

import copy
import gzip
import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.running.sections import shown_tables
from fuseprof.cli import main
from fuseprof.errors import TraceFormatError
from fuseprof.parse.trace_events import TraceTables, read_trace_tables
from tests import perfetto_encoding, trace_forms
from tests.conftest import FIXTURES, FUZZ_RESULTS, shared_traces

MLP = FIXTURES / "truth" / "mlp_plain.json.gz"  # an H200 eager trace: 9 kernels, 3 memsets, shapes and modules
DECODE = FIXTURES / "truth" / "decode_eager.json.gz"
WRITERS = FIXTURES / "writers"
TP2 = sorted((FIXTURES / "tp2").glob("tp_mlp-rank*.json.gz"))
HOST = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver")
GPU = ("kernel", "gpu_memcpy", "gpu_memset")
TABLES = ("gpu", "ops", "launches", "modules", "annotations", "autograd", "host_ops", "forward_ops")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _ns(text: Any) -> int:
    """A written µs value (number or string) as integer ns, by decimal arithmetic on its text."""
    return int(Decimal(str(text)) * 1000)


def _pairs(trace: dict[str, Any], categories: tuple[str, ...]) -> dict[str, Any]:
    """The trace with the complete events of ``categories`` written as begin/end pairs (``trace_forms.begin_end``
    on those events only; the others stay complete)."""
    chosen = {**trace, "traceEvents": [e for e in trace["traceEvents"] if e.get("cat") in categories]}
    rest = [e for e in trace["traceEvents"] if e.get("cat") not in categories]
    return {**trace, "traceEvents": rest + trace_forms.begin_end(chosen)["traceEvents"]}


def _raw_spans(trace: dict[str, Any], categories: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """(name, start ns, duration ns) of each complete event of ``categories``, from the JSON as written."""
    return sorted((e["name"], _ns(e["ts"]), _ns(e["dur"])) for e in trace["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") in categories)


def _same_tables(a: TraceTables, b: TraceTables, tables: tuple[str, ...] = TABLES) -> None:
    keys = ["start_ns", "dur_ns", "name", "tid"]
    for name in tables:
        x, y = getattr(a, name), getattr(b, name)
        order = [k for k in keys if k in x]
        x = x.sort_values(order, kind="stable").reset_index(drop=True)
        y = y.sort_values(order, kind="stable").reset_index(drop=True)
        pd.testing.assert_frame_equal(x, y, check_exact=True, obj=name)


def _same_analysis(a: Any, b: Any) -> None:
    for table, x in shown_tables(a).items():
        pd.testing.assert_frame_equal(x, shown_tables(b)[table], check_exact=True, obj=table)


def _write(path: Path, trace: dict[str, Any]) -> Path:
    return trace_forms.write(copy.deepcopy(trace), path)


# (a) and (b): begin/end pairs

def test_cpu_ops_as_begin_end_pairs_are_attributed(tmp_path: Path) -> None:
    """Before: every pair was dropped, the kernels attributed to no op (0%) and 'no input shapes' noted."""
    trace = _load(MLP)
    path = _write(tmp_path / "pairs.json", _pairs(trace, ("cpu_op",)))
    assert '"ph": "B"' in path.read_text() and '"cat": "cpu_op", "ph": "X"' not in path.read_text()
    tables = read_trace_tables(path)
    spans = set(_raw_spans(trace, ("cpu_op",)))
    assert len(tables.ops) == 9 and {(n, s, d) for n, s, d in tables.ops[["name", "start_ns", "dur_ns"]]
                                      .itertuples(index=False)} <= spans
    (plain,), (paired,) = analyze(MLP), analyze(path)
    integrity = shown_tables(paired)["integrity"].set_index("check")
    assert integrity.loc["attributed_kernel_time_pct", "value"] == 100
    assert not any("no input shapes" in n for n in paired.notes)
    for table in ("top_ops", "categories", "timeline"):
        pd.testing.assert_frame_equal(shown_tables(plain)[table], shown_tables(paired)[table], check_exact=True, obj=table)


@pytest.mark.parametrize("categories", [GPU, GPU + HOST], ids=["kernels and copies", "every event"])
def test_kernels_as_begin_end_pairs_are_read(categories: tuple[str, ...], tmp_path: Path) -> None:
    """Before: refused as 'the GPU activity was not recorded'."""
    trace = _load(MLP)
    path = _write(tmp_path / "pairs.json", _pairs(trace, categories))
    tables = read_trace_tables(path)
    assert sorted(tables.gpu[["name", "start_ns", "dur_ns"]].itertuples(index=False, name=None)) == \
        _raw_spans(trace, GPU)
    assert int(tables.gpu["dur_ns"].sum()) == sum(d for _, _, d in _raw_spans(trace, GPU))
    _same_tables(read_trace_tables(MLP), tables)
    _same_analysis(analyze(MLP)[0], analyze(path)[0])


def test_an_end_merges_its_args_and_pairs_go_by_time_not_file_order(tmp_path: Path) -> None:
    """The Trace Event Format: an 'E' closes the last open 'B' of its thread, its args merged into the begin's;
    ends written before their begins in the file (a merged writer) still pair by time."""
    trace = _load(MLP)
    paired = _pairs(trace, GPU)
    events = paired["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "B" and e.get("cat") == "kernel"]
    moved = kernels[0]["args"].pop("grid")
    end = next(e for e in events[events.index(kernels[0]):] if e.get("ph") == "E")
    end["args"] = {"grid": moved}
    paired["traceEvents"] = list(reversed(events))
    tables = read_trace_tables(_write(tmp_path / "merged.json", paired))
    first = tables.gpu.set_index("start_ns").loc[_ns(kernels[0]["ts"])]
    assert first["grid"] == ",".join(map(str, moved))
    _same_tables(read_trace_tables(MLP), tables)


# (c), (d), (e): the bytes and numbers of the JSON

@pytest.mark.parametrize("encode", [lambda t: b"\xef\xbb\xbf" + t.encode(), lambda t: t.encode("utf-16"),
                                    lambda t: gzip.compress(b"\xef\xbb\xbf" + t.encode())],
                         ids=["utf-8 bom", "utf-16", "gzipped bom"])
def test_a_byte_order_mark_is_not_damage(encode: Any, tmp_path: Path) -> None:
    """Before: 'not valid JSON (invalid character (byte 0)); truncated?'."""
    path = tmp_path / "bom.json"
    path.write_bytes(encode(gzip.decompress(MLP.read_bytes()).decode()))
    _same_tables(read_trace_tables(MLP), read_trace_tables(path))


def test_times_written_as_strings_are_the_numbers_they_say(tmp_path: Path) -> None:
    """Before: 'Expected `float | null`, got `str`'."""
    trace = _load(MLP)
    path = _write(tmp_path / "strings.json", trace_forms.string_times(trace))
    assert '"ts": "' in path.read_text()
    tables = read_trace_tables(path)
    assert sorted(tables.gpu[["name", "start_ns", "dur_ns"]].itertuples(index=False, name=None)) == \
        _raw_spans(trace, GPU)
    _same_tables(read_trace_tables(MLP), tables)


def test_a_metadata_event_at_zero_in_an_epoch_trace(tmp_path: Path) -> None:
    """Before: 'a ts of 1.68273e+15 µs is too large to keep nanosecond precision; is the clock in µs?'."""
    trace = _load(MLP)
    path = _write(tmp_path / "epoch.json", trace_forms.metadata_at_zero(trace))
    assert '"ts": 0,' in path.read_text()
    tables = read_trace_tables(path)
    shift = trace_forms.EPOCH_US * 1000
    assert sorted((n, s - shift, d) for n, s, d in tables.gpu[["name", "start_ns", "dur_ns"]]
                  .itertuples(index=False, name=None)) == _raw_spans(trace, GPU)


# (f): ranks by file name

def test_ranks_named_only_by_file_name_give_the_across_ranks_view(tmp_path: Path, capsys) -> None:
    """docs/traces.md: a trace's rank from distributedInfo, else a number in its file name. Before: without
    distributedInfo the across-ranks tables were not shown at all."""
    paths = []
    for source in TP2:
        trace = _load(source)
        assert trace.pop("distributedInfo")["rank"] == int(source.name.split("rank")[1][0])
        paths.append(tmp_path / source.name.replace("tp_mlp-", "job_"))
        paths[-1].write_text(json.dumps(trace))
    assert main(["analyze", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    assert "== across 2 ranks" in out and "numbers from file names" in out
    assert main(["analyze", *map(str, paths), "--format", "json"]) == 0
    rank_set = json.loads(capsys.readouterr().out)["across_ranks"]["rank_set"]
    assert rank_set[0]["ranks"] == 2 and rank_set[0]["ranks_from"] == "file names", rank_set


# (g): counters only

def _counters_only(trace: dict[str, Any]) -> dict[str, Any]:
    """The trace as Kineto writes it with CUPTI's range profiler on: each kernel a 'cuda_profiler_range' event of
    counters on pid 0 (HTA's sample's shape), no kernel events."""
    out = copy.deepcopy(trace)
    kernels = [e for e in out["traceEvents"] if e.get("cat") in GPU]
    out["traceEvents"] = [e for e in out["traceEvents"] if e.get("cat") not in GPU] + [
        {"ph": "X", "cat": "cuda_profiler_range", "name": k["name"], "pid": 0, "tid": 0, "ts": k["ts"],
         "dur": k["dur"], "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 4096}} for k in kernels]
    return out


def _one_line_error(argv: list[str], capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("fuseprof: error:"), err
    return err


def test_a_counters_only_trace_is_named_as_such(tmp_path: Path, capsys) -> None:
    """Before: 'it holds N runtime calls but none of their GPU work — the GPU activity was not recorded'."""
    trace = _counters_only(_load(MLP))
    path = tmp_path / "counters.json"
    path.write_text(json.dumps(trace))
    ranges = sum(e.get("cat") == "cuda_profiler_range" for e in trace["traceEvents"])
    err = _one_line_error(["analyze", str(path)], capsys)
    assert f"CUPTI range-profiler counters ({ranges:,} 'cuda_profiler_range' events" in err
    assert "not recorded" not in err and "profiler_metrics" in err


@pytest.mark.shared
def test_hta_range_profiler_sample_is_named_as_such(capsys) -> None:
    path = shared_traces() / "fresh4" / "hta_cupti_range_profiler_counters_a100.json.gz"
    ranges = sum(e.get("cat") == "cuda_profiler_range" for e in _load(path)["traceEvents"])
    assert f"({ranges:,} 'cuda_profiler_range' events" in _one_line_error(["analyze", str(path)], capsys)


# (h): torch 2.13's Python exporter

def test_the_python_exporter_reads_like_kineto() -> None:
    kineto = read_trace_tables(WRITERS / "torch213_cpu_kineto.gz")
    python = read_trace_tables(WRITERS / "torch213_cpu_python_export.gz")
    assert len(kineto.ops) == sum(e.get("cat") == "cpu_op" for e in _load(WRITERS / "torch213_cpu_kineto.gz")
                                  ["traceEvents"])
    _same_tables(kineto, python, ("ops", "modules", "annotations", "autograd", "forward_ops", "parameters"))


def _python_exporter_devices(trace: dict[str, Any]) -> dict[str, Any]:
    """deviceProperties as torch/profiler/_chrome_trace_export.py writes them: its nine keys, the SM count
    (``multi_processor_count``) under maxThreadsPerMultiprocessor, no numSms."""
    keys = ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "maxThreadsPerBlock", "regsPerMultiprocessor",
            "warpSize")
    return {**trace, "deviceProperties": [{**{k: d[k] for k in keys}, "maxThreadsPerMultiprocessor": d["numSms"]}
                                          for d in trace["deviceProperties"]]}


def test_the_python_exporters_device_properties_are_kinetos(tmp_path: Path) -> None:
    """Its maxThreadsPerMultiprocessor is the SM count: read as such, never as 132 threads per SM."""
    trace = _load(MLP)
    path = tmp_path / "python_export.json"
    path.write_text(json.dumps(_python_exporter_devices(trace)))
    properties = read_trace_tables(path).properties_of(0)
    assert properties["sms"] == trace["deviceProperties"][0]["numSms"] == 132 and "max_threads" not in properties
    (a,), (b,) = analyze(MLP), analyze(path)
    assert (a.device, a.roof.label) == (b.device, b.roof.label) == ("NVIDIA H200", "H200 (datasheet)")


# (i): by content, whatever the name

@pytest.mark.parametrize("name, gzipped", [("trace.pftrace", False), ("trace.json", True), ("trace.txt", False),
                                           ("trace", True)])
def test_a_trace_is_read_by_content_whatever_its_name(name: str, gzipped: bool, tmp_path: Path) -> None:
    raw = gzip.decompress(MLP.read_bytes())
    path = tmp_path / name
    path.write_bytes(gzip.compress(raw) if gzipped else raw)
    _same_analysis(analyze(MLP)[0], analyze(path)[0])


def test_torch_213s_pftrace_of_json_text_is_read(tmp_path: Path) -> None:
    named = tmp_path / "x.pftrace"
    named.write_bytes(gzip.decompress((WRITERS / "torch213_cpu_named.pftrace").read_bytes()))
    assert named.read_bytes().lstrip()[:1] == b"{"  # what the 2.13 wheel wrote under that name
    tables = read_trace_tables(named)
    assert len(tables.ops) == sum(e.get("cat") == "cpu_op" for e in json.loads(named.read_bytes())["traceEvents"])


# (j): a Perfetto protobuf trace

@pytest.mark.parametrize("interned, incremental", [(True, True), (False, False)],
                         ids=["interned, incremental clock", "inline, absolute times"])
@pytest.mark.parametrize("source", [MLP, DECODE], ids=["mlp", "decode"])
def test_a_perfetto_protobuf_trace_reads_as_its_json_twin(source: Path, interned: bool, incremental: bool,
                                                          tmp_path: Path) -> None:
    """TrackEvent has no field for a Chrome trace's top-level keys (deviceProperties, distributedInfo, the capture
    settings torch writes): its twin is the JSON trace's events alone."""
    trace = _load(source)
    proto = tmp_path / "trace.pftrace"
    proto.write_bytes(perfetto_encoding.encode(trace, interned, incremental))
    twin = tmp_path / "twin.json"
    twin.write_text(json.dumps({"traceEvents": trace["traceEvents"]}))
    tables = read_trace_tables(proto)
    assert sorted(tables.gpu[["name", "start_ns", "dur_ns"]].itertuples(index=False, name=None)) == \
        _raw_spans(trace, GPU)
    _same_tables(read_trace_tables(twin), tables)
    _same_analysis(analyze(twin)[0], analyze(proto)[0])


# (k): Nsight Systems

def _nsys_export(path: Path) -> Path:
    """A file with the tables ``nsys export --type sqlite`` writes (their names; a few columns)."""
    with sqlite3.connect(path) as db:
        db.executescript("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
                         "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, demangledName INTEGER);"
                         "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, nameId INTEGER);"
                         "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, text TEXT);")
    return path


@pytest.mark.parametrize("name", ["report.sqlite", "report.json"])
def test_an_nsys_sqlite_export_is_named_with_what_to_run(name: str, tmp_path: Path, capsys) -> None:
    err = _one_line_error(["analyze", str(_nsys_export(tmp_path / name))], capsys)
    assert "Nsight Systems SQLite export" in err and "nsys stats" in err


@pytest.mark.parametrize("name", ["report.nsys-rep", "old.qdrep"])
def test_an_nsys_report_is_named_with_what_to_run(name: str, tmp_path: Path, capsys) -> None:
    (tmp_path / name).write_bytes(bytes(range(256)) * 4)
    err = _one_line_error(["analyze", str(tmp_path / name)], capsys)
    assert "Nsight Systems report" in err and "nsys stats" in err


# hostile variants of the shapes

def _clear_error(path: Path, says: str) -> None:
    with pytest.raises(TraceFormatError) as caught:
        read_trace_tables(path)
    assert str(path) in str(caught.value) and says in str(caught.value), str(caught.value)
    FUZZ_RESULTS["clear error"] += 1


def _warns(path: Path, says: str) -> TraceTables:
    with pytest.warns(UserWarning, match=says):
        tables = read_trace_tables(path)
    FUZZ_RESULTS["warning"] += 1
    return tables


def _small() -> dict[str, Any]:
    return _load(MLP)


def _mutated_pairs(edit: Any) -> dict[str, Any]:
    trace = _pairs(_small(), GPU + ("cpu_op",))
    edit(trace["traceEvents"])
    return trace


def _nth(events: list[dict[str, Any]], ph: str, cat: str | None = None, n: int = 0) -> dict[str, Any]:
    return [e for e in events if e.get("ph") == ph and (cat is None or e.get("cat") == cat)][n]


HOSTILE_WARNINGS = {
    "an end with no begin": (lambda ev: ev.append({"ph": "E", "pid": 999, "tid": 1, "ts": 1.0}), "with no begin"),
    "a begin never ended": (lambda ev: ev.append({"ph": "B", "pid": 999, "tid": 1, "ts": 1.0, "name": "open",
                                                   "cat": "cpu_op"}), "never ended"),
    "a begin without a time": (lambda ev: ev.append({"ph": "B", "pid": 999, "tid": 1, "name": "x", "cat": "cpu_op"}),
                               "without a time"),
    "an end of nan": (lambda ev: ev.append({"ph": "E", "pid": 999, "tid": 1, "ts": float("nan")}), "without a time"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_WARNINGS))
def test_unpaired_begins_and_ends_are_left_out_with_a_warning(name: str, tmp_path: Path) -> None:
    edit, says = HOSTILE_WARNINGS[name]
    path = trace_forms.write(_mutated_pairs(edit), tmp_path / "t.json")
    path.write_text(path.read_text().replace("NaN", '"nan"'))
    tables = _warns(path, says)
    _same_tables(read_trace_tables(MLP), tables, ("gpu", "ops", "launches"))


def test_a_kernel_end_before_its_begin_in_time_is_not_a_negative_kernel(tmp_path: Path) -> None:
    """An end earlier than its begin on its stream closes nothing open (ends pair by time): two events left out."""
    def edit(events: list[dict[str, Any]]) -> None:
        end = next(e for e in events if e.get("ph") == "E" and e.get("pid") == 0)
        end["_ts_text"] = "1.000"
    path = tmp_path / "t.json"
    trace_forms.write(_mutated_pairs(edit), path)
    tables = _warns(path, "never ended")
    assert len(tables.gpu) == 11 and (tables.gpu["dur_ns"] >= 0).all()


def test_deep_nesting_of_pairs_is_read_in_linear_time(tmp_path: Path) -> None:
    """100,000 begins, each inside the last, then their ends: pairs by a stack, not by search."""
    depth = 100_000
    events = [{"ph": "B", "pid": 1, "tid": 1, "ts": i, "name": f"op{i}", "cat": "cpu_op"} for i in range(depth)]
    events += [{"ph": "E", "pid": 1, "tid": 1, "ts": 2 * depth - i} for i in range(depth - 1, -1, -1)]
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({"traceEvents": events}))
    tables = read_trace_tables(path)
    assert len(tables.ops) == depth and tables.ops["dur_ns"].max() == 2 * depth * 1000
    FUZZ_RESULTS["identical"] += 1


HOSTILE_ERRORS = {
    "ts 'abc'": (lambda: json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "abc", "dur": 1,
                                                      "args": {"correlation": 1}}]}).encode(), "not a torch.profiler"),
    "ts ''": (lambda: json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "k", "ts": "", "dur": 1}]})
              .encode(), "not a torch.profiler"),
    "dur 'nan'": (lambda: json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": "nan",
                                                       "args": {"correlation": 1}}]}).encode(), "non-finite"),
    "a byte-order mark then nothing": (lambda: b"\xef\xbb\xbf", "not valid JSON"),
    "a byte-order mark then garbage": (lambda: b"\xef\xbb\xbf\x00\x01garbage", "not valid JSON"),
    "UTF-16 cut in a character": (lambda: '{"traceEvents": []}'.encode("utf-16")[:-1], "UTF-16"),
    "a protobuf cut short": (lambda: perfetto_encoding.encode(_small())[:-7], "Perfetto protobuf"),
    "protobuf packets of garbage": (lambda: perfetto_encoding.blob(1, b"\xff" * 40) * 3, "Perfetto protobuf"),
    "counters and no kernel": (lambda: json.dumps(_counters_only(_small())).encode(), "range-profiler counters"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_ERRORS))
def test_a_damaged_shape_is_a_clear_error(name: str, tmp_path: Path) -> None:
    data, says = HOSTILE_ERRORS[name]
    path = tmp_path / "t.json"
    path.write_bytes(data())
    _clear_error(path, says)


def test_a_protobuf_slice_on_a_track_never_described_keeps_its_own_thread(tmp_path: Path) -> None:
    """A slice whose track has no descriptor: its track uuid stands for its pid and tid (no thread is merged)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1 + i, "ts": 10.0 + i, "dur": 5.0}
              for i in range(2)]
    encoded = perfetto_encoding.encode({"traceEvents": events}, interned=False, incremental=False)
    without = b"".join(p for p in _packets(encoded) if b"\xe2\x03" not in p[:4])  # drop the track descriptors
    path = tmp_path / "t.pftrace"
    path.write_bytes(without)
    tables = read_trace_tables(path)
    assert sorted(tables.ops["name"]) == ["op0", "op1"] and tables.ops["tid"].nunique() == 2
    FUZZ_RESULTS["identical"] += 1


def _packets(data: bytes) -> list[bytes]:
    from fuseprof.parse.perfetto_proto import _varint

    out, at = [], 0
    while at < len(data):
        size, start = _varint(data, at + 1)
        out.append(data[at:start + size])
        at = start + size
    return out


def test_a_json_trace_that_starts_with_a_newline_is_not_taken_for_protobuf(tmp_path: Path) -> None:
    """0x0A is a protobuf trace's first byte, and a newline: text never lands on packet after packet."""
    path = tmp_path / "t.json"
    path.write_bytes(b"\n" + gzip.decompress(MLP.read_bytes()))
    _same_tables(read_trace_tables(MLP), read_trace_tables(path))
    FUZZ_RESULTS["identical"] += 1


def test_python_exporter_devices_with_a_word_for_a_number_are_left_out(tmp_path: Path) -> None:
    trace = _python_exporter_devices(_small())
    trace["deviceProperties"][0]["maxThreadsPerMultiprocessor"] = "many"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    properties = read_trace_tables(path).properties_of(0)
    assert "sms" not in properties and "max_threads" not in properties
    FUZZ_RESULTS["held"] += 1


def test_a_counters_trace_with_kernels_reads_its_kernels(tmp_path: Path) -> None:
    """Range-profiler events beside kernel events (a merged trace): the kernels are read, the counters left."""
    trace = _small()
    trace["traceEvents"] += _counters_only(trace)["traceEvents"][-3:]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    _same_tables(read_trace_tables(MLP), read_trace_tables(path))
    FUZZ_RESULTS["identical"] += 1


def test_an_empty_pftrace_is_a_clear_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "empty.pftrace"
    path.write_bytes(b"")
    assert "fuseprof: error:" in _one_line_error(["analyze", str(path)], capsys)
    FUZZ_RESULTS["clear error"] += 1
