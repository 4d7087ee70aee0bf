"""What fuseprof writes to the terminal: progress messages to stderr (stdout carries only results), and the one
layer every line of the CLI's output passes through.

Why one layer: a kernel or file name is data, kept verbatim in JSON, Perfetto and SQL, but printed it can carry a
terminal escape sequence (clear the screen, retitle the window, fake a line of output). ``terminal_streams``
wraps stdout and stderr for the whole of a command, so a heading, an error quoting a DuckDB message, a warning
naming a file and a table all show control characters as Python's repr writes them (``\\x1b``), whichever code
printed them. Data a user asked for on stdout (CSV) is written ``verbatim``. The same layer keeps a command's
exit status when the reader of a pipe goes away (``| head -n 1``): the rest of the output goes to /dev/null and
the command runs on to its own status, so a failing gate still fails under ``pipefail``.

Torch-free on purpose: ``ingest`` uses it on machines where importing torch is slow or absent.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

Log = Callable[[str], None]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but tab and newline (a leading \r: below)
_VERBATIM = [0]  # depth of ``verbatim`` blocks now open


def log_to_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def terminal_text(text: str) -> str:
    """``text`` as the terminal is given it: control characters as repr writes them (``\\x1b``), but for tab,
    newline and one carriage return that starts the text (a progress line redrawn in place)."""
    head = "\r" if text.startswith("\r") else ""
    return head + _CONTROL.sub(lambda m: repr(m.group())[1:-1], text[len(head):])


def is_verbatim() -> bool:
    """Whether writes now are data the user asked for (inside ``verbatim``)."""
    return _VERBATIM[0] > 0


@contextlib.contextmanager
def verbatim() -> Iterator[None]:
    """Writes in this block reach the stream unchanged: CSV a user redirects to a file, a kept answer already
    escaped once, the output of the user's own script under ``fuseprof run``."""
    _VERBATIM[0] += 1
    try:
        yield
    finally:
        _VERBATIM[0] -= 1


class WrappedStream(io.TextIOBase):
    """A text stream over another that asks it whatever it does not answer itself: the one base of the streams
    fuseprof puts in front of the terminal (``_TerminalStream``) and of a kept answer (``commands.answers``)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _TerminalStream(WrappedStream):
    """A text stream that escapes control characters (``terminal_text``) and, when the reader of a pipe has
    gone, points the file descriptor at /dev/null and goes on, so the command still ends with its own status."""

    def _guarded(self, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.stream.fileno())
            finally:
                os.close(devnull)
            return action()  # the buffered rest goes to /dev/null

    def write(self, text: str) -> int:
        shown = text if is_verbatim() else terminal_text(text)
        self._guarded(lambda: self.stream.write(shown))
        return len(text)

    def flush(self) -> None:
        self._guarded(self.stream.flush)


@contextlib.contextmanager
def terminal_streams() -> Iterator[None]:
    """stdout and stderr through ``_TerminalStream`` for the block (a CLI command), flushed at its end (a pipe
    closed early then costs no "Exception ignored" line at exit), then as they were."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _TerminalStream(saved[0]), _TerminalStream(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        sys.stdout, sys.stderr = saved


def _warn_in_one_line(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
    print(f"fuseprof: warning: {message}", file=sys.stderr)


def _terminated(signum, frame):  # type: ignore[no-untyped-def]
    raise KeyboardInterrupt  # unwinds like Ctrl-C: half-written bundles and temporary files are removed


def one_line_warnings_and_sigterm() -> None:
    """How the command reports for the rest of the process: a warning is one ``fuseprof: warning:`` line (no
    source line), and SIGTERM unwinds like Ctrl-C, so half-written outputs are removed (the main thread only:
    a signal handler can be set nowhere else)."""
    import signal
    import threading
    import warnings

    warnings.showwarning = _warn_in_one_line
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)


# the variables OpenBLAS reads its thread count from, in the order it reads them: one the user set is theirs
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
FIRST_GENERATION_THRESHOLD = 1_000_000  # as the analysis's own (``fuseprof.analysis.running.collector``)


def trace_verb_settings() -> Callable[[], None]:
    """Settle the process for a trace verb, which imports NumPy, pandas and pyarrow next; returns what puts the
    process's settings back as they were (``main`` called inside a test or a script leaves them so). What it cannot
    put back: where NumPy was first loaded during the verb, its OpenBLAS keeps the one thread for the rest of that
    process (a script that calls ``fuseprof.cli.main`` before its own NumPy work gets single-threaded BLAS; the
    library's ``fuseprof.analyze`` changes nothing of this).

    One OpenBLAS thread, for this process and the workers it spawns, where NumPy is not loaded yet (OpenBLAS reads
    the count once, as it loads) and the user chose no count: NumPy's OpenBLAS starts a thread per core, each
    spinning for work before it sleeps, and a trace verb gives it none (its hot path multiplies no matrices). On a
    2-core machine ``import pandas`` cost 0.55 s of CPU with them and 0.36-0.42 s without (medians of 7 runs); a
    many-core host starts more of them.

    The collector's first threshold at least ``FIRST_GENERATION_THRESHOLD``, as the analysis already runs
    (``analysis.running.collector`` says why): the imports before it ran 148 passes over the modules they keep and
    freed nothing of note, 0.03-0.08 s of a 0.85 s cold ``fuseprof analyze`` of a 14 MB trace (``gc.callbacks``).
    Put back, the objects the command made join the oldest generation, where a later full pass finds any cycle."""
    blas = "numpy" not in sys.modules and not any(v in os.environ for v in BLAS_THREAD_VARIABLES)
    if blas:
        os.environ[BLAS_THREAD_VARIABLES[0]] = "1"
    found = gc.get_threshold()
    gc.set_threshold(max(found[0], FIRST_GENERATION_THRESHOLD), *found[1:])

    def restore() -> None:
        gc.freeze()  # what the command made is old now: the first threshold back at 700 starts no pass over it
        gc.unfreeze()  # (the pass a process that exits next would pay for nothing: 0.04-0.07 s on that trace)
        gc.set_threshold(*found)
        if blas:
            os.environ.pop(BLAS_THREAD_VARIABLES[0], None)

    return restore
