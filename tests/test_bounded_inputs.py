"""Bounded inputs (issue 58, build point 5) and the trace decoding it found silently wrong: every input of a
bounded size or depth with a clear error, no hang on a FIFO or a registry regex, ``fuseprof run``'s partial
bundle removed at every exit, impossible durations and memory records flagged, nanosecond clocks never read
1000x off. Hostile cases count into the fuzz line (tests/conftest.py's FUZZ_RESULTS); a case that could hang
runs in a child process under a timeout and counts 'hang' when it runs out."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.safe_regex import regex_problem
from tests.conftest import FIXTURES, FUZZ_RESULTS

BERT = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"
CHILD_TIMEOUT_S = 30


def _trace() -> dict:
    return json.loads(gzip.decompress(BERT.read_bytes()))


def _kernels(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]


def _child(argv: list[str], tmp: Path, memory_bytes: int | None = None, stdin: int | None = None,
           timeout: float = CHILD_TIMEOUT_S) -> tuple[str, int | None, str, str]:
    """``fuseprof ARGV`` in a child process (its own trace store under ``tmp``; its address space limited to
    ``memory_bytes``, as ``ulimit -v`` does): (outcome, exit code, stdout, stderr). The outcome is 'hang' past
    ``timeout``, 'traceback' for one, 'clear error' for exit 2 with one error line, else 'exit N'."""
    limit = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({memory_bytes}, {memory_bytes}))\n"
             if memory_bytes else "")
    code = limit + "import sys\nfrom fuseprof.cli import main\nsys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "FUSEPROF_CACHE": str(tmp / "store")}
    try:
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                              timeout=timeout, stdin=stdin if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "hang", None, "", ""
    errors = [line for line in done.stderr.splitlines() if line.startswith("fuseprof: error:")]
    if "Traceback (most recent call last)" in done.stderr:
        return "traceback", done.returncode, done.stdout, done.stderr
    if done.returncode == 2 and len(errors) == 1:
        return "clear error", done.returncode, done.stdout, done.stderr
    return f"exit {done.returncode}", done.returncode, done.stdout, done.stderr


def _count(outcome: str) -> None:
    FUZZ_RESULTS[outcome if not outcome.startswith("exit") else "silently wrong"] += 1


def _clear_error(argv: list[str], tmp: Path, words: str, **kwargs) -> str:
    """The case ends in one error line holding ``words`` (a regex), counted in the fuzz line either way."""
    outcome, code, _, err = _child(argv, tmp, **kwargs)
    _count(outcome)
    assert outcome == "clear error" and re.search(words, err), (outcome, code, err[-800:])
    return err


# --- regexes from a registry ------------------------------------------------------------------------------------

REFUSED = ["(a+)+$", "(a{1,9})+", r"(\w*x?)*", r"(\w+\s?)*$", "(x+x+)+y", "(.*)*", "^(a|aa)+$", "(.|x)+",
           ".*a.*b.*c", "a.*a.*b", ".*a.*b", "x" * 3000]
ACCEPTED = ["gemm.*bias", "[^_]*_[^_]*_[^_]*$", "(?:foo|bar)*", "(a|ab)*c", "(?:_[a-z0-9]+)*$", "a*+b", "(?>a+)+",
            "(ab)+", r"^\w+::\w*rope\w*$", r"^aten::_*(?P<name>[a-z0-9]+(?:_[a-z0-9]+)*?)_?$"]


@pytest.mark.parametrize("pattern", REFUSED)
def test_a_pattern_that_backtracks_without_bound_is_refused(pattern: str) -> None:
    assert regex_problem(pattern) is not None


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_an_accepted_pattern_searches_a_hostile_name_fast(pattern: str) -> None:
    """What the check lets through runs in well under a second on a 2 kB name made to make it backtrack (runs of
    each character the pattern names, then one that fails it)."""
    assert regex_problem(pattern) is None
    compiled = re.compile(pattern)
    letters = sorted(set(re.sub(r"[^A-Za-z0-9_:]", "", pattern))) or ["a"]
    for letter in letters:
        name = letter * 2000 + "!"
        started = time.perf_counter()
        compiled.search(name)
        assert time.perf_counter() - started < 0.5, (pattern, letter)


def test_every_built_in_pattern_passes_the_check() -> None:
    """The rule refuses no regex of fuseprof's own registry: a user copying a built-in row is never refused."""
    import dataclasses

    fields = ("op", "kernel", "pattern", "fused", "region", "calls", "ranges")
    patterns = [p for f in dataclasses.fields(DEFAULT) for row in (getattr(DEFAULT, f.name) if isinstance(
        getattr(DEFAULT, f.name), tuple) else ()) if dataclasses.is_dataclass(row)
        for name in fields if hasattr(row, name)
        for p in (getattr(row, name) if isinstance(getattr(row, name), tuple) else (getattr(row, name),))
        if isinstance(p, str) and p]
    assert len(patterns) > 100
    assert [p for p in patterns if regex_problem(p)] == []


