"""Columns and tables the decoder makes without pandas' slower paths, each equal to what those paths make: integer args
columns made by NumPy (``_arg_columns``: the column pandas infers from the list), the GPU table's ``Int64`` columns
built directly (``_nullable``: pandas' own cast), and empty tables made once and copied (``_empty_table``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fuseprof.parse.text_arrays import python_strings
from fuseprof.parse.trace_events import (
    _arg_columns,
    _Args,
    _empty_table,
    _memory_frame,
    _nullable,
    _sync_frame,
    _timed_frame,
)


@pytest.mark.parametrize("values", [[1, 2, 3], [7, None, 9], [None, None], [], [2**53 + 1, None], [-(2**63), 2**63 - 1],
                                    [None, 2**62]])
def test_an_integer_column_is_the_one_pandas_infers(values: list[int | None]) -> None:
    args = [_Args(external_id=v, kernel=None if v is None else "k") for v in values]
    with python_strings():
        made = pd.DataFrame(_arg_columns(args, ("external_id", "kernel")), index=pd.RangeIndex(len(values)))
        inferred = pd.DataFrame({"external_id": values, "kernel": [None if v is None else "k" for v in values]},
                                index=pd.RangeIndex(len(values)))
    for column in ("external_id", "kernel"):
        assert made[column].dtype == inferred[column].dtype, column
        assert [repr(v) for v in made[column].tolist()] == [repr(v) for v in inferred[column].tolist()], column


@pytest.mark.parametrize("values", [[1, 2, 3], [7, None, 9], [None, None], [], [2**53 + 1, None], [-(2**63), 2**62],
                                    [None, -(2**63)], [2**63 - 1, None]])
def test_a_gpu_integer_column_is_the_int64_cast_of_the_inferred_one(values: list[int | None]) -> None:
    """``_nullable`` builds the GPU table's ``Int64`` columns directly: the same values and nulls as pandas' own cast of
    the column it infers from the list (an error where that cast refuses, as a float past int64)."""
    column = _arg_columns([_Args(external_id=v) for v in values], ("external_id",))["external_id"]
    try:
        expected = pd.Series(values).astype("Int64")
    except (TypeError, ValueError) as refused:
        with pytest.raises(type(refused)):
            _nullable(column)
        return
    made = pd.Series(_nullable(column))
    assert made.dtype == expected.dtype == "Int64"
    assert [repr(v) for v in made.tolist()] == [repr(v) for v in expected.tolist()]


@pytest.mark.parametrize("values", [[None, None], [], [5, None, 7]])
def test_a_column_left_as_a_list_is_cast_by_its_values(values: list[int | None]) -> None:
    """A field's column left as its list (all null, none, or a field whose type the integer set missed) as pandas'
    own cast of it: its values are never taken for nulls."""
    assert [repr(v) for v in pd.Series(_nullable(list(values))).tolist()] == \
        [repr(v) for v in pd.Series(values, dtype="object").astype("Int64").tolist()]


@pytest.mark.parametrize("table, extra", [("memory", ()), ("syncs", ()), ("timed", ()), ("timed", ("sequence", "fwd_tid"))])
def test_an_empty_table_is_made_once_and_each_trace_gets_its_own(table: str, extra: tuple[str, ...]) -> None:
    """A table with no events is the one its builder makes from none (same columns and dtypes), copied: a trace that
    changes its table (the clock's base added back) leaves the next trace's alone."""
    build = {"memory": lambda: _memory_frame([], [], Path()), "syncs": lambda: _sync_frame([], Path())}.get(
        table, lambda: _timed_frame([], Path(), extra, None))
    with python_strings():
        first = _empty_table(table, extra)
        first["changed"] = 1
        again, built = _empty_table(table, extra), build()
    assert "changed" not in again and again is not first
    assert list(again.columns) == list(built.columns) and list(again.dtypes) == list(built.dtypes)
    assert again.index.equals(built.index) and len(again) == 0
