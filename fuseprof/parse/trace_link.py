"""One row per GPU event, linked to what launched it: the runtime call (by ``correlation``), the CPU
op (by ``External id``, the kernel's own or its launch call's: Triton launches carry it only on the
call), the ``nn.Module`` path and the ``record_function`` range (a profiler step) around that op.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import numpy as np
import pandas as pd

from fuseprof.parse.nesting import around, around_times, innermost
from fuseprof.parse.trace_events import GRAPH_CALL, TraceTables

_KIND = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def enclosing(spans: pd.DataFrame, points: pd.DataFrame, joiner: str | None, outermost: bool = False) -> pd.Series:
    """For each point (``start_ns``, ``tid``), the names of the spans (``start_ns``, ``dur_ns``,
    ``name``, ``tid``) around it on the same thread: outermost first, joined by ``joiner``, or
    only the innermost (the outermost with ``outermost``) when ``joiner`` is None. Null where none
    encloses it."""
    if spans.empty or points.empty:
        return pd.Series(pd.NA, index=points.index, dtype="string")
    by_thread: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for s, d, n, t in zip(spans["start_ns"].tolist(), spans["dur_ns"].tolist(), spans["name"].tolist(),
                          spans["tid"].tolist()):
        by_thread[t].append((int(s), int(s) + int(d), str(n)))
    # filled by position and made a column once: setting tens of thousands of labels into a string column one
    # list at a time cost more than the walk
    found = np.full(len(points), None, dtype=object)
    times = points["start_ns"].to_numpy()
    exact = times.dtype.kind == "i"  # integer times: one walk and one label per stretch between span edges
    starts = [] if exact else times.tolist()

    def label(live: list[str]) -> str | None:
        return None if not live else (live[0] if outermost else live[-1]) if joiner is None else joiner.join(live)

    for tid, positions in points.groupby("tid", sort=False).indices.items():
        intervals = by_thread.get(str(tid), [])
        if exact:
            at, lives = around_times(intervals, times[positions].astype(np.int64))
            labels = np.empty(len(lives), dtype=object)
            labels[:] = [label(live) for live in lives]
            found[positions] = labels[at]
        else:
            for k, live in around(intervals, ((starts[k], k) for k in positions.tolist())):
                found[k] = label(live)
    return pd.Series(found, index=points.index, dtype="string")


def matching(values: pd.Series, pattern: str | re.Pattern[str]) -> np.ndarray:
    """Per row, whether ``pattern`` (a regular expression, searched) matches its text; a missing value: no. Each
    distinct text is searched once: a trace repeats a few hundred names over tens of thousands of rows, where a
    pandas string search runs once per row."""
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    codes, distinct = pd.factorize(values.to_numpy(object))
    hits = np.fromiter((compiled.search(str(v)) is not None for v in distinct), bool, len(distinct))
    return (hits[codes] & (codes >= 0)) if len(distinct) else np.zeros(len(values), bool)


def named(frame: pd.DataFrame, *patterns: str) -> np.ndarray:
    """Per row, whether any of ``patterns`` (regular expressions, searched) matches its ``name``; none when no
    pattern is given."""
    patterns = tuple(p for p in patterns if p)
    if not patterns or frame.empty:
        return np.zeros(len(frame), bool)
    return matching(frame["name"], "|".join(f"(?:{p})" for p in patterns))


def rows_named(frame: pd.DataFrame, *patterns: str) -> pd.DataFrame:
    """The rows whose ``name`` any of ``patterns`` matches (``named``). The mask is a boolean array: an empty
    frame's stays a frame, not a column selection."""
    return frame[named(frame, *patterns)] if any(patterns) and len(frame) else frame.iloc[:0]


def numbered(spans: pd.DataFrame) -> pd.DataFrame:
    """Spans whose name occurs more than once get ' #k' (k-th in time order): 'decode_step #3'."""
    if spans.empty:
        return spans
    ordered = spans.sort_values("start_ns", kind="stable")
    names = ordered["name"].tolist()
    counts = Counter(n for n in names if isinstance(n, str))
    seen: dict[str, int] = defaultdict(int)
    out = []
    for name in names:  # a missing name stays missing
        if isinstance(name, str) and counts[name] > 1:
            out.append(f"{name} #{seen[name]}")
            seen[name] += 1
        else:
            out.append(name)
    return ordered.assign(name=pd.Series(out, index=ordered.index, dtype=ordered["name"].dtype))


