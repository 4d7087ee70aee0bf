"""Fusion opportunities in a whole-model trace: chains of memory-bound kernels between compute
anchors, grouped by signature and ranked by what one fused kernel would save.

Per stream and profiler step, a *chain* is a maximal run of two or more consecutive kernels that
are not anchors (the op registry's role: GEMM, convolution, attention and communication families, by op or
kernel name whatever the vendor; memcpys and memsets end a chain too).
Chains with the same op sequence (the signature; shapes aside, so the RMSNorm of every layer and
step is one group) form one opportunity ×N. For each group:

    measured_ns        = Σ kernel durations of its chains
    chain_bytes        = Σ analytic bytes of its ops (fuseprof.model.op_models; each op reads its
                         inputs and writes its output)
    fused_bytes        = the chain's external inputs read once + its outputs written once, by
                         following tensor shapes and dtypes through the chain (an input whose shape
                         and dtype an earlier op of the chain produced is internal; one op takes each
                         producer once: in silu(gate) · up, ``up`` is external). A trace records
                         no tensor identities, so an intermediate also used after the chain (a
                         residual stream) is not counted: a lower bound.
    predicted_fused_ns = fused_bytes / copy rate + fixed cost of one kernel (``CopyModel``: fitted to
                         the same-bytes copies of the newest ``fuseprof bench`` bundle at hand —
                         4.31 TB/s + 2.95 µs on the H200 here — else the roof's DRAM rate and the
                         trace's floor per kernel, the 10th percentile of its kernel durations)
    saving_ns          = measured_ns − count · predicted_fused_ns
    share_of_busy_pct  = saving_ns / GPU busy time;  share_of_span_pct = saving_ns / trace span
                         (Amdahl: the end-to-end gain if the GPU is on the critical path)
    launches_saved     = count · (kernels per chain − 1), host_launch_ns_saved = that × the median
                         host time of a launch call (what a host-bound run gains instead)
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fuseprof.model.op_models import DTYPE_BYTES
from fuseprof.model.op_registry import estimate
from fuseprof.parse.names import short_kernel_name

_WRITE_ONLY_FIRST = ("aten::copy_", "aten::fill_", "aten::zero_", "aten::index_copy_")  # first argument: written only
_GATHERS = ("aten::index_select", "aten::embedding", "aten::gather")  # read only the rows they gather


@dataclass(frozen=True)
class CopyModel:
    """Time to move ``bytes`` through DRAM in one kernel: bytes / rate + fixed."""

    bytes_per_s: float
    fixed_ns: float
    source: str

    def time_ns(self, nbytes: float | pd.Series) -> float | pd.Series:
        return nbytes / self.bytes_per_s * 1e9 + self.fixed_ns


def copy_model_from_bench(timings: pd.DataFrame, min_bytes: float = 2e7) -> CopyModel | None:
    """A least-squares line through the fastest same-bytes copy of each shape of the newest bench
    bundle in ``timings`` (copies of at least ``min_bytes``: smaller ones measure launch latency)."""
    copies = timings[timings["variant"].str.startswith("copy") & timings["gpu_median_ns"].notna()]
    if copies.empty:
        return None
    # a bench bundle when there is one (a capture's --copy-baseline copies cover a few shapes only),
    # the newest by the capture time that ends its name (not by the whole name: "decoder…" > "bench…")
    benches = copies[copies["bundle"].str.startswith("bench-")]
    copies = benches if not benches.empty else copies
    newest = max(copies["bundle"].unique(), key=lambda name: re.findall(r"\d{8}t\d{6}z", name)[-1:])
    copies = copies[copies["bundle"] == newest]
    copies = copies.groupby(["case", "shape"]).agg(b=("nominal_bytes", "first"), ns=("gpu_median_ns", "min"))
    copies = copies[copies["b"] >= min_bytes]
    if len(copies) < 2:
        return None
    design = np.vstack([copies["b"].astype(float), np.ones(len(copies))]).T
    (slope, intercept), *_ = np.linalg.lstsq(design, copies["ns"].astype(float).to_numpy(), rcond=None)
    return CopyModel(1e9 / slope, float(intercept), f"fit to {len(copies)} same-bytes copies")


@dataclass(frozen=True)
class KnownFusion:
    """A kernel that already fuses chains whose signature matches ``pattern`` (a regex over the
    op names joined by ' → ')."""

    pattern: str
    kernel: str


# Checked in order; a user appends rows for their own kernels.
KNOWN_FUSIONS: list[KnownFusion] = [
    KnownFusion(r"aten::add → .*aten::pow → aten::mean → .*aten::rsqrt", "fuseprof add_rms_norm (kernels/add_rms_norm); "
                                                                        "Liger LigerFusedAddRMSNorm; torch.compile"),
    KnownFusion(r"aten::pow → aten::mean → .*aten::rsqrt", "fuseprof rmsnorm_swiglu's norm (kernels/rmsnorm_swiglu); "
                                                          "Liger LigerRMSNorm; torch.compile"),
    KnownFusion(r"aten::silu → aten::mul|aten::sigmoid → aten::mul → aten::mul", "fuseprof silu_mul "
                                                                               "(kernels/silu_mul); Liger swiglu"),
    KnownFusion(r"aten::neg → aten::cat → aten::mul → aten::add", "Liger liger_rotary_pos_emb; torch.compile"),
]


def known_fusion(signature: str) -> str:
    for row in KNOWN_FUSIONS:
        if re.search(row.pattern, signature):
            return row.kernel
    return "torch.compile"


def _shape_key(dims: object, dtype: object) -> tuple[str, str] | None:
    """(shape, dtype) of a tensor input; None for scalars (a Python float is recorded as 'double', [])."""
    if not isinstance(dims, list) or not dims or not all(isinstance(d, int) for d in dims) or dtype not in DTYPE_BYTES:
        return None
    return str(dims), str(dtype)


def _nbytes(dims: list[int], dtype: str) -> int:
    return math.prod(dims) * DTYPE_BYTES[dtype]


_FUSED_BYTES: dict[str, float] = {}


def fused_bytes(ops: Sequence[tuple[str, object, object, object]]) -> float:
    """External inputs read once plus outputs written once, for ops (name, input dims, input types)
    in chain order; see the module docstring for the shape-and-dtype dataflow it assumes. Memoised on
    the chain's text: every decoder layer and step repeats the same few chains."""
    key = repr(ops)
    if key not in _FUSED_BYTES:
        if len(_FUSED_BYTES) > 100_000:
            _FUSED_BYTES.clear()
        _FUSED_BYTES[key] = _fused_bytes(ops)
    return _FUSED_BYTES[key]


