"""The suite runs anywhere (issue 58, point 1): a user's clone has no ../shared/thirdparty-traces, so every test
that reads them is marked `shared` and skips there one by one, while CI runs them in its checkout, which has them.
These tests run pytest on small test files (pytester) with the shared folder present or absent, and hold the
rules conftest.py enforces: collection never reads the folder, a test without the mark cannot reach it, a mark
without a use is an error, and CI fails where it should have the traces. The committed list of the folder's
traces, and .ci/run's copy of the README's test command, are checked against their originals."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.conftest as conftest
from tests.conftest import ROOT, SHARED_FILES, shared_traces

pytest_plugins = ["pytester"]

# What the small test files use: conftest's hooks, registered in the inner run as they are in this one.
INNER_CONFTEST = """
from tests.conftest import pytest_runtest_call, pytest_runtest_protocol, pytest_runtest_setup
"""
INNER_TESTS = """
import pytest
from tests.conftest import by_name, shared_traces, trace_at

@pytest.mark.shared
def test_marked_reads():
    assert (shared_traces() / "a.json.gz").read_text() == "a"

def test_unmarked_reads():
    shared_traces()

@pytest.mark.shared
def test_marked_never_reads():
    pass

def test_needs_nothing():
    pass

@pytest.mark.parametrize("name", by_name("shared:a.json.gz", "README.md"))
def test_by_name(name):
    assert trace_at(name).exists()
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Runs INNER_TESTS with the shared folder at a temporary path (present when asked) and CI's variables
    as given; the outcomes by test name."""
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    shared: reads the shared traces\n")
    pytester.makepyfile(test_inner=INNER_TESTS)
    (pytester.path / "README.md").write_text("x")
    monkeypatch.setattr(conftest, "ROOT", pytester.path)

    def run(present: bool, **env: str) -> dict[str, tuple[str, str]]:
        folder = tmp_path / "shared" / "thirdparty-traces"
        if present:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "a.json.gz").write_text("a")
        monkeypatch.setattr(conftest, "_SHARED_TRACES", folder)
        for name in ("CI", "FUSEPROF_NO_SHARED"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        reports = pytester.inline_run("-p", "no:cacheprovider").getreports("pytest_runtest_logreport")
        outcomes: dict[str, tuple[str, str]] = {}
        for r in reports:  # a test's outcome: its call's, or its setup's where the setup skipped or failed
            if r.when == "call" or (r.when == "setup" and not r.passed):
                text = r.longrepr[2] if isinstance(r.longrepr, tuple) else str(r.longrepr or "")
                outcomes[r.nodeid.split("::")[1]] = (r.outcome, text)
        return outcomes

    return run


def test_without_the_folder_shared_tests_skip_one_by_one_and_the_rest_run(inner) -> None:  # type: ignore[no-untyped-def]
    got = inner(present=False)
    for name in ("test_marked_reads", "test_marked_never_reads", "test_by_name[shared:a.json.gz]"):
        outcome, reason = got[name]
        assert outcome == "skipped" and "is not beside this checkout" in reason, (name, got[name])
    assert got["test_needs_nothing"][0] == got["test_by_name[README.md]"][0] == "passed"
    outcome, message = got["test_unmarked_reads"]  # fails, never skips: it would need ../shared silently
    assert outcome == "failed" and "mark this test @pytest.mark.shared" in message


def test_with_the_folder_shared_tests_run_and_a_mark_without_a_use_fails(inner) -> None:  # type: ignore[no-untyped-def]
    got = inner(present=True)
    assert got["test_marked_reads"][0] == got["test_by_name[shared:a.json.gz]"][0] == "passed"
    assert got["test_unmarked_reads"][0] == "failed" and "mark this test" in got["test_unmarked_reads"][1]
    outcome, message = got["test_marked_never_reads"]
    assert outcome == "failed" and "never called shared_traces()" in message


def test_ci_fails_without_the_folder_except_in_its_stand_in_for_a_users_clone(inner) -> None:  # type: ignore[no-untyped-def]
    got = inner(present=False, CI="true")
    outcome, message = got["test_marked_reads"]
    assert outcome == "failed" and "CI must run the `shared` tests" in message
    assert got["test_needs_nothing"][0] == "passed"
    got = inner(present=False, CI="true", FUSEPROF_NO_SHARED="1")
    assert got["test_marked_reads"][0] == "skipped" and got["test_needs_nothing"][0] == "passed"


def test_a_module_that_reads_the_folder_while_collecting_is_a_collection_error(pytester: pytest.Pytester,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "_running", None)  # as in a session's own collection: no test runs yet
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_collect="from tests.conftest import shared_traces\nFILES = list(shared_traces().iterdir())\n"
                                     "def test_x():\n    pass\n")
    result = pytester.inline_run("-p", "no:cacheprovider")
    (failed,) = [r for r in result.getreports("pytest_collectreport") if r.failed]
    assert "called while collecting: parametrize by name" in str(failed.longrepr)


@pytest.mark.shared
def test_the_list_of_shared_traces_is_the_folders() -> None:
    """tests/shared_traces.txt names every trace of the folder (the tests parametrize by it, never reading the
    folder while collecting): a trace added there is listed, so the every-trace tests cover it."""
    folder = shared_traces()
    assert list(SHARED_FILES) == sorted(str(p.relative_to(folder)) for p in folder.rglob("*.json.gz"))


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    """README's set-up command 2 is what .ci/run runs in its fresh clone, character for character."""
    readme = (ROOT / "README.md").read_text().splitlines()
    command = readme[readme.index("# 2. set up, then run the tests (what .ci/run runs)") + 1]
    assert command.endswith("python -m pytest")
    assert any(line.strip().endswith(command) for line in (ROOT / ".ci" / "run").read_text().splitlines())
