"""Human units for tables people read (the dashboard): a column's base unit, named by its suffix,
becomes a readable one and the header says which. CSV and JSON keep base units and exact integers."""

from __future__ import annotations

import json
import math
import re

import pandas as pd

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def md_text(value: object) -> str:
    """A user-controlled string (a GPU, case, bundle or file name) shown by Markdown as the text it is: an
    image link in a trace's GPU name must not make the page fetch it."""
    return _MARKDOWN.sub(r"\\\1", str(value))


def plain(value: object) -> str:
    """A trace's string as Plotly text: Plotly reads ``<a href>``, ``<span style>`` and ``<br>`` in any label,
    hover or tick as markup (a shared trace's op name could make the page fetch a URL when a point is hovered,
    or show a live link), and decodes ``&lt;``, ``&gt;`` and ``&amp;`` back into the characters."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cells_as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with list and dict cells (input shapes, members) as JSON text, which CSV, JSON records and HTML
    tables all carry as written; a new frame, or ``frame`` itself where no cell is one (only a column of Python
    objects can hold one: the others are not read)."""
    nested = [c for c, dtype in frame.dtypes.items() if pd.api.types.is_object_dtype(dtype) and
              any(isinstance(v, (list, dict)) for v in frame[c].to_numpy())]
    if not nested:
        return frame
    out = frame.copy()
    for column in nested:
        out[column] = out[column].map(lambda v: json.dumps(v) if isinstance(v, (list, dict)) else v)
    return out


# suffix of a base-unit column -> (new suffix, divisor, decimals)
_UNITS: tuple[tuple[str, str, float, int], ...] = (
    ("_bytes_per_s", " TB/s", 1e12, 3),
    ("_flops_per_s", " TFLOP/s", 1e12, 2),
    ("_per_s", " T/s", 1e12, 3),
    ("_ns", " µs", 1e3, 3),
    ("_bytes", " MB", 1e6, 3),
    ("flops", " GFLOP", 1e9, 4),
)


def human_units(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ns as µs, bytes as MB, bytes/s as TB/s, FLOPs as GFLOP and FLOP/s as TFLOP/s,
    each renamed to say so ('busy_ns' -> 'busy µs'); other columns as they are."""
    out = {}
    for column in frame.columns:
        name = str(column)
        for suffix, unit, divisor, decimals in _UNITS:
            if name.endswith(suffix) and pd.api.types.is_numeric_dtype(frame[column]) \
                    and not pd.api.types.is_bool_dtype(frame[column]):
                out[name.removesuffix(suffix).removesuffix("_") + unit] = (
                    frame[column].astype("float64") / divisor).round(decimals)
                break
        else:
            out[name] = frame[column]
    return pd.DataFrame(out, index=frame.index)


_IDENTIFIER = re.compile(r"(^|[\s_])(id|pid|tid|rank|step|stream|device|correlation|sequence|version|year|#)$",
                         re.IGNORECASE)


def is_identifier(header: str) -> bool:
    """A column of labels that happen to be numbers (a pid, a rank, a step): written without separators."""
    return bool(_IDENTIFIER.search(header.strip()))


def number_text(value: float, decimals: int | None = None) -> str:
    """The one way a number is written in a table a person reads (terminal, HTML, the dashboard's text): thousands
    separators, ``decimals`` fixed decimals (None: an integer as one, anything else to four significant digits),
    never scientific notation; NaN blank. JSON and CSV keep base units and are never written by this."""
    number = float(value)
    if math.isnan(number):
        return ""
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    if decimals is None:
        if number.is_integer():
            return f"{int(number):,}"
        magnitude = math.floor(math.log10(abs(number)))
        decimals = min(max(3 - magnitude, 0), 9)
    return f"{number:,.{decimals}f}"
