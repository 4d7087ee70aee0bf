"""Shared fixtures: the committed H200 bundles, GPU/ncu skips and the `shared` tests' skip (or CI failure)
where ../shared/thirdparty-traces is absent."""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The committed H200 bundles, frozen for the tests: traces/ may grow without moving an assertion.
TRACES = FIXTURES / "bundles"
# the fuseprof command of the environment running the tests (not whatever `fuseprof` PATH finds first)
FUSEPROF = str(Path(sys.executable).with_name("fuseprof"))
# The seed-000 capture on the H200 (fp16, eager and torch.compile, the seed's four shapes).
SEED_BUNDLE = TRACES / "rmsnorm_swiglu-float16-h200-20261129t084609z"


def _has_cuda() -> bool:
    """True where torch sees a CUDA device (the H200 through the device tool; never CI)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    skip_ncu = pytest.mark.skip(reason="needs Nsight Compute (ncu) on a GPU machine")
    cuda = _has_cuda()
    for item in items:
        if "gpu" in item.keywords and not cuda:
            item.add_marker(skip_gpu)
        if "ncu" in item.keywords and not (cuda and shutil.which("ncu")):
            item.add_marker(skip_ncu)


# Without a GPU, Triton kernels run in Triton's interpreter on CPU tensors; it must be chosen
# before triton is first imported, so it is set here, for the whole test process.
if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")


# The trace store of the test run: a fresh folder, never the user's ~/.cache. Tests that need a cold
# or an absent store set FUSEPROF_CACHE themselves (tests/test_store.py).
if "FUSEPROF_CACHE" not in os.environ:
    import tempfile

    os.environ["FUSEPROF_CACHE"] = tempfile.mkdtemp(prefix="fuseprof-test-store-")


# Outcomes of tests/test_fuzz_inputs.py, printed after the run (CI's log shows the counts).
FUZZ_RESULTS: Counter[str] = Counter()


def held_safely(unsafe: object, what: str) -> None:
    """A hostile input's outcome for the fuzz line: anything in ``unsafe`` (a file written, a URL fetched,
    markup rendered, an escape code printed) counts as unsafe and fails the test; nothing counts as held."""
    FUZZ_RESULTS["unsafe" if unsafe else "held"] += 1
    assert not unsafe, f"{what}: {unsafe!r}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    if FUZZ_RESULTS:
        tried = sum(FUZZ_RESULTS.values())
        terminalreporter.write_line(
            f"fuzz: tried {tried} malformed or varied inputs: {FUZZ_RESULTS['clear error']} clear errors, "
            f"{FUZZ_RESULTS['warning']} warnings, {FUZZ_RESULTS['identical']} accepted with identical values, "
            f"{FUZZ_RESULTS['held']} hostile inputs held, {FUZZ_RESULTS['cleaned after kill -9']} runs killed with -9 "
            f"cleaned up; tracebacks {FUZZ_RESULTS['traceback']}, silently wrong {FUZZ_RESULTS['silently wrong']}, "
            f"hangs {FUZZ_RESULTS['hang']}, leftovers after kill -9 {FUZZ_RESULTS['leftover']}, "
            f"data lost {FUZZ_RESULTS['data lost']}, unsafe {FUZZ_RESULTS['unsafe']}")


# The shared third-party traces (MI300, SGLang, vLLM, Inductor, HTA's, the 2-GPU pairs) with TraceLens's
# reports, beside the checkout as ../shared/thirdparty-traces on the developers' machines and in CI. Too large
# to commit (35 MB), so a user's clone has none: every test that reads them is marked `shared` and skips, one
# by one, where they are absent; CI runs the `shared` tests in its checkout, which has them, and fails there
# without them. Tests reach the folder only through shared_traces(), which checks the mark, and parametrize by
# name (SHARED_FILES, `by_name`, `trace_at`): collection never reads ../shared.
_SHARED_TRACES = ROOT.parent / "shared" / "thirdparty-traces"
# Every trace file of the folder, by path inside it (tests/test_shared_split.py checks the list against it).
SHARED_FILES: tuple[str, ...] = tuple(Path(__file__).with_name("shared_traces.txt").read_text().split())
SHARED = "shared:"  # a trace named by path inside the shared folder, in a parametrize case
_running: pytest.Item | None = None  # the test being set up, run or torn down (None while collecting)
_READS_SHARED = pytest.StashKey[bool]()


def _shared_required() -> bool:
    """CI must run the `shared` tests on the traces, except in its stand-in for a user's fresh clone, where
    .ci/run sets FUSEPROF_NO_SHARED=1: there they skip, as on the user's machine."""
    return bool(os.environ.get("CI")) and not os.environ.get("FUSEPROF_NO_SHARED")


def shared_traces() -> Path:
    """The shared traces' folder, for a test marked `shared` only: a test without the mark (or a module at
    collection) that needs it fails here, so no test can need ../shared without skipping where it is absent."""
    item = _running
    if item is None:
        pytest.fail("shared_traces() called while collecting: parametrize by name (conftest.by_name) and resolve "
                    "the path inside a test marked @pytest.mark.shared", pytrace=False)
    if item.get_closest_marker("shared") is None:
        pytest.fail(f"{item.nodeid} reads ../shared/thirdparty-traces: mark this test @pytest.mark.shared "
                    "(or its parametrize case: conftest.by_name)", pytrace=False)
    item.stash[_READS_SHARED] = True
    return _SHARED_TRACES


def by_name(*names: str) -> list[Any]:
    """Parametrize cases of traces by name: ``shared:PATH`` is a file of the shared traces, its case marked
    `shared`; any other name is a path from the checkout's root. `trace_at` gives the file inside the test."""
    return [pytest.param(n, marks=pytest.mark.shared) if n.startswith(SHARED) else n for n in names]


def trace_at(name: str) -> Path:
    """The file a `by_name` case names (a shared one only inside a test marked `shared`)."""
    return shared_traces() / name.removeprefix(SHARED) if name.startswith(SHARED) else ROOT / name


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    global _running
    outer, _running = _running, item  # a test running pytest inside itself (pytester) gets its own back
    try:
        return (yield)
    finally:
        _running = outer


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("shared") is None or _SHARED_TRACES.is_dir():
        return
    if _shared_required():
        pytest.fail(f"{_SHARED_TRACES} is missing: CI must run the `shared` tests on the shared third-party traces",
                    pytrace=False)
    pytest.skip(f"needs the shared third-party traces: {_SHARED_TRACES} is not beside this checkout "
                "(CI runs these tests with them)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    """A test marked `shared` that passed without calling shared_traces() does not need the traces: its mark
    would skip it for nothing where they are absent."""
    result = yield
    if item.get_closest_marker("shared") is not None and not item.stash.get(_READS_SHARED, False):
        pytest.fail(f"{item.nodeid} is marked shared but never called shared_traces(): drop the mark, or read "
                    "the traces through shared_traces()", pytrace=False)
    return result


def covered_ns(intervals: list[tuple[int, int]]) -> int:
    """Time covered by [start, end) intervals, overlaps once: a plain sweep, the tests' own oracle."""
    covered, reach = 0, None
    for start, end in sorted(intervals):
        reach = start if reach is None else reach
        covered += max(0, end - max(start, reach))
        reach = max(reach, end)
    return covered
