"""A trace verb's kept answer (fuseprof.commands.answers): given back while nothing that shaped it changed, and
only then."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fuseprof.analysis
from fuseprof.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
DECODE = FIXTURES / "truth" / "decode_eager.json.gz"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "store"
    monkeypatch.setenv("FUSEPROF_CACHE", str(root))
    return root


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each call of the library's ``analyze`` (what every trace verb runs, from the store or not), counted."""
    calls: list[object] = []
    real = fuseprof.analysis.analyze
    monkeypatch.setattr(fuseprof.analysis, "analyze", lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_an_unchanged_question_is_answered_from_the_store_with_its_warnings(
        store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The cold run's output and warnings, to the byte, without analysing: a trace with 5 kernels twice warns."""
    trace = json.loads(gzip.decompress(DECODE.read_bytes()))
    trace["traceEvents"] += [e for e in trace["traceEvents"] if e.get("cat") == "kernel"][:5]
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(trace))
    cold = _run(["audit", str(path), "--format", "json"], capsys)
    assert cold[0] == 0 and "5 GPU events appear twice" in cold[2]
    assert json.loads(cold[1])  # rows came out
    calls = _counted(monkeypatch)
    assert _run(["audit", str(path), "--format", "json"], capsys) == cold
    assert calls == []
    assert main(["store"]) == 0
    assert "1 stored trace(s) and 1 kept answer(s)" in capsys.readouterr().out


@pytest.mark.parametrize("change", ["edit the trace", "another option", "another format", "an execution trace beside"])
def test_what_shapes_the_answer_asks_again(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """Each input of the key (the module docstring) changed once: the verb analyses again (seen by counting
    the library's analyze), where the same question again does not."""
    path = tmp_path / "decode.json.gz"
    shutil.copy(DECODE, path)
    argv = ["check", str(path)]
    assert _run(argv, capsys)[0] == 0
    if change == "edit the trace":
        trace = json.loads(gzip.decompress(path.read_bytes()))
        trace["traceEvents"] = trace["traceEvents"][:-1]
        path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    elif change == "another option":
        argv = [*argv, "--device", "H100"]
    elif change == "another format":
        argv = [*argv, "--format", "csv"]
    else:
        (tmp_path / "decode.et.json").write_text('{"nodes": []}')
    calls = _counted(monkeypatch)
    _run(argv, capsys)
    _run(argv, capsys)
    assert len(calls) == 1, change


def test_a_failed_run_is_not_kept_and_a_store_turned_off_keeps_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    monkeypatch.setenv("FUSEPROF_CACHE", str(tmp_path / "store"))
    first = _run(["analyze", str(bad)], capsys)
    assert first[0] != 0 and "error" in first[2]
    assert _run(["analyze", str(bad)], capsys) == first  # said again, by reading it again
    assert not list((tmp_path / "store").rglob("answer"))
    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    assert _run(["check", str(DECODE)], capsys)[0] == 0
    assert not list((tmp_path / "store").rglob("answer"))


def test_a_kept_answer_loads_neither_pandas_nor_the_decoder(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The warm run's point: the answer printed at the cost of hashing the trace (a fresh process)."""
    assert _run(["check", str(DECODE), "--format", "json"], capsys)[0] == 0
    code = ("import sys, contextlib, io\nfrom fuseprof.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):"
            "\n    assert main(['check', sys.argv[1], '--format', 'json']) == 0\n"
            "print(sorted(m for m in ('pandas', 'pyarrow', 'numpy', 'fuseprof.parse.trace_events') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(DECODE)], capture_output=True, text=True, check=True,
                          env=dict(os.environ), cwd=Path.cwd())  # FUSEPROF_CACHE: the fixture's store
    assert done.stdout.strip() == "[]", done.stderr


def test_a_trace_verb_hashes_each_trace_once(store: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept answer's key and the store's key of the same file, in one run, come from one SHA-256 pass over it
    (a 134 MB trace: 0.13 s); a second run (its files unchanged, written long before) reads none of them: the keys
    are kept (``hashing.KEPT_FILE``; tests/test_kept_file_keys.py changes the files)."""
    import fuseprof.parse.hashing as hashing

    monkeypatch.setattr(hashing, "_KEPT", {})
    monkeypatch.setattr(hashing, "_KEPT_NEW", {})
    monkeypatch.setattr(hashing, "_KEYS", {})  # keys an earlier test's run left for a later read of the same files
    read: list[str] = []
    real = hashing.file_sha256
    monkeypatch.setattr(hashing, "file_sha256", lambda path: read.append(Path(path).name) or real(path))
    folder = FIXTURES / "tp2"
    names = sorted(p.name for p in folder.glob("*.json.gz"))
    assert main(["analyze", str(folder), "--workers", "1", "--format", "json"]) == 0
    assert sorted(read) == names
    read.clear()
    assert main(["analyze", str(folder), "--workers", "1", "--format", "json"]) == 0  # the kept answer
    assert read == []
    capsys.readouterr()
