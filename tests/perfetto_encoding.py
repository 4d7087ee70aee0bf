"""A Chrome JSON trace written as a Perfetto protobuf ``Trace`` by hand, from the wire format and Perfetto's
published field numbers (protos/perfetto/trace/{trace,trace_packet}.proto, track_event/{track_event,
track_descriptor,debug_annotation}.proto, interned_data/interned_data.proto, clock_snapshot.proto): no protobuf
library and none of fuseprof's own code (its ``.pftrace`` writer, ``fuseprof.export.pftrace``, uses Perfetto's
package), so the reader is tested against the format, not against a twin of itself.

Each complete event is a slice begin and a slice end on its thread's track, every begin and end in time order (the
order ``trace_forms.begin_end`` gives each thread); names, categories and annotation names interned on the
sequence, lists and dicts as nested annotations (``interned``), or all written inline, lists and dicts as JSON
text; times absolute ns, or deltas on the sequence's incremental clock 64
from a clock snapshot (``incremental``), as the Perfetto SDK writes by default.
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

from tests import trace_forms

SEQUENCE = 7
_BOOTTIME, _INCREMENTAL = 6, 64
_BEGIN, _END, _INSTANT = 1, 2, 3


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s: ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def number(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def blob(field: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(field << 3 | 2) + varint(len(data)) + data


def double(field: int, value: float) -> bytes:
    import struct

    return varint(field << 3 | 1) + struct.pack("<d", value)


class _Interned:
    """Interned strings of one kind: each new string gets the next iid and goes out with the packet that uses it."""

    def __init__(self, field: int) -> None:
        self.field, self.iids, self.new = field, {}, []  # type: ignore[var-annotated]

    def iid(self, text: str) -> int:
        if text not in self.iids:
            self.iids[text] = len(self.iids) + 1
            self.new.append(blob(self.field, number(1, self.iids[text]) + blob(2, text)))
        return self.iids[text]  # type: ignore[no-any-return]

    def take(self) -> bytes:
        out, self.new = b"".join(self.new), []
        return out


def _annotation(name: str, value: Any, names: _Interned | None) -> bytes:
    head = number(1, names.iid(name)) if names is not None else blob(10, name)
    return head + _value(value, names)


def _value(value: Any, names: _Interned | None) -> bytes:
    if isinstance(value, bool):
        return number(2, int(value))
    if isinstance(value, int):
        return number(4, value)
    if isinstance(value, float):
        return double(5, value)
    if isinstance(value, str):
        return blob(6, value)
    if isinstance(value, (list, dict)) and names is None:  # inline: as JSON text, as Chrome's JSON converter writes
        return blob(9, json.dumps(value))
    if isinstance(value, list):
        return b"".join(blob(12, _value(v, names)) for v in value)
    if isinstance(value, dict):
        return b"".join(blob(11, _annotation(str(k), v, names)) for k, v in value.items())
    return blob(6, json.dumps(value))


def _ns(event: dict[str, Any]) -> int:
    text = event.get("_ts_text")
    return int(Decimal(text) * 1000) if text is not None else trace_forms._ns(event["ts"])


def encode(trace: dict[str, Any], interned: bool = True, incremental: bool = True) -> bytes:
    """The trace's complete events (and instants) as a serialized Perfetto ``Trace``."""
    events = trace_forms.begin_end(copy.deepcopy(trace))["traceEvents"]
    timed = sorted((e for e in events if e.get("ph") in ("B", "E", "i", "I") and ("ts" in e or "_ts_text" in e)),
                   key=_ns)  # stable: each thread keeps begin_end's order at one time
    tracks: dict[tuple[str, str], int] = {}
    packets = []
    for e in timed:
        key = (json.dumps(e.get("pid")), json.dumps(e.get("tid")))
        if key not in tracks:
            tracks[key] = uuid = 1000 + len(tracks)
            pid, tid = e.get("pid"), e.get("tid")
            thread = blob(4, number(1, pid) + number(2, tid)) if isinstance(pid, int) and isinstance(tid, int) else b""
            packets.append(blob(60, number(1, uuid) + blob(2, f"{pid}/{tid}") + thread))
    names, categories, annotation_names = _Interned(2), _Interned(1), _Interned(3)
    first = _ns(timed[0]) if timed else 0
    start = number(10, SEQUENCE) + number(41, 1)
    if incremental:
        clocks = blob(1, number(1, _BOOTTIME) + number(2, first)) + blob(1, number(1, _INCREMENTAL) + number(2, 0)
                                                                         + number(3, 1) + number(4, 1))
        start += blob(59, number(58, _INCREMENTAL)) + blob(6, clocks)
    packets.append(start)
    clock = first  # the incremental clock's 0 is the snapshot's boot time
    for e in timed:
        ns = _ns(e)
        kind = {"B": _BEGIN, "E": _END}.get(e["ph"], _INSTANT)
        body = number(9, kind) + number(11, tracks[(json.dumps(e.get("pid")), json.dumps(e.get("tid")))])
        if kind != _END:
            name, cat = str(e.get("name", "")), str(e.get("cat", ""))
            body += number(10, names.iid(name)) if interned else blob(23, name)
            if cat:
                body += number(3, categories.iid(cat)) if interned else blob(22, cat)
            body += b"".join(blob(4, _annotation(str(k), v, annotation_names if interned else None))
                             for k, v in (e.get("args") or {}).items() if v is not None)
        strings = names.take() + categories.take() + annotation_names.take()
        stamp = number(8, ns - clock if incremental else ns)
        clock = ns
        packets.append(stamp + number(10, SEQUENCE) + (blob(12, strings) if strings else b"") + blob(11, body))
    return b"".join(blob(1, p) for p in packets)
