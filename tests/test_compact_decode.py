"""The decoder's event-at-a-time decode (``_compact_trace``) against the whole-list decode it replaced (``_DECODER``)
and against ``json.loads`` of the same file: the same events, values and errors, with each distinct name made once
and nothing left holding the file's bytes (what lets a 1 GB trace's 1 GB go when the decode ends)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import msgspec
import pytest

from fuseprof.parse.trace_events import _DECODER, _compact_trace

ROOT = Path(__file__).resolve().parents[1]
TRACES = [ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz",
          ROOT / "tests" / "fixtures" / "thirdparty" / "b200_eager.json.gz",
          ROOT / "tests" / "fixtures" / "thirdparty" / "h100_bert_small_uncased.json.gz"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_the_events_are_the_whole_decodes_and_the_files(path: Path) -> None:
    raw = gzip.decompress(path.read_bytes())
    held = sys.getrefcount(raw)
    trace = _compact_trace(raw)
    assert sys.getrefcount(raw) == held  # no view into the file's bytes kept
    assert trace == _DECODER.decode(raw)
    written = json.loads(raw)["traceEvents"]
    assert len(trace.traceEvents) == len(written)
    for e, w in zip(trace.traceEvents, written):
        assert (e.ph, e.cat, e.name, e.pid, e.tid) == (w.get("ph", ""), w.get("cat", ""), w.get("name", ""),
                                                       w.get("pid"), w.get("tid"))
        assert (e.ts, e.dur) == (w.get("ts"), w.get("dur"))
        assert json.loads(bytes(e.args)) == w.get("args")
    names = [e.name for e in trace.traceEvents]
    assert len({id(n) for n in names}) == len(set(names))  # one string per distinct name


@pytest.mark.parametrize("events", [b'[{"ph": "X", "ts": "soon"}]', b'[{"ph": "X"}, 7]', b'[{"ph": "X", "ts": 1',
                                    b'{"ph": "X"}'])
def test_a_refused_trace_is_refused_as_the_whole_decode_words_it(events: bytes) -> None:
    raw = b'{"deviceProperties": [], "traceEvents": ' + events + b"}"
    with pytest.raises((msgspec.ValidationError, msgspec.DecodeError)) as whole:
        _DECODER.decode(raw)
    with pytest.raises(type(whole.value)) as alone:
        _compact_trace(raw)
    assert str(alone.value) == str(whole.value)


def test_the_top_level_fields_are_kept() -> None:
    raw = (b'{"traceEvents": [{"ph": "X", "name": "k", "cat": "kernel", "ts": 1.5, "dur": 2, "args": {"stream": 7}}],'
           b' "distributedInfo": {"rank": 3}, "record_shapes": 1, "fuseprof_unprofiled": {"step_ms": 2.5}}')
    trace = _compact_trace(raw)
    assert trace.distributedInfo == {"rank": 3} and trace.record_shapes == 1
    assert json.loads(bytes(trace.fuseprof_unprofiled)) == {"step_ms": 2.5}
    assert json.loads(bytes(trace.traceEvents[0].args)) == {"stream": 7}


def test_the_tables_are_the_same_decoded_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_trace_tables`` decodes a trace from ``_COMPACT_FROM`` bytes one event at a time: the same tables."""
    import pandas as pd

    from fuseprof.parse import trace_events

    path = TRACES[1]
    whole = trace_events.read_trace_tables(path)
    monkeypatch.setattr(trace_events, "_COMPACT_FROM", 0)
    alone = trace_events.read_trace_tables(path)
    for name, value in vars(whole).items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(value, getattr(alone, name), check_exact=True)
        else:  # the notes hold frames of their own: their repr
            assert repr(value) == repr(getattr(alone, name)), name
