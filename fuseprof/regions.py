"""Mark regions of your own program, for ``fuseprof run``: ``with fuseprof.region("decode_step"): ...``, and the
end of each step of its loop: ``fuseprof.step()``.

A region is a torch.profiler ``record_function`` range and, on a GPU, an NVTX push/pop range of the
same label (``fuseprof:decode_step:region``), so ``fuseprof run`` finds its kernels in the trace and
profiles only them with ncu. Outside ``fuseprof run`` a region costs a record_function call and
changes nothing else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from fuseprof.ranges import region_label


@contextlib.contextmanager
def region(name: str) -> Iterator[None]:
    """The code inside is one region named ``name`` (letters, digits, '_', '.', '-')."""
    import torch

    label = region_label(name)
    nvtx = torch.cuda.is_available() and torch.cuda.is_initialized()
    if nvtx:
        torch.cuda.nvtx.range_push(label)
    try:
        with torch.profiler.record_function(label):
            yield
    finally:
        if nvtx:
            torch.cuda.nvtx.range_pop()


# what ``step`` calls: set by ``fuseprof run`` while the script runs (fuseprof.capture.run.StepMarks), else nothing
_on_step: Callable[[], None] | None = None


def step() -> None:
    """One step of your loop has ended. Under ``fuseprof run`` the steps are the trace's ``ProfilerStep`` ranges,
    and with ``--unprofiled-steps K`` the first K whole steps run, timed, before the profiler starts (issue 59:
    the step as it runs without the profiler, measured in the same run). Elsewhere it does nothing."""
    if _on_step is not None:
        _on_step()
