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

import re
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.aggregate import aggregate
from fuseprof.analysis.facts.modes import modes
from fuseprof.analysis.facts.opgraph import OpGraph
from fuseprof.model.dataflow import ShapeDataflow, infer_outputs, links_to_nothing, tensor_arguments
from fuseprof.model.registry import ChainClass, Registry
from fuseprof.model.value_key import value_key
from fuseprof.parse.names import short_kernel_name


@dataclass(frozen=True)
class CopyModel:
    """Time to move ``bytes`` through DRAM in one kernel: bytes / rate + fixed."""

    bytes_per_s: float
    fixed_ns: float
    source: str

    def time_ns(self, nbytes: float | pd.Series) -> float | pd.Series:
        return nbytes / self.bytes_per_s * 1e9 + self.fixed_ns


def within_peak(copy: CopyModel, peak_bytes_per_s: float, device: str) -> tuple[CopyModel, str | None]:
    """The copy model no faster than the device's peak DRAM rate (``peak_bytes_per_s``: its roof's), and a line
    saying so where it was: a predicted time may never imply more bandwidth than the card has. A rate above it (a
    bench of another GPU given with ``--ceilings``), or none above 0 (a fit's negative slope), is the peak; a negative fixed cost (a line fitted through
    copies that ended in L2) is none, since any fused kernel takes at least its bytes over the rate."""
    rate = copy.bytes_per_s if 0 < copy.bytes_per_s <= peak_bytes_per_s else peak_bytes_per_s
    fixed = max(copy.fixed_ns, 0.0)
    if (rate, fixed) == (copy.bytes_per_s, copy.fixed_ns) or not peak_bytes_per_s > 0:
        return copy, None
    wrong = f"above {device}'s peak" if copy.bytes_per_s > peak_bytes_per_s else "not a rate"
    said = [f"its rate {copy.bytes_per_s / 1e12:.2f} TB/s is {wrong}: priced at the peak, "
            f"{peak_bytes_per_s / 1e12:.2f} TB/s"] if rate != copy.bytes_per_s else []
    said += [f"its fixed cost {copy.fixed_ns:,.0f} ns is negative: 0"] if fixed > copy.fixed_ns else []
    return (CopyModel(rate, fixed, f"{copy.source}, bounded by {device}'s peak DRAM rate"),
            f"copy model ({copy.source}): {'; '.join(said)} (a predicted time never implies more bandwidth than "
            "the device's peak)")


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


_FUSED_BYTES: dict[tuple[bytes | str, str, str], float] = {}


Internal = Sequence[frozenset[int]]  # per op of a chain: its argument positions an op of the chain produced


def fused_bytes(ops: Sequence[tuple[str, object, object, object]], registry: Registry,
                internal: Internal | None = None) -> float:
    """External inputs read once plus outputs written once, for ops (name, input dims, input types,
    concrete inputs) in chain order. Which inputs an op of the chain produced: ``internal``, the op graph's
    edges among the chain's ops (the graph the audit reads: by the execution trace or the whole trace's shapes),
    else (an op the graph does not hold) the shape-and-dtype rule over the chain alone
    (``fuseprof.model.dataflow``). Memoised on the chain's text (``value_key``) and the registry:
    every decoder layer and step repeats the same few chains."""
    key = (value_key(ops), repr(internal), registry.fingerprint())
    if key not in _FUSED_BYTES:
        if len(_FUSED_BYTES) > 100_000:
            _FUSED_BYTES.clear()
        _FUSED_BYTES[key] = _fused_bytes(ops, registry, internal)
    return _FUSED_BYTES[key]


def _fused_bytes(ops: Sequence[tuple[str, object, object, object]], registry: Registry,
                 internal: Internal | None) -> float:
    flow = ShapeDataflow()
    total = 0.0
    last_out = 0.0
    for node, (name, dims, types, concrete) in enumerate(ops):
        arguments = tensor_arguments(dims, types)
        tensors = [v for v in arguments if v is not None]
        if not tensors:
            continue
        role = registry.role(name)
        skip = [links_to_nothing(role, i) for i in range(len(arguments))]
        links: Sequence[object | None] = flow.link(arguments, skip, role.reduces) if internal is None else [
            True if i in internal[node] else None for i in range(len(arguments))]
        gathered = registry.estimate(name, dims, types, concrete) if role.gathers else None
        if gathered is not None:
            total += gathered.bytes / 2  # the model's read half: indices and gathered rows
        else:  # what no op of the chain produced is read from DRAM
            total += sum(v.nbytes for v, link, written in zip(arguments, links, skip)
                         if v is not None and link is None and not written)
        if role.first_argument == "indexed write" and len(tensors) >= 2:  # its source's rows, into a cache
            total += tensors[-1].nbytes
            continue
        outputs = infer_outputs(role, arguments)
        flow.produce(node, outputs)
        last_out = outputs[0].nbytes if outputs else last_out
    return total + last_out


