"""Fuzzing the inputs: malformed variants of the committed fixtures (Chrome traces, ncu CSVs,
``.ncu-rep``, bundles, output folders), each through the CLI in-process. For every variant: no
traceback, exit 2 with one line naming the file, or exit 0 with values identical to the clean
input's (a BOM, CRLF, reordered keys...), or exit 0 with a one-line warning; never a partial bundle.
The counts are printed at the end of the run (tests/conftest.py)."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from fuseprof.cli import main
from tests.conftest import FIXTURES, FUZZ_RESULTS, SEED_BUNDLE, held_safely

BERT = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"
CSV = SEED_BUNDLE / "raw" / "ncu_raw.csv.gz"
REP = FIXTURES / "compiled_128x4096.ncu-rep"
COMPARED = ["kernel", "kind", "duration_ns", "start_ns", "grid", "block", "stream", "device", "cpu_op",
            "dram_read_bytes", "flops_fp32", "registers_per_thread"]

Variant = Callable[[Path], list[str]]  # writes its input under tmp, returns the CLI argv


def _trace() -> dict:
    return json.loads(gzip.decompress(BERT.read_bytes()))


def _first(trace: dict, cat: str = "kernel") -> dict:
    return next(e for e in trace["traceEvents"] if e.get("cat") == cat)


def _write_json(tmp: Path, trace: object, name: str = "t.json", **dump) -> Path:
    path = tmp / name
    path.write_text(json.dumps(trace, **dump))
    return path


def _trace_variant(edit: Callable[[dict], object]) -> Variant:
    def make(tmp: Path) -> list[str]:
        trace = _trace()
        result = edit(trace)
        return ["ingest", str(_write_json(tmp, trace if result is None else result)), "--out", str(tmp / "out")]
    return make


def _set(field: str, value: object, cat: str = "kernel", in_args: bool = False) -> Variant:
    def edit(trace: dict) -> None:
        event = _first(trace, cat)
        (event["args"] if in_args else event)[field] = value
    return _trace_variant(edit)


def _drop(field: str, cat: str = "kernel") -> Variant:
    return _trace_variant(lambda t: _first(t, cat).pop(field) and None)


def _raw_bytes(data: Callable[[], bytes], name: str) -> Variant:
    def make(tmp: Path) -> list[str]:
        (tmp / name).write_bytes(data())
        return ["ingest", str(tmp / name), "--out", str(tmp / "out")]
    return make


def _csv_text() -> str:
    return gzip.decompress(CSV.read_bytes()).decode()


def _csv_variant(edit: Callable[[str], str], name: str = "n.csv") -> Variant:
    def make(tmp: Path) -> list[str]:
        (tmp / name).write_text(edit(_csv_text()), newline="")
        return ["ingest", str(tmp / name), "--out", str(tmp / "out")]
    return make


def _csv_cell(column: str, value: str) -> Callable[[str], str]:
    """Put ``value`` (a raw CSV cell, quotes included) in ``column`` of the first kernel row."""
    def edit(text: str) -> str:
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
        import csv
        import io

        header = next(csv.reader([lines[start]]))
        row = next(csv.reader([lines[start + 2]]))
        row[header.index(column)] = value
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="").writerow(row)
        lines[start + 2] = out.getvalue()
        return "\n".join(lines) + "\n"
    return edit


def _csv_drop_column(column: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        import csv
        import io

        rows = list(csv.reader(io.StringIO(text)))
        i = rows[0].index(column)
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([r[:i] + r[i + 1:] for r in rows])
        return out.getvalue()
    return edit


def _bundle_variant(edit: Callable[[Path], None], command: str = "show") -> Variant:
    def make(tmp: Path) -> list[str]:
        bundle = tmp / SEED_BUNDLE.name
        shutil.copytree(SEED_BUNDLE, bundle)
        edit(bundle)
        return [command, str(bundle)]
    return make


def _parquet_edit(table: str, edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def apply(bundle: Path) -> None:
        path = bundle / table
        edit(pd.read_parquet(path)).to_parquet(path)
    return apply


def _same_as_clean(make: Callable[[Path], Path]) -> Variant:
    def variant(tmp: Path) -> list[str]:
        return ["ingest", str(make(tmp)), "--out", str(tmp / "out")]
    return variant


CUT_POINTS = [0.001, 0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95, 0.999]
TRACE_JSON = gzip.decompress(BERT.read_bytes())

NEGATIVE_METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
                    "lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum",
                    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
                    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
                    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
                    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
                    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
                    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
                    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct")

ERRORS: dict[str, Variant] = {
    **{f"trace dur={v!r}": _set("dur", v) for v in ("abc", 1e300, -5, None, [], {}, True)},
    "trace dur=NaN": _trace_variant(lambda t: _first(t).update(dur=float("nan"))),
    "trace dur=Infinity": _trace_variant(lambda t: _first(t).update(dur=float("inf"))),
    "trace kernel without dur": _drop("dur"),
    "trace kernel without ts": _drop("ts"),
    "trace kernel without name": _drop("name"),
    **{f"trace ts={v!r}": _set("ts", v) for v in ("abc", None, 1e300, -1e300, [1])},
    **{f"trace name={v!r}": _set("name", v) for v in (5, None, [])},
    **{f"trace args={v!r}": _set("args", v) for v in (5, "x", [], None)},
    "trace kernel without args": _drop("args"),
    "trace memcpy dur=-1": _set("dur", -1, cat="gpu_memcpy"),
    "trace cpu_op ts='x'": _set("ts", "x", cat="cpu_op"),
    "trace cpu_op without ts": _drop("ts", cat="cpu_op"),
    "trace traceEvents={}": _trace_variant(lambda t: {**t, "traceEvents": {}}),
    "trace traceEvents missing": _trace_variant(lambda t: {k: v for k, v in t.items() if k != "traceEvents"}),
    "trace top level []": _trace_variant(lambda t: []),
    "trace top level 5": _trace_variant(lambda t: 5),
    "trace no events": _trace_variant(lambda t: {**t, "traceEvents": []}),
    "trace no GPU events": _trace_variant(lambda t: {**t, "traceEvents": [e for e in t["traceEvents"]
                                                                          if e.get("cat") not in ("kernel", "gpu_memcpy")]}),
    "trace deviceProperties='x'": _trace_variant(lambda t: {**t, "deviceProperties": "x"}),
    "trace event is a number": _trace_variant(lambda t: {**t, "traceEvents": [5, *t["traceEvents"]]}),
    **{f"trace json cut at {p:.0%}": _raw_bytes(lambda p=p: TRACE_JSON[: int(len(TRACE_JSON) * p)], "cut.json")
       for p in CUT_POINTS},
    **{f"trace gzip cut at {p:.0%}": _raw_bytes(lambda p=p: BERT.read_bytes()[: int(len(BERT.read_bytes()) * p)],
                                                "cut.json.gz") for p in CUT_POINTS},
    "trace empty file": _raw_bytes(lambda: b"", "empty.json"),
    "trace random bytes": _raw_bytes(lambda: random.Random(1).randbytes(4096), "noise.json"),
    "trace latin-1 bytes": _raw_bytes(lambda: b'{"traceEvents": ["\xe9"]}', "latin.json"),
    "csv without units row": _csv_variant(lambda t: "\n".join(
        line for i, line in enumerate(t.splitlines()) if i != next(j for j, x in enumerate(t.splitlines())
                                                                   if x.startswith('"ID"')) + 1) + "\n"),
    "csv unknown unit": _csv_variant(lambda t: t.replace('"ns"', '"fortnight"', 1)),
    "csv unknown byte prefix": _csv_variant(lambda t: t.replace('"byte"', '"Qbyte"', 1)),
    "csv non-numeric duration": _csv_variant(_csv_cell("gpu__time_duration.sum", '"fast"')),
    "csv non-numeric dram bytes": _csv_variant(_csv_cell("dram__bytes_read.sum", '"lots"')),
    "csv non-numeric registers": _csv_variant(_csv_cell("launch__registers_per_thread", '"36 regs"')),
    **{f"csv cut at {p:.0%}": _csv_variant(lambda t, p=p: t[: int(len(t) * p)]) for p in CUT_POINTS},
    "csv header only": _csv_variant(lambda t: "\n".join(t.splitlines()[:2]) + "\n"),
    "csv without Kernel Name": _csv_variant(lambda t: t.replace('"Kernel Name"', '"Kernel"', 1)),
    "csv empty": _csv_variant(lambda t: ""),
    "csv random bytes": _raw_bytes(lambda: random.Random(2).randbytes(2048), "noise.csv"),
    "csv extra field in a row": _csv_variant(lambda t: t.replace("\n", ',"extra"\n', 3).replace(',"extra"', "", 2)),
    "ncu-rep cut at 10%": _raw_bytes(lambda: REP.read_bytes()[: len(REP.read_bytes()) // 10], "cut.ncu-rep"),
    "ncu-rep cut at 60%": _raw_bytes(lambda: REP.read_bytes()[: len(REP.read_bytes()) * 6 // 10], "cut.ncu-rep"),
    "ncu-rep random bytes": _raw_bytes(lambda: random.Random(3).randbytes(8192), "noise.ncu-rep"),
    "ncu-rep empty": _raw_bytes(lambda: b"", "empty.ncu-rep"),
    "unknown file kind": _raw_bytes(lambda: b"{}", "trace.txt"),
    "a directory given as FILE": lambda tmp: ["ingest", str(tmp), "--out", str(tmp / "out")],
    "no such file": lambda tmp: ["ingest", str(tmp / "missing.json"), "--out", str(tmp / "out")],
    "the same file twice": lambda tmp: ["ingest", str(BERT), str(BERT), "--out", str(tmp / "out")],
    "the same content under two names": lambda tmp: ["ingest", str(BERT), str(shutil.copy(BERT, tmp / "b.json.gz")),
                                                      "--out", str(tmp / "out")],
    "--out is a file": lambda tmp: ["ingest", str(BERT), "--out", str(shutil.copy(BERT, tmp / "file"))],
    "--out under /proc": lambda tmp: ["ingest", str(BERT), "--out", "/proc/fuseprof-out"],
    "--out under /sys": lambda tmp: ["ingest", str(BERT), "--out", "/sys/fuseprof-out"],
    "--out under a file": lambda tmp: ["ingest", str(BERT), "--out", str(shutil.copy(BERT, tmp / "f")) + "/sub"],
    "--out is an existing bundle": lambda tmp: ["ingest", str(BERT), "--out",
                                                str(shutil.copytree(SEED_BUNDLE, tmp / SEED_BUNDLE.name))],
    "bundle manifest []": _bundle_variant(lambda b: (b / "manifest.json").write_text("[]")),
    "bundle manifest 5": _bundle_variant(lambda b: (b / "manifest.json").write_text("5")),
    "bundle manifest damaged": _bundle_variant(lambda b: (b / "manifest.json").write_text('{"schema_version": 1,')),
    "bundle manifest binary": _bundle_variant(lambda b: (b / "manifest.json").write_bytes(b"\xff\xfe\x00")),
    "bundle manifest schema 99": _bundle_variant(lambda b: (b / "manifest.json").write_text(
        (b / "manifest.json").read_text().replace('"schema_version": 1', '"schema_version": 99'))),
    "bundle without manifest": _bundle_variant(lambda b: (b / "manifest.json").unlink()),
    "bundle kernels.parquet deleted": _bundle_variant(lambda b: (b / "kernels.parquet").unlink()),
    "bundle timings.parquet deleted": _bundle_variant(lambda b: (b / "timings.parquet").unlink(), "summary"),
    "bundle kernels.parquet is text": _bundle_variant(lambda b: (b / "kernels.parquet").write_text("hello")),
    "bundle kernels.parquet cut": _bundle_variant(lambda b: (b / "kernels.parquet").write_bytes(
        (b / "kernels.parquet").read_bytes()[:300])),
    "bundle duration_ns as strings": _bundle_variant(_parquet_edit(
        "kernels.parquet", lambda f: f.assign(duration_ns=f["duration_ns"].astype(str) + "ns"))),
    "bundle registers as strings": _bundle_variant(_parquet_edit(
        "kernels.parquet", lambda f: f.assign(registers_per_thread="many"))),
    "bundle foreign-schema parquet": _bundle_variant(_parquet_edit(
        "kernels.parquet", lambda f: pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}))),
    "bundle timings gpu time as strings": _bundle_variant(_parquet_edit(
        "timings.parquet", lambda f: f.assign(gpu_median_ns="slow")), "summary"),
    # round 3: values no GPU can measure, numbers beyond int64, hostile files
    "csv decimal-comma duration": _csv_variant(_csv_cell("gpu__time_duration.sum", '"4,032000"')),
    "csv achieved occupancy 250%": _csv_variant(_csv_cell("sm__warps_active.avg.pct_of_peak_sustained_active", '"250"')),
    "csv theoretical occupancy 101%": _csv_variant(_csv_cell("sm__maximum_warps_per_active_cycle_pct", '"101"')),
    "csv 100,000 registers a thread": _csv_variant(_csv_cell("launch__registers_per_thread", '"100,000"')),
    "csv negative duration": _csv_variant(_csv_cell("gpu__time_duration.sum", '"-5"')),
    "csv negative dram bytes": _csv_variant(_csv_cell("dram__bytes_read.sum", '"-1"')),
    "trace kernel at ts -5": _set("ts", -5),
    "trace JSON nested 1000 deep": _raw_bytes(lambda: b'{"traceEvents": [' + b"[" * 1000 + b"]" * 1000 + b"]}",
                                              "deep.json"),
    # 100,000 deep, not 1,000: the decoder's depth limit is the interpreter's recursion limit, which a
    # library may raise (1,000 deep then decodes, and the value is left out as one of the wrong type)
    "trace args nested 100,000 deep": _raw_bytes(
        lambda: b'{"traceEvents": [{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"grid":'
        + b"[" * 100_000 + b"]" * 100_000 + b'}}]}', "deepargs.json"),
    "bundle raw/ holds a named pipe": _bundle_variant(lambda b: os.mkfifo(b / "raw" / "pipe.json"), "reparse"),
    "bundle raw/ links to /dev/zero": _bundle_variant(lambda b: (b / "raw" / "zero.json").symlink_to("/dev/zero"),
                                                      "reparse"),
    "bundle raw/ links to a trace elsewhere": _bundle_variant(
        lambda b: (b / "raw" / "other.json.gz").symlink_to(BERT.resolve()), "reparse"),
    "analyze a bundle whose raw/ trace is a pipe": _bundle_variant(
        lambda b: os.mkfifo(b / "raw" / "pipe.json"), "analyze"),
    # every metric fuseprof reads, negative: no counter counts below zero
    **{f"csv {metric} negative": _csv_variant(_csv_cell(metric, '"-3"')) for metric in NEGATIVE_METRICS},
    **{f"trace gpu_memcpy dur={v!r}": _set("dur", v, cat="gpu_memcpy") for v in ("x", None)},
    **{f"trace args.{f}={v!r}": _set(f, v, in_args=True) for f in ("grid", "block") for v in ([-1, 1, 1], [1, 2**32, 1])},
    "trace deviceProperties=[5]": _trace_variant(lambda t: {**t, "deviceProperties": [5]}),
    "trace distributedInfo='x'": _trace_variant(lambda t: {**t, "distributedInfo": "x"}),
    "trace traceEvents=null": _trace_variant(lambda t: {**t, "traceEvents": None}),
    "trace a kernel a week later": _trace_variant(lambda t: _first(t).update(ts=_first(t)["ts"] + 7 * 86_400e6)),
    "trace gzip of random bytes": _raw_bytes(lambda: gzip.compress(random.Random(4).randbytes(4096)), "noise.json.gz"),
    "trace gzip of gzip": _raw_bytes(lambda: gzip.compress(gzip.compress(TRACE_JSON)), "double.json.gz"),
    "csv only a units row": _csv_variant(lambda t: "\n".join(t.splitlines()[1:2]) + "\n"),
    "csv a NUL byte in a number": _csv_variant(_csv_cell("gpu__time_duration.sum", '"40\x0032"')),
    "bundle manifest is a pipe": _bundle_variant(lambda b: ((b / "manifest.json").unlink(),
                                                            os.mkfifo(b / "manifest.json")) and None),
    "bundle kernels.parquet is a pipe": _bundle_variant(lambda b: ((b / "kernels.parquet").unlink(),
                                                                   os.mkfifo(b / "kernels.parquet")) and None),
    "bundle kernels.parquet with a renamed column": _bundle_variant(_parquet_edit(
        "kernels.parquet", lambda f: f.rename(columns={"dram_read_bytes": "dram_bytes_read"})), "summary"),
    "bundle timings.parquet with a renamed column": _bundle_variant(_parquet_edit(
        "timings.parquet", lambda f: f.rename(columns={"gpu_median_ns": "gpu_median"})), "summary"),
    "bundle raw/ is a file": _bundle_variant(lambda b: (shutil.rmtree(b / "raw"), (b / "raw").write_text("x"))
                                             and None, "reparse"),
    "bundle raw/ holds a gzip bomb": _bundle_variant(lambda b: (b / "raw" / "bomb.json.gz").write_bytes(
        gzip.compress(b"[" * 2**20, 9)), "reparse"),
}

# A value that says nothing of its field's type: the trace is read, that value left out with one warning
# naming the field (never a refusal: fuseprof/parse/trace_events.py, _lenient), every event kept
LEFT_OUT: dict[str, tuple[Variant, str]] = {
    **{f"trace args.grid={v!r}": (_set("grid", v, in_args=True), "grid") for v in (["a", 1, 1], [1.5, 1, 1], 7)},
    **{f"trace args.block={v!r}": (_set("block", v, in_args=True), "block") for v in (["x"], {"x": 1})},
    **{f"trace args.device={v!r}": (_set("device", v, in_args=True), "device") for v in ("gpu0", 1.5, [0])},
    "trace args.stream=7.5": (_set("stream", 7.5, in_args=True), "stream"),
    **{f"trace args.correlation={v!r}": (_set("correlation", v, in_args=True), "correlation") for v in ("x", 1.5)},
    "trace launch args=5": (_set("args", 5, cat="cuda_runtime"), "args"),
    # numbers past 64 bits: no profiler writes one, and the tables hold int64
    **{f"trace args.{f} beyond int64": (_set(f, 2**70, in_args=True), f)
       for f in ("correlation", "External id", "stream", "device", "registers per thread", "shared memory")},
    "trace args.grid beyond int64": (_set("grid", [2**70, 1, 1], in_args=True), "grid"),
    "trace memory Bytes beyond int64": (_set("Bytes", 2**70, cat="cpu_instant_event", in_args=True), "Bytes"),
}

WARNINGS: dict[str, Variant] = {
    "csv without a metric column": _csv_variant(_csv_drop_column("dram__bytes_write.sum")),
    "csv without the occupancy columns": _csv_variant(lambda t: _csv_drop_column(
        "sm__warps_active.avg.pct_of_peak_sustained_active")(t)),
}


def _bom(tmp: Path) -> Path:
    path = tmp / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + gzip.decompress(CSV.read_bytes()))
    return path


def _utf16(tmp: Path) -> Path:
    """What Windows PowerShell's ``>`` writes: UTF-16 with its byte-order mark (read as the text it is)."""
    path = tmp / "utf16.json"
    path.write_bytes(gzip.decompress(BERT.read_bytes()).decode().encode("utf-16"))
    return path


