"""DataFrames to Arrow and back, exactly: the same values, dtypes and index; an entry's frames packed in one file.

Arrow keeps numbers and strings as typed columns. What pandas holds as Python objects is written
so that it comes back as it was: a column of text (and nulls) as a dictionary-encoded string column; any other
(a kernel's recorded input shapes, a chain's member list: nested and mixed values) as one JSON text
per cell, each followed by a comma, so that the whole column decodes in one call (``[`` + the
column's bytes + ``]``) instead of one call per cell. Which null each null cell was (None, NaN or
``pd.NA``) is kept beside it where a column mixes them. Each column's pandas dtype is recorded in
the table's metadata and restored on read: the trace store (``fuseprof.parse.store``) gives back the
tables the decoder made, to the bit.

A store entry holds a trace's ten decoded tables or an analysis's two dozen, most of them a few rows: written as
one file each, opening, framing and closing a file cost more than the rows (a rank of a generated rank set: 33
Parquet files, 62 ms to write; packed, 19 ms). ``pack_frames`` writes them as Arrow IPC streams one after another
in one buffer, and names each one's span; ``unpack_frame`` reads one back. The store checks each span's SHA-256
before it decodes it. A frame of at least ``COMPRESS_FROM_BYTES`` is LZ4-compressed per column buffer; a smaller one
is not: LZ4 starts a frame per buffer, ~5 µs each, so a table of a few rows cost 60–250 µs to compress against
6–20 µs to write (an analysis's two dozen small tables: ~3 ms a rank) to save a few kilobytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

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
    # the nulls taken out as a list once: a NumPy scalar index per cell cost ~0.4 µs each (a column of 1,700 Nones)
    codes = np.array([1 if v is None else 3 if v is pd.NA else 2 if isinstance(v, float) and math.isnan(v) else 1
                      for v in values[mask].tolist()], np.int8)
    if (codes == 1).all():
        return None
    kinds = np.zeros(len(values), np.int8)
    kinds[mask] = codes
    return kinds


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
    """Text (and None) as a dictionary column: a trace repeats a few hundred kernel names (each up to kilobytes of
    C++ template) tens of thousands of times; each distinct one is stored once. Arrow encodes it itself, in its
    first-seen order as ``pd.factorize`` would: a 131 MB trace's 42k kernel names in a third of factorize's time
    (which hashes each name's Python text), and a small table's column without factorize's ~20 µs a call."""
    return pa.array(values, type=pa.large_string()).dictionary_encode()


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
    return _numpy_name(dtype) if isinstance(dtype, np.dtype) else str(dtype)


@lru_cache(maxsize=64)
def _numpy_name(dtype: np.dtype) -> str:
    """A NumPy dtype's name: NumPy builds it in Python each time (~2 µs), for each column of each frame stored."""
    return str(dtype)


def _dtype(name: str) -> Any:
    if name.startswith("string:"):
        _, storage, na = name.split(":")
        return pd.StringDtype(storage, na_value=np.nan if na == "nan" else pd.NA)
    return name


_PLAIN = frozenset("biuf")  # NumPy's bool, integer and float kinds: Arrow takes the array as it is (NaN as null)


def _numpy_numbers(dtype: Any) -> bool:
    """A NumPy bool, integer or float dtype: its values go to Arrow as they are, with no pandas detour."""
    return isinstance(dtype, np.dtype) and dtype.kind in _PLAIN


def _extension_column(series: pd.Series) -> pa.Array:
    """A column of a pandas dtype (``str``, ``Int64``, ...) in Arrow. Where its array converts itself
    (``__arrow_array__``), that is what ``pa.Array.from_pandas`` would call, without its checks of the Series
    (~10 µs a column); any other (datetimes, categories) goes through them."""
    values = series.array
    return pa.array(values) if hasattr(values, "__arrow_array__") else pa.Array.from_pandas(series)


_EMPTY_TEXT = _text_column(np.empty(0, dtype=object))  # Arrow arrays never change: one serves every empty column


def _object_column(values: np.ndarray) -> tuple[str, pa.Array, pa.Array | None]:
    """A column of Python objects as its codec (``text`` or ``json``), its Arrow array, and its null kinds where
    it mixes nulls (``_null_kinds``). An empty one is text, with no pandas call: a trace's and an analysis's empty
    tables hold some fifty such columns, ~20 µs each to look at."""
    if not len(values):
        return "text", _EMPTY_TEXT, None
    nulls = pd.isna(values)
    kinds = _null_kinds(values, nulls)
    plain = values
    if nulls.any():  # each null as None (Arrow takes no NaT or NumPy NaN as text); its kind, where not None, beside
        plain = values.copy()
        plain[nulls] = None
    if _is_text(values):
        return "text", _text_column(plain), None if kinds is None else pa.array(kinds)
    return "json", _json_column(plain), None if kinds is None else pa.array(kinds)


def frame_table(frame: pd.DataFrame) -> pa.Table:
    """``frame`` as an Arrow table that ``table_frame`` turns back into it (the module docstring)."""
    if not frame.columns.is_unique:
        raise ValueError("the trace store keeps frames whose column labels are unique")
    dtypes, codecs, arrays, names = {}, {}, [], []
    for column, series in frame.items():
        name = str(column)
        dtypes[name] = _dtype_name(series.dtype)
        if _numpy_numbers(series.dtype):
            arrays.append(pa.array(series.to_numpy(), from_pandas=True))
        elif dtypes[name] == "object":
            codecs[name], column, kinds = _object_column(series.to_numpy(dtype=object))
            if kinds is not None:
                arrays.append(kinds)
                names.append(_NULL_PREFIX + name)
            arrays.append(column)
        else:
            arrays.append(_extension_column(series))
        names.append(name)
    if frame.index.nlevels != 1:
        raise ValueError("the trace store keeps frames with a single-level index")
    index = frame.index  # a NumPy number index (nearly every frame's) as it is: a Series of it costs ~70 µs
    arrays.append(pa.array(index.to_numpy(), from_pandas=True) if _numpy_numbers(index.dtype)
                  else pa.Array.from_pandas(index.to_series(index=None)))
    names.append("__index__")
    meta = {"dtypes": dtypes, "codecs": codecs, "columns": [str(c) for c in frame.columns],
            "index_name": frame.index.name, "index_dtype": _dtype_name(frame.index.dtype),
            "columns_dtype": _dtype_name(frame.columns.dtype),
            "range_index": isinstance(frame.index, pd.RangeIndex)}
    return pa.Table.from_arrays(arrays, names=names).replace_schema_metadata({_META: json.dumps(meta).encode()})


@lru_cache(maxsize=256)
def _resolved(name: str) -> Any:
    """The dtype a recorded name (``_dtype_name``) names: pandas looks a text name up in its registry of
    extension dtypes each time (~35 µs); a table store holds a dozen names."""
    return pd.api.types.pandas_dtype(_dtype(name))


def _values(data: pa.ChunkedArray, dtype_name: str, index: pd.Index) -> Any:
    """A column that is not of Python objects, as pandas holds it: NumPy numbers straight from Arrow's buffers, a
    pandas extension dtype (``Int64``, ``Float64``, ``boolean``, ``string``) through its own Arrow conversion
    (what ``to_pandas`` calls); anything else, or a value that comes back as another dtype, through a Series cast to
    the dtype recorded. A Series and a cast per column cost ~150 µs, most of reading back an analysis's two dozen
    small tables (a rank's: 51 ms; these paths: a few µs a column)."""
    dtype = _resolved(dtype_name)
    if isinstance(dtype, np.dtype) and dtype.kind in _PLAIN and (data.null_count == 0 or dtype.kind == "f"):
        values = data.to_numpy()  # a float column's nulls were its NaNs (``frame_table``: from_pandas)
        if values.dtype == dtype:
            return values
    elif hasattr(dtype, "__from_arrow__"):
        values = dtype.__from_arrow__(data)
        if values.dtype == dtype:
            return values
    series = data.to_pandas()
    series.index = index
    return series if _dtype_name(series.dtype) == dtype_name else series.astype(dtype)


def table_frame(table: pa.Table) -> pd.DataFrame:
    """The frame ``frame_table`` made ``table`` from; a table it did not make raises (KeyError, ValueError)."""
    meta = json.loads((table.schema.metadata or {})[_META])
    index_values = table.column("__index__").to_numpy()
    index = pd.RangeIndex(len(index_values)) if meta["range_index"] and (
        index_values == np.arange(len(index_values))).all() else pd.Index(
        table.column("__index__").to_pandas().to_numpy(), dtype=_dtype(meta["index_dtype"]))
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
            out[column] = pd.Series(values, index=index, dtype=object, copy=False)  # text kept as objects, not inferred str
        else:
            out[column] = _values(data, dtype, index)
    result = pd.DataFrame(out, index=index) if out else pd.DataFrame(index=index)  # the dict in column order
    labels = _dtype(meta["columns_dtype"])
    if out and (isinstance(labels, pd.StringDtype) or labels == "object"):  # text labels: their dtype and storage
        result.columns = pd.Index(meta["columns"], dtype=labels)  # (other labels come back as their text, as written)
    result.index.name = meta["index_name"]
    return result


COMPRESS_FROM_BYTES = 256 * 1024
_LZ4, _PLAIN_IPC = pa.ipc.IpcWriteOptions(compression="lz4"), pa.ipc.IpcWriteOptions()
Spans = dict[str, tuple[int, int]]  # frame name -> (offset, length) in a pack


def pack_frames(frames: Mapping[str, pd.DataFrame]) -> tuple[bytes, Spans]:
    """Every frame as one Arrow IPC stream, one after another: the bytes, and each frame's span in them."""
    sink = pa.BufferOutputStream()
    spans: Spans = {}
    for name, frame in frames.items():
        table, start = frame_table(frame), sink.tell()
        options = _LZ4 if table.nbytes >= COMPRESS_FROM_BYTES else _PLAIN_IPC
        with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
            writer.write_table(table)
        spans[name] = (start, sink.tell() - start)
    return sink.getvalue().to_pybytes(), spans


def unpack_frame(data: bytes | memoryview) -> pd.DataFrame:
    """One frame of a pack, from its span's bytes; bytes that are no such stream raise (pyarrow's error, or
    KeyError/ValueError)."""
    return table_frame(pa.ipc.open_stream(pa.py_buffer(data)).read_all())