@pytest.mark.parametrize(("pattern", "refused"), [
    (r"at::native::(?:\(anonymous namespace\)::|\w+::)?silu_kernel", False),  # ATen's kernels, one namespace or none
    (r"(a|aa)?b", False), (r"((a+)?)+$", True), (r"(?:\w+::)+x$", True)])
def test_an_optional_part_is_one_turn_and_no_nesting(pattern: str, refused: bool) -> None:
    """``?`` takes one turn at most, so a repeat inside it has no turns to split a name between (2fa1f15's ATen
    kernel rows were refused as '(a+)+'); a part that can repeat still is. Timed on a long name either way."""
    assert (regex_problem(pattern) is not None) == refused
    if not refused:
        started = time.perf_counter()
        re.search(pattern, "at::native::" + "a" * 50_000 + "!")
        assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(("pattern", "refused"), [
    (r"^(?=.*gemm)(?!.*attn).*?fp8", False),
    (r"^.*a(?=.*b.*c)", True), (r"^.*a.*b.*c", True)])
def test_a_lookaround_is_its_own_search(pattern: str, refused: bool) -> None:
    """A lookaround consumes nothing and is not re-entered once it has answered: the registry's quantized-GEMM row
    (``^(?=.*gemm…)(?!.*attn…).*?e4m3…``) is three linear searches from one place, not one search of power 3 (it
    was refused as such, failing the built-in-pattern check); one after a ``.*`` still multiplies with it."""
    assert (regex_problem(pattern) is not None) == refused
    if not refused:
        started = time.perf_counter()
        for name in ("gemm" * 12_500 + "!", "a" * 50_000 + "gemm!", "gemm" + "a" * 50_000):
            re.search(pattern, name)
        assert time.perf_counter() - started < 1.0


def test_a_catastrophic_registry_regex_is_refused_not_searched(tmp_path: Path) -> None:
    """``(a+)+$`` against a kernel named by 40 a's and a '!': on the code before, minutes of backtracking (a
    hang); now one line naming the file, the table and the key."""
    trace = _trace()
    _kernels(trace)[3]["name"] = "a" * 40 + "!"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    registry = tmp_path / "evil.toml"
    registry.write_text('[[family]]\nfamily = "evil"\ncategory = "GEMM"\nkernel = "(a+)+$"\n')
    _clear_error(["analyze", str(path), "--registry", str(registry)], tmp_path, r"evil\.toml.*exponential time",
                 timeout=20)


# --- nanosecond clocks ------------------------------------------------------------------------------------------

def _in_ns(trace: dict, offset_ns: int = 0) -> str:
    """The trace as an ns writer writes it: whole ns in ts and dur, ``displayTimeUnit: "ns"``, ts moved by
    ``offset_ns`` (written as JSON integers, exactly)."""
    out = {**trace, "displayTimeUnit": "ns", "traceEvents": []}
    for e in trace["traceEvents"]:
        e = dict(e)
        for key in ("ts", "dur"):
            if isinstance(e.get(key), (int, float)):
                e[key] = round(e[key] * 1000) + (offset_ns if key == "ts" else 0)
        out["traceEvents"].append(e)
    return json.dumps(out)


def _decoded(path: Path) -> dict:
    import warnings

    from fuseprof.parse.trace_events import read_trace_tables

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tables = read_trace_tables(path)
    return {name: getattr(tables, name)[["start_ns", "dur_ns"]].reset_index(drop=True)
            for name in ("gpu", "ops", "launches", "modules")} | {
        "memory": tables.memory[["start_ns", "bytes"]].reset_index(drop=True)}


