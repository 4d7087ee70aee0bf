"""One DataFrame to one Parquet file and back, exactly: the same values, dtypes and index.

Parquet keeps numbers and strings as typed columns. What pandas holds as Python objects is written
so that it comes back as it was: a column of text (and nulls) as a dictionary-encoded string column; any other
(a kernel's recorded input shapes, a chain's member list: nested and mixed values) as one JSON text
per cell, each followed by a comma, so that the whole column decodes in one call (``[`` + the
column's bytes + ``]``) instead of one call per cell. Which null each null cell was (None, NaN or
``pd.NA``) is kept beside it where a column mixes them. Each column's pandas dtype is recorded in
the file's metadata and restored on read: the trace store (``fuseprof.parse.store``) gives back the
tables the decoder made, to the bit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

_META = b"fuseprof.frame"
_NULLS = (None, float("nan"), pd.NA)  # codes 1, 2, 3 of a null-kind column; 0: not null
_NULL_PREFIX = "__nulls__"


def _numpy_scalar(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store a {type(value).__name__} in the trace store")


_ENCODE = msgspec.json.Encoder(enc_hook=_numpy_scalar).encode
_DECODE = msgspec.json.Decoder().decode


def _null_kinds(values: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """Per cell 0 (a value) or the code of its null in ``_NULLS`` (``mask``: the nulls); None when every
    null is None."""
    if not mask.any():
        return None
    kinds = np.zeros(len(values), np.int8)
    for i in np.flatnonzero(mask):
        v = values[i]
        kinds[i] = 1 if v is None else 3 if v is pd.NA else 2 if isinstance(v, float) and math.isnan(v) else 1
    return None if (kinds[mask] == 1).all() else kinds


def _json_column(values: np.ndarray) -> pa.Array:
    pieces = [_ENCODE(v) + b"," for v in values]
    offsets = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(pieces),
                                            [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(pieces))])


def _from_json_column(column: pa.ChunkedArray) -> list[Any]:
    array = column.combine_chunks()
    if len(array) == 0:
        return []
    offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset:array.offset + len(array) + 1]
    data = array.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]
    return _DECODE(b"[" + data[:-1] + b"]")  # type: ignore[no-any-return]


def _text_column(values: np.ndarray) -> pa.Array:
    """Text as a dictionary column: a trace repeats a few hundred kernel names (each up to kilobytes of
    C++ template) tens of thousands of times; each distinct one is converted once."""
    codes, uniques = pd.factorize(values)
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0, type=pa.int32()),
                                          pa.array(np.asarray(uniques, dtype=object), type=pa.large_string()))


def _from_text_column(column: pa.ChunkedArray) -> np.ndarray:
    array = column.combine_chunks()
    words = np.asarray(array.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    codes = array.indices.fill_null(-1).to_numpy()
    out = np.empty(len(codes), dtype=object)
    out[:] = words[codes] if len(words) else None
    out[codes < 0] = None
    return out


def _is_text(values: np.ndarray) -> bool:
    return pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty")


def _dtype_name(dtype: Any) -> str:
    """A dtype as text that names it exactly: a string dtype with its storage and missing value."""
    if isinstance(dtype, pd.StringDtype):
        return f"string:{dtype.storage}:{'nan' if dtype.na_value is not pd.NA else 'na'}"
    return str(dtype)


def _dtype(name: str) -> Any:
    if name.startswith("string:"):
        _, storage, na = name.split(":")
        return pd.StringDtype(storage, na_value=np.nan if na == "nan" else pd.NA)
    return name


def write_frame(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` to ``path`` (Parquet: zstd level 1, the fastest to write and read here; page checksums on)."""
    dtypes, codecs, arrays, names = {}, {}, [], []
    for column in frame.columns:
        name, series = str(column), frame[column]
        dtypes[name] = _dtype_name(series.dtype)
        if dtypes[name] == "object":
            values = series.to_numpy(dtype=object)
            nulls = pd.isna(values)
            kinds = _null_kinds(values, nulls)
            if kinds is not None:
                arrays.append(pa.array(kinds))
                names.append(_NULL_PREFIX + name)
            plain = np.asarray(np.where(nulls, None, values)) if kinds is not None else values
            codecs[name] = "text" if _is_text(values) else "json"
            arrays.append(_text_column(plain) if codecs[name] == "text" else _json_column(plain))
        else:
            arrays.append(pa.Array.from_pandas(series))
        names.append(name)
    if frame.index.nlevels != 1:
        raise ValueError("the trace store keeps frames with a single-level index")
    arrays.append(pa.Array.from_pandas(frame.index.to_series(index=None)))
    names.append("__index__")
    meta = {"dtypes": dtypes, "codecs": codecs, "columns": [str(c) for c in frame.columns],
            "index_name": frame.index.name, "index_dtype": str(frame.index.dtype),
            "range_index": isinstance(frame.index, pd.RangeIndex)}
    table = pa.Table.from_arrays(arrays, names=names).replace_schema_metadata({_META: json.dumps(meta).encode()})
    pq.write_table(table, path, compression="zstd", compression_level=1, write_page_checksum=True)


def read_frame(path: Path) -> pd.DataFrame:
    """The frame ``write_frame`` wrote; a damaged file raises (pyarrow's error, or ValueError)."""
    table = pq.read_table(path, page_checksum_verification=True)
    meta = json.loads((table.schema.metadata or {})[_META])
    index_values = table.column("__index__").to_pandas()
    index = pd.RangeIndex(len(index_values)) if meta["range_index"] and (
        index_values.to_numpy() == np.arange(len(index_values))).all() else pd.Index(
        index_values.to_numpy(), dtype=meta["index_dtype"])
    out = {}
    for column in meta["columns"]:
        dtype, data = meta["dtypes"][column], table.column(column)
        if dtype == "object":
            values = np.empty(len(data), dtype=object)
            values[:] = _from_text_column(data) if meta["codecs"][column] == "text" else _from_json_column(data)
            if _NULL_PREFIX + column in table.column_names:
                kinds = table.column(_NULL_PREFIX + column).to_numpy()
                for i in np.flatnonzero(kinds):
                    values[i] = _NULLS[kinds[i] - 1]
            out[column] = pd.Series(values, index=index, dtype=object)
        else:
            series = data.to_pandas()
            series.index = index
            out[column] = series if _dtype_name(series.dtype) == dtype else series.astype(_dtype(dtype))
    result = pd.DataFrame(out, index=index, columns=meta["columns"]) if out else pd.DataFrame(index=index)
    result.index.name = meta["index_name"]
    return result
