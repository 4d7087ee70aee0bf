"""``modes``: per key, its most frequent non-null value, ties to the one seen first — against a plain count per
key (``collections.Counter`` in row order, the definition itself) on real traces' events: the kernels' ops and
modules (what the top-kernels table shows), the ops' modules by signature (the top-ops table), with null keys,
null values, keys of one row and ties; and the order of the keys (most frequent first, then first seen)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fuseprof.analysis.facts.modes import modes
from fuseprof.analysis.running.analyze import windowed_events
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, TRACES

REAL = [TRACES / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz", FIXTURES / "tp2" / "tp_mlp-rank0.json.gz",
        FIXTURES / "truth" / "train_foreach.json.gz"]


def _reference(values: list[Any], keys: list[Any]) -> list[tuple[Any, Any]]:
    """(key, winner) in the order the definition gives: count each key's values in row order; the winner has the
    largest count, ties to the earliest first row; keys by their winner's count descending, then its first row."""
    counts: dict[Any, Counter[Any]] = {}
    first: dict[tuple[Any, Any], int] = {}
    for row, (v, k) in enumerate(zip(values, keys)):
        if pd.isna(v) or pd.isna(k):
            continue
        counts.setdefault(k, Counter())[v] += 1
        first.setdefault((k, v), row)
    best = {k: min(c, key=lambda v: (-c[v], first[(k, v)])) for k, c in counts.items()}
    return sorted(best.items(), key=lambda kv: (-counts[kv[0]][kv[1]], first[kv]))


@pytest.fixture(scope="module", params=REAL, ids=lambda p: p.parent.name)
def events(request: pytest.FixtureRequest) -> pd.DataFrame:
    found = windowed_events(read_trace_tables(Path(request.param))).events
    dims = found["input_dims"].map(lambda d: "" if not isinstance(d, list) else str(d))
    return found.assign(signature=found["op"].fillna("(no op)").astype(str) + " " + dims)


@pytest.mark.parametrize("value, key", [("op", "name"), ("module", "name"), ("module", "signature"),
                                        ("name", "op"), ("stream", "category")])
def test_the_most_frequent_value_of_each_key(events: pd.DataFrame, value: str, key: str) -> None:
    found = modes(events[value], events[key])
    expected = _reference(events[value].tolist(), events[key].tolist())
    assert list(zip(found.index.tolist(), found.tolist())) == expected
    assert found.dtype == object and (found.name, found.index.name) == ("value", "key")
    if expected:
        assert len(expected) < len(events)  # keys repeat: there was something to count


def test_null_keys_null_values_and_ties() -> None:
    values = pd.Series(["a", "b", None, "b", "a", "c", None, "d", "d", "e"], dtype=object)
    keys = pd.Series(["x", "x", "y", "z", "z", None, "w", "w", "v", "v"], dtype=object)
    found = modes(values, keys)
    # x: a and b once each, a first; y: only a null; z: b first; None is no key; w: d; v: d first of d and e
    assert list(zip(found.index.tolist(), found.tolist())) == _reference(values.tolist(), keys.tolist())
    assert dict(zip(found.index, found)) == {"x": "a", "z": "b", "w": "d", "v": "d"}
    assert modes(values.iloc[:0], keys.iloc[:0]).empty