@pytest.mark.parametrize("offset_ns", [0, 1_752_830_085_464_752_000], ids=["boot clock", "epoch clock"])
def test_a_trace_in_ns_is_read_as_ns(offset_ns: int, tmp_path: Path) -> None:
    """Whole ns in ts and dur with displayTimeUnit 'ns' (its launch calls 1.5–50k units long: ns): every table's
    times are the µs trace's to the ns, moved by the offset. The code before read them as µs, 1000x too long."""
    path = tmp_path / "ns.json"
    path.write_text(_in_ns(_trace(), offset_ns))
    ns, us = _decoded(path), _decoded(BERT)
    same = all(ns[k]["start_ns"].sub(offset_ns).equals(us[k]["start_ns"]) and ns[k].drop(columns="start_ns").equals(
        us[k].drop(columns="start_ns")) for k in us)
    FUZZ_RESULTS["identical" if same else "silently wrong"] += 1
    assert same, {k: (ns[k].head(2), us[k].head(2)) for k in us}


def test_whole_microseconds_that_say_ns_stay_microseconds(tmp_path: Path) -> None:
    """A µs writer's whole numbers (PyTorch ≤ 2.0) beside displayTimeUnit 'ns' (a viewer's setting): its launch
    calls are a few units long, which only µs can be, so the times stay µs — the same tables as without it."""
    trace = _trace()
    for e in trace["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(e.get(key), float):
                e[key] = int(e[key])
    plain, said = tmp_path / "us.json", tmp_path / "said.json"
    plain.write_text(json.dumps(trace))
    said.write_text(json.dumps({**trace, "displayTimeUnit": "ns"}))
    same = all(a.equals(b) for a, b in zip(_decoded(plain).values(), _decoded(said).values()))
    FUZZ_RESULTS["identical" if same else "silently wrong"] += 1
    assert same


def test_whole_numbers_that_say_ns_with_nothing_to_tell_are_refused(tmp_path: Path) -> None:
    """No fraction and no launch call (a GPU-only export): µs or ns cannot be told, so the trace is refused with
    what to do — never read 1000x off."""
    trace = json.loads(_in_ns(_trace()))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in ("cuda_runtime", "cuda_driver")]
    path = tmp_path / "gpu_only.json"
    path.write_text(json.dumps(trace))
    _clear_error(["analyze", str(path)], tmp_path, r"gpu_only\.json: displayTimeUnit is 'ns'.*divide them by 1000")


# --- durations and memory records no run can have ---------------------------------------------------------------

def _check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from fuseprof.cli import main

    code = main(["check", str(path)])
    return code, capsys.readouterr().out


def _flagged(check: str, path: Path, capsys: pytest.CaptureFixture[str], table: str) -> None:
    """``check`` fails on the edited trace (``fuseprof check`` exits 1 naming it) and ``table`` of the analysis
    says it rests on it; the clean trace passes it. Counted 'warning' (said, not silent) or 'silently wrong'."""
    from fuseprof.analysis import analyze_trace
    from fuseprof.analysis.facts.integrity import failed_for
    from fuseprof.analysis.running.sections import table_spec

    code, out = _check(path, capsys)
    row = next(line for line in out.splitlines() if line.startswith(check))
    result = analyze_trace(path)
    flagged = code == 1 and "FAILED" in row and any(f.startswith(check) for f in failed_for(
        table_spec(table).rests_on, result.integrity))
    FUZZ_RESULTS["warning" if flagged else "silently wrong"] += 1
    assert flagged, (code, row)
    assert analyze_trace(BERT).integrity.set_index("check").loc[check, "ok"]


@pytest.mark.parametrize("which", ["a middle kernel", "the last kernel"])
def test_a_kernel_of_a_billion_microseconds_is_damage(which: str, tmp_path: Path, capsys) -> None:
    """One kernel's dur set to 10^9 µs (1,000 s in a trace of 8 ms): in the middle it holds the later kernels
    of its stream; last, it outlasts the host's whole recording. Either fails impossible_durations, and the
    timeline says it rests on it. Before, every check passed and the span read 1,000 s."""
    trace = _trace()
    kernels = sorted(_kernels(trace), key=lambda e: e["ts"])
    (kernels[10] if which == "a middle kernel" else kernels[-1])["dur"] = 1e9
    path = tmp_path / "long.json"
    path.write_text(json.dumps(trace))
    _flagged("impossible_durations", path, capsys, "timeline")


def _memory_records(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("name") == "[memory]"
            and e["args"].get("Device Type") == 1]


def _negative_total(records: list[dict]) -> None:
    records[50]["args"]["Total Allocated"] = -10**12


def _total_jumps(records: list[dict]) -> None:
    records[60]["args"]["Total Allocated"] += 10**11  # no record's Bytes says where 100 GB came from


def _beyond_reserved(records: list[dict]) -> None:
    records[70]["args"]["Total Reserved"] = records[70]["args"]["Total Allocated"] - 512


