"""What a trace says about its own completeness that the tables do not keep: the CUDA synchronisation records
(``cuda_sync``: stream syncs and stream waits, with the event record each wait names), the event-record calls
those names point at, the ``record_param_comms`` ops' metadata keys, and the messages Kineto collected while it
traced (its ``LoggerCollector``: top-level ``"WARNING"``, ``"ERROR"`` and ``"INFO"`` lists beside
``traceEvents``, where "Dropped N activity records", "Exceeded max GPU buffer count" and "CUPTI stopped early? =
1" say records were lost).

Kept apart from ``trace_events``' tables (which every analysis keeps and the store holds, while these serve only
the completeness checks: ``fuseprof.analysis.facts.completeness``, ``fuseprof.analysis.facts.torch_rules``), but read from
the same events when a trace is decoded (``notes_from``: ``TraceTables.notes``); only tables read back from the store
have the file read again (``read_trace_notes``). Times stay in the file's clock as µs floats (``displayTimeUnit:
"ns"`` files scaled): the rules compare these records with each other and with the kernels read here, never with
the tables' exact ns. A file this reader cannot read as a Chrome trace (another format) gives no records: the
checks that need them then say nothing. The cost is a skim of the JSON, and the events decoded only where a sync or
comms record is in it; a second read of the file cost its gunzip again (0.25 CPU-s of a 62 MB trace).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd

from fuseprof.errors import FuseprofError
from fuseprof.parse.perfetto_proto import chrome_json, is_protobuf_trace
from fuseprof.parse.textio import read_bytes
from fuseprof.parse.time_unit import says_ns

SYNC_CATEGORY = "cuda_sync"
COMMS_OP = "record_param_comms"  # the CPU op c10d writes a collective's metadata on
# the NCCL metadata torch's validator asks of every record_param_comms op (torch.profiler._trace_validator)
COMMS_FIELDS = ("Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size")
EVENT_RECORDS = frozenset(("cudaEventRecord", "cudaEventRecord_ptsz", "cudaEventRecordWithFlags",
                           "cudaEventRecordWithFlags_ptsz", "cuEventRecord", "cuEventRecordWithFlags",
                           "hipEventRecord", "hipEventRecordWithFlags"))
LOG_LEVELS = ("ERROR", "WARNING", "INFO")


class _Event(msgspec.Struct, gc=False):
    ph: Any = ""
    cat: Any = ""
    name: Any = ""
    ts: Any = None
    dur: Any = None
    args: msgspec.Raw = msgspec.Raw(b"null")


class _Top(msgspec.Struct):
    traceEvents: msgspec.Raw
    displayTimeUnit: Any = None
    ERROR: Any = None
    WARNING: Any = None
    INFO: Any = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]


_TOP, _DECODER = msgspec.json.Decoder(_Top), msgspec.json.Decoder(_Trace)
# the events are decoded one by one only where one of these is in the file (most traces hold neither)
_WANTED = (b'"cuda_sync"', b'"record_param_comms"')
_ARGS = msgspec.json.Decoder(dict[str, Any])
_MANY = msgspec.json.Decoder(list[Any])  # many events' args at once (``_all_args``)


@dataclass(frozen=True)
class TraceNotes:
    """The records (module docstring), each a table with µs times: ``syncs`` (kind, ts, dur, device, stream,
    wait_corr: the ``wait_on_cuda_event_record_corr_id`` written, null where absent), ``records`` (the event-record
    calls: ts, correlation, external_id), ``kernels`` (ts, dur, device, stream), ``comms`` (ts and the NCCL fields
    missing, '' where none), and ``log`` (Kineto's messages by level). ``read``: whether the file was read."""

    syncs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["kind", "ts", "dur", "device", "stream", "wait_corr"]))
    records: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["ts", "correlation", "external_id"]))
    kernels: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["ts", "dur", "device", "stream"]))
    comms: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["ts", "missing"]))
    log: dict[str, list[str]] = field(default_factory=dict)
    read: bool = False


