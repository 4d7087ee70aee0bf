"""Input paths checked while the command line is parsed: a missing path, a folder where a file belongs (or the
reverse) and another tool's file given as a trace are said in one line before pandas and the analysis are imported
(they cost 1–6 s, which a typo should not).

Only inputs: an argument that names something to write (``--out``, ``-o``) keeps ``type=Path``. A quoted glob
('ranks/*.json.gz', which the shell left alone) passes when it matches something; the verb expands it.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from fuseprof.errors import InvalidArgumentError, TraceFormatError

Kind = Literal["file", "folder", "any", "trace"]


def _checked(text: str, kind: Kind, option: str | None) -> Path:
    path = Path(text)
    said = f"{option} {text}" if option else text
    if not path.exists():
        if any(c in text for c in "*?["):  # a quoted glob
            if glob.glob(text):
                return path
            raise InvalidArgumentError(f"{said}: matches no file")
        raise InvalidArgumentError(f"{said}: no such file or directory")
    if kind == "file" and path.is_dir():
        raise InvalidArgumentError(f"{said}: is a folder; give a file")
    if kind == "folder" and not path.is_dir():
        raise InvalidArgumentError(f"{said}: is a file; give a folder")
    if kind == "trace":
        from fuseprof.parse.foreign import foreign_file

        what = foreign_file(path)
        if what is not None:
            raise TraceFormatError(f"{said}: {what}")
    return path


def input_path(kind: Kind = "any", option: str | None = None) -> Callable[[str], Path]:
    """An argparse ``type`` for a path the verb reads: it must exist and be of ``kind`` ('trace': a file or folder
    that is not another tool's file); ``option``: the option it is given with, named in the message."""
    def check(text: str) -> Path:
        return _checked(text, kind, option)

    check.__name__ = f"{kind} path"  # what argparse names in its own messages
    return check
