"""A trace's notes (``fuseprof.parse.trace_notes``) read from the events the tables' decoder decoded, each table's args
in one decode: the values a hand-written trace holds, whatever form its args take, and the same as a second read of
the file (``read_trace_notes``, its own decoding)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from fuseprof.errors import FuseprofWarning
from fuseprof.parse.text_arrays import python_strings
from fuseprof.parse.trace_events import read_trace_tables
from fuseprof.parse.trace_notes import read_trace_notes


def _trace() -> dict:
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7}
    events = [
        {**kernel, "ts": 10.5, "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 1}},
        {**kernel, "ts": 20, "dur": 3.25, "args": {"device": 1, "stream": "7", "correlation": 2}},  # a number as text
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "ts": 30, "dur": 1, "pid": 0, "tid": 7,
         "args": {"cuda_sync_kind": "Wait Event", "device": 0, "stream": 7, "wait_on_cuda_event_record_corr_id": 5}},
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "ts": 31, "dur": 1, "pid": 0, "tid": 7, "args": [1, 2]},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "ts": 9, "dur": 1, "pid": 0, "tid": 3,
         "args": {"correlation": 5, "External id": 6}},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 8, "dur": 1, "pid": 0, "tid": 3,
         "args": {"Collective name": "all_reduce", "dtype": "Float", "Group size": 2}},
        {"ph": "i", "cat": "cuda_sync", "name": "instant", "ts": 40, "pid": 0, "tid": 7, "s": "t"},  # no X: no record
    ]
    return {"traceEvents": events, "WARNING": ["Dropped 3 activity records", 7], "INFO": []}


def _write(tmp_path: Path, trace: dict) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    return path


def test_the_notes_hold_the_records_as_written(tmp_path: Path) -> None:
    with pytest.warns(FuseprofWarning, match="left out"):  # the tables' reading of the sync whose args are a list
        notes = _notes(tmp_path, _trace())
    assert notes.kernels.to_dict("records") == [{"ts": 10.5, "dur": 2.0, "device": 0.0, "stream": 7.0},
                                                {"ts": 20.0, "dur": 3.25, "device": 1.0, "stream": 7.0}]
    syncs = notes.syncs.to_dict("records")
    assert syncs[0] == {"kind": "Wait Event", "ts": 30.0, "dur": 1.0, "device": 0.0, "stream": 7.0, "wait_corr": 5.0}
    assert pd.isna(syncs[1]["kind"]) and syncs[1]["ts"] == 31.0 and math.isnan(syncs[1]["wait_corr"])  # args no object
    assert notes.records.to_dict("records") == [{"ts": 9.0, "correlation": 5.0, "external_id": 6.0}]
    assert notes.comms.to_dict("records") == [{"ts": 8.0, "missing": "In msg nelems, Out msg nelems"}]
    assert notes.log == {"WARNING": ["Dropped 3 activity records"]} and notes.read


def _notes(tmp_path: Path, trace: dict):  # type: ignore[no-untyped-def]
    path = _write(tmp_path, trace)
    tables = read_trace_tables(path)
    assert tables.notes is not None
    with python_strings():  # as the integrity section reads them: inside the analysis
        again = read_trace_notes(path)  # the second read's own decoding gives the same records
    for key in ("syncs", "records", "kernels", "comms"):
        assert getattr(tables.notes, key).equals(getattr(again, key)), key
    assert tables.notes.log == again.log
    return tables.notes


def test_a_kernel_whose_args_are_no_object_has_no_device_or_stream(tmp_path: Path) -> None:
    """The kernels' device and stream are read in one decode of just those two fields; a kernel whose args are a
    list (no profiler writes one, and the tables refuse it) refuses it, and each kernel is then read alone: that
    one has neither."""
    trace = _trace()
    trace["traceEvents"].insert(1, {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 15, "dur": 1,
                                    "args": [0, 7]})
    with python_strings():
        notes = read_trace_notes(_write(tmp_path, trace))
    kernels = notes.kernels.to_dict("records")
    assert [k["ts"] for k in kernels] == [10.5, 15.0, 20.0]
    assert (kernels[0]["device"], kernels[0]["stream"], kernels[2]["device"], kernels[2]["stream"]) == (0.0, 7.0, 1.0, 7.0)
    assert math.isnan(kernels[1]["device"]) and math.isnan(kernels[1]["stream"])