def _exact(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its integer times nullable, so that a reindex that finds no row for a label leaves them
    integers: as floats, times of a clock in µs since the epoch (1.7e18 ns) would move by up to 128 ns."""
    ints = [c for c in frame.columns if str(c).endswith("_ns") and frame[c].dtype == np.int64]
    return frame.astype(dict.fromkeys(ints, "Int64")) if ints else frame


# the columns of the ops and launch calls a GPU event takes (``link_gpu_events``): selected before the joins, which
# otherwise made nullable and reindexed every column of the tables (~2 ms of a generated rank's ~15)
_OP_COLUMNS = ["name", "tid", "external_id", "input_dims", "input_type", "concrete", "start_ns", "dur_ns"]
_LAUNCH_COLUMNS = ["name", "tid", "external_id", "start_ns", "dur_ns"]


def _launching_ops(ops: pd.DataFrame, gpu: pd.DataFrame, external: pd.Series) -> pd.DataFrame:
    """Per GPU event, the CPU op that launched it (rows of ``ops`` aligned with ``gpu``, with ``linked_by``):
    the op its External id names where that op is around its launch call on the launch's thread; else the
    innermost op around the launch call in time (writers whose External ids are correlation ids, or collide:
    a memcpy's small id naming an ``aten::view``); else, with no launch call, the op its id names."""
    ops = _exact(ops[_OP_COLUMNS])  # the columns read here and by the caller: each step copies fewer
    by_id = ops.dropna(subset=["external_id"]).drop_duplicates("external_id", keep="last")
    label_of = pd.Series(by_id.index.to_numpy(), index=by_id["external_id"].astype("float64").to_numpy())
    labels = label_of.reindex(external.astype("float64").to_numpy()).to_numpy(dtype="float64")
    named = ops[["start_ns", "dur_ns", "tid"]].reindex(labels).reset_index(drop=True)
    launch = gpu["launch_start_ns"].astype("Int64").reset_index(drop=True)
    tid = pd.Series(gpu["tid"].to_numpy(), dtype=object).astype("string")
    start = named["start_ns"].astype("Int64")
    inside = ((start <= launch) & (launch <= start + named["dur_ns"].astype("Int64"))).fillna(False).to_numpy(bool)
    same_thread = (named["tid"].astype(object).astype(str).to_numpy() == tid.fillna("").to_numpy(str))
    around = inside & same_thread
    by_id_ok = ~np.isnan(labels) & (around | launch.isna().to_numpy())
    linked_by = np.array(["External id" if ok else None for ok in by_id_ok], dtype=object)
    labels = np.where(by_id_ok, labels, np.nan)
    todo = np.flatnonzero(~by_id_ok & launch.notna().to_numpy())
    for thread, part in pd.DataFrame({"t": launch.iloc[todo].to_numpy(np.int64), "tid": tid.iloc[todo].to_numpy(),
                                      "row": todo}).groupby("tid", sort=False):
        mine = ops[ops["tid"] == str(thread)]
        spans = list(zip(mine["start_ns"].tolist(), (mine["start_ns"] + mine["dur_ns"]).tolist(), mine.index))
        for row, label in innermost(spans, zip(part["t"].tolist(), part["row"].tolist())).items():
            labels[row], linked_by[row] = label, "time"
    rows = ops.reindex(labels).reset_index(drop=True)
    rows["linked_by"] = linked_by
    return rows


def _graph_calls(tables: TraceTables) -> pd.DataFrame:
    """Inductor's calls of a torch.compile'd graph (``GRAPH_CALL``): ranges in most torch versions, CPU ops in some
    (tests/fixtures/truth_unprofiled/h100/infer_compiled's). What launches inside one is the graph's work, a cuBLAS
    GEMM the graph calls as an extern kernel too."""
    columns = ["start_ns", "dur_ns", "name", "tid"]
    ranges = tables.annotations[tables.annotations["name"].astype(str).str.startswith(GRAPH_CALL)]
    return pd.concat([f[columns] for f in (ranges, tables.graph_calls) if not f.empty] or
                     [pd.DataFrame(columns=columns)], ignore_index=True)


def link_gpu_events(tables: TraceTables) -> pd.DataFrame:
    """The GPU events of ``tables`` with kind, launch call, CPU op (name, shapes, types),
    module path, enclosing ``record_function`` ranges and the outermost of them (``step``), and the Inductor graph
    call around the launching op (``graph_call``: its name, a range or a CPU op)."""
    gpu = tables.gpu.copy()
    gpu["kind"] = gpu["cat"].map(_KIND)  # communication kernels are the op registry's to name (analysis.events)
    launches = tables.launches[["correlation", *_LAUNCH_COLUMNS]].drop_duplicates("correlation").set_index("correlation")
    joined = _exact(launches).reindex(gpu["correlation"].astype("float64"))
    gpu["launch_api"] = joined["name"].to_numpy()
    gpu["launch_start_ns"] = pd.array(joined["start_ns"].array, dtype="Int64")
    gpu["launch_dur_ns"] = pd.array(joined["dur_ns"].array, dtype="Int64")
    gpu["tid"] = joined["tid"].to_numpy()
    external = gpu["external_id"].astype("Float64").fillna(pd.Series(joined["external_id"].to_numpy(),
                                                                     index=gpu.index, dtype="Float64"))
    op_rows = _launching_ops(tables.ops, gpu, external)
    gpu["op"] = pd.array(op_rows["name"].to_numpy(), dtype="string")
    gpu["op_start_ns"] = pd.array(op_rows["start_ns"].array, dtype="Int64")
    gpu["op_id"] = pd.array(op_rows["external_id"].to_numpy(), dtype="Int64")
    gpu["linked_by"] = pd.array(op_rows["linked_by"].to_numpy(), dtype="string")
    for column in ("input_dims", "input_type", "concrete"):
        gpu[column] = op_rows[column].to_numpy()
    gpu["tid"] = gpu["tid"].where(pd.notna(gpu["tid"]), op_rows["tid"].to_numpy())
    anchor = pd.DataFrame({"start_ns": gpu["op_start_ns"].fillna(gpu["launch_start_ns"]), "tid": gpu["tid"]})
    anchor = anchor.dropna()
    anchor["start_ns"] = anchor["start_ns"].astype(np.int64)
    modules = tables.modules.assign(name=tables.modules["name"].str.removeprefix("nn.Module: "))
    gpu["module"] = enclosing(modules, anchor, " / ").reindex(gpu.index)
    gpu["ranges"] = enclosing(tables.annotations, anchor, " / ").reindex(gpu.index)
    gpu["graph_call"] = enclosing(_graph_calls(tables), anchor, None).reindex(gpu.index)
    # the outermost range: ProfilerStep#N, or the user's own range (numbered when its name repeats)
    gpu["step"] = enclosing(numbered(tables.annotations), anchor, None, outermost=True).reindex(gpu.index)
    gpu["end_ns"] = gpu["start_ns"] + gpu["dur_ns"]
    return gpu.sort_values("start_ns", kind="stable").reset_index(drop=True)