def _fused_bytes(ops: Sequence[tuple[str, object, object, object]]) -> float:
    produced: Counter[tuple[str, str]] = Counter()  # producers of each (shape, dtype) so far
    total = 0.0
    last_out = 0.0
    for name, dims, types, concrete in ops:
        if not isinstance(dims, list) or not isinstance(types, list):
            continue
        tensors = [(d, t) for d, t in zip(dims, types) if _shape_key(d, t) is not None]
        if not tensors:
            continue
        inputs = tensors[1:] if name in _WRITE_ONLY_FIRST else tensors
        gathered = estimate(name, dims, types, concrete) if name in _GATHERS else None
        if gathered is not None:
            total += gathered.bytes / 2  # the model's read half: indices and gathered rows
        else:
            used: Counter[tuple[str, str]] = Counter()
            for d, t in inputs:
                key = (str(d), str(t))  # what _shape_key gives a tensor input
                used[key] += 1
                if used[key] > produced[key]:  # no producer of it left for this op: read from DRAM
                    total += _nbytes(d, t)
        if name == "aten::index_copy_" and len(tensors) >= 2:  # writes its source's slice into a cache
            out_dims, out_type = tensors[-1]
            total += _nbytes(out_dims, out_type)
            continue
        shapes = [d for d, _ in tensors]
        rank = max(len(s) for s in shapes)
        out = [max(s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0) for i in range(rank)]
        if name in ("aten::mean", "aten::sum", "aten::amax") and out:
            out = out[:-1] + [1]
        out_type = tensors[0][1]
        produced[(str(out), str(out_type))] += 1
        last_out = _nbytes(out, out_type)
    return total + last_out


def gap_limit_ns(events: pd.DataFrame) -> float:
    """The idle gap a chain may not span: 5 × the larger of the trace's median kernel duration and its
    median gap between consecutive kernels on one stream (a host-bound decode launches with gaps of a
    few µs, which a fused kernel would remove; a 55 ms pause between decode steps is no chain)."""
    kernels = events[events["kind"] == "kernel"].sort_values("start_ns", kind="stable")
    ends = kernels["start_ns"] + kernels["dur_ns"]
    gaps = (kernels["start_ns"] - ends.groupby(kernels["stream"].astype("string")).shift()).dropna()
    typical = max(float(kernels["dur_ns"].median()) if len(kernels) else 0.0,
                  float(gaps[gaps > 0].median()) if (gaps > 0).any() else 0.0)
    return 5 * typical


