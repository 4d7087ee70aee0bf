"""``value_key``: two recorded values get one key exactly when their ``repr`` is one (the key the memos used
before), on every op's shapes, dtypes and concrete inputs of real traces, and on the values JSON writes alike
(None, NaN and the infinities are all ``null``) or cannot write (a NumPy scalar, a lone surrogate)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fuseprof.model.value_key import value_key
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, TRACES

REAL = [TRACES / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz", FIXTURES / "tp2" / "tp_mlp-rank0.json.gz",
        FIXTURES / "truth" / "train_foreach.json.gz"]


def _one_key_per_repr(values: list[Any]) -> None:
    """Keys and reprs partition ``values`` alike: a key never stands for two reprs, nor a repr for two keys."""
    by_key: dict[bytes | str, str] = {}
    by_repr: dict[str, bytes | str] = {}
    for value in values:
        key, text = value_key(value), repr(value)
        assert by_key.setdefault(key, text) == text, f"one key for {by_key[key]} and {text}"
        assert by_repr.setdefault(text, key) == key, f"two keys for {text}"


@pytest.mark.parametrize("trace", REAL, ids=lambda p: p.parent.name)
def test_recorded_values_get_one_key_per_repr(trace: Path) -> None:
    ops = read_trace_tables(trace).ops
    rows = list(zip(ops["input_dims"], ops["input_type"], ops["concrete"]))
    values: list[Any] = [v for row in rows for v in row] + [(d, t) for d, t, _ in rows] + rows
    assert len({repr(v) for v in values}) > 15  # distinct values to tell apart, not one repeated
    _one_key_per_repr(values)


def test_values_json_writes_alike_or_cannot_write_get_their_repr() -> None:
    merged = [None, float("nan"), float("inf"), -float("inf"), [None], [float("nan")], [[1, None]], [[1, float("nan")]],
              "null", ["null"], 1, 1.0, True, [1], [1.0], [True], ["1"], [np.int64(1)], [2**70], [-(2**70)], []]
    _one_key_per_repr(merged)
    for unwritable in ([float("nan")], [np.int64(1)], "null", ["\ud800"]):
        assert value_key(unwritable) == repr(unwritable)
    assert value_key([[4096, 4096], ["c10::BFloat16"]]) == b'[[4096,4096],["c10::BFloat16"]]'


def test_a_key_is_the_same_for_equal_values_built_apart() -> None:
    """The memos rely on equal values, made as separate lists (the decoder makes one per op), meeting one key."""
    for dims in itertools.product([[], [1], [4096, 11008]], repeat=2):
        assert value_key([list(d) for d in dims]) == value_key([list(d) for d in dims])


@pytest.mark.parametrize("trace", REAL, ids=lambda p: p.parent.name)
def test_recorded_shapes_by_list_identity_equal_those_by_value(trace: Path) -> None:
    """The decoder shares one list per distinct text, and ``RecordedShapes`` remembers keys per pair of list
    objects: what it gives for the shared lists equals what a fresh one gives for copies of them (every pair
    looked up by value), op by op — the same dims with other types, or the reverse, must not meet one key."""
    import copy

    from fuseprof.model.dataflow import RecordedShapes
    from fuseprof.model.registry_data import DEFAULT

    ops = read_trace_tables(trace).ops
    rows = list(zip(ops["name"], ops["input_dims"], ops["input_type"]))
    shared, apart = RecordedShapes(), RecordedShapes()
    for op, dims, types in rows:
        role = DEFAULT.role(op)
        assert shared.of(op, role, dims, types) == apart.of(op, role, copy.deepcopy(dims), copy.deepcopy(types))
    assert len({id(d) for _, d, _ in rows}) < len(rows) / 2  # the decoder shared the lists
