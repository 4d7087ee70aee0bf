"""The annotated trace in Perfetto's protobuf format (``.pftrace``), written with Perfetto's own Python package
(``perfetto.trace_builder``; the optional extra ``fuseprof[interop]``).

The events are those of the Chrome JSON export (``fuseprof.export.chrome.annotated``: the same pids, lanes and
findings), each process a track and each of its threads a child track named as the trace names them.
Complete events ('X') become a slice (a begin and an end, at exact integer ns), instants ('i', 'I') instant
events, counters ('C') counter tracks, each with its args as debug annotations; a flow ('s' → 'f', Kineto's
launch → kernel arrows) becomes the flow ids of the slices it starts at. Async and object events, and a flow
event at no slice's start, have no one-to-one TrackEvent form: they are counted (``Converted.left_out``) and
kept only by the JSON export, which is exact for every event."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pandas as pd

from fuseprof.errors import FuseprofError
from fuseprof.export.chrome import KEPT_MARK, Original, annotated

SEQUENCE = 1  # every packet is on one trusted sequence


def _ns(value: Any) -> int:
    """A ``ts``/``dur`` (µs: an int, or a float kept as its text) as exact integer ns."""
    if isinstance(value, str):
        return int(Decimal(value.removeprefix(KEPT_MARK)) * 1000)
    return int(Decimal(str(value)) * 1000)


def _plain(value: Any) -> Any:
    """An args value with kept numbers back as numbers."""
    if isinstance(value, str) and value.startswith(KEPT_MARK):
        return float(value.removeprefix(KEPT_MARK))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass
class Converted:
    """What the conversion wrote and what it left to the JSON export, by phase."""

    slices: int = 0
    instants: int = 0
    counters: int = 0
    flows: int = 0
    left_out: dict[str, int] = field(default_factory=dict)


class _Tracks:
    """Track uuids by (pid) and (pid, tid), each declared once, named by the trace's metadata events."""

    def __init__(self, builder: Any, events: list[dict[str, Any]]) -> None:
        self.builder, self.uuids = builder, {}  # type: ignore[var-annotated]
        self.names = {(json.dumps(e.get("pid")), json.dumps(e.get("tid")) if e["name"] == "thread_name" else None):
                      str((e.get("args") or {}).get("name", "")) for e in events
                      if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name")}

    def uuid(self, pid: Any, tid: Any = None, counter: str | None = None) -> int:
        key = (json.dumps(pid), json.dumps(tid) if tid is not None else None, counter)
        if key not in self.uuids:
            self.uuids[key] = zlib.crc32(repr(key).encode()) | (len(self.uuids) + 1) << 32
            packet = self.builder.add_packet()
            descriptor = packet.track_descriptor
            descriptor.uuid = self.uuids[key]
            base = self.names.get((key[0], None)) or f"pid {pid}"
            if tid is None and counter is None:
                descriptor.name = base
            else:
                descriptor.parent_uuid = self.uuid(pid)
                descriptor.name = counter or self.names.get((key[0], key[1])) or f"thread {tid}"
                if counter is not None:
                    descriptor.counter.SetInParent()
        return self.uuids[key]


def _annotate(track_event: Any, args: dict[str, Any]) -> None:
    for name, value in args.items():
        annotation = track_event.debug_annotations.add()
        annotation.name = str(name)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            annotation.string_value = json.dumps(value, default=str)
        elif isinstance(value, int) and -(1 << 63) <= value < 1 << 63:
            annotation.int_value = value
        elif isinstance(value, (int, float)):
            annotation.double_value = float(value)
        else:
            annotation.string_value = value


def _packets(events: list[dict[str, Any]], tracks: _Tracks, done: Converted) -> list[tuple[tuple, dict[str, Any]]]:
    """(sort key, what to write) per packet: a slice's end before a begin at the same ns, an enclosing slice
    begun before and ended after the slices it holds."""
    out: list[tuple[tuple, dict[str, Any]]] = []
    begins: dict[tuple[str, str, int], dict[str, Any]] = {}  # where a flow event binds: the slice it starts at
    flows = []
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            continue
        if ph in ("s", "f") and "ts" in e and "id" in e:
            flows.append(e)
        elif ph == "X" and "ts" in e:
            start, dur = _ns(e["ts"]), _ns(e.get("dur", 0))
            track = tracks.uuid(e.get("pid"), e.get("tid"))
            item = {"kind": "begin", "ts": start, "track": track, "event": e, "flows": [], "ends": []}
            begins.setdefault((json.dumps(e.get("pid")), json.dumps(e.get("tid")), start), item)
            out.append(((start, 1, -dur), item))
            out.append(((start + dur, 0, -start), {"kind": "end", "ts": start + dur, "track": track}))
            done.slices += 1
        elif ph in ("i", "I") and "ts" in e:
            out.append(((_ns(e["ts"]), 2, 0), {"kind": "instant", "ts": _ns(e["ts"]), "event": e,
                                                "track": tracks.uuid(e.get("pid"), e.get("tid"))}))
            done.instants += 1
        elif ph == "C" and "ts" in e:
            for series, value in (e.get("args") or {}).items():
                out.append(((_ns(e["ts"]), 2, 0), {"kind": "counter", "ts": _ns(e["ts"]), "value": _plain(value),
                                                    "track": tracks.uuid(e.get("pid"), None, f"{e['name']} {series}")}))
            done.counters += 1
        else:
            done.left_out[str(ph)] = done.left_out.get(str(ph), 0) + 1
    for e in flows:  # Kineto's launch → kernel arrows: 's' at the launch call, 'f' at the kernel, both at its start
        at = begins.get((json.dumps(e.get("pid")), json.dumps(e.get("tid")), _ns(e["ts"])))
        if at is None:
            done.left_out[e["ph"]] = done.left_out.get(e["ph"], 0) + 1
        else:
            ident = e["id"] if isinstance(e["id"], int) and e["id"] >= 0 else zlib.crc32(str(e["id"]).encode())
            at["flows" if e["ph"] == "s" else "ends"].append(ident % (1 << 64))
            done.flows += 1
    return out


def _write(builder: Any, item: dict[str, Any]) -> None:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent

    packet = builder.add_packet()
    packet.timestamp = item["ts"]
    packet.trusted_packet_sequence_id = SEQUENCE
    track_event = packet.track_event
    track_event.track_uuid = item["track"]
    kind = item["kind"]
    track_event.type = {"begin": TrackEvent.TYPE_SLICE_BEGIN, "end": TrackEvent.TYPE_SLICE_END,
                        "instant": TrackEvent.TYPE_INSTANT, "counter": TrackEvent.TYPE_COUNTER}[kind]
    if kind == "counter":
        value = item["value"]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            track_event.double_counter_value = float(value)
    elif kind != "end":
        event = item["event"]
        track_event.name = str(event.get("name", ""))
        if event.get("cat"):
            track_event.categories.append(str(event["cat"]))
        _annotate(track_event, _plain(event.get("args") or {}))
        track_event.flow_ids.extend(item.get("flows", ()))
        track_event.terminating_flow_ids.extend(item.get("ends", ()))


def pftrace_bytes(originals: list[Original], findings: list[pd.DataFrame], labels: list[str]
                  ) -> tuple[bytes, Converted]:
    """The annotated trace (as ``annotated`` makes it) as a serialized Perfetto ``Trace``, and the counts."""
    return convert(annotated(originals, findings, labels)["traceEvents"])


def convert(events: list[dict[str, Any]]) -> tuple[bytes, Converted]:
    """Chrome trace events (numbers possibly kept as text) as a serialized Perfetto ``Trace``, and the counts."""
    try:
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder
    except ImportError:
        raise FuseprofError("--perfetto OUT.pftrace needs Perfetto's Python package: pip install 'fuseprof[interop]' "
                            "(or write OUT.json.gz, which needs nothing)") from None
    builder, done = TraceProtoBuilder(), Converted()
    tracks = _Tracks(builder, events)
    for _, item in sorted(_packets(events, tracks, done), key=lambda p: p[0]):
        _write(builder, item)
    return builder.serialize(), done