def _freed_twice(records: list[dict]) -> None:
    frees = [i for i, r in enumerate(records) if r["args"]["Bytes"] < 0]
    i = frees[5]
    again = {**records[i], "ts": records[i]["ts"] + 0.001, "args": {**records[i]["args"]}}
    again["args"]["Total Allocated"] = records[i]["args"]["Total Allocated"] + records[i]["args"]["Bytes"]
    records.insert(i + 1, again)


@pytest.mark.parametrize("edit", [_negative_total, _total_jumps, _beyond_reserved, _freed_twice],
                         ids=lambda f: f.__name__.strip("_"))
def test_impossible_memory_records_are_flagged(edit, tmp_path: Path, capsys) -> None:
    """Hostile [memory] records — a negative total, a total no allocation explains, more allocated than reserved,
    an address freed twice — fail memory_records_impossible, and the memory tables say they rest on it. Before,
    the tables printed their peaks with no flag."""
    trace = _trace()
    records = _memory_records(trace)
    assert len(records) > 100
    edit(records)
    others = [e for e in trace["traceEvents"] if not (isinstance(e, dict) and e.get("name") == "[memory]"
                                                      and e["args"].get("Device Type") == 1)]
    trace["traceEvents"] = others + records
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(trace))
    _flagged("memory_records_impossible", path, capsys, "memory")


# --- inputs of a bounded size and depth; no hang on a FIFO ------------------------------------------------------

def _fifo(tmp: Path, name: str) -> Path:
    path = tmp / name
    os.mkfifo(path)
    return path


def _deep_json(tmp: Path) -> Path:
    path = tmp / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    return path


def _big_plan(tmp: Path) -> Path:
    path = tmp / "big.json"
    path.write_text('{"fuse": ["top:1"]}' + " " * 2**21)
    return path


def _deep_toml(tmp: Path) -> Path:
    path = tmp / "deep.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    return path


HOSTILE_FILES = {  # what is given, how, and the words of the one line that refuses it
    "--plan a FIFO": (lambda t: ["whatif", str(BERT), "--plan", str(_fifo(t, "plan.json"))], "not a regular file"),
    "--plan /dev/zero": (lambda t: ["whatif", str(BERT), "--plan", "/dev/zero"], "not a regular file"),
    "--plan nested 100,000 deep": (lambda t: ["whatif", str(BERT), "--plan", str(_deep_json(t))], "nested too deeply"),
    "--plan of 2 MiB": (lambda t: ["whatif", str(BERT), "--plan", str(_big_plan(t))], "larger than 1 MiB"),
    "--registry a FIFO": (lambda t: ["analyze", str(BERT), "--registry", str(_fifo(t, "r.toml"))], "regular file"),
    "--registry nested 5,000 deep": (lambda t: ["analyze", str(BERT), "--registry", str(_deep_toml(t))], "deep"),
    "a trace that is a FIFO": (lambda t: ["analyze", str(_fifo(t, "t.json"))], "not a regular file"),
    "a trace that is /dev/zero": (lambda t: ["analyze", "/dev/zero"], "not a regular file"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_a_hostile_input_file_is_one_line_not_a_hang(name: str, tmp_path: Path) -> None:
    """Each in a child process under a timeout (a FIFO without a writer blocked the read forever before; the deep
    plan was a RecursionError traceback): one error line, exit 2, at once."""
    make, words = HOSTILE_FILES[name]
    _clear_error(make(tmp_path), tmp_path, words, timeout=20)


def _bomb(tmp: Path, gib: int) -> Path:
    """``gib`` GiB of spaces as concatenated gzip members of 64 MiB each (one compressed once: a test-sized file)."""
    member = gzip.compress(b" " * 2**26, 1)
    path = tmp / "bomb.json.gz"
    path.write_bytes(member * (16 * gib))
    return path


def test_a_gzip_bomb_under_a_memory_limit_is_one_line(tmp_path: Path) -> None:
    """3 GiB of spaces (a 14 MB file) read under `ulimit -v` 2 GiB, within fuseprof's own 8 GiB bound: the
    decompression runs out of memory first. Before, a MemoryError traceback; now one line that names the bound."""
    _clear_error(["analyze", str(_bomb(tmp_path, 3))], tmp_path, r"bomb\.json\.gz: decompressing it outgrew the memory"
                 r".*FUSEPROF_MAX_TRACE_MB", memory_bytes=2 * 2**30)


def test_the_decompressed_bound_is_set_by_an_environment_variable(tmp_path: Path, monkeypatch) -> None:
    """FUSEPROF_MAX_TRACE_MB=64: a 1 GiB bomb is refused at 64 MiB, and a value that is no size is one line."""
    bomb = _bomb(tmp_path, 1)
    monkeypatch.setenv("FUSEPROF_MAX_TRACE_MB", "64")
    _clear_error(["analyze", str(bomb)], tmp_path, "decompresses to more than 64 MiB")
    monkeypatch.setenv("FUSEPROF_MAX_TRACE_MB", "lots")
    _clear_error(["analyze", str(BERT)], tmp_path, "FUSEPROF_MAX_TRACE_MB='lots': give a size in MiB")


_TIGHT = ("import resource, sys\nfrom fuseprof.cli import main\nimport fuseprof.analysis.running.runner, pandas, pyarrow\n"
          "size = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmSize')) * 1024\n"
          "resource.setrlimit(resource.RLIMIT_AS, (size + 60 * 2**20,) * 2)\nsys.exit(main(sys.argv[1:]))")


def test_a_trace_larger_than_the_memory_left_is_one_line(tmp_path: Path) -> None:
    """100,000 tiny kernels (a 37 MB trace) with 60 MB of address space left after the imports (the 5 M kernels
    under 4 GB of the issue, at a test's size): the decode runs out of memory past the file's read. Before, a
    MemoryError traceback; now one line at the command's boundary."""
    n = 100_000
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0.0, "dur": 2.0 * n + 10,
               "args": {"External id": 1}}]
    for i in range(n):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 1.0 + 2 * i, "dur": 1.0, "args": {"correlation": i + 10, "External id": 1}})
        events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5 + 2 * i, "dur": 0.5,
                       "args": {"correlation": i + 10, "External id": 1, "stream": 7, "device": 0}})
    path = tmp_path / "many.json"
    path.write_text(json.dumps({"traceEvents": events}))
    done = subprocess.run([sys.executable, "-c", _TIGHT, "analyze", str(path)], capture_output=True, text=True,
                          timeout=CHILD_TIMEOUT_S, env={**os.environ, "FUSEPROF_CACHE": "off"})
    outcome = ("traceback" if "Traceback" in done.stderr else "clear error" if done.returncode == 2 and
               done.stderr.count("fuseprof: error:") == 1 else f"exit {done.returncode}")
    _count(outcome)
    assert outcome == "clear error" and "out of memory" in done.stderr, (done.returncode, done.stderr[-600:])


