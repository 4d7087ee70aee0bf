"""What every command module shares: the ``Command`` row of the command table, the options several
verbs take, and the one way a table reaches the terminal, CSV or JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fuseprof.commands.paths import input_path
from fuseprof.console import verbatim

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_TRACES = Path("traces")
SHAPES_HELP = ("comma-separated shapes: MxN (e.g. 128x4096), or as many dimensions as the case takes "
               "(decoder_layer: 1x1x2048)")


@dataclass(frozen=True)
class Command:
    """One verb: its name, one-line help, the longer description of ``--help``, the function that adds
    its arguments and the one that runs it (returns the exit code); ``kept``: whether a run with these
    arguments only prints what its inputs determine, so its answer is kept in the trace store and given back
    while they are unchanged (``fuseprof.commands.answers``)."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    description: str | None = None
    kept: Callable[[argparse.Namespace], bool] | None = None


def always(_: argparse.Namespace) -> bool:
    """``Command.kept`` for a verb whose every run only prints."""
    return True


def bool_flag(parser: argparse.ArgumentParser, name: str, default: bool, help_text: str) -> None:
    parser.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=default, help=help_text)


def format_option(p: argparse.ArgumentParser, help_text: str = "output format") -> None:
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help=help_text)
    wide_option(p)


def wide_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true",
                   help="tables as wide as their content (default: at most 120 columns, long text wrapped)")


def out_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=DEFAULT_TRACES, help="folder for the bundle")


def folder_argument(p: argparse.ArgumentParser, help_text: str = "bundle or folder of bundles") -> None:
    p.add_argument("dir", nargs="?", type=input_path("any"), default=DEFAULT_TRACES, help=help_text)


# The version of every JSON output's layout: a top-level "schema_version" in `analyze --format json`'s object, a
# "schema_version" field first in each record of the other verbs' lists (a list stays a list: adding a field breaks
# no reader). CHANGELOG.md lists every field whose meaning changes, and a change that is not only an added field
# raises it.
JSON_SCHEMA_VERSION = 1


def emit(frame: pd.DataFrame, fmt: str, wide: bool = False, versioned: bool = True) -> None:
    """``frame`` as a terminal table (columns with no value at all left out; at most 120 columns unless
    ``wide``), CSV or JSON records (every column, base units; each record with its ``schema_version`` unless
    ``versioned`` is off: rows whose columns the user chose, as `sql`'s)."""
    from fuseprof.commands.render import table_text

    if fmt == "csv":
        with verbatim():  # data: names as the trace holds them
            frame.to_csv(sys.stdout, index=False)
    elif fmt == "json":
        if versioned:
            frame = frame.copy(deep=False)
            frame.insert(0, "schema_version", JSON_SCHEMA_VERSION)
        sys.stdout.write(frame.to_json(orient="records", indent=1) + "\n")
    else:
        print(table_text(frame.dropna(axis=1, how="all"), wide))
