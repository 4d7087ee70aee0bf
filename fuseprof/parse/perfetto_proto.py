"""Perfetto protobuf traces (``TracePacket``s of ``TrackEvent``s, as Kineto's Perfetto-SDK writer and Perfetto's own
SDK write them) read as the Chrome JSON trace they hold, so that one decoder makes one set of tables of either.

Why through JSON text: the decoder's rules (exact ns at any clock, begin/end pairs, fields read by meaning, units)
are the JSON format's; a second path to the tables would be a second set of rules to keep equal. A slice begin and
end become a 'B' and an 'E' on the track's thread (``fuseprof.parse.durations`` pairs them), an instant an 'i';
each time is written as the exact µs text of its ns. A track's pid and tid are its thread's (its process's pid and
its own uuid for a track that names no thread); the event's name, category and debug annotations (its args, nested
dicts and arrays included) are read plainly or through the sequence's interned data; timestamps on a
sequence-scoped incremental clock (the SDK's default) are added up from the sequence's clock snapshot.

What TrackEvent has no field for is not there: ``deviceProperties`` (the GPU is then told by ``--device``) and
``distributedInfo`` (the rank by file name). Counter, legacy (unspecified-type) and flow events say nothing the
tables read and are left out. Parsing uses Perfetto's generated protobuf classes (``fuseprof[interop]``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuseprof.errors import MissingExtraError, TraceFormatError

_PACKET_TAG = 0x0A  # Trace.packet: field 1, length-delimited
_INCREMENTAL_CLOCKS = 64  # clock ids 64-127 are sequence-scoped (Perfetto's clock_snapshot.proto)
_PHASE = {1: "B", 2: "E", 3: "i"}  # TrackEvent.Type: SLICE_BEGIN, SLICE_END, INSTANT


def _varint(data: bytes | bytearray, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(data) and shift < 64:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at
    return -1, at


_WALKED = 1 << 16  # packets looked at in the first 64 KiB: text never lands on a packet tag that many times


def is_protobuf_trace(data: bytes | bytearray) -> bool:
    """Whether ``data`` (a file's bytes, or its first bytes) is a serialized Perfetto ``Trace``: packet after packet,
    each a packet field whose length lands on the next one, to the end of ``data`` or past its first 64 KiB (a
    text file that starts with a newline lands on another by chance once, not all the way); or, after one or more
    such packets, one cut short (a truncated trace, which the reader then calls so)."""
    at, whole = 0, 0
    while at < len(data) and at < _WALKED:
        if data[at] != _PACKET_TAG:
            return False
        size, start = _varint(data, at + 1)
        if size < 0:
            return False
        if start + size > len(data):
            return whole > 0
        at, whole = start + size, whole + 1
    return whole > 0


@dataclass
class _Sequence:
    """What a packet sequence's earlier packets set: interned strings, its defaults and its incremental clock."""

    names: dict[int, str] = field(default_factory=dict)
    categories: dict[int, str] = field(default_factory=dict)
    annotation_names: dict[int, str] = field(default_factory=dict)
    strings: dict[int, str] = field(default_factory=dict)
    track: int | None = None
    clock: int | None = None
    clock_value: int = 0
    clock_offset_ns: int = 0
    clock_unit_ns: int = 1

    def intern(self, interned: Any) -> None:
        for table, entries, attribute in ((self.names, interned.event_names, "name"),
                                          (self.categories, interned.event_categories, "name"),
                                          (self.annotation_names, interned.debug_annotation_names, "name"),
                                          (self.strings, interned.debug_annotation_string_values, "str")):
            for entry in entries:
                value = getattr(entry, attribute)
                table[entry.iid] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    def snapshot(self, clocks: Any) -> None:
        """A clock snapshot: the incremental clock's value now, and the ns of the primary clock it stands at."""
        primary = next((c for c in clocks if c.clock_id < _INCREMENTAL_CLOCKS), None)
        for c in clocks:
            if c.clock_id >= _INCREMENTAL_CLOCKS and c.clock_id == self.clock and primary is not None:
                self.clock_unit_ns = c.unit_multiplier_ns or 1
                self.clock_value = c.timestamp
                self.clock_offset_ns = primary.timestamp - c.timestamp * self.clock_unit_ns


def _protos() -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError:
        raise MissingExtraError("perfetto", "reading a Perfetto protobuf trace (.pftrace)",
                                "or export the trace as Chrome JSON") from None
    return perfetto_trace_pb2


def _annotation_value(a: Any, sequence: _Sequence) -> Any:
    kind = a.WhichOneof("value")
    if kind == "legacy_json_value":
        try:
            return json.loads(a.legacy_json_value)
        except ValueError:
            return a.legacy_json_value
    if kind == "string_value_iid":
        return sequence.strings.get(a.string_value_iid)
    if kind == "pointer_value":
        return hex(a.pointer_value)
    if kind == "nested_value":
        return None  # the legacy nested form: no profiler field fuseprof reads is written so
    if kind is not None:
        return getattr(a, kind)
    if a.dict_entries:
        return _annotations(a.dict_entries, sequence)
    if a.array_values:  # an element with no value is an empty array: a shape list's scalar ("Input Dims": [[8], []])
        return [[] if (value := _annotation_value(v, sequence)) is None else value for v in a.array_values]
    return None


def _annotations(annotations: Any, sequence: _Sequence) -> dict[str, Any]:
    return {(a.name if a.WhichOneof("name_field") == "name" else sequence.annotation_names.get(a.name_iid, "")):
            _annotation_value(a, sequence) for a in annotations}


def _us_text(ns: int) -> str:
    """Integer ns as the exact µs text a Chrome trace writes (three decimals)."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def _threads(packets: Any) -> dict[int, tuple[Any, Any, str]]:
    """Each track uuid's (pid, tid, name): a thread's own; else its process's pid (or the parent's) and its uuid."""
    described = {p.track_descriptor.uuid: p.track_descriptor for p in packets if p.HasField("track_descriptor")}

    def pid_of(uuid: int, depth: int = 0) -> Any:
        d = described.get(uuid)
        if d is None or depth > 32:
            return uuid
        if d.HasField("thread"):
            return d.thread.pid
        if d.HasField("process"):
            return d.process.pid
        return pid_of(d.parent_uuid, depth + 1) if d.parent_uuid else uuid

    out = {}
    for uuid, d in described.items():
        tid = d.thread.tid if d.HasField("thread") else uuid
        out[uuid] = (pid_of(uuid), tid, d.name or (d.thread.thread_name if d.HasField("thread") else ""))
    return out


def _event_text(packet: Any, sequence: _Sequence, threads: dict[int, tuple[Any, Any, str]], ts: int) -> str | None:
    event = packet.track_event
    phase = _PHASE.get(event.type)
    if phase is None:
        return None
    track = event.track_uuid if event.HasField("track_uuid") else sequence.track
    pid, tid, _ = threads.get(track or 0, (track, track, ""))
    out: dict[str, Any] = {"ph": phase, "pid": pid, "tid": tid}
    if phase != "E":
        out["name"] = event.name if event.WhichOneof("name_field") == "name" else sequence.names.get(event.name_iid, "")
        categories = list(event.categories) or [sequence.categories.get(i, "") for i in event.category_iids]
        out["cat"] = categories[0] if categories else ""
        out["args"] = _annotations(event.debug_annotations, sequence)
        if phase == "i":
            out["s"] = "t"
    return json.dumps(out)[:-1] + f', "ts": {_us_text(ts)}}}'


def _timestamp(packet: Any, sequence: _Sequence) -> int:
    clock = packet.timestamp_clock_id if packet.HasField("timestamp_clock_id") else sequence.clock
    if clock is None or clock < _INCREMENTAL_CLOCKS:
        return int(packet.timestamp)
    sequence.clock_value += packet.timestamp
    return sequence.clock_offset_ns + sequence.clock_value * sequence.clock_unit_ns


def chrome_json(data: bytes | bytearray, path: Path) -> bytes:
    """The Chrome JSON trace (``{"traceEvents": [...]}``) of a serialized Perfetto ``Trace``."""
    protos = _protos()
    try:
        packets = protos.Trace.FromString(bytes(data)).packet
    except Exception as exc:  # the protobuf runtime's DecodeError, whose class differs by implementation
        raise TraceFormatError(f"{path}: starts as a Perfetto protobuf trace but does not parse ({exc}); "
                               "truncated?") from None
    threads = _threads(packets)
    sequences: dict[int, _Sequence] = {}
    texts = []
    for packet in packets:
        key = packet.trusted_packet_sequence_id
        if packet.incremental_state_cleared or packet.sequence_flags & 1:
            sequences[key] = _Sequence()
        sequence = sequences.setdefault(key, _Sequence())
        if packet.HasField("trace_packet_defaults"):
            defaults = packet.trace_packet_defaults
            sequence.clock = defaults.timestamp_clock_id if defaults.HasField("timestamp_clock_id") else None
            sequence.track = defaults.track_event_defaults.track_uuid or None
        if packet.HasField("interned_data"):
            sequence.intern(packet.interned_data)
        if packet.HasField("clock_snapshot"):
            sequence.snapshot(packet.clock_snapshot.clocks)
        if packet.HasField("track_event"):
            text = _event_text(packet, sequence, threads, _timestamp(packet, sequence))
            if text is not None:
                texts.append(text)
        elif packet.HasField("timestamp") and not packet.HasField("clock_snapshot"):
            _timestamp(packet, sequence)  # a packet of another kind on an incremental clock moves it as well
    names = [json.dumps({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
             for pid, tid, name in threads.values() if name]
    return ('{"traceEvents": [' + ",\n".join(names + texts) + "]}").encode()
