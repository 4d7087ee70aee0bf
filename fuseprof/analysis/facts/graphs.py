"""CUDA- and HIP-graph replays attributed to the ops that launched their kernels during capture.

A serving engine replays captured graphs: the execution trace holds one ``cudaGraphLaunch`` /
``hipGraphLaunch`` call per replay, and each kernel of the replay shares that call's correlation id
and has no op of its own. The engine's capture trace holds, between each ``*StreamBeginCapture`` and
``*StreamEndCapture``, the launch calls that built the graph, each with the ``External id`` of the op
that made it (and, on ROCm, the kernel's name). So the k-th kernel of a replay is the k-th launch of
the capture window it replays:

- a replay is matched to a window with as many nodes (kernel launches, and the asynchronous copies and
  fills captured among them), each of the same kind (a copy node replays as a memcpy) and, where the
  capture names its kernels (ROCm), the same kernel names in the same order; where several windows match (the identical layers
  of a piecewise graph), the n-th replay of that sequence takes the n-th matching window, cyclically;
- a CUDA capture trace names no kernels in its launch calls: there the match is by count only, and
  the result says so (``checked_by``).
The attributed kernel gets the capture op's name, shapes and module, and an ``op_id`` of its own per
replay (negative: ``-(replay · 10⁹ + capture External id)``), so the per-op tables count each replay
as one call.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pandas as pd

from fuseprof.model.intervals import grouped_in_start_order
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import enclosing, matching

GRAPH_LAUNCH = re.compile(r"GraphLaunch")
KERNEL_LAUNCH = re.compile(r"Launch\w*Kernel|LaunchKernelEx|LaunchCooperativeKernel")
# copies and fills captured into a graph are nodes of it too: a replay runs them among its kernels
GRAPH_NODE = re.compile(rf"{KERNEL_LAUNCH.pattern}|Memcpy\w*Async|Memset\w*Async|MemcpyPeerAsync")
REPLAY_ID_SCALE = 10**9


def is_graph_launch(api: pd.Series) -> pd.Series:
    return pd.Series(matching(api, GRAPH_LAUNCH), index=api.index, name=api.name)


def capture_numbers(thread: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """For one thread's runtime calls in start order: the number of the stream capture each call is
    in (0: none yet), and whether it is inside one (between ``*StreamBeginCapture`` and its end)."""
    begin = thread["name"].str.contains("StreamBeginCapture")
    end = thread["name"].str.contains("StreamEndCapture")
    number = begin.cumsum()
    return number, (number - end.shift(fill_value=False).cumsum()) > 0


def kernel_launches(calls: pd.DataFrame) -> pd.Series:
    """Which runtime/driver calls launch a kernel."""
    return pd.Series(matching(calls["name"], KERNEL_LAUNCH), index=calls.index, name="name")


def graph_nodes(calls: pd.DataFrame) -> pd.Series:
    """Which runtime/driver calls, made inside a stream capture, become a node of the graph (a kernel, an
    asynchronous copy or fill)."""
    return pd.Series(matching(calls["name"], GRAPH_NODE), index=calls.index, name="name")


def capture_windows(*captures: TraceTables) -> list[pd.DataFrame]:
    """The graph-node calls (kernel launches, asynchronous copies and fills) of each stream capture in the
    capture traces, in launch order, with the op (name, shapes, types, concrete inputs) and ``nn.Module``
    path that made each one. An engine that captures one graph per batch size in separate runs gives one
    capture trace per run: every one's windows are candidates for every replay."""
    return [w for capture in captures for w in _windows(capture)]


def _windows(capture: TraceTables) -> list[pd.DataFrame]:
    calls = capture.launches.sort_values("start_ns", kind="stable")
    windows: list[pd.DataFrame] = []
    for _, thread in calls.groupby("tid", sort=False):
        number, inside = capture_numbers(thread)
        launches = outermost(thread[graph_nodes(thread) & inside])
        for _, part in launches.groupby(number[launches.index], sort=True):
            windows.append(_with_ops(part, capture))
    return windows


def outermost(calls: pd.DataFrame) -> pd.DataFrame:
    """One row per launch: a driver call nested in a runtime call (cudaLaunchKernelExC around
    cuLaunchKernelEx) is the same launch."""
    if calls.empty:
        return calls
    ends = (calls["start_ns"] + calls["dur_ns"]).cummax().shift(fill_value=np.iinfo(np.int64).min)
    return calls[calls["start_ns"] >= ends]


