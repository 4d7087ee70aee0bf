"""A process-wide setting held while any of several overlapping blocks is open, and put back after the last.

Why: fuseprof changes two settings of the interpreter while it decodes and analyses a trace — pandas' string storage
(``fuseprof.parse.text_arrays``) and the garbage collector's threshold (``fuseprof.analysis.running.collector``) — and
a library call must leave its host's settings as it found them. Both are the process's, not a thread's, so a
save-and-restore per block breaks where blocks overlap in threads (a Dask worker's threads, a caller's pool): the
first block to leave restores the setting under the second, and the second, leaving, restores the changed value
it found for good. Here the first block to enter saves and changes it, the last to leave puts back what the first
found, and no block sees it change under it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class HeldSetting(Generic[T]):
    """A setting read by ``read`` and written by ``write``, held at ``held(found)`` (a function of the value the first
    block found) while any ``block()`` is open in any thread."""

    def __init__(self, read: Callable[[], T], write: Callable[[T], None], held: Callable[[T], T]) -> None:
        self._read, self._write, self._held = read, write, held
        self._lock = threading.Lock()
        self._open = 0  # blocks open now, in every thread
        self._found: T | None = None  # the setting the first of them found

    @contextmanager
    def block(self) -> Iterator[None]:
        """The setting held inside (also a decorator: ``@setting.block()``)."""
        with self._lock:
            if self._open == 0:
                self._found = self._read()
                self._write(self._held(self._found))
            self._open += 1
        try:
            yield
        finally:
            with self._lock:
                self._open -= 1
                if self._open == 0:
                    self._write(self._found)  # type: ignore[arg-type]
