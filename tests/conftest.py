"""Shared fixtures: the committed H200 bundles and GPU/ncu skips."""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from pathlib import Path

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


# The shared third-party traces (MI300, SGLang, vLLM, Inductor) with TraceLens's reports, beside the
# checkout as ../shared/thirdparty-traces on the developers' machines and in CI. Too large to commit
# (7.7 MB); a checkout without them skips their tests, but CI must have them.
SHARED_TRACES = ROOT.parent / "shared" / "thirdparty-traces"


def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{SHARED_TRACES} is missing: CI must test on the shared third-party traces")
        pytest.skip(f"{SHARED_TRACES} is not beside this checkout")
    return SHARED_TRACES


def covered_ns(intervals: list[tuple[int, int]]) -> int:
    """Time covered by [start, end) intervals, overlaps once: a plain sweep, the tests' own oracle."""
    covered, reach = 0, None
    for start, end in sorted(intervals):
        reach = start if reach is None else reach
        covered += max(0, end - max(start, reach))
        reach = max(reach, end)
    return covered
