"""torch.profiler Chrome traces into kernel-frame rows, at nanosecond precision.

Built on the typed decoder (``fuseprof.parse.trace_events``) and the event linking of
``fuseprof.parse.trace_link``: kernels join their launch call by ``correlation`` (Triton's
``cuLaunchKernelEx`` launches have no ``External id`` on the kernel), the CPU op by ``External
id``, and the fuseprof range (variant and shape) by the ``record_function`` ranges around the op.
Memcpys and memsets are rows too (``kind``), never dropped.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from fuseprof.errors import FuseprofWarning
from fuseprof.parse.sources import PROFILER_SOURCE
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import enclosing, link_gpu_events
from fuseprof.ranges import first_range_label

_SEPARATOR = "\x1f"  # joins range names; never part of one


def _gpu_rows(tables: TraceTables) -> pd.DataFrame:
    events = link_gpu_events(tables)
    found = [first_range_label(r) for r in events["ranges"]]
    rows = pd.DataFrame({
        "kernel": events["name"], "kind": events["kind"].replace({"communication": "kernel"}),
        "variant": [f[0] if f else None for f in found], "shape": [f[1] if f else None for f in found],
        "duration_ns": events["dur_ns"], "start_ns": events["start_ns"], "grid": events["grid"],
        "block": events["block"], "registers_per_thread": events["registers"], "shared_mem_bytes": events["shared"],
        "stream": events["stream"], "device": events["device"].map(tables.device_name),
        "launch_api": events["launch_api"], "launch_api_ns": events["launch_dur_ns"],
        "launch_start_ns": events["launch_start_ns"], "cpu_op": events["op"], "step": events["step"]})
    rows["blocks"] = [_product(g) for g in events["grid"]]
    rows["threads_per_block"] = [_product(b) for b in events["block"]]
    return rows


def _product(dims: object) -> int | None:
    """'128,1,1' -> 128."""
    if not isinstance(dims, str):
        return None
    out = 1
    for d in dims.split(","):
        out *= int(d)
    return out


def _cpu_op_rows(tables: TraceTables) -> pd.DataFrame:
    """On a CPU-only capture there are no kernels: the ops directly inside each fuseprof range."""
    ops = tables.ops
    if ops.empty:
        return pd.DataFrame()
    points = ops[["start_ns", "tid"]]
    ranges = enclosing(tables.annotations, points, _SEPARATOR)
    nesting = enclosing(ops, points, _SEPARATOR).str.count(_SEPARATOR)  # 0: no op above this one
    found = [first_range_label(r, _SEPARATOR) for r in ranges]
    keep = pd.Series([f is not None for f in found], index=ops.index) & (nesting == 0)
    picked, labels = ops[keep], [f for f, k in zip(found, keep) if k and f is not None]
    return pd.DataFrame({"kernel": picked["name"], "kind": "cpu_op", "variant": [f[0] for f in labels],
                         "shape": [f[1] for f in labels], "duration_ns": picked["dur_ns"],
                         "start_ns": picked["start_ns"], "cpu_op": picked["name"], "device": "cpu"})


def kernel_rows(tables: TraceTables) -> pd.DataFrame:
    """One row per GPU kernel, memcpy and memset (or per top-level CPU op if there are none)."""
    frame = _gpu_rows(tables) if not tables.gpu.empty else _cpu_op_rows(tables)
    if frame.empty:
        return frame
    frame = frame.sort_values("start_ns", kind="stable").reset_index(drop=True)
    frame["invocation"] = frame.groupby(["variant", "shape", "kernel"], dropna=False).cumcount()
    frame["source"], frame["rank"] = PROFILER_SOURCE, tables.rank
    return frame


def read_chrome_trace(path: Path) -> pd.DataFrame:
    """The kernel rows of a trace, read through the trace store (``fuseprof.parse.store``): a trace that
    ``analyze`` or ``ingest`` has read before is not decoded again, and its decoding's warnings are shown."""
    from fuseprof.parse.store import default_store

    tables, said = default_store().tables(path)
    for text in said:
        warnings.warn(text, FuseprofWarning, stacklevel=2)
    return kernel_rows(tables)