# --- the trace store: an entry that is not this code's is a miss ------------------------------------------------

def test_a_stored_table_with_a_dropped_column_is_rebuilt(tmp_path: Path, monkeypatch, capsys) -> None:
    """The store's tables of a trace rewritten without a column, its digests written again (a foreign or edited
    entry): a KeyError traceback before; now a warning, the entry rebuilt, and the analysis the clean one."""
    from fuseprof.cli import main
    from fuseprof.parse.store import TraceStore, content_key, wait_for_writes

    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "store"))
    store = TraceStore(tmp_path / "store")
    store.tables(BERT)
    wait_for_writes()
    assert main(["analyze", str(BERT), "--format", "json"]) == 0
    clean = capsys.readouterr().out
    key = content_key(BERT)
    frames, meta = store.get_frames(key, "tables")
    frames["gpu"] = frames["gpu"].drop(columns=["stream"])
    tables = store._entry(key, "tables")
    for entry in [*tables.parent.parent.parent.glob("??/*/*")]:  # every stored part: its analysis, kept answers
        shutil.rmtree(entry)
    assert store.put_frames(key, "tables", frames, meta)
    from fuseprof.analysis.running import runner

    runner._LAST.clear()
    try:
        code = main(["analyze", str(BERT), "--format", "json"])
    except Exception as exc:  # the failure this case exists to catch
        FUZZ_RESULTS["traceback"] += 1
        pytest.fail(f"traceback: {type(exc).__name__}: {exc}")
    out, err = capsys.readouterr()
    rebuilt = code == 0 and out == clean and "is damaged" in err and "its gpu table has columns" in err
    FUZZ_RESULTS["warning" if rebuilt else "silently wrong"] += 1
    assert rebuilt, (code, err[-500:])


