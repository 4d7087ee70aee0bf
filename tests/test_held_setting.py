"""A process-wide setting fuseprof changes while it works — pandas' string storage (``python_strings``), the
collector's threshold (``fewer_collections``) — held while blocks overlap in threads (fuseprof.parse.held_setting):
A enters, B enters, A leaves — B still runs with the setting — B leaves, and the caller's setting from before A is
back."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pandas as pd
import pytest

from fuseprof.analysis.running.collector import FIRST_GENERATION_THRESHOLD, fewer_collections
from fuseprof.parse.text_arrays import python_strings


@contextmanager
def _callers_threshold() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)


CASES = {  # block, the caller's setting around the test, what a block sees, held and after
    "string storage": (python_strings, lambda: pd.option_context("mode.string_storage", "pyarrow"),
                       lambda: pd.Series(["x"]).dtype.storage, lambda: pd.get_option("mode.string_storage"),
                       "python", "pyarrow"),
    "collector threshold": (fewer_collections, _callers_threshold, gc.get_threshold, gc.get_threshold,
                            (FIRST_GENERATION_THRESHOLD, 10, 10), (700, 10, 10)),
}


@pytest.mark.parametrize("case", CASES)
def test_the_setting_holds_while_blocks_overlap_in_threads(case: str) -> None:
    block, callers, inside, setting, held, after = CASES[case]
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def first(block: Callable[[], AbstractContextManager[None]] = block) -> None:
        with block():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def second(block: Callable[[], AbstractContextManager[None]] = block) -> None:
        a_in.wait(10)
        with block():
            b_in.set()
            a_out.wait(10)
            seen["b after a left"] = inside()

    with callers():
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        seen["after both"] = setting()
    assert seen == {"b after a left": held, "after both": after}
