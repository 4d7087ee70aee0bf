"""torch.profiler Chrome traces into typed event tables, decoding only the fields fuseprof reads.

A 131 MB decode trace holds ~480k events; ``json.load`` builds a dict per event with every field.
msgspec decodes straight into small typed structs and skips the rest, which is faster and lighter
than ``json.load`` itself (``scripts/bench_trace_parse.py`` measures both side by side). Each
event's ``args`` stay raw bytes until needed: python-function events are never decoded, and of the
CPU ops only those that launched GPU work get their recorded shapes decoded (on a 134 MB trace:
0.6 s instead of 1.7 s for decoding every event's args).

Timestamps are exact to the nanosecond: a trace writes microseconds with three decimals; the float
nearest such a value, split into its integer and fractional microseconds (both exact in float64),
gives back the written nanoseconds as long as the float's spacing is under 1 ns, i.e. ts < 2**43 µs
(~100 days of clock). Larger values are refused rather than rounded (``ns_from_us``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from fuseprof.errors import FuseprofWarning, TraceFormatError
from fuseprof.parse.textio import read_bytes

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
AUTOGRAD_FUNCTION = "autograd::engine::evaluate_function: "  # a backward node's run: links it to its forward op
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
_EXACT_LIMIT_US = float(2**43)


class _Args(msgspec.Struct, gc=False):
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    stream: int | None = None
    device: int | None = None
    grid: list[int] | None = None
    block: list[int] | None = None
    registers: int | None = msgspec.field(default=None, name="registers per thread")
    shared: int | None = msgspec.field(default=None, name="shared memory")
    input_dims: list[Any] | None = msgspec.field(default=None, name="Input Dims")
    input_type: list[Any] | None = msgspec.field(default=None, name="Input type")
    concrete: list[Any] | None = msgspec.field(default=None, name="Concrete Inputs")
    bytes: int | None = None
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    nccl_dtype: str | None = msgspec.field(default=None, name="dtype")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    communicator: str | int | None = msgspec.field(default=None, name="Process Group Name")
    seq: int | None = msgspec.field(default=None, name="Seq")  # the collective's number on its communicator
    kernel: str | None = None  # ROCm launch calls name the kernel they launch (graph captures rely on it)
    rf_id: int | None = msgspec.field(default=None, name="Record function id")  # joins the execution trace
    sequence: int | None = msgspec.field(default=None, name="Sequence number")  # autograd: forward ↔ backward
    fwd_tid: int | None = msgspec.field(default=None, name="Fwd thread id")


class _ExternalId(msgspec.Struct, gc=False):
    external_id: int | None = msgspec.field(default=None, name="External id")


_NULL = msgspec.Raw(b"null")


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float | None = None
    dur: float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: msgspec.Raw = _NULL


class _Device(msgspec.Struct, gc=False):
    id: int = 0
    name: str = ""
    numSms: int | None = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]
    deviceProperties: list[_Device] | None = None
    distributedInfo: dict[str, Any] | None = None


_DECODER = msgspec.json.Decoder(_Trace)
# strict=False: ROCm writes some numbers as strings (hipMemcpy*'s "bytes": "4096"); "4096" decodes to 4096,
# while a string that is no number is still refused
_ONE: dict[type, msgspec.json.Decoder[Any]] = {_Args: msgspec.json.Decoder(_Args | None, strict=False),
                                              _ExternalId: msgspec.json.Decoder(_ExternalId | None, strict=False)}
_MANY: dict[type, msgspec.json.Decoder[Any]] = {_Args: msgspec.json.Decoder(list[_Args | None], strict=False),
                                               _ExternalId: msgspec.json.Decoder(list[_ExternalId | None], strict=False)}


def _decode_args(e: _Event, decoder: msgspec.json.Decoder, path: Path) -> Any:
    try:
        return decoder.decode(e.args)
    except RecursionError:
        raise TraceFormatError(f"{path}: {e.cat} event {e.name[:60]!r} has args nested too deeply") from None
    except msgspec.ValidationError as exc:
        raise TraceFormatError(f"{path}: {e.cat} event {e.name[:60]!r} has malformed args ({exc})") from None


def _decode_all_args(events: list[_Event], kind: type, path: Path) -> list[Any]:
    """Every event's args in one decode of their joined bytes (a call per event costs as much again as
    the decoding); on a failure, event by event, to name the event at fault."""
    if not events:
        return []
    try:
        return _MANY[kind].decode(b"[" + b",".join(e.args for e in events) + b"]")  # type: ignore[no-any-return]
    except (RecursionError, msgspec.ValidationError, msgspec.DecodeError):
        return [_decode_args(e, _ONE[kind], path) for e in events]


@dataclass
class TraceTables:
    """One trace as tables (times in ns on the trace's clock). ``gpu`` holds kernels, memcpys and
    memsets; ``ops`` the CPU ops (with recorded shapes when ``record_shapes`` was on); ``launches``
    the runtime/driver calls; ``modules`` the ``nn.Module`` python events; ``annotations`` the
    ``record_function`` ranges (``ProfilerStep#N`` among them); ``autograd`` the runs of backward nodes
    (``autograd::engine::evaluate_function: …``, with the forward op's sequence number and thread);
    ``host_ops`` the ops with recorded shapes that launched nothing and called no other op (views,
    reshapes, splits: the op graph follows tensors through them; empty in a CPU-only trace, whose ``ops``
    hold every op)."""

    path: Path
    gpu: pd.DataFrame
    ops: pd.DataFrame
    launches: pd.DataFrame
    modules: pd.DataFrame
    annotations: pd.DataFrame
    autograd: pd.DataFrame
    host_ops: pd.DataFrame
    devices: dict[int, str]
    rank: int | None

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


def _decode(path: Path) -> _Trace:
    raw = read_bytes(path)
    try:
        return _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if "`$`" in text or "required field `traceEvents`" in text or text.endswith("at `$.traceEvents`"):
            raise TraceFormatError(f"{path}: no 'traceEvents' list; is this a torch.profiler Chrome trace?") from None
        raise TraceFormatError(f"{path}: not a torch.profiler trace: {text}") from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: not valid JSON ({exc}); truncated?") from None
    except RecursionError:  # JSON nested hundreds deep: no profiler writes that
        raise TraceFormatError(f"{path}: JSON nested too deeply to be a torch.profiler trace") from None


_TEXT = ("name", "cat", "pid", "tid")  # object columns: an empty list would otherwise make floats


def _frame(rows: dict[str, list[Any]], path: Path) -> pd.DataFrame:
    frame = pd.DataFrame({k: pd.Series(v, dtype=object) if k in _TEXT else v
                          for k, v in rows.items() if k not in ("ts", "dur")}, index=pd.RangeIndex(len(rows["name"])))
    for column in ("ts", "dur"):
        values = np.array(rows[column], dtype="float64") if column in rows else np.empty(0)
        frame[f"{'start' if column == 'ts' else 'dur'}_ns"] = ns_from_us(values, path, column)
    return frame


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
        "name": [e.name for e in events], "cat": [e.cat if e.cat.islower() else e.cat.lower() for e in events],
        "ts": [e.ts for e in events], "dur": [e.dur for e in events],
        **{key: [getattr(a, key) for a in present] for key in _GPU_ARGS[:4]},
        "grid": [",".join(map(str, a.grid)) if a.grid else None for a in present],
        "block": [",".join(map(str, a.block)) if a.block else None for a in present],
        **{key: [getattr(a, key) for a in present] for key in _GPU_ARGS[4:]}}
    frame = _frame(cols, path)
    for key in ("stream", "device", "correlation", "external_id", "registers", "shared", "bytes", "in_nelems",
                "group_size", "seq"):
        huge = [i for i, v in enumerate(cols[key]) if isinstance(v, int) and not -(2**63) <= v < 2**63]
        if huge:
            raise TraceFormatError(f"{path}: GPU event {huge[0]} ({cols['name'][huge[0]][:60]!r}) has an args.{key} "
                                   "beyond a 64-bit integer")
        frame[key] = frame[key].astype("Int64")
    return _unique(frame, path)


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


def _timed_rows(events: list[_Event], path: Path, extra: tuple[str, ...] = (),
                args: list[_Args | None] | None = None) -> pd.DataFrame:
    present = [a or _Args() for a in args] if args is not None else [_Args()] * len(events)
    cols: dict[str, list[Any]] = {
        "name": [e.name for e in events], "ts": [e.ts if e.ts is not None else np.nan for e in events],
        "dur": [e.dur if e.dur is not None else 0.0 for e in events], "pid": [str(e.pid) for e in events],
        "tid": [str(e.tid) for e in events], **{key: [getattr(a, key) for a in present] for key in extra}}
    return _frame(cols, path)


def _host_leaves(ops: list[_Event], launched: list[bool]) -> list[_Event]:
    """The ops that launched nothing and called no other op (views, reshapes, factories: what the op graph
    follows tensors through), in start order per thread."""
    by_thread: dict[Any, list[int]] = {}
    for i, e in enumerate(ops):
        by_thread.setdefault(e.tid, []).append(i)
    leaves = []
    for indices in by_thread.values():
        indices.sort(key=lambda i: (ops[i].ts or 0.0, -(ops[i].dur or 0.0)))
        for here, after in zip(indices, [*indices[1:], None]):
            e = ops[here]
            nested = after is not None and (ops[after].ts or 0.0) < (e.ts or 0.0) + (e.dur or 0.0)
            if not launched[here] and not nested and not e.name.startswith(AUTOGRAD_FUNCTION):
                leaves.append(e)
    return leaves


def read_trace_tables(path: Path) -> TraceTables:
    """Decode ``path`` (``.json`` or ``.json.gz``) into ``TraceTables``."""
    trace = _decode(path)
    by_kind: dict[str, list[_Event]] = {"gpu": [], "ops": [], "launches": [], "modules": [], "annotations": []}
    for e in trace.traceEvents:
        if e.ph != "X":
            continue
        cat = e.cat if e.cat.islower() else e.cat.lower()  # "Kernel" from a hand-edited or foreign writer
        if cat in GPU_CATEGORIES:
            by_kind["gpu"].append(e)
        elif cat == "cpu_op":
            by_kind["ops"].append(e)
        elif cat in LAUNCH_CATEGORIES:
            by_kind["launches"].append(e)
        elif cat == "python_function" and e.name.startswith("nn.Module: "):
            by_kind["modules"].append(e)
        elif cat == "user_annotation":
            by_kind["annotations"].append(e)
    for kind in ("ops", "launches", "modules", "annotations"):
        missing = next((i for i, e in enumerate(by_kind[kind]) if e.ts is None), None)
        if missing is not None:
            raise TraceFormatError(f"{path}: a {kind[:-1]} event ({by_kind[kind][missing].name[:60]!r}) has no ts")
    gpu_args = _decode_all_args(by_kind["gpu"], _Args, path)
    launch_args = _decode_all_args(by_kind["launches"], _Args, path)
    gpu = _gpu_rows(by_kind["gpu"], gpu_args, path)
    autograd = [e for e in by_kind["ops"] if e.name.startswith(AUTOGRAD_FUNCTION)]
    host: list[_Event] = []
    if by_kind["gpu"]:  # only the ops that launched GPU work are joined; a CPU-only trace keeps them all
        launched = {a.external_id for a in gpu_args + launch_args if a is not None}
        ids = _decode_all_args(by_kind["ops"], _ExternalId, path)
        kept = [x is not None and x.external_id in launched for x in ids]
        host = _host_leaves(by_kind["ops"], kept)
        by_kind["ops"] = [e for e, k in zip(by_kind["ops"], kept) if k]
    op_args = _decode_all_args(by_kind["ops"], _Args, path)
    host_args = _decode_all_args(host, _Args, path)
    shaped = [i for i, a in enumerate(host_args) if a is not None and a.input_dims]
    devices = {d.id: d.name for d in trace.deviceProperties or []}
    rank = (trace.distributedInfo or {}).get("rank")
    return TraceTables(
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
        devices=devices,
        rank=int(rank) if isinstance(rank, int) else None,
    )
