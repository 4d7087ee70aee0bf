"""The core install and its extras (issue 58, point 2): the table and JSON verbs import no plotting library and
no torch; an optional package that is missing is one line naming the extra that brings it; a ``.ncu-rep`` is read
through ``ncu --import`` where NVIDIA's reader is not installed; JSON outputs carry their schema version; the trace
store lives in each system's cache folder and says so when it first creates it there."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fuseprof.cli import main
from fuseprof.errors import MissingExtraError, TraceFormatError
from fuseprof.parse import ncu_rep
from fuseprof.parse.hashing import default_root, platform_root
from fuseprof.parse.ncu_rep import read_ncu_rep
from tests.conftest import FIXTURES, FUZZ_RESULTS, ROOT, TRACES

EAGER = TRACES / "llama4l-eager-h200"
COMPILED = TRACES / "llama4l-compiled-h200"
BERT = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"
REP = FIXTURES / "compiled_128x4096.ncu-rep"
CAT = shutil.which("cat")
HAS_READER = importlib.util.find_spec("ncu_report") is not None or ncu_rep._ncu_extras_dir() is not None
HEAVY = {"plotly", "torch", "streamlit", "IPython", "matplotlib", "triton", "pynvml", "ncu_report"}

# Runs fuseprof's command line in a fresh interpreter and writes the names of every module it imported to argv[1].
_RUNNER = ("import json, sys\n"
           "from fuseprof.cli import main\n"
           "code = main(sys.argv[2:])\n"
           "open(sys.argv[1], 'w').write(json.dumps(sorted(sys.modules)))\n"
           "sys.exit(code)\n")


def _fuseprof(argv: list[str], tmp_path: Path, env: dict[str, str] | None = None,
              prelude: str = "") -> subprocess.CompletedProcess[str]:
    """``fuseprof ARGV`` in a fresh interpreter (``prelude`` run first, in it), from the checkout."""
    code = f"{prelude}\nimport sys\nfrom fuseprof.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env={**os.environ, **(env or {})})


VERBS = {
    "analyze": ["analyze", str(EAGER)],
    "analyze-json": ["analyze", str(EAGER), "--format", "json"],
    "check": ["check", str(EAGER)],
    "fusion": ["fusion", str(EAGER), "--format", "json"],
    "audit": ["audit", str(EAGER)],
    "path": ["path", str(EAGER)],
    "whatif": ["whatif", str(EAGER), "--fuse", "top:2"],
    "diff": ["diff", str(EAGER), str(COMPILED)],
    "gate": ["diff", str(EAGER), str(COMPILED), "--fail-on", "busy:+5%,kernels:+0", "--format", "json"],
    "export": ["export", str(EAGER), "--perfetto", "{tmp}/out.json.gz"],
    "sql": ["sql", "SELECT module, count(*) AS n FROM kernels GROUP BY 1", str(EAGER), "--format", "json"],
    "store": ["store"],
    "compare": ["compare", str(ROOT / "traces" / "verify")],
    "summary": ["summary", str(TRACES), "--format", "json"],
}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_table_and_json_verbs_import_no_plotting_library_and_no_torch(verb: str, tmp_path: Path) -> None:
    """Each verb in a fresh interpreter, the store off (every trace decoded and analysed: the longest import
    path): plotly, torch, streamlit and IPython are not among the modules it loaded. Before, every trace verb
    loaded plotly (the section views built each table's figure, shown or not)."""
    if verb == "sql" and importlib.util.find_spec("duckdb") is None:
        pytest.skip("duckdb (fuseprof[interop]) is not installed")
    modules = tmp_path / "modules.json"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in VERBS[verb]]
    done = subprocess.run([sys.executable, "-c", _RUNNER, str(modules), *argv], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={**os.environ, "FUSEPROF_CACHE": "off"})
    assert done.returncode == 0, done.stderr[-2000:]
    names = json.loads(modules.read_text())
    assert f"fuseprof.commands.{'interop' if verb in ('sql', 'export') else 'traces'}" in names or verb in (
        "compare", "summary", "whatif")  # the runner saw the command's own imports
    loaded = {name.split(".")[0] for name in names}
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def test_report_still_draws_every_figure(tmp_path: Path) -> None:
    """`report` is the verb that draws: its HTML holds one figure for each shown table that declares one and has
    rows (the figure is drawn when a view asks for it, no longer whenever the table is shown)."""
    from fuseprof.analysis import analyze
    from fuseprof.analysis.running.sections import trace_sections

    out = tmp_path / "r.html"
    assert main(["report", str(EAGER), "-o", str(out)]) == 0
    (result,) = analyze([EAGER])
    drawn = [t.name for s in trace_sections() for t in s.tables
             if t.shown and t.figure and not result.frames.get(t.name, pd.DataFrame()).empty]
    assert drawn and out.read_text().count("<div class='fig'") == len(drawn), drawn