def _number(value: Any) -> float | None:
    """A number as written (a string of one too, as some writers write them); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _args(e: _Event) -> dict[str, Any]:
    try:
        decoded = _ARGS.decode(e.args)
    except msgspec.MsgspecError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _messages(value: Any) -> list[str]:
    return [m for m in value if isinstance(m, str)] if isinstance(value, list) else []


def _all_args(events: list[Any]) -> list[dict[str, Any]]:
    """Each event's args as a dict (``{}`` where they are no object), in one decode of their joined text: a call
    per event (a rank's thousand kernels) cost as much again as the decoding. Event by event where the joined
    text is refused."""
    if not events:
        return []
    try:
        decoded = _MANY.decode(b"[" + b",".join(e.args for e in events) + b"]")
    except msgspec.MsgspecError:
        return [_args(e) for e in events]
    return [d if isinstance(d, dict) else {} for d in decoded]


class _Where(msgspec.Struct, gc=False):
    """The two fields the kernels table reads of a kernel's args (each as written: ``_number`` reads it)."""

    device: Any = None
    stream: Any = None


_WHERE = msgspec.json.Decoder(list[_Where | None])


def _kernel_args(events: list[Any]) -> list[_Where]:
    """Each kernel's device and stream, in one decode of the joined args that keeps only those two: decoding every
    kernel's dozen args into a dict cost as much as the rest of the notes. Where that is refused (an args value
    that is no object), as ``_all_args`` reads them."""
    if not events:
        return []
    try:
        return [a or _Where() for a in _WHERE.decode(b"[" + b",".join(e.args for e in events) + b"]")]
    except msgspec.MsgspecError:
        return [_Where(a.get("device"), a.get("stream")) for a in _all_args(events)]


def _columns(table: str, found: list[tuple[Any, float, float]]) -> dict[str, list[Any]]:
    """One table's columns from its picked events (each with its time and duration, scaled), their args decoded at
    once (``_all_args``, ``_kernel_args``)."""
    events, ts, dur = [e for e, _, _ in found], [t for _, t, _ in found], [d for _, _, d in found]
    if table == "kernels":
        where = _kernel_args(events)
        return {"ts": ts, "dur": dur, "device": [_number(a.device) for a in where],
                "stream": [_number(a.stream) for a in where]}
    args = _all_args(events)
    if table == "syncs":
        return {"kind": [a.get("cuda_sync_kind") for a in args], "ts": ts, "dur": dur,
                "device": [_number(a.get("device")) for a in args], "stream": [_number(a.get("stream")) for a in args],
                "wait_corr": [_number(a.get("wait_on_cuda_event_record_corr_id")) for a in args]}
    if table == "records":
        return {"ts": ts, "correlation": [_number(a.get("correlation")) for a in args],
                "external_id": [_number(a.get("External id")) for a in args]}
    return {"ts": ts, "missing": [", ".join(f for f in COMMS_FIELDS if f not in a) for a in args]}


def _table_of(cat: str) -> str | None:
    """The table a category's events go to whatever their name (``_rows``)."""
    lower = cat.lower()
    return "syncs" if lower == SYNC_CATEGORY else "kernels" if lower == "kernel" else None


def _rows(events: Sequence[Any], scale: float) -> dict[str, dict[str, list[Any]]]:
    """The records of interest, as columns, by table (a table with no record is absent): the events picked first
    (by category, looked up once per category as written, then by name), then each table's args decoded at once
    (``_columns``)."""
    picked: dict[str, list[tuple[Any, float, float]]] = {"syncs": [], "records": [], "kernels": [], "comms": []}
    by_category: dict[str, str | None] = {}
    for e in events:
        if e.ph != "X" or not isinstance(e.cat, str) or not isinstance(e.name, str):
            continue
        table = by_category[e.cat] if e.cat in by_category else by_category.setdefault(e.cat, _table_of(e.cat))
        if table is None:
            table = "records" if e.name in EVENT_RECORDS else "comms" if e.name == COMMS_OP else None
            if table is None:
                continue
        ts = e.ts if type(e.ts) is float else _number(e.ts)  # the tables' decoder gives floats: no call for them
        if ts is not None:
            dur = e.dur if type(e.dur) is float else _number(e.dur)
            picked[table].append((e, ts * scale, (dur or 0.0) * scale))
    return {table: _columns(table, found) for table, found in picked.items() if found}


def read_trace_notes(path: Path) -> TraceNotes:
    """The records of the trace at ``path`` (module docstring); none where it is no Chrome trace JSON. A trace
    decoded in this process has them already (``TraceTables.notes``, from the same bytes): this read is for
    tables read back from the store."""
    try:
        raw = read_bytes(path)
        if is_protobuf_trace(raw):  # by content, as the tables are read (``trace_events``)
            raw = chrome_json(raw, path)
    except (FuseprofError, OSError, MemoryError):
        return TraceNotes()
    return notes_of(raw)


def notes_of(raw: bytes | bytearray) -> TraceNotes:
    """The records of a trace's Chrome JSON text (module docstring), for tables read back from the store."""
    try:
        top = _TOP.decode(raw)
        events = _DECODER.decode(raw).traceEvents if wanted(raw) else []
    except (msgspec.MsgspecError, MemoryError, RecursionError):  # the tables' decoding says why, if it must
        return TraceNotes()
    return notes_from(events, top.displayTimeUnit, {level: getattr(top, level) for level in LOG_LEVELS})


def wanted(raw: bytes | bytearray) -> bool:
    """Whether the trace's text holds a record whose events the notes read (most traces hold none)."""
    return any(w in raw for w in _WANTED)


def notes_from(events: Sequence[Any], display_unit: Any, logs: Mapping[str, Any]) -> TraceNotes:
    """The records among a trace's decoded events (each with ``ph``, ``cat``, ``name``, ``ts``, ``dur`` and its raw
    ``args``; none where ``wanted`` says the text holds no record of interest), its ``displayTimeUnit`` and its
    top-level log lists. ``trace_events`` passes the events it decoded for the tables, before it rebases their
    times: one decoding of the text serves both (this module's own two cost a third of the decoding's time)."""
    ns = says_ns(display_unit) and not any(
        isinstance(e.ts, float) and not e.ts.is_integer() for e in events if e.ph == "X")
    rows = _rows(events, 1e-3 if ns else 1.0)
    empty = TraceNotes()
    frames = {key: pd.DataFrame(rows[key]) if key in rows else getattr(empty, key)
              for key in ("syncs", "records", "kernels", "comms")}
    log = {level: _messages(logs.get(level)) for level in LOG_LEVELS}
    return TraceNotes(**frames, log={k: v for k, v in log.items() if v}, read=True)
