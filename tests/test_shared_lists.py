"""Recorded lists decoded once per distinct text (``fuseprof.parse.shared_lists``): every op's args equal to the
typed decode's (msgspec's own ``list[Any] | None`` fields, the reference) on real traces, ops that recorded one
text sharing one list, and the batches the typed decode must decide handed back to it: a shape written as a
string, a field of another type, JSON nested past the recursion limit."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from fuseprof.parse import trace_events as te
from tests.conftest import FIXTURES, TRACES

REAL = [TRACES / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz", FIXTURES / "tp2" / "tp_mlp-rank0.json.gz",
        FIXTURES / "truth" / "train_foreach.json.gz"]
FIELDS = [f.name for f in msgspec.structs.fields(te._Args)]


def _ops_args(trace: Path) -> bytes:
    decoded, _, _ = te._decode(trace)  # the trace, its time base, its notes
    ops = te._by_kind(decoded, trace)["ops"]
    return b"[" + b",".join(e.args for e in ops) + b"]"


@pytest.mark.parametrize("trace", REAL, ids=lambda p: p.parent.name)
def test_every_op_reads_as_the_typed_decode_reads_it_and_equal_texts_share_a_list(trace: Path) -> None:
    text = _ops_args(trace)
    typed = te._MANY[te._Args].decode(text)
    shared = te._ARGS_SHARING.decode(text)
    assert shared is not None and len(shared) == len(typed)
    for got, want in zip(shared, typed):
        assert (got is None) == (want is None)
        if want is not None:
            assert {f: getattr(got, f) for f in FIELDS} == {f: getattr(want, f) for f in FIELDS}
    dims = [a.input_dims for a in shared if a is not None and a.input_dims is not None]
    assert len(dims) > 50
    assert len({id(d) for d in dims}) == len({msgspec.json.encode(d) for d in dims})  # one list per distinct value


@pytest.mark.parametrize("args", [b'{"Input Dims": "[1, 2]"}', b'{"Input type": 7}', b'{"Concrete Inputs": {"a": 1}}',
                                  b'{"External id": "seven", "Input Dims": [[1]]}',
                                  b'{"Input Dims": ' + b"[" * 5000 + b"]" * 5000 + b"}"])
def test_a_batch_the_typed_decode_must_decide_is_handed_back(args: bytes) -> None:
    assert te._ARGS_SHARING.decode(b"[" + args + b"]") is None


def test_a_shape_written_as_a_string_is_still_read_by_meaning(tmp_path: Path) -> None:
    """The batch falls back to the typed decode, and its event-by-event reading parses the string, as before."""
    event = te._Event(ph="X", cat="cpu_op", name="aten::mm", ts=1.0, dur=1.0, pid=1, tid=1,
                      args=msgspec.Raw(b'{"Input Dims": "[[2, 3], [3, 4]]", "Input type": ["float", "float"]}'))
    shared = te._Event(ph="X", cat="cpu_op", name="aten::mm", ts=3.0, dur=1.0, pid=1, tid=1,
                       args=msgspec.Raw(b'{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}'))
    read = te._decode_all_args([event, shared], te._Args, tmp_path / "t.json")
    assert [a.input_dims for a in read] == [[[2, 3], [3, 4]]] * 2
    assert [a.input_type for a in read] == [["float", "float"]] * 2
