"""torch.profiler Chrome traces into typed event tables, decoding only the fields fuseprof reads.

A 131 MB decode trace holds ~480k events; ``json.load`` builds a dict per event with every field.
msgspec decodes straight into small typed structs and skips the rest, which is faster and lighter
than ``json.load`` itself (``scripts/bench_trace_parse.py`` measures both side by side). Each
event's ``args`` stay raw bytes until needed: python-function events are never decoded, and of the
CPU ops only those that launched GPU work get their recorded shapes decoded (on a 134 MB trace:
0.6 s instead of 1.7 s for decoding every event's args).

Timestamps are exact to the nanosecond at any magnitude: a trace writes microseconds with three decimals;
the float nearest such a value, split into its integer and fractional microseconds (both exact in float64),
gives back the written nanoseconds as long as the float's spacing is under 1 ns, i.e. ts < 2**43 µs
(~100 days of clock). A trace on a larger clock (µs since the Unix epoch, as PyTorch ≤ 2.0 and many
production profilers write: integers, or fractions at that size) has its times read again from the JSON
text, exactly, and rebased on its first whole microsecond, which is added back as integer ns
(``_exact_times``).

Fields are read by meaning: a number written as a string (``"bytes": "4096"``), in hex (ROCm's
``"stream": "0x0"``), as an integral float, or an array written as a string (a Triton launch's
``"grid": "(1, 2, 3)"``) is the number or array it says; a value that is none of these is left out with a
counted warning, never a refusal of the trace (``_lenient``). Old Kineto category names (``Operator``,
``Runtime``, ``Memcpy``, ``Memset``) are today's.
"""

from __future__ import annotations

import ast
import decimal
import json
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Annotated, Any

import msgspec
import msgspec.inspect
import numpy as np
import pandas as pd

from fuseprof.errors import FuseprofWarning, NotATraceError, TraceFormatError
from fuseprof.parse.durations import PAIRED, complete_events, launch_durations
from fuseprof.parse.foreign import foreign_file
from fuseprof.parse.nesting import around, innermost
from fuseprof.parse.perfetto_proto import chrome_json, is_protobuf_trace
from fuseprof.parse.shared_lists import SharingDecoder
from fuseprof.parse.text_arrays import python_strings
from fuseprof.parse.textio import read_bytes
from fuseprof.parse.time_unit import NS_PER_US, ns_per_unit, says_ns
from fuseprof.parse.trace_notes import LOG_LEVELS, TraceNotes, notes_from, wanted

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
AUTOGRAD_FUNCTION = "autograd::engine::evaluate_function: "  # a backward node's run: links it to its forward op
# autograd's gradient sink of a leaf tensor: one run per parameter that got a gradient, its input the gradient
# (the parameter's shape and dtype) — the parameter list an optimizer step updates
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
GRAPH_CALL = "## Call CompiledFxGraph"  # Inductor's call of a compiled graph: a range, or in some torch versions a CPU op
MEMORY_EVENT = "[memory]"  # the allocator's record (profile_memory=True): one instant per alloc (+bytes) or free (-)
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
# CUPTI's synchronisation records (a stream sync, an event sync, a stream waiting on another's event): the
# dependencies between streams and between the host and a stream (``syncs``; ``fuseprof.analysis.facts.sync_edges``)
SYNC_CATEGORY = "cuda_sync"
# a kernel's hardware counters from CUPTI's range profiler (torch.profiler's experimental_config profiler_metrics):
# Kineto records no kernel events while it runs, by design
COUNTER_RANGE = "cuda_profiler_range"
_EXACT_LIMIT_US = float(2**43)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# An integer field: one past 64 bits (no count, id or size a profiler writes) fails the strict decode and is read
# by meaning (``_as_int``), i.e. left out with the counted warning, instead of overflowing the int64 tables
Int64 = Annotated[int, msgspec.Meta(ge=_INT64_MIN, le=_INT64_MAX)]


class _Args(msgspec.Struct, gc=False):
    correlation: Int64 | None = None
    external_id: Int64 | None = msgspec.field(default=None, name="External id")
    stream: Int64 | None = None
    device: Int64 | None = None
    grid: list[Int64] | None = None
    block: list[Int64] | None = None
    registers: Int64 | None = msgspec.field(default=None, name="registers per thread")
    shared: Int64 | None = msgspec.field(default=None, name="shared memory")
    input_dims: list[Any] | None = msgspec.field(default=None, name="Input Dims")
    input_type: list[Any] | None = msgspec.field(default=None, name="Input type")
    concrete: list[Any] | None = msgspec.field(default=None, name="Concrete Inputs")
    bytes: Int64 | None = None
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: Int64 | None = msgspec.field(default=None, name="In msg nelems")
    nccl_dtype: str | None = msgspec.field(default=None, name="dtype")
    group_size: Int64 | None = msgspec.field(default=None, name="Group size")
    communicator: str | int | None = msgspec.field(default=None, name="Process Group Name")
    seq: Int64 | None = msgspec.field(default=None, name="Seq")  # the collective's number on its communicator
    kernel: str | None = None  # ROCm launch calls name the kernel they launch (graph captures rely on it)
    rf_id: Int64 | None = msgspec.field(default=None, name="Record function id")  # joins the execution trace
    sequence: Int64 | None = msgspec.field(default=None, name="Sequence number")  # autograd: forward ↔ backward
    fwd_tid: Int64 | None = msgspec.field(default=None, name="Fwd thread id")


class _Ids(msgspec.Struct, gc=False):
    external_id: Int64 | None = msgspec.field(default=None, name="External id")
    sequence: Int64 | None = msgspec.field(default=None, name="Sequence number")  # a forward op's autograd number


class _Sync(msgspec.Struct, gc=False):
    correlation: Int64 | None = None  # the synchronising call's (cudaStreamWaitEvent, cudaStreamSynchronize)
    stream: Int64 | None = None
    device: Int64 | None = None
    wait_stream: Int64 | None = msgspec.field(default=None, name="wait_on_stream")
    wait_record: Int64 | None = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")


class _Memory(msgspec.Struct, gc=False):
    addr: Int64 | None = msgspec.field(default=None, name="Addr")
    bytes: Int64 | None = msgspec.field(default=None, name="Bytes")
    total_allocated: Int64 | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Int64 | None = msgspec.field(default=None, name="Total Reserved")
    device_type: Int64 | None = msgspec.field(default=None, name="Device Type")  # 1 CUDA, 6 HIP, 0 CPU
    device_id: Int64 | None = msgspec.field(default=None, name="Device Id")


_NULL = msgspec.Raw(b"null")
# The Trace Event Format's phases (its specification's list): an event with another, or none, says nothing
_PHASES = frozenset("BEXiICbnestfPNODMVvRc()")
# Only a GPU event and the call that launched it carry a correlation id: one of those under a category fuseprof
# does not read is work missing from every table, not an event of no interest
_CORRELATION = b'"correlation"'
_OLD_EXTERNAL_ID = b'"external id"'
# PyTorch 1.8's Kineto wrote these keys so (today's: "External id", "Input Dims")
_OLD_KEYS = ((_OLD_EXTERNAL_ID, b'"External id"'), (b'"Input dims"', b'"Input Dims"'))
# record_function ranges PyTorch 1.8 wrote as ops (category "Operator"): today's user annotations
_OLD_RANGES = re.compile(r"ProfilerStep#\d+$|enumerate\(DataLoader\)|DataLoader\.__next__|Optimizer\.(?:step|zero_grad)#")


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float | None = None
    dur: float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: msgspec.Raw = _NULL