def _crlf(tmp: Path) -> Path:
    path = tmp / "crlf.csv"
    path.write_bytes(gzip.decompress(CSV.read_bytes()).replace(b"\n", b"\r\n"))
    return path


def _plain_csv(tmp: Path) -> Path:
    path = tmp / "plain.csv"
    path.write_bytes(gzip.decompress(CSV.read_bytes()))
    return path


def _numbers_as_strings(tmp: Path) -> Path:
    """As HIP writes hipMemcpy's "bytes": every integer arg of every event written as a string."""
    trace = _trace()
    for event in trace["traceEvents"]:
        args = event.get("args") if isinstance(event, dict) else None
        for key, value in (args or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                args[key] = str(value)
    return _write_json(tmp, trace)


def _capitalised_categories(tmp: Path) -> Path:
    """Every event's "cat" capitalised ("Kernel", "Gpu_memcpy"): nothing may be dropped for it."""
    trace = _trace()
    for event in trace["traceEvents"]:
        if isinstance(event, dict) and isinstance(event.get("cat"), str):
            event["cat"] = event["cat"].capitalize()
    return _write_json(tmp, trace)


def _minimal_quoting(tmp: Path) -> Path:
    """The ncu CSV re-saved by a spreadsheet or pandas: fields quoted only where they must be."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(_csv_text())))
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerows(rows)
    path = tmp / "minimal.csv"
    path.write_text(out.getvalue())
    return path


SAME: dict[str, tuple[Path, Callable[[Path], Path]]] = {
    "csv with minimal quoting": (CSV, _minimal_quoting),
    "trace categories capitalised": (BERT, _capitalised_categories),
    "trace numbers written as strings (ROCm)": (BERT, _numbers_as_strings),
    "trace plain JSON": (BERT, lambda tmp: _write_json(tmp, _trace())),
    "trace indented": (BERT, lambda tmp: _write_json(tmp, _trace(), indent=2)),
    "trace keys reordered": (BERT, lambda tmp: _write_json(tmp, _trace(), sort_keys=True)),
    "trace with unknown fields": (BERT, lambda tmp: _write_json(tmp, {**_trace(), "extra": {"x": [1]}, "traceEvents": [
        {**e, "mystery": 1} for e in _trace()["traceEvents"]]})),
    "csv with a UTF-8 BOM": (CSV, _bom),
    "trace UTF-16 file": (BERT, _utf16),
    "csv with CRLF line ends": (CSV, _crlf),
    "csv not gzipped": (CSV, _plain_csv),
}


CASE_TIMEOUT_S = 60  # a case that takes longer is a hang, the third failure this suite looks for


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Hang


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIMEOUT_S)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    except _Hang:
        FUZZ_RESULTS["hang"] += 1
        pytest.fail(f"hang: no answer within {CASE_TIMEOUT_S} s")
    except Exception as exc:  # a traceback is the failure this suite exists to catch
        FUZZ_RESULTS["traceback"] += 1
        pytest.fail(f"traceback: {type(exc).__name__}: {exc}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return code, out, err


def _no_partial_output(tmp: Path) -> None:
    out = tmp / "out"
    leftovers = [p.name for p in out.iterdir()] if out.is_dir() else []
    assert leftovers == [], f"left behind: {leftovers}"


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_malformed_input_is_a_clear_error(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ERRORS[name](tmp_path)
    code, _, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("fuseprof: error:")]
    assert code == 2 and len(errors) == 1, (code, err)
    assert "Traceback" not in err
    named = argv[1] if argv[0] == "ingest" else argv[-1]
    assert Path(named).name in errors[0] or "--out" in errors[0] or "/proc" in errors[0], errors[0]
    if argv[0] == "ingest":
        _no_partial_output(tmp_path)
    FUZZ_RESULTS["clear error"] += 1


@pytest.mark.parametrize("name", sorted(WARNINGS))
def test_incomplete_input_warns_and_keeps_the_rest(name: str, tmp_path: Path, capsys) -> None:
    code, out, err = _run(WARNINGS[name](tmp_path), capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("fuseprof: warning:")]
    assert len(warnings) == 1 and "absent" in warnings[0] and "n.csv" in warnings[0]
    bundle = Path(out.strip().splitlines()[-1])
    clean = _ingested(CSV, tmp_path / "clean", capsys)
    assert (fuseprof_load(bundle)["duration_ns"] == clean["duration_ns"]).all()
    FUZZ_RESULTS["warning"] += 1


@pytest.mark.parametrize("name", sorted(LEFT_OUT))
def test_a_value_of_the_wrong_type_is_left_out_with_a_warning(name: str, tmp_path: Path, capsys) -> None:
    variant, field = LEFT_OUT[name]
    code, out, err = _run(variant(tmp_path), capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("fuseprof: warning:")]
    assert len(warnings) == 1 and "left out" in warnings[0] and f"{field} ×1" in warnings[0], err
    clean = _ingested(BERT, tmp_path / "clean", capsys)
    assert len(fuseprof_load(Path(out.strip().splitlines()[-1]))) == len(clean)  # every event kept
    FUZZ_RESULTS["warning"] += 1


def test_a_grid_written_as_a_string_is_the_grid_it_says(tmp_path: Path, capsys) -> None:
    code, out, err = _run(_set("grid", "1,1,1", in_args=True)(tmp_path), capsys)
    assert code == 0 and "warning" not in err, err
    loaded = fuseprof_load(Path(out.strip().splitlines()[-1]))
    assert "1,1,1" in set(loaded["grid"].astype(str))
    FUZZ_RESULTS["identical"] += 1


def fuseprof_load(bundle: Path) -> pd.DataFrame:
    import fuseprof

    return fuseprof.load(bundle)


def _ingested(source: Path, out: Path, capsys) -> pd.DataFrame:
    code, text, err = _run(["ingest", str(source), "--out", str(out)], capsys)
    assert code == 0, err
    return fuseprof_load(Path(text.strip().splitlines()[-1]))


@pytest.mark.parametrize("name", sorted(SAME))
def test_harmless_variation_gives_identical_values(name: str, tmp_path: Path, capsys) -> None:
    clean_source, make = SAME[name]
    variant = _ingested(make(tmp_path), tmp_path / "a", capsys)
    clean = _ingested(clean_source, tmp_path / "b", capsys)
    columns = [c for c in COMPARED if clean[c].notna().any()]
    pd.testing.assert_frame_equal(variant[columns], clean[columns])
    FUZZ_RESULTS["identical"] += 1


# options a user can get wrong: one line naming the option, exit 2
ARGUMENT_ERRORS: dict[str, tuple[list[str], str]] = {
    "--window x": (["analyze", str(BERT), "--window", "x"], "--window"),
    "--window 5-9 (no such steps)": (["analyze", str(BERT), "--window", "7-9"], "--window"),
    "--window 2 on a trace without steps": (["analyze", str(FIXTURES / "thirdparty" / "b200_eager.json.gz"),
                                             "--window", "2"], "--window"),
    "--window x on a trace without steps (the syntax is named)": (
        ["analyze", str(FIXTURES / "thirdparty" / "b200_eager.json.gz"), "--window", "x"], "use all, steps, N or N-M"),
    "--device H999": (["analyze", str(BERT), "--device", "H999"], "--device"),
    "--device '' ": (["fusion", str(BERT), "--device", ""], "--device"),
    "--top 0 (fusion)": (["fusion", str(BERT), "--top", "0"], "--top"),
    "--top -3 (analyze)": (["analyze", str(BERT), "--top", "-3"], "--top"),
    "--top on audit, which prints every row": (["audit", str(BERT), "--top", "3"], "unrecognized arguments: --top"),
    "--ceilings missing": (["analyze", str(BERT), "--ceilings", "/no/such/folder"], "--ceilings"),
    "--ceilings a trace file": (["analyze", str(BERT), "--ceilings", str(BERT)], "--ceilings"),
    "--graph-capture missing": (["analyze", str(BERT), "--graph-capture", "/no/such.json"], "no such"),
    "--fail-on busy:5": (["diff", str(BERT), str(BERT), "--fail-on", "busy:5"], "--fail-on"),
    "--fail-on op:+x%": (["diff", str(BERT), str(BERT), "--fail-on", "op:+x%"], "--fail-on"),
    "--format markdown without --fail-on": (["diff", str(BERT), str(BERT), "--format", "markdown"], "markdown"),
    "report -o into a missing folder": (["report", str(BERT), "-o", "/no/such/dir/r.html"], "no such folder"),
    "--roof H999": (["roofline", str(SEED_BUNDLE), "--roof", "H999"], "--roof"),
    "dashboard --memory-mb 0": (["dashboard", str(SEED_BUNDLE.parent), "--memory-mb", "0"], "--memory-mb"),
    "dashboard --port 99999": (["dashboard", str(SEED_BUNDLE.parent), "--port", "99999"], "--port"),
    "--ceilings a folder without bundles": (["analyze", str(BERT), "--ceilings", str(FIXTURES / "thirdparty")],
                                            "--ceilings"),
}


@pytest.mark.parametrize("name", sorted(ARGUMENT_ERRORS))
def test_a_wrong_option_is_one_line(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv, word = ARGUMENT_ERRORS[name]
    code, _, err = _run(argv, capsys)
    errors = [line for line in err.strip().splitlines() if line.startswith("fuseprof: error:")]
    assert code == 2 and len(errors) == 1 and word in errors[0], (code, err)
    FUZZ_RESULTS["clear error"] += 1


def test_a_gzip_bomb_is_refused_within_its_limit(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """50 MiB of zeros gzipped to 50 kB, read under a 10 MiB limit: refused, fast, nothing written."""
    import fuseprof.parse.textio as textio

    monkeypatch.setattr(textio, "MAX_BYTES", 10 * 2**20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"\0" * 50 * 2**20, 9))
    code, _, err = _run(["ingest", str(bomb), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "decompresses to more than 10 MiB" in err
    _no_partial_output(tmp_path)
    FUZZ_RESULTS["clear error"] += 1


def test_a_gzip_of_whitespace_costs_its_decompressed_size_once(tmp_path: Path) -> None:
    """256 MiB of spaces gzipped to 250 kB (within the limit, so read whole): the reading process's peak RSS
    grows by about the decompressed size, not twice it (chunks held, then joined: 2.4 GB for 1.1 GB)."""
    import subprocess
    import sys

    size = 256 * 2**20
    bomb = tmp_path / "spaces.json.gz"
    bomb.write_bytes(gzip.compress(b" " * size, 9))
    child = ("from pathlib import Path\nimport sys\nfrom fuseprof.parse.textio import read_bytes\n"
             "def peak(): return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
             "base = peak()\ndata = read_bytes(Path(sys.argv[1]))\nassert len(data) == int(sys.argv[2])\n"
             "print((peak() - base) * 1024)")
    grown = int(subprocess.run([sys.executable, "-c", child, str(bomb), str(size)], capture_output=True, text=True,
                               check=True).stdout)
    assert size <= grown < 1.3 * size, grown / size
    FUZZ_RESULTS["identical"] += 1


def test_kernel_events_written_twice_are_counted_once_with_a_warning(tmp_path: Path, capsys) -> None:
    trace = _trace()
    kernels = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]
    trace["traceEvents"] += kernels
    code, out, err = _run(["analyze", str(_write_json(tmp_path, trace)), "--format", "json"], capsys)
    assert code == 0 and f"{len(kernels)} GPU events appear twice" in err
    categories = next(v for k, v in json.loads(out).items() if k != "schema_version")["categories"]
    assert sum(c["count"] for c in categories if c["category"] != "memcpy") == len(kernels) == 60
    FUZZ_RESULTS["warning"] += 1


def test_stale_partial_bundles_of_dead_writers_are_removed(tmp_path: Path, capsys) -> None:
    """A writer killed with -9 leaves its marked temporary bundle behind; the next bundle written there
    removes it (its PID is gone, on this machine), and leaves alone a live writer's, another machine's (a
    shared disk) and every file of the user's, whatever its name."""
    from fuseprof.bundle.files import PARTIAL_MARKER, temporary_name

    out = tmp_path / "out"
    here = temporary_name("x", "partial").removeprefix(".x.fuseprof-partial-").rsplit("-", 1)[0]  # this host
    dead, live = out / f".old.fuseprof-partial-{here}-999999999", out / temporary_name("busy", "partial")
    remote = out / ".theirs.fuseprof-partial-another.host-999999999"
    unmarked = out / f".unmarked.fuseprof-partial-{here}-999999999"
    for folder in (dead, live, remote):
        (folder / "raw").mkdir(parents=True)
        (folder / PARTIAL_MARKER).write_text("")
    (unmarked / "raw").mkdir(parents=True)
    users = [out / ".notes.txt.tmp-4000000", out / ".draft.partial-999999999", out / "x" / ".y.tmp-999999999"]
    for path in users:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the user's")
    code, _, err = _run(["ingest", str(BERT), "--out", str(out)], capsys)
    assert code == 0, err
    assert not dead.exists() and live.exists() and remote.exists() and unmarked.exists()
    assert all(p.read_text() == "the user's" for p in users)


# a fuseprof killed with -9 at its first rename: the moment a bundle or a store entry is written but not committed
_KILLED_AT_COMMIT = ("import os, signal, sys\n"
                     "os.rename = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
                     "from fuseprof.cli import main\nsys.exit(main(sys.argv[1:]))")
_OWNED_TEMPORARY = (".fuseprof-partial-", ".fuseprof-tmp-")


def _owned_temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if any(mark in p.name for mark in _OWNED_TEMPORARY)]


