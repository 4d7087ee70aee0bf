"""The collector's threshold (``fewer_collections``) held while blocks overlap in threads, as pandas' string storage is
(tests/test_store.py): A enters, B enters, A leaves — B still runs with the raised threshold — B leaves, and the
threshold from before A is back."""

from __future__ import annotations

import gc
import threading

from fuseprof.analysis.collector import FIRST_GENERATION_THRESHOLD, fewer_collections


def test_the_collectors_threshold_holds_while_blocks_overlap_in_threads() -> None:
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, tuple[int, ...]] = {}

    def first() -> None:
        with fewer_collections():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def second() -> None:
        a_in.wait(10)
        with fewer_collections():
            b_in.set()
            a_out.wait(10)
            seen["b after a left"] = gc.get_threshold()

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        seen["after both"] = gc.get_threshold()
    finally:
        gc.set_threshold(*before)
    assert seen == {"b after a left": (FIRST_GENERATION_THRESHOLD, 10, 10), "after both": (700, 10, 10)}