def gap_limit_ns(events: pd.DataFrame) -> float:
    """The idle gap a chain may not span: 5 × the larger of the trace's median kernel duration and its
    median gap between consecutive kernels on one stream (a host-bound decode launches with gaps of a
    few µs, which a fused kernel would remove; a 55 ms pause between decode steps is no chain). On arrays: a
    frame filtered and grouped cost a millisecond whatever its rows; the gaps are floats, as a grouped shift (NaN
    for each stream's first kernel) made them, of integer differences (absolute times as floats are 256 ns apart on
    a clock of µs since the epoch)."""
    kernel = (events["kind"] == "kernel").to_numpy(bool)
    start, dur = events["start_ns"].to_numpy(np.int64)[kernel], events["dur_ns"].to_numpy(np.int64)[kernel]
    order = np.argsort(start, kind="stable")
    start, dur = start[order], dur[order]
    stream = pd.factorize(events["stream"].astype("string").to_numpy()[kernel][order])[0]  # -1: no stream
    by_stream = np.lexsort((np.arange(len(stream)), stream))
    same = stream[by_stream][1:] == stream[by_stream][:-1]
    later, earlier = by_stream[1:][same], by_stream[:-1][same]
    gaps = (start[later] - (start[earlier] + dur[earlier])).astype(np.float64)  # differenced as integers: exact
    gaps = gaps[(stream[later] >= 0) & (gaps > 0)]
    typical = max(float(np.median(dur)) if len(dur) else 0.0, float(np.median(gaps)) if len(gaps) else 0.0)
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


def find_chains(events: pd.DataFrame, registry: Registry, graph: OpGraph | None = None) -> pd.DataFrame:
    """One row per chain: a maximal run of ≥ 2 consecutive fusible kernels on one stream, inside one
    profiler step (or the user's outermost range), with no idle gap over ``gap_limit_ns`` inside it.
    Columns: stream, step, key (the ops, '?kernel' where the trace did not link one), signature, kernels,
    measured_ns, chain_bytes, fused_bytes (by ``graph``'s edges among the chain's ops, where given: the op graph
    the audit reads, one dataflow pass for both),
    module, start_ns and members (the events' index labels)."""
    order, codes = stream_step_order(events)
    runs = _runs(events, order, codes, gap_limit_ns(events))
    if not runs:
        return pd.DataFrame()
    rows = events.iloc[order]
    step = rows["profiler_step"] if "profiler_step" in rows else rows["step"]
    columns = {"op": [None if pd.isna(v) else str(v) for v in rows["op"].tolist()],
               "name": rows["name"].tolist(), "dims": rows["input_dims"].tolist(),
               "types": rows["input_type"].tolist(), "concrete": rows["concrete"].tolist(),
               "dur": rows["dur_ns"].tolist(), "start": rows["start_ns"].tolist(), "module": rows["module"].tolist(),
               "label": rows.index.tolist(), "stream": rows["stream"].astype("string").fillna("?").tolist(),
               "step": step.astype("string").fillna("").tolist(),
               "op_id": rows["op_id"].astype("Float64").to_numpy(dtype="float64", na_value=np.nan).tolist()}
    return pd.DataFrame([_chain(columns, run, registry, graph) for run in runs])


def _internal(op_ids: list[float], graph: OpGraph) -> Internal | None:
    """Per op of a chain, the arguments another op of the chain produced (the graph's edges); None when an op
    has no id (not in the graph)."""
    if any(np.isnan(o) for o in op_ids):
        return None
    within = graph.within(int(o) for o in op_ids)
    return [frozenset(a for a, ps in within[int(o)].items() if any(p[0] != int(o) for p in ps)) for o in op_ids]


def _chain(columns: dict[str, list[Any]], run: np.ndarray, registry: Registry,
           graph: OpGraph | None) -> dict[str, object]:
    ops = [columns["op"][i] for i in run]
    short = [short_kernel_name(str(columns["name"][i])) for i in run]
    inputs = [(op or "", columns["dims"][i], columns["types"][i], columns["concrete"][i]) for op, i in zip(ops, run)]
    analytic = [registry.estimate(*call) for call in inputs]
    known = all(a is not None for a in analytic)  # one op without a model: the chain's bytes are unknown
    chain_bytes = float(sum(a.bytes for a in analytic if a)) if known else np.nan
    first = int(run[0])
    return {"stream": str(columns["stream"][first]), "step": str(columns["step"][first]),
            "key": " → ".join(op if op is not None else f"?{s}" for op, s in zip(ops, short)),
            "signature": " → ".join(op if op is not None else s for op, s in zip(ops, short)), "kernels": len(run),
            "measured_ns": int(sum(int(columns["dur"][i]) for i in run)), "chain_bytes": chain_bytes,
            "fused_bytes": min(fused_bytes(inputs, registry, _internal([columns["op_id"][i] for i in run], graph)
                                           if graph is not None else None), chain_bytes) if known else np.nan,
            "module": columns["module"][first], "start_ns": int(columns["start"][first]),
            "members": [columns["label"][i] for i in run]}


