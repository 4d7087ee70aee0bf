"""The catalogue audit: for each fusion of seed 002's catalogue, is it done in this trace?

Verdicts: ``fused`` (a kernel or op that does it is in the trace: named as evidence, with its time),
``not fused`` (the unfused pieces are there: their time now and the finder's predicted saving),
``partly fused`` (both), ``not present`` (neither: the model has no such step). Each entry of
``CATALOGUE`` is data — a regular expression for the fused kernels or ops, and which opportunity
classes or op chains show the unfused form — so an engine's own kernels are a row away::

    from fuseprof.analysis.audit import CATALOGUE, Entry
    CATALOGUE.append(Entry("my fused MoE", fused=r"my_fused_moe", chains=(), ops=(r"moe",)))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fuseprof.analysis.fusion import CopyModel, per_stream
from fuseprof.model.op_registry import estimate

_INDUCTOR = r"triton_\w*fused\w*"


@dataclass
class Entry:
    """``fused``: a regex searched (case-insensitively) in kernel names and launching ops; ``classes``:
    opportunity classes of the finder that are this fusion undone; ``chains``: op names that, all in
    one memory-bound chain, are this fusion undone; ``ops``: regexes on ops or kernels that show the
    step exists at all."""

    name: str
    fused: str
    classes: tuple[str, ...] = ()
    chains: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    pair: tuple[str, str] | None = None  # two ops as separate kernels, the second within 3 kernels of the first
    partial: str = ""  # kernels or ops that do part of it (RoPE without the cache write)
    _fused: re.Pattern[str] = field(init=False, repr=False)
    _partial: re.Pattern[str] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._fused = re.compile(self.fused, re.IGNORECASE)
        self._partial = re.compile(self.partial, re.IGNORECASE) if self.partial else None


CATALOGUE: list[Entry] = [
    Entry("add + RMSNorm", rf"{_INDUCTOR}add\w*(mean|rsqrt)|add_?rms_?norm|rms_?norm\w*(with_)?add|fused_add_rms",
          chains=("aten::add", "aten::pow", "aten::mean", "aten::rsqrt"), ops=(r"rms_?norm", r"aten::rsqrt")),
    Entry("SiLU · mul", rf"{_INDUCTOR}(mul\w*silu|silu\w*mul)|silu_and_mul|act_and_mul|swiglu|silu_mul",
          chains=("aten::silu", "aten::mul"), ops=(r"aten::silu", r"silu"), pair=("aten::silu", "aten::mul")),
    Entry("QKV projection", r"qkv", classes=("horizontal GEMM:3",), ops=(r"attention",)),
    Entry("gate / up projection", r"gate_?up|MergedColumn|swiglu", classes=("horizontal GEMM:2",), ops=(r"mlp",)),
    # addmm adds its bias in the GEMM's epilogue (cuBLAS, hipBLASLt); a Tensile kernel named _Bias_ can
    # but need not add one (aten::mm launches them too), so the op decides
    Entry("GEMM + bias + activation epilogue", r"^aten::(addmm|_addmm_activation)$|gemm\w*(gelu|relu)|epilogue",
          classes=("GEMM epilogue",), ops=(r"aten::(gelu|relu|silu)",)),
    Entry("RoPE + KV-cache write", rf"{_INDUCTOR}(cos|sin)\w*index_(copy|put)|{_INDUCTOR}index_(copy|put)\w*(cos|sin)|"
          r"rope\w*cache|rotary\w*cache", classes=("RoPE + KV-cache write",), chains=("aten::neg", "aten::cat"),
          ops=(r"rotary", r"aten::neg"), partial=rf"rotary|rope|{_INDUCTOR}(cat\w*(cos|sin)|neg\w*cat)"),
    Entry("flash attention", r"flash|fmha|attn_fwd|mha_|BatchPrefill|BatchDecode|paged_attention|unified_attention|"
          r"_cudnn_attention|scaled_dot_product", classes=("eager attention → SDPA",), ops=(r"softmax",)),
    Entry("dequant + GEMM", r"mxfp4|MxE\dm\d|w4a16|w8a8|awq|gptq|marlin|_scaled_mm|fp8\w*gemm|int4",
          ops=(r"dequant",)),
    Entry("sampling", r"sampling|top_?k_?top_?p|sample_kernel", classes=("sampling chain",),
          ops=(r"aten::(argmax|topk|multinomial)",)),
]


def _unfused(entry: Entry, fusion: pd.DataFrame) -> pd.DataFrame:
    if fusion.empty:
        return fusion
    picked = pd.Series(False, index=fusion.index)
    for cls in entry.classes:
        name, _, count = cls.partition(":")
        rows = fusion["class"] == name
        if count:
            rows &= fusion["signature"].str.count(r" \+ ") == int(count) - 1
        picked |= rows
    if entry.chains:
        chains = fusion["class"].isin(["memory-bound chain", "RoPE + KV-cache write", "sampling chain"])
        has_all = fusion["signature"].map(lambda s: all(op in s.split(" → ") for op in entry.chains))
        picked |= chains & has_all
    return fusion[picked]


def _by_stream(events: pd.DataFrame) -> list[dict[str, list[Any]]]:
    """Each stream's events in start order, as columns of plain values (read once for every pair entry)."""
    return [{"op": part["op"].astype("string").fillna("").tolist(), "dur": part["dur_ns"].tolist(),
             "dims": part["input_dims"].tolist(), "types": part["input_type"].tolist(),
             "concrete": part["concrete"].tolist()} for part in per_stream(events)]


