"""A roofline without hardware counters: where ncu is refused (``ERR_NVGPUCTRPERM`` on cloud and shared
hosts), each variant and shape still gets one point, from what the capture has without counters:

    flops_<pipe>     Σ the op registry's analytic FLOPs of the ops a call launched (the trace's recorded
                     shapes), on the pipe each op's model names (``memory`` ops count under fp32); the
                     same for every variant of a shape — the math the case does, whoever does it — taken
                     from the variant whose ops the registry models best (compiled and fused variants
                     launch kernels it has no model for)
    dram_read_bytes  the case's nominal bytes (every input read once, every output written once); the
                     split into reads and writes is not known without counters, so writes stay 0
    duration_ns      the call's GPU time (CUDA-graph replay median, from the timings)

Rows carry ``source = "model"`` and a kernel name saying so; ``fuseprof roofline`` and the dashboard
place them like ncu rows.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.trace_events import read_trace_tables
from fuseprof.parse.trace_link import link_gpu_events
from fuseprof.ranges import first_range_label

MODEL_SOURCE = "model"


def _flop_column(pipe: str) -> str:
    return f"flops_{pipe}" if pipe.startswith("tensor_") or pipe in ("fp16", "fp64") else "flops_fp32"


def modelled_rows(trace: Path, timings: pd.DataFrame, calls_per_range: int) -> pd.DataFrame:
    """One ``source = "model"`` row per variant and shape of ``timings`` (columns above)."""
    events = link_gpu_events(read_trace_tables(trace))
    labels = events["ranges"].map(first_range_label)
    events = events.assign(variant=[found[0] if found else None for found in labels],
                           shape=[found[1] if found else None for found in labels])
    calls = events.dropna(subset=["variant", "op_id"]).drop_duplicates("op_id")
    flops: dict[tuple[str, str], dict[str, float]] = {}
    for _, e in calls.iterrows():
        est = DEFAULT.estimate(str(e["op"]), e["input_dims"], e["input_type"], e["concrete"])
        if est is not None:
            per = flops.setdefault((e["variant"], e["shape"]), {})
            per[_flop_column(est.pipe)] = per.get(_flop_column(est.pipe), 0.0) + est.flops / calls_per_range
    per_shape: dict[str, dict[str, float]] = {}
    for (_, shape), counts in flops.items():
        if sum(counts.values()) > sum(per_shape.get(shape, {}).values()):
            per_shape[shape] = counts
    rows = []
    for _, t in timings[timings["gpu_median_ns"].notna() & ~timings["variant"].str.startswith("copy")].iterrows():
        rows.append({"variant": t["variant"], "shape": t["shape"], "kernel": f"{t['variant']} (whole call, modelled)",
                     "kind": "call", "source": MODEL_SOURCE, "duration_ns": int(t["gpu_median_ns"]),
                     "dram_read_bytes": float(t["nominal_bytes"]), "dram_write_bytes": 0.0,
                     **per_shape.get(t["shape"], {"flops_fp32": 0.0})})
    return pd.DataFrame(rows)