# --- optional packages: one line naming the extra -----------------------------------------------------------


@pytest.mark.parametrize(("argv", "hidden", "extra"), [
    (["profile", "silu_mul", "--device", "cpu", "--shapes", "4x64", "--out", "{tmp}"], "torch", "capture"),
    (["bench", "silu_mul", "--device", "cpu", "--shapes", "4x64", "--out", "{tmp}"], "torch", "capture"),
    (["run", "--out", "{tmp}", str(ROOT / "examples" / "region_demo.py")], "torch", "capture"),
    (["fusion", str(EAGER), "--verify", "1", "--out", "{tmp}"], "torch", "capture"),
    (["dashboard", str(TRACES), "--port", "8599"], "streamlit", "dashboard"),
])
def test_a_missing_optional_package_is_one_line_naming_its_extra(argv: list[str], hidden: str, extra: str,
                                                                 tmp_path: Path) -> None:
    """The package hidden from the interpreter (as in a core install): exit 2, one line, the extra named, no
    traceback, nothing written."""
    given = [a.replace("{tmp}", str(tmp_path / "out")) for a in argv]
    done = _fuseprof(given, tmp_path, prelude=f"import sys; sys.modules[{hidden!r}] = None",
                     env={"FUSEPROF_CACHE": "off"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (f"fuseprof: error: fuseprof {given[0]} needs {hidden}, which this "
                                                    f"install lacks: pip install 'fuseprof[{extra}]'")
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
    FUZZ_RESULTS["clear error"] += 1


def test_a_missing_module_that_is_no_extra_of_fuseprofs_is_not_blamed_on_one() -> None:
    from fuseprof.errors import missing_extra

    assert missing_extra(ModuleNotFoundError("no", name="mycase_helpers"), "fuseprof profile") is None
    found = missing_extra(ModuleNotFoundError("no", name="torch._dynamo"), "fuseprof profile")
    assert found is not None and found.extra == "capture" and found.exit_code == 2


# --- .ncu-rep without NVIDIA's reader: ncu --import ---------------------------------------------------------


def _fake_ncu(folder: Path, body: str) -> Path:
    """An ``ncu`` on PATH that keeps its argv in ncu-argv.txt and runs ``body`` (a shell script's lines)."""
    folder.mkdir(exist_ok=True)
    ncu = folder / "ncu"
    ncu.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {folder}/ncu-argv.txt\n{body}\n')
    ncu.chmod(0o755)
    return ncu


@pytest.fixture
def without_reader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ``ncu_report`` importable and no Nsight Compute install to find it in; PATH holds only tmp/bin."""
    monkeypatch.setitem(sys.modules, "ncu_report", None)
    monkeypatch.setattr(ncu_rep, "_EXTRAS_GLOBS", ())  # the machine's own Nsight install (the GPU host has one)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path / "bin"


def test_ncu_rep_is_read_through_ncu_import_without_the_reader(without_reader: Path) -> None:
    """The fake ncu prints the CSV that `ncu --import compiled_128x4096.ncu-rep --csv --page raw` printed on the
    H200 (the committed fixture, auto-scaled units): the rows equal what NVIDIA's reader reads from the report,
    to the CSV's three significant digits, and ncu was asked for the raw page in base units."""
    if not HAS_READER:
        pytest.skip("NVIDIA's reader is not installed here: nothing to compare against")
    _fake_ncu(without_reader, f"{CAT} {FIXTURES / 'compiled_128x4096_auto_units.csv'}")
    through_ncu = read_ncu_rep(REP)
    assert (without_reader / "ncu-argv.txt").read_text().split("\n")[:-1] == [
        "--import", str(REP), "--csv", "--page", "raw", "--print-units", "base"]
    del sys.modules["ncu_report"]  # the reader back, for the reference
    reference = read_ncu_rep(REP)
    assert len(through_ncu) == len(reference) == 1
    a, b = through_ncu.iloc[0], reference.iloc[0]
    assert (a["variant"], a["shape"], a["kernel"]) == (b["variant"], b["shape"], b["kernel"])
    for column in ("duration_ns", "dram_read_bytes", "l2_read_bytes", "registers_per_thread", "shared_mem_bytes",
                   "achieved_occupancy_pct"):
        assert a[column] == pytest.approx(b[column], rel=2e-3), column


def test_ncu_rep_without_reader_or_ncu_names_the_capture_extra(without_reader: Path) -> None:
    with pytest.raises(MissingExtraError) as caught:
        read_ncu_rep(REP)
    assert str(caught.value) == ("reading compiled_128x4096.ncu-rep needs ncu_report, which this install lacks: "
                                 "pip install 'fuseprof[capture]' (or put Nsight Compute's ncu on PATH)")
    FUZZ_RESULTS["clear error"] += 1


def test_ncu_import_that_fails_or_prints_no_csv_is_a_clear_error(without_reader: Path, tmp_path: Path) -> None:
    """A report ncu cannot open (it exits 1) and an ncu that prints no CSV: each one line naming the file."""
    damaged = tmp_path / "cut.ncu-rep"
    damaged.write_bytes(REP.read_bytes()[:3000])
    _fake_ncu(without_reader, 'echo "==ERROR== Failed to import report" >&2; exit 1')
    with pytest.raises(TraceFormatError, match=r"cut\.ncu-rep: ncu --import could not read it .*Failed to import"):
        read_ncu_rep(damaged)
    _fake_ncu(without_reader, 'echo "==PROF== nothing here"')
    with pytest.raises(TraceFormatError, match=r"cut\.ncu-rep: no ncu header row"):
        read_ncu_rep(damaged)
    FUZZ_RESULTS["clear error"] += 2


# --- JSON outputs carry their schema version --------------------------------------------------------------


def test_json_outputs_carry_the_schema_version(capsys: pytest.CaptureFixture[str]) -> None:
    """analyze's object: a top-level schema_version, every other key a trace (as before); a list verb's records:
    each carries it first, the list still a list with one record per row of its CSV."""
    assert main(["analyze", str(BERT), "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert list(body)[0] == "schema_version" and body["schema_version"] == 1
    assert [k for k in body if k != "schema_version"] == [BERT.name] and "integrity" in body[BERT.name]
    for argv in (["fusion", str(BERT)], ["check", str(BERT)], ["diff", str(EAGER), str(COMPILED)]):
        assert main([*argv, "--format", "csv"]) == 0
        rows = len(pd.read_csv(io.StringIO(capsys.readouterr().out)))
        assert main([*argv, "--format", "json"]) == 0
        records = json.loads(capsys.readouterr().out)
        assert isinstance(records, list) and len(records) == rows > 0, argv
        assert all(list(r)[0] == "schema_version" and r["schema_version"] == 1 for r in records), argv


def test_a_sql_query_keeps_only_its_own_columns(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("duckdb")
    assert main(["sql", "SELECT count(*) AS n FROM kernels", str(BERT), "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    trace = json.loads(gzip.decompress(BERT.read_bytes()))
    assert list(row) == ["n"] and row["n"] == sum(e.get("cat") in ("kernel", "gpu_memcpy") for e in trace["traceEvents"])


# --- the trace store's folder --------------------------------------------------------------------------------


def test_the_store_lives_in_each_systems_cache_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path("/home/u")
    assert platform_root("linux", {}, home) == home / ".cache" / "fuseprof"
    assert platform_root("linux", {"XDG_CACHE_HOME": "/x/cache"}, home) == Path("/x/cache/fuseprof")
    assert platform_root("darwin", {"XDG_CACHE_HOME": "/x/cache"}, home) == home / "Library" / "Caches" / "fuseprof"
    local = r"C:\Users\u\AppData\Local"
    assert platform_root("win32", {"LOCALAPPDATA": local}, home) == Path(local) / "fuseprof" / "Cache"
    assert platform_root("win32", {}, home) == home / "AppData" / "Local" / "fuseprof" / "Cache"
    monkeypatch.setenv("FUSEPROF_CACHE", "/somewhere/else")
    assert default_root() == Path("/somewhere/else")
    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    assert default_root() is None
    monkeypatch.delenv("FUSEPROF_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/cache")
    assert default_root() == platform_root(sys.platform, {"XDG_CACHE_HOME": "/x/cache"}, Path.home())


def _notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "created the trace store" in line]


def test_the_first_run_says_where_it_created_the_store_once(tmp_path: Path) -> None:
    """HOME a fresh folder, no FUSEPROF_CACHE: the run that creates ~/.cache/fuseprof says so in one line naming
    it and `fuseprof store --help`; the next verb, and the same command again (a kept answer), say nothing."""
    env = {k: v for k, v in os.environ.items() if k not in ("FUSEPROF_CACHE", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path)
    run = [sys.executable, "-m", "fuseprof.cli"]
    first = subprocess.run([*run, "analyze", str(BERT)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / ".cache" / "fuseprof"
    assert _notices(first.stderr) == [
        f"fuseprof: created the trace store {folder}: decoded traces are kept there to be read again fast "
        "(FUSEPROF_CACHE=DIR moves it, FUSEPROF_CACHE=off turns it off, `fuseprof store --clear` empties it; "
        "`fuseprof store --help`)"]
    assert (folder / ".fuseprof-store").is_file()
    for argv in (["check", str(BERT)], ["analyze", str(BERT)]):
        again = subprocess.run([*run, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
        assert again.returncode == 0 and _notices(again.stderr) == [], again.stderr
    assert first.stdout == again.stdout  # the kept answer, without the notice


def test_a_store_folder_the_user_named_is_created_without_a_notice(tmp_path: Path) -> None:
    done = _fuseprof(["check", str(BERT)], tmp_path, env={"FUSEPROF_CACHE": str(tmp_path / "mine")})
    assert done.returncode == 0 and (tmp_path / "mine" / ".fuseprof-store").is_file()
    assert _notices(done.stderr) == []


def test_a_file_where_the_default_store_would_be_is_a_warning_and_no_notice(tmp_path: Path) -> None:
    """~/.cache/fuseprof is a file: the analysis goes on without the store, says why once, and claims no store."""
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "fuseprof").write_text("not a folder")
    env = {k: v for k, v in os.environ.items() if k not in ("FUSEPROF_CACHE", "XDG_CACHE_HOME")}
    done = subprocess.run([sys.executable, "-m", "fuseprof.cli", "check", str(BERT)], capture_output=True, text=True,
                          env={**env, "HOME": str(tmp_path)}, cwd=ROOT, timeout=600)
    assert done.returncode == 0 and _notices(done.stderr) == [], done.stderr
    assert "fuseprof: warning: trace store: cannot write under" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / ".cache" / "fuseprof").read_text() == "not a folder"
    FUZZ_RESULTS["warning"] += 1
