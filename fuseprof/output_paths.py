"""An output never replaces an input: the one check every verb that writes a file or a folder goes through.

Why here and not per verb: ``report t.json -o t.json --force`` once replaced the trace it read with HTML. The
rule holds whatever the flags (``--force`` replaces an earlier output, never what the command reads), and by
what the file system says, not by the names: a symbolic link or a hard link to an input is that input
(``os.path.samefile``). An output is refused when it is an input file or folder, when it is a file that exists
inside an input folder (a bundle's raw trace, a trace among a folder of ranks), and when a bundle folder would be
made where an input file is. An existing output folder, whatever it holds (``ingest traces/x.json --out traces``,
``fusion traces`` with its default ``--out traces``), is fine: a bundle is written inside it under a new name,
so nothing in it is replaced.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from fuseprof.errors import InvalidArgumentError

# the command line's outputs, by argparse dest: the bundle folder (--out), report's -o/--output, export's --perfetto
OUTPUTS = {"out": "--out", "output": "--output", "perfetto": "--perfetto"}


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there (yet): a new file is no input
        return False


def _inside(path: Path, folder: Path) -> bool:
    try:
        return folder.resolve() in path.resolve().parents
    except (OSError, RuntimeError):  # a symlink loop: not an input of ours either
        return False


def overwritten_input(out: Path, inputs: Iterable[Path]) -> Path | None:
    """The input that writing ``out`` would replace (the module docstring), else None."""
    if out.is_dir():  # a folder bundles are written into, each under a new name: nothing in it is replaced
        return None
    for given in inputs:
        if _same(out, given):
            return given
        if given.is_dir() and out.exists() and not out.is_dir() and _inside(out, given):
            return given
    return None


def refuse_overwriting(option: str, out: Path, inputs: Iterable[Path]) -> None:
    """InvalidArgumentError when writing ``out`` (given as ``option``) would replace one of ``inputs``."""
    found = overwritten_input(out, list(inputs))
    if found is not None:
        where = "is" if _same(out, found) else "lies inside"
        raise InvalidArgumentError(f"{option} {out}: {where} {found}, which this command reads; an output never "
                                   "replaces an input (whatever --force says): name another path")


def _paths(value: object) -> Iterator[Path]:
    for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, Path):
            yield item


def check_outputs(args: argparse.Namespace) -> None:
    """Every output on a parsed command line against every other path on it, and the execution trace read
    beside a trace file (``fuseprof.parse.execution_trace``)."""
    given = vars(args)
    outputs = [(OUTPUTS[k], p) for k in OUTPUTS for p in _paths(given.get(k))]
    if not outputs:
        return
    inputs = [p for k, v in given.items() if k not in OUTPUTS for p in _paths(v)]
    from fuseprof.parse.execution_trace import execution_trace_beside

    inputs += [et for p in inputs if p.is_file() and (et := execution_trace_beside(p)) is not None]
    for option, out in outputs:
        refuse_overwriting(option, out, inputs)
