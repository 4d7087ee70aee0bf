"""A trace on an epoch clock (past 2**43 µs, where a float's spacing exceeds 1 ns) keeps every written ts exact: each
form JSON allows (an integer, a fraction, half a nanosecond, an exponent, a string a non-strict read accepts) gives the
nanoseconds its text says, rounded half to even, as an exact reading of the text with fractions gives them."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from fuseprof.parse.trace_events import _DECODER, _exact_times, read_trace_tables

# (op name, ts as written in the JSON text)
WRITTEN = [("aten::a", "1669783687464181"), ("aten::b", "1669783687464190.125"), ("aten::c", "1669783687464200.0005"),
           ("aten::d", "1669783687464200.0015"), ("aten::e", "1.6697836874642105e15"), ("aten::f", '"1669783687464220"'),
           ("aten::g", "166978368746424e1"), ("aten::h", "1669783687464230.99999999")]


def _text() -> bytes:
    events = ['{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0, "args": {"name": "python"}}']
    events += [f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": 1}}'
               for name, ts in WRITTEN]
    return ('{"traceEvents": [' + ",\n".join(events) + "]}").encode()


def _ns(text: str, per_unit: int) -> int:
    """The text's value times ``per_unit``, rounded half to even (Python's round of a Fraction)."""
    return round(Fraction(json.loads(text) if text.startswith('"') else text) * per_unit)


def test_every_written_form_gives_its_exact_nanoseconds(tmp_path: Path) -> None:
    path = tmp_path / "epoch.json"
    path.write_bytes(_text())
    ops = read_trace_tables(path).ops.set_index("name")
    for name, ts in WRITTEN:
        assert int(ops.loc[name, "start_ns"]) == _ns(ts, 1000), name
    assert int(ops.loc["aten::c", "start_ns"]) % 1000 == 0  # 0.5 ns rounds to the even 0
    assert int(ops.loc["aten::d", "start_ns"]) % 1000 == 2  # 1.5 ns rounds to the even 2


@pytest.mark.parametrize("per_unit", [1, 1000, 10**6, 10**9])
def test_times_are_rebased_on_the_first_whole_microsecond_at_any_unit(per_unit: int) -> None:
    raw = _text()
    trace = _DECODER.decode(raw)
    base = _exact_times(trace, raw, per_unit)
    exact = [_ns(ts, per_unit) for _, ts in WRITTEN]
    assert base == min(exact) // 1000 * 1000
    timed = [e for e in trace.traceEvents if e.ph == "X"]
    assert [e.ts for e in timed] == [(n - base) / 1000 for n in exact]