def test_the_store_knows_the_columns_the_decoder_gives() -> None:
    """``TABLE_COLUMNS`` is what ``read_trace_tables`` gives, table by table (a decoder change updates both)."""
    from fuseprof.parse.store import TABLE_COLUMNS
    from fuseprof.parse.trace_events import read_trace_tables

    for trace in (BERT, FIXTURES / "thirdparty" / "b200_eager.json.gz"):
        tables = read_trace_tables(trace)
        assert {name: tuple(getattr(tables, name).columns) for name in TABLE_COLUMNS} == TABLE_COLUMNS


# --- the API: a wrong argument is a named error -----------------------------------------------------------------

@pytest.mark.parametrize("given", [123, [], [1], None, "no/such/trace.json", "empty folder"],
                         ids=["a number", "an empty list", "a list of a number", "None", "no such path", "empty folder"])
def test_the_api_says_what_to_give(given: object, tmp_path: Path) -> None:
    """fuseprof.analyze(123) was a TypeError from inside the runner, ([]) an error naming nothing: each is now a
    FuseprofError with one line that says what to give."""
    import fuseprof
    from fuseprof.errors import FuseprofError

    if given == "empty folder":
        given = tmp_path
    try:
        fuseprof.analyze(given)  # type: ignore[arg-type]
    except FuseprofError as exc:
        said = str(exc)
        clear = "\n" not in said and bool(re.search(r"give|no such|holds no", said))
        FUZZ_RESULTS["clear error" if clear else "traceback"] += 1
        assert clear, said
    except Exception as exc:
        FUZZ_RESULTS["traceback"] += 1
        pytest.fail(f"traceback: {type(exc).__name__}: {exc}")
    else:
        FUZZ_RESULTS["silently wrong"] += 1
        pytest.fail("no error")


# --- fuseprof run: no partial bundle left at any exit -----------------------------------------------------------

SCRIPTS = {
    "os._exit(0) at its end": ("import os\n{region}\nos._exit(0)\n", 0, False),
    "os._exit(3) inside a region": ("import os, torch, fuseprof\nwith fuseprof.region('add'):\n    torch.ones(8) + 1\n"
                                    "    os._exit(3)\n", 3, False),
    "os.chdir, then an ordinary end": ("import os\n{region}\nos.chdir('/')\n", 0, True),
    "os.chdir, then an exception": ("import os\n{region}\nos.chdir('/')\nraise RuntimeError('after chdir')\n", 2, False),
}
_REGION = "import torch, fuseprof\nwith fuseprof.region('add'):\n    torch.ones(8) + 1"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_run_leaves_no_partial_bundle_at_any_exit(name: str, tmp_path: Path) -> None:
    """``fuseprof run --out out`` (a relative folder, from ``tmp_path``) on a CPU script that ends with os._exit or
    changes directory: the exit status the script asked for, and in ``out`` either one finished bundle (an ordinary
    end) or nothing, never a hidden ``.partial`` folder (before: left by both os._exit and os.chdir)."""
    source, status, bundle = SCRIPTS[name]
    (tmp_path / "script.py").write_text(source.format(region=_REGION))
    done = subprocess.run([sys.executable, "-m", "fuseprof.cli", "run", "--out", "out", "--no-ncu", "script.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FUSEPROF_CACHE": "off"})
    out = tmp_path / "out"
    left = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    partial = [n for n in left if ".fuseprof-partial-" in n]
    FUZZ_RESULTS["leftover" if partial else "traceback" if "Traceback" in done.stderr else
                 "identical" if bundle else "clear error"] += 1
    assert not partial and "Traceback" not in done.stderr, (left, done.stderr[-600:])
    assert done.returncode == status, done.stderr[-600:]
    assert (len(left) == 1 and (out / left[0] / "manifest.json").is_file()) if bundle else not left, left


def test_a_pipe_or_device_in_a_folder_of_traces_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """A FIFO and a link to /dev/zero named as traces beside a real one: the real one is analysed and each of the
    others named in a warning (before: left out in silence)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(BERT, folder / BERT.name)
    os.mkfifo(folder / "pipe.json")
    (folder / "zero.json.gz").symlink_to("/dev/zero")
    outcome, code, out, err = _child(["analyze", str(folder), "--format", "json"], tmp_path, timeout=60)
    said = [line for line in err.splitlines() if line.startswith("fuseprof: warning:") and "not a regular file" in line]
    traces = [k for k in json.loads(out) if k != "schema_version"] if outcome == "exit 0" else []
    warned = outcome == "exit 0" and len(said) == 2 and traces == [f"traces/{BERT.name}"]
    FUZZ_RESULTS["warning" if warned else "hang" if outcome == "hang" else "silently wrong"] += 1
    assert warned, (outcome, err[-600:])