def _pairs(entry: Entry, streams: list[dict[str, list[Any]]], copy: CopyModel) -> pd.DataFrame:
    """Separate kernels of ``entry.pair``: their time now, and the fused kernel's predicted time (the
    second op's bytes — it reads both inputs and writes the output — at the copy rate, plus one fixed
    cost)."""
    if entry.pair is None:
        return pd.DataFrame()
    first, second = entry.pair
    rows = []
    for part in streams:
        ops = part["op"]
        for i, op in enumerate(ops):
            j = next((j for j in range(i + 1, min(i + 4, len(ops))) if ops[j] == second), None) if op == first else None
            if j is None:
                continue
            est = estimate(ops[j], part["dims"][j], part["types"][j], part["concrete"][j])
            time = int(part["dur"][i]) + int(part["dur"][j])
            predicted = copy.time_ns(est.bytes) if est else float("nan")
            rows.append({"measured_ns": time, "saving_ns": time - predicted,
                         "signature": f"{first} (kernel) … {second} (kernel)", "count": 1})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    return pd.DataFrame([{"measured_ns": frame["measured_ns"].sum(), "saving_ns": frame["saving_ns"].sum(min_count=1),
                          "signature": frame["signature"].iloc[0], "count": len(frame)}])


def _matcher(events: pd.DataFrame) -> Callable[[re.Pattern[str]], pd.Series]:
    """A mask of the events whose kernel name or op matches a pattern; each distinct string is searched
    once per pattern, not once per event."""
    names = events["name"].astype(str)
    ops = events["op"].astype("string").fillna("").astype(str)
    distinct = pd.unique(pd.concat([names, ops]))

    def hits(pattern: re.Pattern[str]) -> pd.Series:
        found = [v for v in distinct if pattern.search(v)]
        return names.isin(found) | ops.isin(found)
    return hits


def audit(events: pd.DataFrame, fusion: pd.DataFrame, copy: CopyModel,
          catalogue: list[Entry] | None = None) -> pd.DataFrame:
    """One row per catalogue entry: fusion, verdict, time_ns (of the unfused pieces, else of the fused
    kernels), predicted_saving_ns, evidence."""
    rows = []
    hits, streams = _matcher(events), _by_stream(events)
    for entry in CATALOGUE if catalogue is None else catalogue:
        unfused = _unfused(entry, fusion)
        if unfused.empty:
            unfused = _pairs(entry, streams, copy)
        fused = events[hits(entry._fused)]
        partial = fused.empty and entry._partial is not None
        if partial:
            fused = events[hits(entry._partial)]  # type: ignore[arg-type]
        present = fused.empty and any(hits(re.compile(p, re.IGNORECASE)).any() for p in entry.ops)
        verdict = ("partly fused" if not fused.empty and (not unfused.empty or partial) else "not fused"
                   if not unfused.empty else "fused" if not fused.empty else "present, no fusion found" if present
                   else "not present")
        rows.append({"fusion": entry.name, "verdict": verdict, **_evidence(unfused, fused)})
    return pd.DataFrame(rows)


def _evidence(unfused: pd.DataFrame, fused: pd.DataFrame) -> dict[str, object]:
    if not unfused.empty:
        return {"time_ns": int(unfused["measured_ns"].sum()),
                "predicted_saving_ns": float(unfused["saving_ns"].sum(min_count=1)),
                "evidence": "; ".join(f"{s} ×{c}" for s, c in zip(unfused["signature"].head(2), unfused["count"].head(2)))
                + (f"; fused elsewhere by {fused['name'].iloc[0]}" if not fused.empty else "")}
    if not fused.empty:
        top = fused.groupby("name")["dur_ns"].sum().sort_values(ascending=False).index[0]
        op = fused.loc[fused["name"] == top, "op"].dropna()
        return {"time_ns": int(fused["dur_ns"].sum()), "predicted_saving_ns": float("nan"),
                "evidence": f"{top} ({len(fused)} kernels; op {op.iloc[0] if len(op) else 'none'})"}
    return {"time_ns": 0, "predicted_saving_ns": float("nan"), "evidence": ""}