def _breaks(events: pd.DataFrame) -> np.ndarray:
    """Events no chain may hold: anchors (the op registry's role), copies and memsets, and graph-replayed
    kernels whose op is unknown (no capture trace)."""
    unattributed_graph = events["graph_replay"].notna() & events["op"].isna() if "graph_replay" in events \
        else pd.Series(False, index=events.index)
    return ((events["role"] == "anchor") | (events["kind"] != "kernel") | unattributed_graph).to_numpy(bool)


def per_stream(events: pd.DataFrame) -> Iterator[pd.DataFrame]:
    """Each stream's events in start order (events on no stream left out): what the pair and epilogue
    searches walk."""
    ordered = events.sort_values("start_ns", kind="stable")
    for _, part in ordered.groupby(ordered["stream"].astype("string")):
        yield part


def stream_step_order(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Row positions per (stream, profiler step), the groups in order of their first kernel and each in
    start order (the order a chain is read in), and each position's group code."""
    step = events["profiler_step"] if "profiler_step" in events else events["step"]
    group = events["stream"].astype("string").fillna("?") + "\x1f" + step.astype("string").fillna("")
    by_start = np.argsort(events["start_ns"].to_numpy(np.int64), kind="stable")
    codes, _ = pd.factorize(group.to_numpy(object)[by_start])
    return by_start[np.argsort(codes, kind="stable")], np.sort(codes, kind="stable")


def _runs(events: pd.DataFrame, order: np.ndarray, codes: np.ndarray, limit: float) -> list[np.ndarray]:
    """Maximal runs (positions into ``order``) of ≥ 2 non-breaking kernels in one group with no gap over
    ``limit`` between one event's end and the next one's start."""
    start = events["start_ns"].to_numpy(np.int64)[order]
    end = start + events["dur_ns"].to_numpy(np.int64)[order]
    stop = _breaks(events)[order]
    first = np.r_[True, codes[1:] != codes[:-1]] if len(codes) else np.zeros(0, bool)
    gap = np.r_[0, start[1:] - end[:-1]] if len(codes) else np.zeros(0, np.int64)
    opens = ~stop & (first | (gap > limit) | np.r_[False, stop[:-1]][: len(stop)])
    kept = np.flatnonzero(~stop)
    run = np.cumsum(opens)[kept]
    _, begin, count = np.unique(run, return_index=True, return_counts=True)
    return [kept[b:b + c] for b, c in zip(begin, count) if c >= 2]


def find_chains(events: pd.DataFrame) -> pd.DataFrame:
    """One row per chain: a maximal run of ≥ 2 consecutive fusible kernels on one stream, inside one
    profiler step (or the user's outermost range), with no idle gap over ``gap_limit_ns`` inside it.
    Columns: stream, step, key (the ops, '?kernel' where the trace did not link one), signature, kernels,
    measured_ns, chain_bytes, fused_bytes, module, start_ns and members (the events' index labels)."""
    order, codes = stream_step_order(events)
    runs = _runs(events, order, codes, gap_limit_ns(events))
    if not runs:
        return pd.DataFrame()
    rows = events.iloc[order]
    step = rows["profiler_step"] if "profiler_step" in rows else rows["step"]
    columns = {"op": [None if pd.isna(v) else str(v) for v in rows["op"]],
               "name": rows["name"].tolist(), "dims": rows["input_dims"].tolist(),
               "types": rows["input_type"].tolist(), "concrete": rows["concrete"].tolist(),
               "dur": rows["dur_ns"].tolist(), "start": rows["start_ns"].tolist(), "module": rows["module"].tolist(),
               "label": rows.index.tolist(), "stream": rows["stream"].astype("string").fillna("?").tolist(),
               "step": step.astype("string").fillna("").tolist()}
    return pd.DataFrame([_chain(columns, run) for run in runs])


def _chain(columns: dict[str, list[Any]], run: np.ndarray) -> dict[str, object]:
    ops = [columns["op"][i] for i in run]
    short = [short_kernel_name(str(columns["name"][i])) for i in run]
    inputs = [(op or "", columns["dims"][i], columns["types"][i], columns["concrete"][i]) for op, i in zip(ops, run)]
    analytic = [estimate(*call) for call in inputs]
    known = all(a is not None for a in analytic)  # one op without a model: the chain's bytes are unknown
    chain_bytes = float(sum(a.bytes for a in analytic if a)) if known else np.nan
    first = int(run[0])
    return {"stream": str(columns["stream"][first]), "step": str(columns["step"][first]),
            "key": " → ".join(op if op is not None else f"?{s}" for op, s in zip(ops, short)),
            "signature": " → ".join(op if op is not None else s for op, s in zip(ops, short)), "kernels": len(run),
            "measured_ns": int(sum(int(columns["dur"][i]) for i in run)), "chain_bytes": chain_bytes,
            "fused_bytes": min(fused_bytes(inputs), chain_bytes) if known else np.nan,
            "module": columns["module"][first], "start_ns": int(columns["start"][first]),
            "members": [columns["label"][i] for i in run]}


def kernel_floor_ns(events: pd.DataFrame) -> float:
    """The least a kernel costs on the trace's GPU: the 10th percentile of its kernel durations."""
    return float(events.loc[events["kind"] == "kernel", "dur_ns"].quantile(0.10))


def linked_keys(chains: pd.DataFrame, events: pd.DataFrame) -> pd.Series:
    """Each chain's op sequence, an unlinked kernel named by the op that launches that kernel elsewhere
    in the trace: chains equal up to how well the trace linked them to ops are one group."""
    linked = events[events["op"].notna()]
    op_of = linked.groupby(linked["name"].map(short_kernel_name))["op"].agg(lambda v: v.value_counts().index[0])
    return chains["key"].map(lambda key: " → ".join(
        str(op_of.get(k[1:], k[1:])) if k.startswith("?") else k for k in key.split(" → ")))


def _label(signatures: pd.Series) -> str:
    """The group's name: the signature with the most ops linked (a chain the trace linked fully)."""
    return max(signatures, key=lambda s: (s.count("::"), s))


def chain_groups(events: pd.DataFrame, copy: CopyModel, taken: set[object] = frozenset()) -> pd.DataFrame:  # type: ignore[assignment]
    """Chains grouped by their op sequence (equal up to linking) with bytes and predicted fused time
    (columns in the module docstring); chains holding an event of ``taken`` (claimed by another class,
    e.g. eager attention) are left out. Groups whose bytes are unknown have no prediction."""
    chains = find_chains(events)
    if chains.empty:
        return chains
    chains = chains[[not (set(m) & taken) for m in chains["members"]]]
    if chains.empty:
        return pd.DataFrame()
    chains = chains.assign(key=linked_keys(chains, events))
    groups = chains.groupby("key", sort=False).agg(
        signature=("signature", _label), count=("measured_ns", "size"), kernels_per_chain=("kernels", "first"),
        measured_ns=("measured_ns", "sum"), chain_bytes=("chain_bytes", lambda v: v.sum(min_count=len(v))),
        fused_bytes=("fused_bytes", lambda v: v.sum(min_count=len(v))), module=("module", "first"),
        members=("members", lambda m: [x for ms in m for x in ms]))
    groups["predicted_fused_ns"] = groups["fused_bytes"] / copy.bytes_per_s * 1e9 + groups["count"] * copy.fixed_ns
    groups["class"] = [chain_class(s) for s in groups.index]
    groups["known_fusion"] = [known_fusion(s) for s in groups["signature"]]
    return groups.reset_index()


def chain_class(key: str) -> str:
    """The kind of memory-bound chain, from its ops: RoPE with a KV-cache write, a sampling chain, or
    a plain one."""
    ops = set(key.split(" → "))
    if {"aten::neg", "aten::cat"} <= ops and ops & {"aten::index_copy_", "aten::index_put_", "aten::copy_"}:
        return "RoPE + KV-cache write"
    if ops & {"aten::argmax", "aten::topk", "aten::multinomial", "aten::sort"}:
        return "sampling chain"
    return "memory-bound chain"


def prediction_check(timings: pd.DataFrame, copy: CopyModel, fused: str = "fused_cuda") -> pd.DataFrame:
    """The finder's time model on the chains ``kernels/`` already fuses, whose fused bytes are known
    exactly (each case's byte model): predicted against the measured fused kernel, per case and shape."""
    rows = timings[(timings["variant"] == fused) & timings["gpu_median_ns"].notna()].copy()
    rows["m"] = rows["shape"].str.split("x").str[0].astype(int)
    predicted = copy.time_ns(rows["nominal_bytes"].astype(float))
    measured = rows["gpu_median_ns"].astype(float)
    return pd.DataFrame({"case": rows["case"], "shape": rows["shape"], "m": rows["m"],
                         "nominal_bytes": rows["nominal_bytes"], "predicted_ns": predicted, "measured_ns": measured,
                         "error_pct": 100 * (predicted - measured) / measured}).reset_index(drop=True)
