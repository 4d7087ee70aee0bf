"""Issue 58, "the first hour" (CLI and API): what a new user meets first — set-up command 1, ``print(fuseprof.analyze(p))``,
a wrong path, another tool's file, the tables' numbers, ``--help``, ``--format csv`` and ``sql`` — each checked against
the raw file or the behaviour the issue states."""

from __future__ import annotations

import gzip
import inspect
import json
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fuseprof.analysis.running.sections import shown_tables
from fuseprof.cli import build_parser, main
from fuseprof.commands import COMMANDS
from tests.conftest import FUSEPROF, FUZZ_RESULTS, ROOT

EAGER = ROOT / "traces" / "llama4l-eager-h200"
EAGER_RAW = EAGER / "raw" / "0-profiler_trace.json.gz"
TP2 = ROOT / "tests" / "fixtures" / "tp2"
NCU_REP = ROOT / "tests" / "fixtures" / "compiled_128x4096.ncu-rep"
EXECUTION_TRACE = ROOT / "tests" / "fixtures" / "whatif" / "attention_a.et.json.gz"
# a table cell (two spaces or a line's edge on each side) that is a number in scientific notation, or of five or
# more integer digits without thousands separators
_BAD_CELL = re.compile(r"(?:^|(?<=\s\s))(-?\d{5,}(?:\.\d+)?|-?\d(?:\.\d+)?e[-+]?\d+)(?=\s\s|$)", re.IGNORECASE)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("fuseprof: error: "), (code, err)
    assert "Traceback" not in err
    return lines[0]


# 1. set-up command 1

