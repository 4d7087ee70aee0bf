"""Terminal tables that fit a terminal: at most ``WIDTH`` characters a line unless ``--wide``.

Cells are shown as given (callers put human units in cells and units in headers). When a table is
wider than the limit, its long text columns (op chains, signatures, kernel names) wrap onto more
lines, never cut, and never inside a name up to ``_WHOLE`` characters (a bundle, an op, a file: a column is at
least as wide as its longest such name); numbers never wrap. If the numbers alone are still too wide, the table
is printed in blocks of columns, each led by the first column, so every value stays on screen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import pandas as pd

from fuseprof.display import is_identifier, number_text

WIDTH = 120
_MIN_TEXT = 24
_WHOLE = 48  # a name (no space, comma, slash, arrow or bracket in it) up to this long is never broken
_NUMBER = re.compile(r"^[-+]?[\d,]*\.?\d*(e[-+]?\d+)?%?$|^(nan|inf|-inf)$", re.IGNORECASE)  # incl. empty cells
_BREAKS = re.compile(r"(?<=[\s,/→(\[])")  # break after spaces, commas, slashes, arrows, open brackets


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # escape sequences in a kernel name must not reach the terminal


def clean_text(text: str) -> str:
    """``text`` with control characters (terminal escape sequences in a kernel or file name) shown as '?'."""
    return _CONTROL.sub("?", text)


def cell_text(value: object) -> str:
    """A table cell as printed: missing values (None, NA, NaN) blank, control characters as '?'."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    return clean_text(str(value))


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``: at a natural break where one is near, else hard."""
    lines, line = [], ""
    for piece in _BREAKS.split(text):
        if len(piece) > width and len(piece.rstrip()) <= width:  # a piece that fits but for its trailing space
            piece = piece.rstrip()
        while len(piece) > width:
            room = width - len(line)
            if room < max(4, width // 3) and line:
                lines.append(line.rstrip())
                line, room = "", width
            line += piece[:room]
            piece = piece[room:]
            lines.append(line.rstrip())
            line = ""
        if len(line) + len(piece) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip())
    return [x for x in lines if x] or [""]


def _render(cells: list[list[str]], headers: list[str], widths: list[int], numeric: list[bool]) -> str:
    out = ["  ".join(h.rjust(w) if n else h.ljust(w) for h, w, n in zip(headers, widths, numeric)).rstrip()]
    for row in cells:
        wrapped = [_wrap(c, w) if not n else [c] for c, w, n in zip(row, widths, numeric)]
        for k in range(max(len(x) for x in wrapped)):
            out.append("  ".join((x[k] if k < len(x) else "").rjust(w) if n else (x[k] if k < len(x) else "").ljust(w)
                                 for x, w, n in zip(wrapped, widths, numeric)).rstrip())
    return "\n".join(out)


_PLAIN = re.compile(r"^[-+]?\d+(\.\d+)?(e[-+]?\d+)?$", re.IGNORECASE)  # a number written without separators
_DECIMALS = (("µs", 3), ("ms", 3), ("%", 2))  # a column's unit (in its header) -> the decimals of its numbers


def _decimals(header: str) -> int:
    return next((d for unit, d in _DECIMALS if unit in header), 3)


def column_texts(column: pd.Series, header: str) -> list[str]:
    """A column's cells as printed, every number in the one format (``fuseprof.display.number_text``): numbers
    given as numbers, and numbers given as text without separators or in scientific notation ('93108.197',
    '3.964e+05'), which other tables' cells may be; labels that are numbers (pids, ranks, steps) as they are."""
    values = column.tolist()
    if is_identifier(header) or pd.api.types.is_bool_dtype(column):
        return [cell_text(v) for v in values]
    if pd.api.types.is_numeric_dtype(column):
        numbers = [float(v) for v in values if v is not None and v is not pd.NA and not math.isnan(float(v))]
        decimals = None if all(n.is_integer() for n in numbers) else _decimals(header)
        return ["" if v is None or v is pd.NA or math.isnan(float(v)) else number_text(v, decimals) for v in values]
    texts = [cell_text(v) for v in values]
    if not any(texts) or not all(_PLAIN.match(s) for s in texts if s):
        return texts
    numbers = [float(s) for s in texts if s]
    decimals = max((len(s.split(".")[1]) for s in texts if "." in s and "e" not in s.lower()), default=None)
    if any("e" in s.lower() for s in texts) and not all(n.is_integer() for n in numbers):
        decimals = _decimals(header)
    return [number_text(float(s), decimals) if s else "" for s in texts]


def table_text(frame: pd.DataFrame, wide: bool = False, width: int = WIDTH) -> str:
    """``frame`` as a text table (no index) of at most ``width`` characters a line unless ``wide``."""
    headers = [str(c) for c in frame.columns]
    columns = [column_texts(frame.iloc[:, i], h) for i, h in enumerate(headers)]
    cells = [list(row) for row in zip(*columns)] if headers else []
    numeric = [all(_NUMBER.match(r[i]) for r in cells) for i in range(len(headers))]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    if wide or not headers:
        return _render(cells, headers, widths, numeric)
    text = [i for i, n in enumerate(numeric) if not n]
    fixed = sum(w for i, w in enumerate(widths) if numeric[i]) + 2 * (len(widths) - 1)
    floor = {i: max(_MIN_TEXT, len(headers[i]), _longest_name(r[i] for r in cells)) for i in text}

    def total(level: int) -> int:  # every text column capped at ``level`` (never below its floor)
        return fixed + sum(min(widths[i], max(level, floor[i])) for i in text)

    level = max(widths)
    while level > 0 and total(level) > width:  # water-fill: the widest text columns give way together
        level -= 1
    for i in text:
        widths[i] = min(widths[i], max(level, floor[i]))
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    if excess <= 0 or len(headers) == 1:
        return _render(cells, headers, widths, numeric)
    return "\n\n".join(_render([[r[i] for i in block] for r in cells], [headers[i] for i in block],
                               [widths[i] for i in block], [numeric[i] for i in block])
                       for block in _blocks(widths, width))


def _longest_name(column: Iterable[str]) -> int:
    """The longest unbreakable piece of a column's cells (at most ``_WHOLE``): what must fit on one line."""
    return max((min(len(p.rstrip()), _WHOLE) for cell in column for p in _BREAKS.split(str(cell))), default=0)


def _blocks(widths: list[int], width: int) -> list[list[int]]:
    """Column indices in blocks that fit ``width``, each led by column 0."""
    blocks: list[list[int]] = []
    current = [0]
    used = widths[0]
    for i in range(1, len(widths)):
        if used + 2 + widths[i] > width and len(current) > 1:
            blocks.append(current)
            current, used = [0], widths[0]
        current.append(i)
        used += 2 + widths[i]
    blocks.append(current)
    return blocks