# Every CUDA GPU since Kepler keeps 1024–2048 threads resident per SM (AMD's CUs 2048), and no GPU has 1024 SMs. torch
# 2.13's Python exporter (``export_chrome_trace(path, use_python_export=True)``, torch/profiler/_chrome_trace_export.py)
# writes ``multi_processor_count`` as ``maxThreadsPerMultiprocessor`` and no ``numSms``, which every other writer
# writes: without ``numSms``, a value below this is the SM count
_FEWEST_THREADS_PER_SM = 1024


class _Device(msgspec.Struct, gc=False):
    id: int = 0
    name: str = ""
    numSms: int | str | None = None
    totalGlobalMem: int | str | None = None
    computeMajor: int | str | None = None
    computeMinor: int | str | None = None
    warpSize: int | str | None = None
    regsPerMultiprocessor: int | str | None = None
    sharedMemPerMultiprocessor: int | str | None = None
    maxThreadsPerMultiprocessor: int | str | None = None

    def properties(self) -> dict[str, int]:
        """What identifies the device (SMs — CUs on ROCm —, memory, arch, warp size) and the per-SM limits
        occupancy needs that it records (registers, shared memory, resident threads: ``devices.limits_for``)."""
        sms, max_threads = self.numSms, self.maxThreadsPerMultiprocessor
        threads = _as_int(max_threads)
        if sms is None and threads is not None and threads < _FEWEST_THREADS_PER_SM:
            sms, max_threads = max_threads, None  # torch 2.13's Python exporter: the SM count under this key
        values = {"sms": sms, "memory_bytes": self.totalGlobalMem, "major": self.computeMajor,
                  "minor": self.computeMinor, "warp": self.warpSize, "registers": self.regsPerMultiprocessor,
                  "shared_bytes": self.sharedMemPerMultiprocessor, "max_threads": max_threads}
        return {k: v for k, v in ((k, _as_int(v)) for k, v in values.items()) if v is not None}


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]
    deviceProperties: list[_Device] | None = None
    distributedInfo: dict[str, Any] | None = None
    displayTimeUnit: Any = None  # a viewer's setting; with whole numbers, a writer's word that ts is in ns
    # the profiler's settings, as torch ≥ 2.x writes them at the top level (absent: inferred from the events)
    record_shapes: Any = None
    with_stack: Any = None
    with_modules: Any = None
    profile_memory: Any = None
    # fuseprof's own timing of the same steps without the profiler (capture): read leniently, as its own JSON, so that
    # a malformed one is ignored rather than refusing the trace
    fuseprof_unprofiled: msgspec.Raw = _NULL
    # Kineto's messages (``trace_notes``): read as written, the notes keep only their strings
    ERROR: Any = None
    WARNING: Any = None
    INFO: Any = None


# strict=False: a ts or dur written as a string ("ts": "1234.567", as some exporters write every number) is the
# number it says; one that says no number is still refused
_DECODER = msgspec.json.Decoder(_Trace, strict=False)
# strict=False: ROCm writes some numbers as strings (hipMemcpy*'s "bytes": "4096"); "4096" decodes to 4096,
# while a string that is no number is still refused
_ONE: dict[type, msgspec.json.Decoder[Any]] = {k: msgspec.json.Decoder(k | None, strict=False)
                                              for k in (_Args, _Ids, _Memory, _Sync)}
_MANY: dict[type, msgspec.json.Decoder[Any]] = {k: msgspec.json.Decoder(list[k | None], strict=False)  # type: ignore[valid-type]
                                               for k in (_Args, _Ids, _Memory, _Sync)}
# an op's recorded lists, each decoded once per distinct text (``fuseprof.parse.shared_lists``), as leniently as _MANY
_ARGS_SHARING = SharingDecoder(_Args, ("input_dims", "input_type", "concrete"), strict=False)


# A trace's events first as their text (a view each into the file's bytes), then each decoded alone (``_compact_trace``)
_OUTLINE = msgspec.json.Decoder(msgspec.defstruct("_TraceOutline", [
    (f.name, list[msgspec.Raw]) if f.name == "traceEvents" else (f.name, f.type, f.default)
    for f in msgspec.structs.fields(_Trace)]), strict=False)
_ONE_EVENT = msgspec.json.Decoder(_Event, strict=False)
# From this size the events are decoded one at a time (``_compact_trace``): the whole-list decode is faster (the 131 MB
# bench trace's tables 2.07 s against 2.31) but holds the file and a string per event until it ends
_COMPACT_FROM = 256 * 2**20


def _compact_trace(raw: bytes | bytearray) -> _Trace:
    """The trace as ``_DECODER`` decodes it, in less memory. A profiler writes a few hundred distinct names,
    categories and threads over millions of events; decoding the whole list made a string of each per event, and
    kept every event's args a view into the file's bytes, so the file stayed as long as the events. Here each event
    is decoded alone, its texts shared with the events before it that wrote the same (its own copies freed for the
    next event to reuse), its args copied out: the file's bytes go when the decode ends. A 1 GB trace (3.3M events):
    1.5 GB of events beside the file for the whole decode before, 1.3 GB now, and the file gone after it. A trace
    this refuses is decoded whole again, for the error as the whole decode words it (an event's index in the file)."""
    try:
        outline: Any = _OUTLINE.decode(raw)
        seen: dict[Any, Any] = {}
        events = []
        texts = outline.traceEvents
        texts.reverse()  # taken from the end, in the file's order: each event's text let go once it is decoded
        while texts:
            e = _ONE_EVENT.decode(texts.pop())
            e.name = seen.setdefault(e.name, e.name)
            e.cat = seen.setdefault(e.cat, e.cat)
            e.pid = seen.setdefault(e.pid, e.pid)  # an int or a text: never equal to one another
            e.tid = seen.setdefault(e.tid, e.tid)
            if e.args is not _NULL:
                e.args = msgspec.Raw(bytes(e.args))
            events.append(e)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return _DECODER.decode(raw)
    top = {f: getattr(outline, f) for f in outline.__struct_fields__ if f != "traceEvents"}
    return _Trace(**{**top, "traceEvents": events,
                     "fuseprof_unprofiled": msgspec.Raw(bytes(outline.fuseprof_unprofiled))})


_HEX = re.compile(r"^[+-]?0[xX][0-9a-fA-F]+$")


def _as_int(value: Any) -> int | None:
    """An integer as a trace may write it: 7, 7.0, "7", "0x7"; None when it says no integer, or one past 64 bits
    (the tables hold int64: no count, id or size a profiler writes is larger)."""
    number = _written_int(value)
    return number if number is not None and _INT64_MIN <= number <= _INT64_MAX else None


