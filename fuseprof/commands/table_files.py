"""``analyze --format csv --out DIR``: one CSV file per table instead of one long table whose columns are every
table's columns (140 of them, mostly empty on any row), which a spreadsheet or ``pandas.read_csv`` cannot use as it
is. Each file holds one table of every trace given, with its ``trace`` column; base units, as all CSV output."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from fuseprof.errors import InvalidArgumentError

if TYPE_CHECKING:
    from fuseprof.analysis import TraceAnalysis


def write_table_files(results: list[TraceAnalysis], folder: Path, force: bool,
                      only: Collection[str] | None = None) -> list[Path]:
    """Every table of ``results`` as ``folder/NAME.csv`` (the folder made if missing); an existing file is replaced
    only with ``force``, and nothing is written unless every file can be; ``only``: those tables alone. Returns
    the files written, in section order."""
    import pandas as pd

    from fuseprof.commands.trace_views import chosen_tables
    from fuseprof.display import cells_as_text

    if folder.exists() and not folder.is_dir():
        raise InvalidArgumentError(f"--out {folder}: is a file; name a folder for the CSV files")
    tables = [chosen_tables(r, only) for r in results]
    names = list(dict.fromkeys(name for chosen in tables for name in chosen))
    targets = [folder / f"{name}.csv" for name in names]
    existing = [t.name for t in targets if t.exists()]
    if existing and not force:
        raise InvalidArgumentError(f"--out {folder}: {', '.join(existing[:4])}{' …' if len(existing) > 4 else ''} "
                                   "exist(s); pass --force to replace them, or name another folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, target in zip(names, targets):
            frame = pd.concat([cells_as_text(chosen[name]).assign(trace=r.name) for r, chosen in zip(results, tables)
                               if name in chosen], ignore_index=True)
            frame = frame[["trace", *[c for c in frame.columns if c != "trace"]]]
            partial = target.with_name(f".{target.name}.partial")
            try:  # whole or not at all: a stopped run leaves no half table under the real name
                frame.to_csv(partial, index=False)
                os.replace(partial, target)
            finally:
                with contextlib.suppress(OSError):
                    partial.unlink(missing_ok=True)
    except OSError as exc:
        raise InvalidArgumentError(f"--out {folder}: cannot write ({exc.strerror or exc})") from None
    return targets