@pytest.mark.parametrize("writer", ["bundle", "trace store"])
def test_a_run_killed_with_minus_9_mid_write_leaves_nothing_once_the_next_run_is_done(
        writer: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real `kill -9` (the process sends it itself at its first commit): its half-written bundle or store
    entry is there; the next run removes it, writes its own, and leaves the user's files in the folder alone."""
    import subprocess
    import sys

    folder = tmp_path / ("out" if writer == "bundle" else "store")
    folder.mkdir()
    users = [folder / ".notes.txt.tmp-4000000", folder / "v2-backup" / "keep.json"]
    for path in users:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the user's")
    argv = ["ingest", str(BERT), "--out", str(folder)] if writer == "bundle" else ["analyze", str(BERT), "--format", "json"]
    monkeypatch.setenv("FUSEPROF_CACHE", str(folder) if writer == "trace store" else "off")
    killed = subprocess.run([sys.executable, "-c", _KILLED_AT_COMMIT, *argv], capture_output=True, text=True)
    assert killed.returncode == -9 and _owned_temporaries(folder), (killed.returncode, killed.stderr[-500:])
    code, out, err = _run(argv, capsys)
    left = _owned_temporaries(folder)
    if left or code != 0:
        FUZZ_RESULTS["leftover"] += 1
    assert code == 0 and not left, (code, err, left)
    assert all(p.read_text() == "the user's" for p in users)
    if writer == "bundle":
        assert len([p for p in folder.iterdir() if not p.name.startswith(".") and p.name != "v2-backup"]) == 1
    else:
        assert out == subprocess.run([sys.executable, "-m", "fuseprof.cli", *argv], capture_output=True, text=True,
                                     env={**os.environ, "FUSEPROF_CACHE": "off"}, check=True).stdout
    FUZZ_RESULTS["cleaned after kill -9"] += 1


def test_terminal_escape_codes_in_names_never_reach_the_terminal(tmp_path: Path, capsys) -> None:
    trace = _trace()
    _first(trace)["name"] = "evil\x1b[2J\x1b]0;pwned\x07kernel"
    code, out, err = _run(["analyze", str(_write_json(tmp_path, trace)), "--top", "60"], capsys)
    assert code == 0, err
    held_safely([c for c in ("\x1b", "\x07") if c in out], "escape codes reached the terminal")
    assert "evil?[2J?]0;pwned?kernel" in out


def test_the_suite_is_at_least_a_hundred_variants() -> None:
    assert len(ERRORS) + len(WARNINGS) + len(SAME) >= 100


def test_reparse_on_a_full_disk_is_one_line_and_leaves_no_temporary_file(tmp_path: Path, capsys,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills while reparse writes kernels.parquet (ENOSPC from the rename): one line, the bundle's
    tables as they were, no .tmp file left (a read-only disk fails the same way; root ignores chmod here)."""
    import errno

    bundle = shutil.copytree(SEED_BUNDLE, tmp_path / SEED_BUNDLE.name)
    before = (bundle / "kernels.parquet").read_bytes()

    def full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("fuseprof.bundle.files.os.replace", full)
    code, _, err = _run(["reparse", str(bundle)], capsys)
    assert code == 2 and "No space left on device" in err and len(err.strip().splitlines()) == 1
    assert (bundle / "kernels.parquet").read_bytes() == before
    assert not [p for p in bundle.rglob("*") if ".fuseprof-tmp-" in p.name]
    FUZZ_RESULTS["clear error"] += 1


def test_reading_a_folder_removes_what_a_killed_run_left_and_says_so(tmp_path: Path, capsys) -> None:
    """``ls`` on a folder where an ingest was killed with -9 (its marked bundle, of a PID that is gone): the
    half-written bundle is removed with a warning, not left hidden behind 'no bundles'."""
    from fuseprof.bundle.files import PARTIAL_MARKER, temporary_name

    out = tmp_path / "out"
    here = temporary_name("x", "partial").removeprefix(".x.fuseprof-partial-").rsplit("-", 1)[0]  # this host
    dead = out / f".ingest-killed.fuseprof-partial-{here}-999999999"
    (dead / "raw").mkdir(parents=True)
    (dead / PARTIAL_MARKER).write_text("")
    code, _, err = _run(["ls", str(out)], capsys)
    assert not dead.exists() and "removed 1 half-written file(s) of fuseprof runs that were killed" in err


def test_a_json_that_is_no_trace_is_skipped_in_a_folder_and_refused_by_name(tmp_path: Path, capsys) -> None:
    """A folder of traces beside a label file and a config (valid JSON, no 'traceEvents'): the traces are read
    and each other file named in a warning; a folder of only those, or such a file named, is one error."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(BERT, folder / BERT.name)
    (folder / "labels.json").write_text(json.dumps({"traces": {BERT.name: {"bound": "GPU"}}}))
    (folder / "config.json").write_text("[1, 2, 3]")
    code, out, err = _run(["analyze", str(folder), "--format", "json"], capsys)
    assert code == 0 and list(json.loads(out)) == ["schema_version", f"traces/{BERT.name}"], err
    assert "labels.json: skipped, not a torch.profiler trace" in err and "config.json: skipped" in err
    (folder / BERT.name).unlink()
    code, _, err = _run(["analyze", str(folder)], capsys)
    assert code == 2 and "no torch.profiler trace among its JSON files" in err and len(err.strip().splitlines()) <= 3
    code, _, err = _run(["analyze", str(folder / "labels.json")], capsys)
    assert code == 2 and "no 'traceEvents' list" in err
    FUZZ_RESULTS["clear error"] += 1


# Every field of the first event of each category, in every bad form a JSON value can take: the class of
# "one field of one event is not what the format says", generated rather than listed case by case
BAD_FORMS: dict[str, object] = {"missing": ..., "null": None, "text": "x", "NaN": float("nan"), "negative": -1,
                                "huge": 1e300, "past 64 bits": 2**70, "a list": [5], "an object": {}}
EVENT_CATEGORIES = ("kernel", "gpu_memcpy", "cpu_op", "cuda_runtime", "user_annotation", "ac2g", "cpu_instant_event",
                    "python_function", "cuda_driver", "gpu_user_annotation")


def _field_variants(cat: str) -> list[tuple[str, dict]]:
    """(what was changed, the trace) for each field of the category's first event and each bad form."""
    fields = [(f, False) for f in _first(_trace(), cat) if f != "args"]
    fields += [(f, True) for f in _first(_trace(), cat).get("args", {})]
    out = []
    for field, in_args in fields:
        for form, value in BAD_FORMS.items():
            trace = _trace()
            holder = _first(trace, cat)["args"] if in_args else _first(trace, cat)
            if value is ...:
                del holder[field]
            else:
                holder[field] = value
            out.append((f"{cat} {'args.' if in_args else ''}{field} {form}", trace))
    return out


def _kernel_totals(bundle: Path) -> tuple[int, int]:
    loaded = fuseprof_load(bundle)
    return len(loaded), int(loaded["duration_ns"].sum())


@pytest.mark.parametrize("cat", EVENT_CATEGORIES)
def test_every_field_of_an_event_in_every_bad_form(cat: str, tmp_path: Path, capsys) -> None:
    """Through ingest and analyze, each variant is one of: exit 2 with one error line naming the file; exit 0
    with one warning; exit 0 with none and the same kernels and total GPU time as the clean trace (anything else
    accepted in silence is silently wrong). A traceback or a hang fails at once."""
    code, out, err = _run(["ingest", str(BERT), "--out", str(tmp_path / "clean")], capsys)
    assert code == 0, err
    clean = _kernel_totals(Path(out.strip().splitlines()[-1]))
    wrong = []
    for what, trace in _field_variants(cat):
        path = _write_json(tmp_path, trace)
        for argv in (["ingest", str(path), "--out", str(tmp_path / "out")], ["analyze", str(path)]):
            code, out, err = _run(argv, capsys)
            errors = [line for line in err.splitlines() if line.startswith("fuseprof: error:")]
            warned = [line for line in err.splitlines() if line.startswith("fuseprof: warning:")]
            if code == 2 and len(errors) == 1 and path.name in errors[0]:
                FUZZ_RESULTS["clear error"] += 1
            elif code == 0 and len(warned) == 1:
                FUZZ_RESULTS["warning"] += 1
            elif code == 0 and not warned and (argv[0] == "analyze" or
                                               _kernel_totals(Path(out.strip().splitlines()[-1])) == clean):
                FUZZ_RESULTS["identical"] += 1
            else:
                FUZZ_RESULTS["silently wrong" if code == 0 and not warned else "traceback"] += 1
                wrong.append(f"{argv[0]} with {what}: exit {code}, {err.strip()[-300:]!r}")
            shutil.rmtree(tmp_path / "out", ignore_errors=True)
    assert not wrong, "\n".join(wrong)