def _with_ops(launches: pd.DataFrame, capture: TraceTables) -> pd.DataFrame:
    ops = capture.ops.dropna(subset=["external_id"]).drop_duplicates("external_id", keep="last")
    ops = ops.set_index(ops["external_id"].astype("float64"))
    op_rows = ops.reindex(launches["external_id"].astype("float64").to_numpy())
    api = launches["name"].astype(str)
    node = np.where(api.str.contains("Memcpy"), "memcpy", np.where(api.str.contains("Memset"), "memset", "kernel"))
    out = pd.DataFrame({"kernel": launches["kernel"].to_numpy(), "node": node,
                        "external_id": launches["external_id"].to_numpy(),
                        "op": op_rows["name"].to_numpy(), "input_dims": op_rows["input_dims"].to_numpy(),
                        "input_type": op_rows["input_type"].to_numpy(), "concrete": op_rows["concrete"].to_numpy(),
                        "op_start_ns": op_rows["start_ns"].to_numpy(), "tid": launches["tid"].to_numpy()})
    anchor = pd.DataFrame({"start_ns": out["op_start_ns"].fillna(pd.Series(launches["start_ns"].to_numpy())),
                           "tid": out["tid"]}).astype({"start_ns": np.int64})
    modules = capture.modules.assign(name=capture.modules["name"].str.removeprefix("nn.Module: "))
    out["module"] = enclosing(modules, anchor, " / ").to_numpy()
    return out


def attribute_replays(events: pd.DataFrame, windows: list[pd.DataFrame]) -> tuple[pd.DataFrame, str]:
    """``events`` with each graph-replayed kernel given the op, shapes and module of its capture launch
    (columns ``graph_replay`` and ``graph_attributed`` added), and how replays were checked."""
    out = events.reset_index(drop=True)
    graph = is_graph_launch(out["launch_api"])
    columns = ("op", "input_dims", "input_type", "concrete", "module")
    filled = {c: out[c].astype(object).to_numpy(copy=True) for c in columns}
    op_id = out["op_id"].astype("Float64").to_numpy(dtype="float64", na_value=np.nan)
    replay_of = np.full(len(out), -1, dtype=np.int64)
    attributed = np.zeros(len(out), dtype=bool)
    # a ROCm capture names the kernel of each launch (a copy or fill node has none): the match checks them
    named = any(w["kernel"].notna().any() for w in windows)
    expected = [tuple(None if pd.isna(k) else k for k in w["kernel"]) for w in windows]
    node_kinds = [tuple(w["node"]) for w in windows]  # a copy node replays as a memcpy, in its place
    seen: dict[tuple[object, ...], int] = defaultdict(int)
    replays = _replays(out, graph)
    all_names, all_kinds = (list(out["name"]), list(out["kind"])) if replays else ([], [])  # read where some ran
    for number, rows in enumerate(replays, start=1):
        replay_of[rows] = number
        names, kinds = tuple(all_names[i] for i in rows), tuple(all_kinds[i] for i in rows)
        matches = [w for w, kernels, nodes in zip(windows, expected, node_kinds) if len(w) == len(names)
                   and nodes == kinds and all(k is None or k == n for k, n in zip(kernels, names))]
        if not matches:
            continue
        key = names if named else (len(names),)
        window = matches[seen[key] % len(matches)]
        seen[key] += 1
        for column in columns:
            filled[column][rows] = window[column].to_numpy(dtype=object)
        ext = pd.to_numeric(window["external_id"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
        op_id[rows] = -(number * REPLAY_ID_SCALE + ext)
        attributed[rows] = window["op"].notna().to_numpy()
    for column in columns:
        out[column] = filled[column]
    for column in ("op", "module"):
        out[column] = out[column].astype("string")
    out["op_id"] = pd.array(op_id, dtype="Float64").astype("Int64")
    out["graph_replay"] = pd.Series(replay_of, dtype="Int64").where(replay_of > 0)
    out["graph_attributed"] = attributed
    return out, "kernel names and order" if named else "kernel count and order (the CUDA capture names no kernels)"


def _replays(events: pd.DataFrame, graph: pd.Series) -> list[np.ndarray]:
    """The rows (positions) of each graph replay among ``events`` — the kernels of one ``cudaGraphLaunch``, rows
    that ``graph`` marks, by their correlation id — in start order (ties: the rows' order), the replays in order
    of their first start (ties: the order they first appear). One stable sort of the marked rows for all of them,
    not a group, a minimum and a sorted frame per replay (hta_torchrec's 70)."""
    rows = np.flatnonzero(graph)
    if not len(rows):
        return []
    codes = pd.factorize(events["correlation"].iloc[rows])[0]  # by first appearance; a missing id is no replay
    rows, codes = rows[codes >= 0], codes[codes >= 0]
    order, bounds = grouped_in_start_order(codes, events["start_ns"].to_numpy()[rows])
    rows = rows[order]
    parts = [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    earliest = events["start_ns"].to_numpy()[rows[bounds[:-1]]]  # each replay's first start, replays by code
    return [parts[k] for k in np.argsort(earliest, kind="stable")]


def is_capture_trace(tables: TraceTables) -> bool:
    """A trace taken while graphs were captured: stream-capture windows holding launch calls."""
    names = tables.launches["name"]
    return bool(matching(names, "StreamBeginCapture").any()) and bool(matching(names, KERNEL_LAUNCH).any())


def has_graph_replays(tables: TraceTables) -> bool:
    return bool(is_graph_launch(tables.launches["name"]).any())
