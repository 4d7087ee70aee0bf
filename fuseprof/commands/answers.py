"""A trace verb's whole answer kept in the trace store, and given back when nothing that shaped it changed.

Why: a stored analysis still costs importing pandas and pyarrow (half a second) and reading its tables back,
about 0.2 s a rank; a user, a script or CI asking the same question of the same traces again wants the same text
back at the cost of hashing the files. The answer is kept under a key of everything that shapes it:

    the verb's arguments as given, and the folder they were given from (a trace's name is its path as given)
    the content key (SHA-256) of every file a path argument names: a folder's every file, recursively (a
        bundle's ncu rows, a registry, the other traces), and the execution trace recorded beside a trace file
    the FUSEPROF_* settings, the terminal's width and whether the output is a terminal (a table's layout)
    the store's version folder: fuseprof's version and a hash of its own source (``fuseprof.parse.store``)

What is kept: the standard output, and the standard error but for the progress lines a terminal shows (the
warnings: a warm run warns as the cold one did). Only a run that ended with exit status 0 is kept; a path
argument that names nothing keeps nothing (the run says what is wrong). The entry is the store's, with its
checks: a damaged one is rebuilt, one another user could have written is never served. ``FUSEPROF_CACHE=off``
keeps nothing. This module loads neither pandas nor the decoder: a kept answer is printed without them.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from fuseprof.console import WrappedStream, is_verbatim, terminal_text, verbatim
from fuseprof.parse.hashing import content_key, default_root

PART = "answer"


def _paths(args: argparse.Namespace) -> Iterator[Path]:
    """Every path among the parsed arguments (an option's, or one of a list's)."""
    for value in vars(args).values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Path):
                yield item


def _inputs(path: Path) -> list[Path] | None:
    """The files a path argument can make the verb read; None when it names nothing."""
    from fuseprof.parse.execution_trace import execution_trace_beside

    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    if not path.is_file():
        return None
    beside = execution_trace_beside(path)
    return [path] + ([beside] if beside is not None else [])


def answer_key(argv: Sequence[str], args: argparse.Namespace) -> str | None:
    """The key of this run's answer (the module docstring); None where none is kept."""
    if default_root() is None:
        return None
    files: list[Path] = []
    for path in _paths(args):
        found = _inputs(path)
        if found is None:
            return None
        files += found
    digest = hashlib.blake2b(digest_size=16)
    settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("FUSEPROF_"))
    digest.update(json.dumps([list(argv), os.getcwd(), settings, shutil.get_terminal_size().columns,
                              sys.stdout.isatty()]).encode())
    for path in dict.fromkeys(p.resolve() for p in files):
        digest.update(f"\n{path}\0{content_key(path, keep=True)}".encode())  # the store's key of it next
    return digest.hexdigest()


class _Tee(WrappedStream):
    """A stream that writes through to ``stream`` and keeps what was written (but for progress lines: a
    write that starts with a carriage return)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.kept = io.StringIO()

    def write(self, text: str) -> int:
        if not text.startswith("\r"):  # kept as the terminal is shown it (``fuseprof.console``), given back verbatim
            self.kept.write(text if is_verbatim() else terminal_text(text))
        return self.stream.write(text)


def answered(argv: Sequence[str], args: argparse.Namespace, run: Callable[[], int]) -> int:
    """The verb's exit status: its kept answer printed again, or ``run`` (its output kept where it succeeds)."""
    from fuseprof.parse.store import default_store

    key = answer_key(argv, args)
    if key is None:
        return run()
    store = default_store()
    found = store.get_frames(key, PART, only=())
    if found is not None:
        with verbatim():
            sys.stdout.write(found[1]["stdout"])
            sys.stderr.write(found[1]["stderr"])
        return 0
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        code = run()
    finally:
        sys.stdout, sys.stderr = out.stream, err.stream
    if code == 0:
        store.put_frames(key, PART, {}, {"stdout": out.kept.getvalue(), "stderr": err.kept.getvalue()})
    return code
