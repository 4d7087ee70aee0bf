"""The decoder's integer args columns (``trace_events._arg_columns``) are made by NumPy, not pandas' inference over a
list: each must be the column pandas infers from the same list, dtype and values, whatever its nulls."""

from __future__ import annotations

import pandas as pd
import pytest

from fuseprof.parse.text_arrays import python_strings
from fuseprof.parse.trace_events import _arg_columns, _Args, _nullable


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
