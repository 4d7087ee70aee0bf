"""Human units for tables people read (the dashboard): a column's base unit, named by its suffix,
becomes a readable one and the header says which. CSV and JSON keep base units and exact integers."""

from __future__ import annotations

import json
import re

import pandas as pd

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def md_text(value: object) -> str:
    """A user-controlled string (a GPU, case, bundle or file name) shown by Markdown as the text it is: an
    image link in a trace's GPU name must not make the page fetch it."""
    return _MARKDOWN.sub(r"\\\1", str(value))


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
