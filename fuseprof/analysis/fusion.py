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
                         and dtype an earlier op of the chain produced is internal). A trace records
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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fuseprof.model.op_models import DTYPE_BYTES
from fuseprof.model.op_registry import estimate

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


def fused_bytes(ops: Sequence[tuple[str, object, object, object]]) -> float:
    """External inputs read once plus outputs written once, for ops (name, input dims, input types)
    in chain order; see the module docstring for the shape-and-dtype dataflow it assumes."""
    produced: set[tuple[str, str]] = set()
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
            for d, t in inputs:
                if _shape_key(d, t) not in produced:
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
        produced.add((str(out), str(out_type)))
        last_out = _nbytes(out, out_type)
    return total + last_out


def find_chains(events: pd.DataFrame) -> pd.DataFrame:
    """One row per chain: stream, step, signature, kernels, measured time, its ops."""
    kernels = events.sort_values("start_ns", kind="stable")
    rows = []
    for (stream, step), part in kernels.groupby([kernels["stream"].astype("string").fillna("?"),
                                                 kernels["step"].astype("string").fillna("")], sort=False):
        run: list[pd.Series] = []
        for _, event in part.iterrows():
            breaks = event["role"] == "anchor" or event["kind"] != "kernel"
            if breaks:
                if len(run) >= 2:
                    rows.append(_chain(run, stream, step))
                run = []
            else:
                run.append(event)
        if len(run) >= 2:
            rows.append(_chain(run, stream, step))
    return pd.DataFrame(rows)


def _chain(run: list[pd.Series], stream: str, step: str) -> dict[str, object]:
    names = [str(e["op"]) if pd.notna(e["op"]) else str(e["name"])[:60] for e in run]
    ops = [(str(e["op"]), e["input_dims"], e["input_type"], e["concrete"]) for e in run]
    analytic = [estimate(str(e["op"]), e["input_dims"], e["input_type"], e["concrete"]) for e in run]
    return {"stream": stream, "step": step, "signature": " → ".join(names), "kernels": len(run),
            "measured_ns": int(sum(int(e["dur_ns"]) for e in run)),
            "chain_bytes": float(sum(a.bytes for a in analytic if a)) if any(analytic) else np.nan,
            "fused_bytes": fused_bytes(ops), "module": run[0]["module"], "start_ns": int(run[0]["start_ns"])}


def kernel_floor_ns(events: pd.DataFrame) -> float:
    """The least a kernel costs on the trace's GPU: the 10th percentile of its kernel durations."""
    return float(events.loc[events["kind"] == "kernel", "dur_ns"].quantile(0.10))


def opportunities(events: pd.DataFrame, timeline: pd.DataFrame, copy: CopyModel) -> pd.DataFrame:
    """Chains grouped by signature and ranked by predicted saving (columns in the module docstring)."""
    chains = find_chains(events)
    if chains.empty:
        return chains
    host_launch_ns = float(events["launch_dur_ns"].astype("float64").median())
    whole = timeline.set_index("stream").loc["all"]
    groups = chains.groupby("signature", sort=False).agg(
        count=("measured_ns", "size"), kernels_per_chain=("kernels", "first"), measured_ns=("measured_ns", "sum"),
        chain_bytes=("chain_bytes", "sum"), fused_bytes=("fused_bytes", "sum"), module=("module", "first"),
        first_step=("step", "first"))
    groups["launches"] = groups["count"] * groups["kernels_per_chain"]
    groups["predicted_fused_ns"] = groups["fused_bytes"] / copy.bytes_per_s * 1e9 + groups["count"] * copy.fixed_ns
    groups["saving_ns"] = (groups["measured_ns"] - groups["predicted_fused_ns"]).clip(lower=0)
    groups["share_of_busy_pct"] = 100 * groups["saving_ns"] / whole["busy_ns"]
    groups["share_of_span_pct"] = 100 * groups["saving_ns"] / whole["span_ns"]
    groups["launches_saved"] = groups["count"] * (groups["kernels_per_chain"] - 1)
    groups["host_launch_ns_saved"] = groups["launches_saved"] * host_launch_ns
    groups["known_fusion"] = [known_fusion(s) for s in groups.index]
    groups["fixed_ns"] = copy.fixed_ns
    groups["copy_bytes_per_s"] = copy.bytes_per_s
    return groups.sort_values("saving_ns", ascending=False).reset_index()


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