def test_set_up_command_1_analyses_a_committed_trace_in_one_screenful() -> None:
    """The README's first command ends in a trace analysis, not a capture summary (170 lines before), and what it
    prints fits a screen: the run's bound and where the time goes, as the README's pitch promises."""
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if line.startswith("python3 -m venv") and "fuseprof" in
                   line.rsplit("&&", 1)[1])
    verb = shlex.split(command.rsplit("&&", 1)[1])
    assert verb[0] == ".venv/bin/fuseprof" and verb[1] == "analyze", verb
    done = subprocess.run([FUSEPROF, *verb[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) <= 50, len(lines)
    assert "Verdict: what bounds the run" in done.stdout and "host-bound" in done.stdout
    assert "Time by category" in done.stdout


# 2. the result object

def _gpu_intervals_ns(path: Path) -> list[tuple[int, int]]:
    """The raw trace's kernel, memcpy and memset intervals in integer ns (its µs timestamp and duration, each to the
    ns it was written with), by start."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return sorted((round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e["dur"] * 1000)) for e in events
                  if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))


def _gpu_busy_and_span_us(path: Path) -> tuple[float, float]:
    """GPU busy time (the union of the GPU intervals) and the span from the first GPU start to the last GPU end, in
    µs, from the raw trace."""
    gpu = _gpu_intervals_ns(path)
    busy, end = 0, -1
    for start, stop in gpu:
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy / 1e3, (max(s for _, s in gpu) - gpu[0][0]) / 1e3


def test_print_of_an_analysis_says_its_verdict_and_how_to_reach_each_section() -> None:
    import fuseprof

    report = fuseprof.analyze(EAGER)
    text = str(report)
    assert text == repr(report)
    busy, span = _gpu_busy_and_span_us(EAGER_RAW)
    assert f"verdict: host-bound: GPU busy {busy:,.3f} µs of a {span:,.3f} µs span ({100 * busy / span:.1f}%)" \
        in text, text
    assert "where the GPU time goes: GEMM" in text
    # the window reads values back on the host more than once (aten::item, counted in the raw file), and a CUDA graph
    # cannot hold a read-back: the graph advice waits below "remove synchronisations" (3654ba4), so it is not first
    events = json.loads(gzip.decompress(EAGER_RAW.read_bytes()))["traceEvents"]
    assert sum(e.get("name") == "aten::item" for e in events) > 1
    first = re.search(r"^  worth doing first: (.+) \(saves [\d,.]+ µs of step time", text, re.M)
    assert first and not first.group(1).startswith("close the host-bound gaps"), text
    assert first.group(1) == report[0].worth_doing["what"].iloc[0]
    tables = shown_tables(report[0])
    assert len(tables) >= 15
    for name, frame in tables.items():  # every section listed with its rows, and reachable as the text says
        assert re.search(rf"^    {name}\s+{len(frame):,} row\(s\)  \S", text, re.M), name
        assert getattr(report[0], name) is report[0].frames[name]
    assert "report[0].NAME or report[0].frames['NAME']" in text


def test_fuseprof_analyze_has_a_real_signature_and_docstring() -> None:
    import fuseprof

    parameters = inspect.signature(fuseprof.analyze).parameters
    assert list(parameters)[:4] == ["paths", "device", "top", "registry"]
    assert {"window", "graph_capture", "ceilings", "workers", "scheduler"} <= set(parameters)
    assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters.values())
    doc = inspect.getdoc(fuseprof.analyze) or ""
    assert "window" in doc and "print(report)" in doc


# 3. paths checked before heavy imports

_WRONG_PATHS = {
    "missing trace": ["analyze", "/nonexistent/trace.json.gz"],
    "missing second trace of diff": ["diff", str(EAGER), "/nonexistent/b.json"],
    "missing --registry": ["fusion", str(EAGER), "--registry", "/nonexistent/registry.toml"],
    "folder as --registry": ["audit", str(EAGER), "--registry", str(TP2)],
    "missing --graph-capture": ["analyze", str(EAGER), "--graph-capture", "/nonexistent/capture.json"],
    "missing bundle of show": ["show", "/nonexistent/bundle"],
    "folder as ingest's file": ["ingest", str(TP2)],
    "glob that matches nothing": ["check", str(TP2 / "nothing-*.json.gz")],
    "missing trace of sql": ["sql", "SELECT 1", "/nonexistent/trace.json"],
}


@pytest.mark.parametrize("name", sorted(_WRONG_PATHS))
def test_a_wrong_path_is_one_line_before_pandas_is_imported(name: str) -> None:
    """A missing path, or a folder where a file belongs, is said in one line with exit status 2 by a process that has
    not imported pandas (it took 1.4–6 s to say after the heavy imports)."""
    argv = _WRONG_PATHS[name]
    probe = ("import sys\nfrom fuseprof.cli import main\ncode = main(sys.argv[1:])\n"
             "print('pandas imported' if 'pandas' in sys.modules else 'pandas not imported')\nsys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    line = _one_error_line(done.returncode, done.stderr)
    assert done.stdout.strip() == "pandas not imported", (done.stdout, line)
    assert any(a in line for a in argv if "/" in a), line
    FUZZ_RESULTS["clear error"] += 1


def test_the_installed_command_says_a_wrong_path_in_one_line() -> None:
    done = subprocess.run([FUSEPROF, "analyze", "/nonexistent"], capture_output=True, text=True, timeout=120)
    assert _one_error_line(done.returncode, done.stderr) == "fuseprof: error: /nonexistent: no such file or directory"
    assert done.stdout == ""


# 4. other tools' files

def _sqlite_file(path: Path) -> Path:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER)")
    connection.commit()
    connection.close()
    return path


_FOREIGN = {  # file made in tmp -> words the error must hold (the next step)
    "ncu-rep named .json": (lambda tmp: _copy(NCU_REP, tmp / "trace.json"), "fuseprof ingest"),
    "ncu-rep as it is": (lambda tmp: _copy(NCU_REP, tmp / "kernels.ncu-rep"), "fuseprof ingest"),
    "nsys SQLite export": (lambda tmp: _sqlite_file(tmp / "report.sqlite"), "nsys stats"),
    "nsys SQLite export named .json.gz": (lambda tmp: _sqlite_file(tmp / "trace.json.gz"), "nsys stats"),
    "nsys-rep": (lambda tmp: _write(tmp / "run.nsys-rep", b"\x00\x01binary report\xff" * 64), "nsys stats"),
    "execution trace named as a trace": (lambda tmp: _copy(EXECUTION_TRACE, tmp / "run.json.gz"), "beside"),
    "execution trace, uncompressed": (lambda tmp: _write(tmp / "et.json", gzip.decompress(EXECUTION_TRACE.read_bytes())),
                                      "beside"),
}


def _copy(source: Path, target: Path) -> Path:
    return _write(target, source.read_bytes())


def _write(target: Path, data: bytes) -> Path:
    target.write_bytes(data)
    return target


@pytest.mark.parametrize("name", sorted(_FOREIGN))
def test_another_tools_file_is_named_with_the_next_step(name: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Recognised by content whatever its name (the nsys-rep by its name): what it is and what to run, one line, exit
    2 — on the command line (before the analysis) and through the API (the reader)."""
    make, next_step = _FOREIGN[name]
    path = make(tmp_path)
    code, out, err = _run(["fusion", str(path)], capsys)
    line = _one_error_line(code, err)
    assert "not a torch.profiler trace" in line and next_step in line, line
    assert "truncated?" not in line and out == ""
    import fuseprof
    from fuseprof.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match=re.escape(next_step)):
        fuseprof.analyze(path)
    FUZZ_RESULTS["clear error"] += 1


def test_a_real_trace_is_not_taken_for_another_tools_file() -> None:
    from fuseprof.parse.foreign import foreign_file

    assert foreign_file(EAGER_RAW) is None
    assert foreign_file(TP2 / "tp_mlp-rank0.json.gz") is None


# 5. one number format

_VERBS = [
    ["analyze", str(EAGER), "--top", "5"],
    ["diff", str(EAGER), str(ROOT / "traces" / "llama4l-compiled-h200"), "--fail-on", "busy:+5%,kernels:+0"],
    ["path", str(EAGER)],
    ["analyze", str(TP2)],
    ["sql", "SELECT name, sum(dur_ns) AS ns, avg(dur_ns) AS mean_ns FROM kernels GROUP BY 1 ORDER BY 2 DESC", str(EAGER)],
    ["summary", str(ROOT / "traces")],
]


@pytest.mark.parametrize("argv", _VERBS, ids=[" ".join(a[:1] + [Path(a[1]).name]) for a in _VERBS])
def test_no_table_cell_is_in_scientific_notation_or_without_separators(argv: list[str],
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Every human-readable table writes numbers one way (``3.964e+05``, ``4412488.0`` and ``93108.197`` were printed
    by some verbs); JSON and CSV keep base units."""
    code, out, err = _run(argv, capsys)
    assert code in (0, 1), err
    bad = [(m.group(1), line) for line in out.splitlines() for m in _BAD_CELL.finditer(line)]
    assert not bad, bad[:5]


def test_the_integrity_table_writes_the_largest_gap_with_separators(capsys: pytest.CaptureFixture[str]) -> None:
    """The longest stretch without GPU work of the raw trace, in ns with separators (it read 3.964e+05), and the
    same value unformatted in the CSV."""
    gpu = _gpu_intervals_ns(EAGER_RAW)
    gap_ns, end = 0, gpu[0][1]
    for start, stop in gpu[1:]:
        gap_ns, end = max(gap_ns, start - end), max(end, stop)
    code, out, _ = _run(["check", str(EAGER)], capsys)
    assert code == 0 and re.search(rf"largest_gpu_gap_ns\s+{gap_ns:,}\s+ok", out), out
    code, out, _ = _run(["check", str(EAGER), "--format", "csv"], capsys)
    assert code == 0 and re.search(rf"^largest_gpu_gap_ns,{gap_ns}(\.0)?,", out, re.M), out


def test_number_text() -> None:
    from fuseprof.display import number_text

    assert number_text(396448.0) == "396,448"
    assert number_text(4412488.0) == "4,412,488"
    assert number_text(93108.197, 3) == "93,108.197"
    assert number_text(1.5e-7) == "0.000000150"
    assert number_text(float("nan")) == ""
    assert number_text(2.0, 2) == "2.00"


# 6. examples in --help

def _subparsers() -> dict:  # type: ignore[type-arg]
    import argparse

    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_help_ends_with_two_examples_the_parser_accepts(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = _subparsers()[name].format_help()
    block = text[text.rindex("\nexamples:\n") + len("\nexamples:\n"):]
    examples = [line.strip() for line in block.splitlines() if line.strip()]
    assert len(examples) >= 2 and all(line.startswith(f"fuseprof {name}") for line in examples), examples
    for line in examples:
        args = build_parser().parse_args(shlex.split(line)[1:])
        assert args.command == name


@pytest.mark.parametrize("line", ["fuseprof cases", "fuseprof columns", "fuseprof ls traces",
                                  "fuseprof check traces/llama4l-eager-h200",
                                  "fuseprof audit traces/llama4l-compiled-h200",
                                  "fuseprof compare traces/silu_mul-bfloat16-h200-20261129t172803z --baseline fused_cuda"])
def test_the_cheap_examples_run(line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from fuseprof.commands.examples import EXAMPLES

    assert line in {e for examples in EXAMPLES.values() for e in examples}
    monkeypatch.chdir(ROOT)
    code, out, err = _run(shlex.split(line)[1:], capsys)
    assert code == 0 and out, err


# 7. one CSV file per table

def test_csv_with_out_writes_one_file_per_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    code, long_csv, _ = _run(["analyze", str(TP2), "--format", "csv"], capsys)
    assert code == 0
    long = pd.read_csv(__import__("io").StringIO(long_csv))
    out = tmp_path / "tables"
    code, said, err = _run(["analyze", str(TP2), "--format", "csv", "--out", str(out)], capsys)
    assert code == 0, err
    import fuseprof

    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(f"{t}.csv" for t in shown_tables(fuseprof.analyze(TP2)[0])), files
    assert set(long["table"]) <= {f.removesuffix(".csv") for f in files}
    assert f"{len(files)} CSV file(s)" in said
    categories = pd.read_csv(out / "categories.csv")
    expected = long[long["table"] == "categories"].dropna(axis=1, how="all").drop(columns="table")
    assert list(categories.columns) == ["trace", "category", "count", "time_ns", "share_pct"]
    assert categories["time_ns"].tolist() == expected["time_ns"].astype("int64").tolist()
    assert set(categories["trace"]) == {"tp2/tp_mlp-rank0.json.gz", "tp2/tp_mlp-rank1.json.gz"}
    assert len(categories.columns) < 10 < len(long.columns)  # a table's own columns, not every table's


def test_csv_out_keeps_files_that_exist_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tables"
    out.mkdir()
    (out / "verdict.csv").write_text("mine\n")
    code, _, err = _run(["analyze", str(EAGER), "--format", "csv", "--out", str(out)], capsys)
    line = _one_error_line(code, err)
    assert "verdict.csv" in line and "--force" in line
    assert (out / "verdict.csv").read_text() == "mine\n" and [p.name for p in out.iterdir()] == ["verdict.csv"]
    FUZZ_RESULTS["held"] += 1
    code, _, err = _run(["analyze", str(EAGER), "--format", "csv", "--out", str(out), "--force"], capsys)
    assert code == 0 and (out / "verdict.csv").read_text().startswith("trace,bound,")


@pytest.mark.parametrize("case", ["out is a file", "out without csv", "unknown section"])
def test_csv_out_and_sections_misuse_is_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    argv = {"out is a file": ["analyze", str(EAGER), "--format", "csv", "--out", str(afile)],
            "out without csv": ["analyze", str(EAGER), "--out", str(tmp_path / "t")],
            "unknown section": ["analyze", str(EAGER), "--sections", "verdict,nonsense"]}[case]
    code, out, err = _run(argv, capsys)
    line = _one_error_line(code, err)
    assert ("nonsense" in line and "categories" in line) if case == "unknown section" else "--out" in line
    assert afile.read_text() == "x" and not (tmp_path / "t").exists()
    FUZZ_RESULTS["clear error"] += 1


def test_sections_choose_the_tables_in_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["analyze", str(EAGER), "--sections", "verdict,categories", "--format", "json"], capsys)
    body = json.loads(out)
    tables = {k for k, v in body[next(k for k in body if k != "schema_version")].items() if isinstance(v, list)} \
        - {"notes"}
    assert code == 0 and tables == {"verdict", "categories"}, tables


# 8. sql says its window and what its tables hold

def test_sql_says_the_window_it_used_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace whose last step's GPU work lies outside every ProfilerStep range (its range removed): the default
    window leaves that work out of ``kernels``, and sql says so in one line on stderr, with the way to take it."""
    pytest.importorskip("duckdb")
    trace = json.loads(gzip.decompress((TP2 / "tp_mlp-rank0.json.gz").read_bytes()))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("name") != "ProfilerStep#3"]
    path = tmp_path / "two-steps.json"
    path.write_text(json.dumps(trace))
    gpu = sum(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in trace["traceEvents"])
    code, out, err = _run(["sql", "SELECT count(*) AS n FROM kernels", str(path)], capsys)
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "the profiled steps (#1, #2)" in lines[0] and "--window all" in lines[0], err
    code, out_all, err_all = _run(["sql", "SELECT count(*) AS n FROM kernels", str(path), "--window", "all"], capsys)
    assert code == 0 and "hold the whole trace" in err_all
    assert int(out_all.split()[-1].replace(",", "")) == gpu > int(out.split()[-1].replace(",", ""))


def test_sql_help_and_docs_say_what_cpu_ops_and_kind_hold(capsys: pytest.CaptureFixture[str]) -> None:
    """cpu_ops holds only the ops that launched GPU work (fewer than the trace's cpu_op events), and
    kind = 'kernel' leaves the NCCL collectives out: both said where a user reads about the tables."""
    pytest.importorskip("duckdb")
    import fuseprof

    help_text = " ".join(_subparsers()["sql"].format_help().split())
    docs = " ".join((ROOT / "docs" / "interop.md").read_text().split())
    for text in (help_text, docs):
        assert "only the CPU ops that launched GPU work" in text
        assert "kind = 'kernel'" in text and "NCCL" in text
    events = json.loads(gzip.decompress(EAGER_RAW.read_bytes()))["traceEvents"]
    cpu_op_events = sum(e.get("cat") == "cpu_op" for e in events)
    held = int(fuseprof.sql("SELECT count(*) AS n FROM cpu_ops", EAGER)["n"].iloc[0])
    assert 0 < held < cpu_op_events
    kinds = fuseprof.sql("SELECT kind, count(*) AS n FROM kernels GROUP BY 1", TP2).set_index("kind")["n"]
    nccl = sum(e.get("cat") == "kernel" and "nccl" in e["name"].lower() for p in sorted(TP2.glob("*.json.gz"))
               for e in json.loads(gzip.decompress(p.read_bytes()))["traceEvents"])
    assert kinds["communication"] > 0 and nccl >= kinds["communication"]