def _written_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 16) if _HEX.match(text) else int(text)
        except ValueError:
            return None
    return None


def _as_list(value: Any) -> list[Any] | None:
    """A list, or a string that writes one ("[1, 2]", "(1, 2, 3)"); None otherwise."""
    if isinstance(value, list):
        return value
    if isinstance(value, str) and len(value) < 10_000:
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
        return list(parsed) if isinstance(parsed, (list, tuple)) else None
    return None


def _as_int_list(value: Any) -> list[int] | None:
    items = _as_list(value)
    ints = [_as_int(x) for x in items] if items is not None else None
    return None if ints is None or None in ints else ints  # type: ignore[return-value]


def _as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else str(value) if isinstance(value, (int, float)) else None


def _reader(annotation: Any) -> Any:
    """How a field of an args struct is read by meaning, from its type as msgspec sees it (``X | None``: X's)."""
    info = msgspec.inspect.type_info(annotation)
    kinds = [k for k in (info.types if isinstance(info, msgspec.inspect.UnionType) else (info,))
             if not isinstance(k, msgspec.inspect.NoneType)]
    if len(kinds) == 1 and isinstance(kinds[0], msgspec.inspect.ListType):
        return _as_int_list if isinstance(kinds[0].item_type, msgspec.inspect.IntType) else _as_list
    if len(kinds) == 1 and isinstance(kinds[0], msgspec.inspect.IntType):
        return _as_int
    if len(kinds) == 2 and {type(k) for k in kinds} == {msgspec.inspect.StrType, msgspec.inspect.IntType}:
        return lambda v: v if isinstance(v, (str, int)) and not isinstance(v, bool) else None
    if len(kinds) == 1 and isinstance(kinds[0], msgspec.inspect.StrType):
        return _as_str
    return lambda v: v


_FIELDS: dict[type, list[tuple[str, str, Any]]] = {}