def kernel_floor_ns(events: pd.DataFrame) -> float:
    """The least a kernel costs on the trace's GPU: the 10th percentile of its kernel durations."""
    return float(events.loc[events["kind"] == "kernel", "dur_ns"].quantile(0.10))


def linked_keys(chains: pd.DataFrame, events: pd.DataFrame) -> pd.Series:
    """Each chain's op sequence, an unlinked kernel named by the op that launches that kernel elsewhere
    in the trace: chains equal up to how well the trace linked them to ops are one group. The ops per kernel name are
    worked out only where some chain holds an unlinked kernel (most traces link every chain's kernels: the trace's
    every linked kernel's name, shortened, and their modes, unread)."""
    op_of: pd.Series | dict[str, str] = {}
    if any(part.startswith("?") for key in chains["key"].tolist() for part in key.split(" → ")):
        linked = events[events["op"].notna()]
        op_of = modes(linked["op"], linked["name"].map(short_kernel_name))
    return chains["key"].map(lambda key: " → ".join(
        str(op_of.get(k[1:], k[1:])) if k.startswith("?") else k for k in key.split(" → ")))


def _label(signatures: pd.Series) -> str:
    """The group's name: the signature with the most ops linked (a chain the trace linked fully)."""
    return max(signatures, key=lambda s: (s.count("::"), s))


def chain_groups(events: pd.DataFrame, copy: CopyModel, registry: Registry, taken: Set[object] = frozenset(),
                 graph: OpGraph | None = None) -> pd.DataFrame:
    """Chains grouped by their op sequence (equal up to linking) with bytes and predicted fused time
    (columns in the module docstring), their class and the kernel known to fuse them (the registry's);
    chains holding an event of ``taken`` (claimed by another class, e.g. eager attention) are left out.
    Groups whose bytes are unknown have no prediction."""
    chains = find_chains(events, registry, graph)
    if chains.empty:
        return chains
    chains = chains[[not (set(m) & taken) for m in chains["members"]]]
    if chains.empty:
        return pd.DataFrame()
    chains = chains.assign(key=linked_keys(chains, events))
    groups = aggregate(
        chains.groupby("key", sort=False), signature=("signature", _label), count=("measured_ns", "size"),
        kernels_per_chain=("kernels", "first"),
        measured_ns=("measured_ns", "sum"), chain_bytes=("chain_bytes", lambda v: v.sum(min_count=len(v))),
        fused_bytes=("fused_bytes", lambda v: v.sum(min_count=len(v))), module=("module", "first"),
        members=("members", lambda m: [x for ms in m for x in ms]))
    groups["predicted_fused_ns"] = groups["fused_bytes"] / copy.bytes_per_s * 1e9 + groups["count"] * copy.fixed_ns
    rows = [_chain_class(registry, key, members, events) for key, members in zip(groups.index, groups["members"])]
    groups["class"] = [r.name if r is not None else ("memory-bound chain (backward)" if backward else
                                                     "memory-bound chain") for r, backward in rows]
    groups["known_fusion"] = [_fused_by(registry, s, r) for (r, _), s in zip(rows, groups["signature"])]
    groups["memory_bound_chain"] = True  # a run of kernels on a stream: what --verify replays (fuseprof.verify)
    return groups.reset_index()


def _fused_by(registry: Registry, signature: str, chain_class: ChainClass | None) -> str:
    """The kernel known to fuse the chain's ops, else what fuses its class, else the default."""
    known = registry.known_fusion(signature)
    return chain_class.fused_by if known == registry.default_fusion and chain_class and chain_class.fused_by else known


def _chain_class(registry: Registry, key: str, members: list[Any], events: pd.DataFrame
                 ) -> tuple[ChainClass | None, bool]:
    """A group's class and whether it is a backward chain (every kernel launched in backward: its class is
    by the forward ops its kernels differentiate, ``fuseprof.analysis.facts.phases``)."""
    phase = events["phase"].reindex(members) if "phase" in events else pd.Series(dtype=object)
    if len(phase) and phase.isin(["backward", "recomputation"]).all() and (phase == "backward").any():
        forward = set(events["forward_op"].reindex(members).dropna().astype(str))
        return registry.chain_class(key.split(" → "), forward), True
    return registry.chain_class(key.split(" → ")), False


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
