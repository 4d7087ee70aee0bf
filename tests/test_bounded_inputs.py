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