def _lenient(raw: bytes, kind: type, dropped: dict[str, int]) -> Any:
    """One event's args read field by field by meaning (``_as_int``, ``_as_list``): what the strict decode
    refused. A value that says nothing of its field's type is left out and counted in ``dropped``."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        dropped["args"] = dropped.get("args", 0) + 1
        return None
    if not isinstance(value, dict):  # args that are no object: none of its fields can be read
        dropped["args"] = dropped.get("args", 0) + (value is not None)
        return None
    if kind not in _FIELDS:
        _FIELDS[kind] = [(f.name, f.encode_name, _reader(f.type)) for f in msgspec.structs.fields(kind)]
    found = {}
    for name, key, read in _FIELDS[kind]:
        if key in value and value[key] is not None:
            got = read(value[key])
            if got is None:
                dropped[key] = dropped.get(key, 0) + 1
            found[name] = got
    return kind(**found)


def _decode_args(e: _Event, decoder: msgspec.json.Decoder, kind: type, dropped: dict[str, int]) -> Any:
    try:
        return decoder.decode(e.args)
    except RecursionError:
        dropped["args"] = dropped.get("args", 0) + 1
        return None
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _lenient(e.args, kind, dropped)


def _decode_all_args(events: list[_Event], kind: type, path: Path) -> list[Any]:
    """Every event's args in one decode of their joined bytes (a call per event costs as much again as
    the decoding); on a failure, event by event, each read by meaning where the strict decode refuses
    it (``_lenient``), with one warning counting the values left out."""
    if not events:
        return []
    # the brackets joined in with the first and last args: one copy of the text, not the join and a bracketed copy
    # of it (a 1 GB trace's million ops: 264 MB of args, held twice at once)
    parts: list[Any] = [e.args for e in events]
    parts[0] = b"[" + bytes(parts[0])
    parts[-1] = bytes(parts[-1]) + b"]"
    text = b",".join(parts)
    old = [(key, new) for key, new in _OLD_KEYS if key in text]  # PyTorch 1.8's Kineto's spelling

    def today(raw: bytes) -> bytes:
        for key, new in old:
            raw = raw.replace(key, new)
        return raw

    text = today(text)
    shared = _ARGS_SHARING.decode(text) if kind is _Args else None
    if shared is not None:
        return shared
    try:
        return _MANY[kind].decode(text)  # type: ignore[no-any-return]
    except (RecursionError, msgspec.ValidationError, msgspec.DecodeError):
        pass
    dropped: dict[str, int] = {}
    if old:
        events = [msgspec.structs.replace(e, args=msgspec.Raw(today(bytes(e.args)))) for e in events]
    decoded = [_decode_args(e, _ONE[kind], kind, dropped) for e in events]
    if dropped:
        said = ", ".join(f"{key} ×{n:,}" for key, n in sorted(dropped.items()))
        warnings.warn(f"{path}: {sum(dropped.values()):,} args value(s) said nothing of their field's type and were "
                      f"left out ({said})", FuseprofWarning, stacklevel=3)
    return decoded


@dataclass
class TraceTables:
    """One trace as tables (times in ns on the trace's clock). ``gpu`` holds kernels, memcpys and
    memsets; ``ops`` the CPU ops (with recorded shapes when ``record_shapes`` was on); ``launches``
    the runtime/driver calls; ``modules`` the ``nn.Module`` python events; ``annotations`` the
    ``record_function`` ranges (``ProfilerStep#N`` among them); ``autograd`` the runs of backward nodes
    (``autograd::engine::evaluate_function: …``, with the forward op's sequence number and thread);
    ``host_ops`` the ops with recorded shapes that launched nothing and called no other op (views,
    reshapes, splits: the op graph follows tensors through them; empty in a CPU-only trace, whose ``ops``
    hold every op); ``forward_ops`` every op with an autograd sequence number (what a backward node
    differentiates, whether or not it launched work); ``parameters`` autograd's ``AccumulateGrad`` ops (one per
    parameter and backward pass, with its shape and dtype); ``memory`` the allocator's records (``profile_memory``:
    address, signed bytes, the totals allocated and reserved after it, device) with the ops around each on its
    thread."""

    path: Path
    gpu: pd.DataFrame
    ops: pd.DataFrame
    launches: pd.DataFrame
    modules: pd.DataFrame
    annotations: pd.DataFrame
    autograd: pd.DataFrame
    host_ops: pd.DataFrame
    forward_ops: pd.DataFrame
    parameters: pd.DataFrame
    memory: pd.DataFrame
    devices: dict[int, str]
    rank: int | None
    device_properties: dict[int, dict[str, int]] = field(default_factory=dict)
    world_size: int | None = None
    # every CPU op and Python frame the profiler recorded (``kind``: "op" or "frame", ``start_ns``): two columns,
    # what the profiler's own cost is counted from (``fuseprof.analysis.facts.unprofiled``); ``ops`` keeps only some ops
    recorded: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({"kind": pd.Series(dtype=object),
                                                                         "start_ns": pd.Series(dtype="int64")}))
    capture: dict[str, Any] = field(default_factory=dict)  # the trace's own word on its settings (``capture_facts``)
    # CUPTI's synchronisation records (``_sync_rows``): waits between streams, a host waiting on a stream
    syncs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({
        **{c: pd.Series(dtype=object) for c in ("name", "pid", "tid")},
        **{c: pd.Series(dtype="Int64") for c in ("correlation", "stream", "device", "wait_stream", "wait_record")},
        "start_ns": pd.Series(dtype="int64"), "dur_ns": pd.Series(dtype="int64")}))
    # Inductor's graph calls (``## Call CompiledFxGraph … ##``) the trace wrote as CPU ops, not ranges (some torch
    # versions do): ``ops`` keeps only ops that launched work, and a graph call launches none of its own
    graph_calls: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({
        **{c: pd.Series(dtype=object) for c in ("name", "pid", "tid")},
        "start_ns": pd.Series(dtype="int64"), "dur_ns": pd.Series(dtype="int64")}))
    # what the trace says of its own completeness (``trace_notes``), read from the bytes the tables were decoded from;
    # not stored: None for tables read back from the store (the integrity check reads the file then)
    notes: TraceNotes | None = None

    def device_name(self, device: object) -> str | None:
        """The GPU name of a device id. ROCm traces can put kernels on an id that ``deviceProperties``
        lacks or leaves unnamed (kernels on device 2 or 9, properties for id 0 only, on partitioned and
        virtual GPUs): then the one name all named properties share, if they share one."""
        if device is None or pd.isna(device):
            return None
        name = self.devices.get(int(device))  # type: ignore[call-overload]
        if name:
            return name
        names = set(self.devices.values()) - {""}
        return names.pop() if len(names) == 1 else None

    def properties_of(self, device: object) -> dict[str, int]:
        """The ``deviceProperties`` of a device id (SMs, memory, arch, warp); those of the one device the trace
        describes where it lacks the id (as ``device_name``)."""
        if device is None or pd.isna(device):
            return {}
        found = self.device_properties.get(int(device))  # type: ignore[call-overload]
        if found:
            return found
        described = [p for p in self.device_properties.values() if p]
        return described[0] if len(described) == 1 else {}


def ns_from_us(values: np.ndarray, path: Path, field: str) -> np.ndarray:
    """Microsecond floats (three decimals) to exact integer nanoseconds."""
    if values.size and not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise TraceFormatError(f"{path}: event {bad} has a non-finite '{field}' ({values[bad]})")
    if values.size and np.abs(values).max() >= _EXACT_LIMIT_US:
        raise TraceFormatError(f"{path}: a '{field}' of {np.abs(values).max():.6g} µs is too large to keep "
                               "nanosecond precision; is the trace's clock in µs?")
    whole = np.floor(values)
    return whole.astype(np.int64) * 1000 + np.rint((values - whole) * 1000).astype(np.int64)


class _ExactTimes(msgspec.Struct, gc=False):
    ts: Any = None


# each ts as written: a JSON integer as a Python int (exact at any size), any other number (a fraction, an exponent)
# as a Decimal of its text, a string (a non-strict read takes "12" for 12) as the string, null as None
_EXACT_TIMES = msgspec.json.Decoder(msgspec.defstruct("_ExactTrace", [("traceEvents", list[_ExactTimes])]),
                                    float_hook=decimal.Decimal)


def _decimal_units(written: object, per_unit: int) -> int | None:
    """A ts as written (``_EXACT_TIMES``) in ns, rounded half to even as Decimal does; None where it is null or
    names no number."""
    if written is None:
        return None
    try:
        return int((decimal.Decimal(written) * per_unit).to_integral_value())  # type: ignore[arg-type]
    except (decimal.InvalidOperation, TypeError):
        return None


def _exact_times(trace: _Trace, raw: bytes | bytearray, per_unit: int) -> int:
    """For a trace on a clock past ``2**43`` units: every complete event's ts read again from the JSON text,
    exactly, and rebased on the first whole microsecond (the float keeps 1 ns below ``2**43`` µs); returns that
    base in ns, which the tables add back as integers. 0 when the clock is small. ``per_unit``: ns per unit of
    the trace's ts and dur (``fuseprof.parse.time_unit``); a trace in ns has its times made µs here, as every
    table reads them."""
    events = trace.traceEvents
    # every ts at once (a null as NaN, which compares false): a generator step per event cost ~0.1 µs each
    if not (np.abs(np.array([e.ts for e in events], dtype=np.float64)) >= _EXACT_LIMIT_US).any():
        if per_unit != NS_PER_US:
            for e in events:
                e.ts, e.dur = (None if t is None else t * per_unit / NS_PER_US for t in (e.ts, e.dur))
        return 0
    # an integer (every ts of most such traces) multiplied as it is; a Decimal per text cost ~0.5 µs an event
    # (below 10**28 ns: what Decimal's 28 digits keep exactly, so both give the same)
    written = [e.ts for e in _EXACT_TIMES.decode(raw).traceEvents]  # type: ignore[attr-defined]
    whole = 10**28 // per_unit
    exact = [t * per_unit if type(t) is int and -whole < t < whole else _decimal_units(t, per_unit) for t in written]
    # metadata events ('M': names, sort orders) have no time of their own: one written at ts 0 is no start
    base = min((n for n, e in zip(exact, events) if n is not None and e.ph != "M"), default=0) // 1000 * 1000
    for e, n in zip(events, exact):
        if e.ts is not None and n is not None:
            e.ts = (n - base) / 1000
        if e.dur is not None and per_unit != NS_PER_US:
            e.dur = e.dur * per_unit / NS_PER_US
    return base


def _ns_per_unit(trace: _Trace, path: Path) -> int:
    """``fuseprof.parse.time_unit.ns_per_unit`` of the trace: its events looked at only where it says ns."""
    if not says_ns(trace.displayTimeUnit):
        return NS_PER_US
    timed = [e for e in trace.traceEvents if e.ph == "X" or e.ph in PAIRED]
    fractional = any(t is not None and not float(t).is_integer() for e in timed for t in (e.ts, e.dur))
    launches = launch_durations(timed, lambda e: category(e.cat) in LAUNCH_CATEGORIES and "launch" in e.name.lower())
    return ns_per_unit(trace.displayTimeUnit, fractional, launches, path)


def _decode(path: Path) -> tuple[_Trace, int, TraceNotes]:
    """The trace, the base its timestamps were rebased on (``_exact_times``) and its notes (``trace_notes``), read
    from the same decoded events, as written (before their times are rebased)."""
    raw = read_bytes(path)
    if is_protobuf_trace(raw):  # by content, whatever the name: a .pftrace may hold JSON text (torch 2.13 writes so)
        raw = chrome_json(raw, path)
    try:
        trace = _compact_trace(raw) if len(raw) >= _COMPACT_FROM else _DECODER.decode(raw)
        notes = notes_from(trace.traceEvents if wanted(raw) else [], trace.displayTimeUnit,
                           {level: getattr(trace, level) for level in LOG_LEVELS})  # before the times are rebased
        return trace, _exact_times(trace, raw, _ns_per_unit(trace, path)), notes
    except msgspec.ValidationError as exc:
        text = str(exc)
        if "`$`" in text or "required field `traceEvents`" in text or text.endswith("at `$.traceEvents`") or \
                " at `$" not in text:  # the top level is no object with a list of events: no trace at all
            what = foreign_file(path) or "no 'traceEvents' list; is this a torch.profiler Chrome trace?"
            raise NotATraceError(f"{path}: {what}") from None
        raise TraceFormatError(f"{path}: not a torch.profiler trace: {text}") from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: {foreign_file(path) or f'not valid JSON ({exc}); truncated?'}") from None
    except RecursionError:  # JSON nested hundreds deep: no profiler writes that
        raise TraceFormatError(f"{path}: JSON nested too deeply to be a torch.profiler trace") from None


# Kineto's category names before PyTorch 1.9 (and hand-written traces' capitals): today's names
_OLD_CATEGORIES = {"operator": "cpu_op", "runtime": "cuda_runtime", "driver": "cuda_driver", "memcpy": "gpu_memcpy",
                   "memset": "gpu_memset"}


def category(cat: str) -> str:
    """An event's category as today's Kineto writes it."""
    lower = cat if cat.islower() else cat.lower()
    return _OLD_CATEGORIES.get(lower, lower)


_TEXT = ("name", "cat", "pid", "tid")  # object columns: an empty list would otherwise make floats


def _frame(rows: dict[str, list[Any]], path: Path) -> pd.DataFrame:
    """The rows' columns, ``ts`` and ``dur`` last as exact ns (``start_ns``, ``dur_ns``): one frame made at once (two
    columns set into it afterwards cost pandas an insert each, a dozen tables a trace)."""
    times = {f"{'start' if column == 'ts' else 'dur'}_ns":
             ns_from_us(np.array(rows[column], dtype="float64") if column in rows else np.empty(0), path, column)
             for column in ("ts", "dur")}
    return pd.DataFrame({**{k: pd.Series(v, dtype=object) if k in _TEXT else v
                            for k, v in rows.items() if k not in ("ts", "dur")}, **times},
                        index=pd.RangeIndex(len(rows["name"])))


# the args fields that are an integer or null (``Int64 | None``): their columns are made without pandas' inference
_INT_ARGS = frozenset(f.name for f in msgspec.structs.fields(_Args)
                      if {type(t).__name__ for t in getattr(msgspec.inspect.type_info(f.type), "types", ())} ==
                      {"IntType", "NoneType"})


def _arg_columns(args: list[_Args], keys: tuple[str, ...]) -> dict[str, Any]:
    """The args' fields ``keys`` as columns: an integer field's (``_INT_ARGS``) as the array pandas infers from its
    list — int64; float64, NaN for null, where some are null; the list itself where all are or it is empty — made
    by NumPy in one call (pandas' inference cost ~0.1 ms a column of a thousand rows, a dozen columns a trace);
    any other's as its list."""
    columns: dict[str, Any] = {}
    for key in keys:
        values = [getattr(a, key) for a in args]
        if key in _INT_ARGS and (nulls := values.count(None)) < len(values):
            columns[key] = np.array(values, np.float64 if nulls else np.int64)
        else:
            columns[key] = values
    return columns


def _nullable(column: Any) -> pd.arrays.IntegerArray:
    """An integer field's column as ``_arg_columns`` makes it, as ``Int64``: what ``astype("Int64")`` makes of it
    (the values, a float64's NaN as null), built from the arrays at hand (a cast each cost ~0.15 ms, ten a GPU
    table); floats too large for int64 are left to pandas' own cast (its error)."""
    if isinstance(column, list):  # all null, or none at all; else a field _INT_ARGS missed: pandas' own cast
        if any(v is not None for v in column):
            return pd.array(column, dtype="Int64")
        return pd.arrays.IntegerArray(np.zeros(len(column), np.int64), np.ones(len(column), bool))
    if column.dtype == np.int64:
        return pd.arrays.IntegerArray(column, np.zeros(len(column), bool))
    null = np.isnan(column)
    whole = np.where(null, 0.0, column)
    if len(whole) and np.abs(whole).max() >= 2.0**63:
        return pd.array(column, dtype="Int64")
    return pd.arrays.IntegerArray(whole.astype(np.int64), null)


_GPU_ARGS = ("stream", "device", "correlation", "external_id", "registers", "shared", "bytes", "collective",
             "in_nelems", "nccl_dtype", "group_size", "communicator", "seq")


def _plausible(events: list[_Event], args: list[_Args | None]) -> bool:
    """True when no GPU event can fail ``_first_bad_gpu_event`` (checked over whole columns at C speed)."""
    if None in [e.dur for e in events] or None in [e.ts for e in events] or None in args or "" in [
            e.name for e in events]:
        return False
    if events and min(e.dur or 0.0 for e in events) < 0:
        return False
    dims = list(chain.from_iterable(d for a in args if a is not None for d in (a.grid, a.block) if d))
    return not dims or (min(dims) >= 0 and max(dims) < 2**31)


def _first_bad_gpu_event(events: list[_Event], args: list[_Args | None], path: Path) -> None:
    """Refuse the trace at its first GPU event that no profiler writes: no ts or dur, a negative
    duration, no name, no args, or a launch beyond any GPU's limits."""
    if _plausible(events, args):
        return

    def first(flags: list[bool]) -> int:
        return flags.index(True) if True in flags else len(events)

    missing = first([e.dur is None or e.ts is None for e in events])
    negative = first([e.dur is not None and e.dur < 0 for e in events])
    unnamed = first([not e.name for e in events])
    no_args = first([a is None for a in args])  # torch.profiler always writes them: correlation, stream, device
    # CUDA's and HIP's launch limits are below 2³¹
    beyond = first([a is not None and any(d and not all(0 <= x < 2**31 for x in d) for d in (a.grid, a.block))
                    for a in args])
    i = min(missing, negative, unnamed, no_args, beyond)
    if i == len(events):
        return
    e, a = events[i], args[i]
    if i == missing:
        raise TraceFormatError(f"{path}: GPU event {i} ({e.name[:60]!r}) has no {'dur' if e.ts else 'ts'}")
    if i == negative:
        raise TraceFormatError(f"{path}: GPU event {i} ({e.name[:60]!r}) has a negative duration ({e.dur})")
    if i == unnamed:
        raise TraceFormatError(f"{path}: GPU event {i} (ts {e.ts}) has no name")
    if i == no_args or a is None:
        raise TraceFormatError(f"{path}: GPU event {i} ({e.name[:60]!r}) has no args (correlation, stream, device)")
    field, dims = ("grid", a.grid) if a.grid and not all(0 <= x < 2**31 for x in a.grid) else ("block", a.block)
    raise TraceFormatError(f"{path}: GPU event {i} ({e.name[:60]!r}) has args.{field} {dims}, beyond any launch a "
                           "GPU accepts")


def _gpu_rows(events: list[_Event], args: list[_Args | None], path: Path) -> pd.DataFrame:
    _first_bad_gpu_event(events, args, path)
    present = [a or _Args() for a in args]
    cols: dict[str, list[Any]] = {
        "name": [e.name for e in events], "cat": [category(e.cat) for e in events],
        "ts": [e.ts for e in events], "dur": [e.dur for e in events],
        **{key: _nullable(column) for key, column in _arg_columns(present, _GPU_ARGS[:4]).items()},
        "grid": [",".join(map(str, a.grid)) if a.grid else None for a in present],
        "block": [",".join(map(str, a.block)) if a.block else None for a in present],
        **{key: _nullable(column) if key in _INT_ARGS else column  # each within 64 bits (``Int64``)
           for key, column in _arg_columns(present, _GPU_ARGS[4:]).items()}}
    return _unique(_frame(cols, path), path)


def _unique(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """GPU events written twice (same name, start, duration, stream and correlation: a merged or hand-edited
    trace) are one event; a warning says how many were dropped. Timestamps far from the rest (over a day
    away from the median: a kernel at ts −5 µs on a 10¹² µs clock) are refused."""
    key = ["name", "start_ns", "dur_ns", "stream", "correlation"]
    duplicated = frame.duplicated(key)
    if duplicated.any():
        warnings.warn(f"{path}: {int(duplicated.sum())} GPU events appear twice (same name, start, duration, stream "
                      "and correlation); each is counted once", FuseprofWarning, stacklevel=2)
        frame = frame[~duplicated].reset_index(drop=True)
    if len(frame):
        far = (frame["start_ns"] - frame["start_ns"].median()).abs() > 86_400 * 10**9
        if far.any():
            i = int(far.idxmax())
            raise TraceFormatError(f"{path}: GPU event {frame['name'].iloc[i][:60]!r} starts at ts "
                                   f"{frame['start_ns'].iloc[i] / 1e3:.3f} µs, more than a day from the others; "
                                   "a damaged timestamp?")
    return frame


def _empty_table(table: str, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """The table of a trace that holds no such events (``memory``, ``syncs``, else ``_timed_rows``' with ``extra``):
    made once per process and string storage (pandas' option, which decides the dtypes of text) and copied for each
    trace, as each trace may change its tables. An empty frame cost pandas as much to make as a few hundred rows (the
    memory table's 1.7 ms), and most traces record no memory, no syncs, no graph calls."""
    return _made_empty(table, extra, pd.get_option("mode.string_storage")).copy()


@lru_cache(maxsize=32)
def _made_empty(table: str, extra: tuple[str, ...], storage: str) -> pd.DataFrame:
    builders = {"memory": lambda: _memory_frame([], [], Path()), "syncs": lambda: _sync_frame([], Path())}
    return builders.get(table, lambda: _timed_frame([], Path(), extra, None))()


def _timed_rows(events: list[_Event], path: Path, extra: tuple[str, ...] = (),
                args: list[_Args | None] | None = None) -> pd.DataFrame:
    return _timed_frame(events, path, extra, args) if events else _empty_table("timed", extra)


def _timed_frame(events: list[_Event], path: Path, extra: tuple[str, ...], args: list[_Args | None] | None
                 ) -> pd.DataFrame:
    present = [a or _Args() for a in args] if args is not None else [_Args()] * len(events)
    cols: dict[str, list[Any]] = {
        "name": [e.name for e in events], "ts": [e.ts if e.ts is not None else np.nan for e in events],
        "dur": [e.dur if e.dur is not None else 0.0 for e in events], "pid": [str(e.pid) for e in events],
        "tid": [str(e.tid) for e in events], **_arg_columns(present, extra)}
    return _frame(cols, path)


def _opening_order(ops: list[_Event], ids: list[_Ids | None]) -> list[int]:
    """The ops' positions in the order they opened: by start, the longer first; between ops of one span (an op and
    the autograd node recorded with it), by External id (the order the profiler opened them), then name: never by
    the file's order, which a merged or streamed writer changes. Sorted once for ``_host_leaves`` and
    ``_ops_by_time`` (each had sorted them again), on keys made once (a key function per op cost ~1 µs: 69 ms of
    hta_v100's 57k ops, against 14)."""
    keys = [(e.ts or 0.0, -(e.dur or 0.0), -1 if x is None or x.external_id is None else x.external_id, e.name)
            for e, x in zip(ops, ids)]
    return sorted(range(len(ops)), key=keys.__getitem__)


def _host_leaves(ops: list[_Event], launched: list[bool], order: list[int]) -> list[_Event]:
    """The ops that launched nothing and called no other op (views, reshapes, factories: what the op graph
    follows tensors through), in start order per thread (``order``: ``_opening_order``; the threads in the order
    they first appear)."""
    by_thread: dict[Any, list[int]] = {e.tid: [] for e in ops}
    for i in order:
        by_thread[ops[i].tid].append(i)
    leaves = []
    for indices in by_thread.values():
        for here, after in zip(indices, [*indices[1:], None]):
            e = ops[here]
            nested = after is not None and (ops[after].ts or 0.0) < (e.ts or 0.0) + (e.dur or 0.0)
            if not launched[here] and not nested and not e.name.startswith(AUTOGRAD_FUNCTION):
                leaves.append(e)
    return leaves


_ENQUEUES = re.compile(r"Launch|Memcpy|Memset", re.IGNORECASE)  # runtime/driver calls that put work on a stream


def _enqueuing(launches: list[_Event], launch_args: list[Any], gpu_args: list[Any]) -> np.ndarray:
    """Per launch call, whether it enqueued GPU work: its GPU event is in the trace, or it is a launch, copy or
    set by name (recorded into a graph under capture, whose kernels a capture trace does not hold)."""
    work = {a.correlation for a in gpu_args if a is not None}
    return np.array([(a is not None and a.correlation in work) or bool(_ENQUEUES.search(e.name))
                     for e, a in zip(launches, launch_args)], dtype=bool)


def _ops_by_time(ops: list[_Event], op_ids: list[Any], launches: list[_Event], launch_args: list[Any],
                 gpu_args: list[Any], launching: np.ndarray, order: list[int]) -> tuple[set[int], float]:
    """The ops (positions in ``ops``) innermost around a launch call on its thread whose External id names
    no op around it, or that has none while the GPU work it launched has none either: the op that made the
    launch by time, where the ids do not say (a writer whose External ids are correlation ids, or collide,
    or that puts ids on ops only); and the share of launch calls with an id whose id names the op around
    them. ``launching``: per launch call, whether it enqueued work (``_enqueuing``): a query names no launching
    op. ``order``: the ops' positions as ``_opening_order`` gives them."""
    if not launches:
        return set(), 1.0
    last: dict[int | None, int] = {}  # External id -> the last op of that id (a dict: a pandas index of ids cost 1 ms a rank)
    for i, x in enumerate(op_ids):
        if x is not None and x.external_id is not None:
            last[x.external_id] = i
    wanted = [a.external_id if a is not None else None for a in launch_args]
    at = np.array([last.get(w, -1) for w in wanted], dtype=np.int64)  # -1: no id, or one no op has
    op_start = np.array([e.ts or 0.0 for e in ops] + [np.nan])[at]
    op_end = op_start + np.array([e.dur or 0.0 for e in ops] + [np.nan])[at]
    op_tid = np.array([str(e.tid) for e in ops] + [""], dtype=object)[at]
    ts = np.array([e.ts if e.ts is not None else np.nan for e in launches])
    tid = np.array([str(e.tid) for e in launches], dtype=object)
    named_by_id = (at >= 0) & (op_tid == tid) & (op_start <= ts) & (ts <= op_end)  # NaN compares False
    with_id = np.array([x is not None for x in wanted], dtype=bool)  # a sync or event call often has none
    anonymous_work = {a.correlation for a in gpu_args if a is not None and a.external_id is None}
    launched_anonymously = np.array([a is not None and a.external_id is None and a.correlation in anonymous_work
                                     for a in launch_args], dtype=bool)
    unnamed: dict[str, list[tuple[float, Any]]] = {}
    for j in np.flatnonzero(((with_id & ~named_by_id & launching) | launched_anonymously) & ~np.isnan(ts)).tolist():
        unnamed.setdefault(tid[j], []).append((float(ts[j]), j))
    named = float(named_by_id[with_id].mean()) if with_id.any() else 1.0
    if not unnamed:
        return set(), named
    spans: dict[str, list[tuple[float, float, Any]]] = {}
    for i in order:  # the walk keeps this order at ties
        e = ops[i]
        if str(e.tid) in unnamed:
            spans.setdefault(str(e.tid), []).append((e.ts or 0.0, (e.ts or 0.0) + (e.dur or 0.0), i))
    found: set[int] = set()
    for thread, points in unnamed.items():
        found.update(innermost(spans.get(thread, []), points).values())
    return found, named


def _memory_rows(events: list[_Event], ops: list[_Event], path: Path) -> pd.DataFrame:
    """The allocator's records, each with the innermost CPU op around it on its thread (``op``: the allocation,
    ``aten::empty_strided``) and the op around that one (``caller``: the op the memory was for, ``aten::mm``)."""
    return _memory_frame(events, ops, path) if events else _empty_table("memory")


def _memory_frame(events: list[_Event], ops: list[_Event], path: Path) -> pd.DataFrame:
    fields = ("addr", "bytes", "total_allocated", "total_reserved", "device_type", "device_id")
    records = [m or _Memory() for m in _decode_all_args(events, _Memory, path)]
    threads = {str(e.tid) for e in events}
    spans: dict[str, list[tuple[float, float, str]]] = {}
    for e in ops:
        if str(e.tid) in threads and e.ts is not None:
            spans.setdefault(str(e.tid), []).append((e.ts, e.ts + (e.dur or 0.0), e.name))
    points: dict[str, list[tuple[float, int]]] = {}
    for i, e in enumerate(events):
        points.setdefault(str(e.tid), []).append((float(e.ts or 0.0), i))
    op: list[str | None] = [None] * len(events)
    caller: list[str | None] = [None] * len(events)
    for thread, at in points.items():
        for i, live in around(spans.get(thread, []), at):
            op[i], caller[i] = live[-1], live[-2] if len(live) > 1 else None
    cols: dict[str, list[Any]] = {
        "name": [e.name for e in events], "ts": [e.ts for e in events], "dur": [0.0] * len(events),
        "pid": [str(e.pid) for e in events], "tid": [str(e.tid) for e in events],
        **{f: [getattr(m, f) for m in records] for f in fields}, "op": op, "caller": caller}
    return _frame(cols, path).drop(columns=["name", "dur_ns"]).astype(dict.fromkeys(fields, "Int64"))


def _kind(cat: str) -> str:
    """Which of ``_by_kind``'s lists a complete event of category ``cat`` (today's name) goes to: a Python function
    only when it is a module's (its name says), any other only when it is a GPU event or launch whose category is
    unreadable (its args hold a correlation id)."""
    if cat in GPU_CATEGORIES:
        return "gpu"
    if cat in LAUNCH_CATEGORIES:
        return "launches"
    return {"cpu_op": "ops", "user_annotation": "annotations", "python_function": "python function",
            COUNTER_RANGE: "counters", SYNC_CATEGORY: "syncs"}.get(cat, "other")


def _by_kind(trace: _Trace, path: Path) -> dict[str, list[_Event]]:
    """The trace's events by what they are: GPU work, CPU ops, launch calls, modules, annotations, memory."""
    by_kind: dict[str, list[_Event]] = {"gpu": [], "ops": [], "launches": [], "modules": [], "annotations": [],
                                        "memory": [], "frames": [], "counters": [], "syncs": []}
    lost: Counter[str] = Counter()
    kind_of: dict[str, str] = {}  # per category as written: a trace has a dozen, over hundreds of thousands of events
    for e in trace.traceEvents:
        if e.ph != "X":
            if e.ph in ("i", "I") and e.name == MEMORY_EVENT and e.ts is not None:
                by_kind["memory"].append(e)
            elif e.ph in PAIRED:  # durations written as begin/end pairs: read again with each pair one 'X'
                trace.traceEvents = complete_events(trace.traceEvents, path)
                return _by_kind(trace, path)
            elif e.ph not in _PHASES:
                lost[f"ph {e.ph!r}"] += 1
            continue
        kind = kind_of.get(e.cat)
        if kind is None:
            kind = kind_of[e.cat] = _kind(category(e.cat))
        if kind == "ops" and e.cat == "Operator" and _OLD_RANGES.match(e.name):
            kind = "annotations"
        if kind == "python function":
            by_kind["modules" if e.name.startswith("nn.Module: ") else "frames"].append(e)
        elif kind == "other":
            if _CORRELATION in bytes(e.args):
                lost[f"category {e.cat!r}"] += 1
        else:
            by_kind[kind].append(e)
    if lost:
        said = ", ".join(f"{key} ×{n:,}" for key, n in sorted(lost.items()))
        warnings.warn(f"{path}: {sum(lost.values()):,} event(s) left out, their kind unreadable ({said}): a complete "
                      "event's ph is 'X', a GPU event's or launch's category one Kineto writes", FuseprofWarning,
                      stacklevel=2)
    by_kind["frames"] = [e for e in by_kind["frames"] if e.ts is not None]  # counted only: one without a time is no cost
    for kind in ("ops", "launches", "modules", "annotations"):
        missing = next((i for i, e in enumerate(by_kind[kind]) if e.ts is None), None)
        if missing is not None:
            raise TraceFormatError(f"{path}: a {kind[:-1]} event ({by_kind[kind][missing].name[:60]!r}) has no ts")
    return by_kind


def _joined_ops(by_kind: dict[str, list[_Event]], gpu_args: list[Any], launch_args: list[Any], path: Path
                ) -> tuple[list[_Event], list[_Event], list[_Event]]:
    """The ops the GPU events are joined to (those that launched work: all of them in a CPU-only trace), the
    host leaves among the rest, and the ops autograd numbered (``forward_ops``)."""
    if not by_kind["gpu"]:
        return by_kind["ops"], [], []
    # ops that launched work: named by a GPU event, or by a call that enqueues work (its GPU event in the trace,
    # or a launch, copy or set recorded into a graph being captured); a query — hipStreamGetDevice, an event's
    # status — makes no op a launching one
    work = _enqueuing(by_kind["launches"], launch_args, gpu_args)
    launched = {a.external_id for a in gpu_args if a is not None} | {
        a.external_id for a, enqueues in zip(launch_args, work) if a is not None and enqueues}
    ids = _decode_all_args(by_kind["ops"], _Ids, path)
    forward = [e for e, x in zip(by_kind["ops"], ids) if x is not None and x.sequence is not None
               and not e.name.startswith(AUTOGRAD_FUNCTION)]
    order = _opening_order(by_kind["ops"], ids)
    by_time, named = _ops_by_time(by_kind["ops"], ids, by_kind["launches"], launch_args, gpu_args, work, order)
    # ids that mostly name no op around their launch say nothing, not even which ops launched work
    by_id = named >= 0.5
    kept = [(by_id and x is not None and x.external_id in launched) or i in by_time for i, x in enumerate(ids)]
    return [e for e, k in zip(by_kind["ops"], kept) if k], _host_leaves(by_kind["ops"], kept, order), forward


def _sync_rows(events: list[_Event], path: Path) -> pd.DataFrame:
    """The synchronisation records (name: CUPTI's kind, 'Stream Wait Event', 'Stream Sync'; the call's
    correlation id, its stream and device, and for a wait the stream and event record it waits on), those with a
    time and no negative duration: a record is a dependency, never a cost, so a damaged one is left out."""
    return _sync_frame(events, path) if events else _empty_table("syncs")


def _sync_frame(events: list[_Event], path: Path) -> pd.DataFrame:
    kept = [e for e in events if isinstance(e.ts, (int, float)) and (e.dur is None or e.dur >= 0)]
    args = [a or _Sync() for a in _decode_all_args(kept, _Sync, path)]
    fields = ("correlation", "stream", "device", "wait_stream", "wait_record")
    frame = _frame({"name": [str(e.name) for e in kept], "ts": [e.ts for e in kept],
                    "dur": [e.dur or 0.0 for e in kept], "pid": [str(e.pid) for e in kept],
                    "tid": [str(e.tid) for e in kept], **{f: [getattr(a, f) for a in args] for f in fields}}, path)
    for f in fields:
        frame[f] = pd.array(frame[f].tolist(), dtype="Int64")
    return frame


def _recorded(ops: list[_Event], frames: list[_Event], path: Path) -> pd.DataFrame:
    """Every CPU op and Python frame, as its kind and start (ns): what the profiler paid a recording for."""
    starts = np.array([e.ts for e in ops] + [e.ts for e in frames], dtype=np.float64)
    return pd.DataFrame({"kind": np.array(["op"] * len(ops) + ["frame"] * len(frames), dtype=object),
                         "start_ns": ns_from_us(starts, path, "ts") if starts.size else starts.astype(np.int64)})


_SETTINGS = ("record_shapes", "with_stack", "with_modules", "profile_memory")


def capture_facts(trace: _Trace) -> dict[str, Any]:
    """The settings the trace says it was recorded with (torch writes ``record_shapes``, ``with_stack``,
    ``with_modules`` at its top level; older ones write none) and fuseprof's own un-profiled timing, where given."""
    facts: dict[str, Any] = {k: bool(v) for k in _SETTINGS if isinstance(v := getattr(trace, k), (bool, int))}
    try:
        measured = json.loads(bytes(trace.fuseprof_unprofiled))
    except (ValueError, RecursionError):  # not JSON fuseprof wrote: no measurement
        measured = None
    if isinstance(measured, dict):
        facts["unprofiled"] = measured
    return facts


@python_strings()
def read_trace_tables(path: Path) -> TraceTables:
    """Decode ``path`` (``.json`` or ``.json.gz``) into ``TraceTables``."""
    trace, base_ns, notes = _decode(path)
    by_kind = _by_kind(trace, path)
    if by_kind["counters"] and not by_kind["gpu"]:
        raise TraceFormatError(
            f"{path}: a trace of CUPTI range-profiler counters ({len(by_kind['counters']):,} '{COUNTER_RANGE}' "
            "events: each kernel's hardware counters, recorded with experimental_config's profiler_metrics), which by "
            "design holds no kernel events and so no GPU timeline; record the run again without profiler_metrics for "
            "one (its counters: HTA's get_cupti_counter_data_with_operators reads them)")
    gpu_args = _decode_all_args(by_kind["gpu"], _Args, path)
    launch_args = _decode_all_args(by_kind["launches"], _Args, path)
    gpu = _gpu_rows(by_kind["gpu"], gpu_args, path)
    autograd = [e for e in by_kind["ops"] if e.name.startswith(AUTOGRAD_FUNCTION)]
    every_op = by_kind["ops"]
    by_kind["ops"], host, forward = _joined_ops(by_kind, gpu_args, launch_args, path)
    op_args = _decode_all_args(by_kind["ops"], _Args, path)
    host_args = _decode_all_args(host, _Args, path)
    shaped = [i for i, a in enumerate(host_args) if a is not None and a.input_dims]
    devices = {d.id: d.name for d in trace.deviceProperties or []}
    properties = {d.id: d.properties() for d in trace.deviceProperties or []}
    rank = _as_int((trace.distributedInfo or {}).get("rank"))
    world_size = _as_int((trace.distributedInfo or {}).get("world_size"))
    tables = TraceTables(
        path=path,
        gpu=gpu,
        ops=_timed_rows(by_kind["ops"], path, ("external_id", "input_dims", "input_type", "concrete", "rf_id", "sequence",
                                               "fwd_tid"), op_args),
        launches=_timed_rows(by_kind["launches"], path, ("correlation", "external_id", "kernel"), launch_args),
        modules=_timed_rows(by_kind["modules"], path),
        annotations=_timed_rows(by_kind["annotations"], path),
        autograd=_timed_rows(autograd, path, ("sequence", "fwd_tid"), _decode_all_args(autograd, _Args, path)),
        host_ops=_timed_rows([host[i] for i in shaped], path, ("input_dims", "input_type", "concrete", "rf_id"),
                             [host_args[i] for i in shaped]),
        forward_ops=_timed_rows(forward, path, ("sequence",), _decode_all_args(forward, _Args, path)),
        parameters=_timed_rows(params := [e for e in every_op if e.name == ACCUMULATE_GRAD], path,
                               ("input_dims", "input_type"), _decode_all_args(params, _Args, path)),
        memory=_memory_rows(by_kind["memory"], every_op, path),
        devices=devices,
        device_properties=properties,
        rank=rank,
        world_size=world_size,
        recorded=_recorded(every_op, by_kind["frames"], path),
        capture=capture_facts(trace),
        syncs=_sync_rows(by_kind["syncs"], path),
        graph_calls=_timed_rows([e for e in every_op if e.name.startswith(GRAPH_CALL)], path),
        notes=notes,
    )
    if base_ns:  # the clock's base back, as integers: times stay exact and comparable across ranks
        for frame in (tables.gpu, tables.ops, tables.launches, tables.modules, tables.annotations, tables.autograd,
                      tables.host_ops, tables.forward_ops, tables.parameters, tables.memory, tables.recorded, tables.syncs,
                      tables.graph_calls):
            frame["start_ns"] += base_ns
    return tables
