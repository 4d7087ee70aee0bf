"""Per variant and shape of a capture bundle: what one call costs and where its time goes.

For cases that are a whole layer rather than one op (``decoder_layer``): latency as called, GPU
time, kernels and launches per call, the time shares of GEMM, attention and memory-bound kernels,
and the call's bytes against a same-bytes copy timed in the same run (``--copy-baseline``), i.e.
the share of the memory roofline the whole call reaches. Each formula is in ``BREAKDOWN_COLUMNS``
(listed by ``fuseprof columns``) and computed here only.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fuseprof.bundle.files import read_manifest
from fuseprof.bundle.loading import load, load_timings
from fuseprof.bundle.schema import Column
from fuseprof.errors import InvalidArgumentError
from fuseprof.model.registry import classify
from fuseprof.model.registry_data import DEFAULT
from fuseprof.tables.compare import KEYS as COPY_KEYS
from fuseprof.tables.compare import fastest_copy_ns, is_copy
from fuseprof.tables.summary import sort_by_shape

# Categories that are neither matrix math nor attention: they move bytes (norms, elementwise,
# copies, reductions, memcpy/memset) and are what fusion removes.
MATRIX_CATEGORIES = ("GEMM", "attention")

BREAKDOWN_COLUMNS: tuple[Column, ...] = (
    Column("as_called_us", "Float64", "timings: as_called_median_ns / 1e3 (CUDA events around a call, L2 flushed)"),
    Column("gpu_us", "Float64", "timings: gpu_median_ns / 1e3 (fuseprof's CUDA-graph replay of the call, L2 "
                                "flushed); null for a variant that replays its own graph"),
    Column("kernel_us", "Float64", "profiler: Σ duration_ns of the range's GPU events / calls / 1e3 (warm L2)"),
    Column("kernels_per_call", "Float64", "profiler: GPU events (kernels, memcpy, memset) in the range / calls"),
    Column("launches_per_call", "Float64",
           "profiler: distinct (launch_api, launch_start_ns) in the range / calls (a graph replay is one launch)"),
    Column("gemm_share", "Float64", "Σ duration of category GEMM / Σ duration (categories: fuseprof.model.registry_data)"),
    Column("attention_share", "Float64", "Σ duration of category attention / Σ duration"),
    Column("memory_bound_share", "Float64", "1 − gemm_share − attention_share"),
    Column("bytes", "Int64", "timings: nominal_bytes (the case's byte model)"),
    Column("copy_us", "Float64", "timings: min gpu_median_ns of the same shape's copy rows / 1e3 (same bytes, same run; "
                                 "fuseprof.tables.compare.fastest_copy_ns)"),
    Column("pct_of_memory_roofline", "Float64", "100 · copy_us / as_called_us"),
    Column("gpu_pct_of_memory_roofline", "Float64", "100 · copy_us / gpu_us"),
)

KEYS = ["case", "variant", "shape", "dtype"]


def _kernel_stats(kernels: pd.DataFrame, calls: int) -> pd.DataFrame:
    events = kernels[kernels["source"] == "torch.profiler"].copy()
    events["category"] = classify(DEFAULT, events["kind"], events["cpu_op"], events["kernel"])["category"]
    events["matrix"] = events["category"].where(events["category"].isin(MATRIX_CATEGORIES), "memory-bound")
    grouped = events.groupby(KEYS, observed=True)
    by_category = events.pivot_table(index=KEYS, columns="matrix", values="duration_ns", aggfunc="sum",
                                     fill_value=0, observed=True)
    total = by_category.sum(axis=1)
    launches = events.drop_duplicates([*KEYS, "launch_api", "launch_start_ns"]).groupby(KEYS, observed=True).size()
    return pd.DataFrame({
        "kernel_us": grouped["duration_ns"].sum() / calls / 1e3,
        "kernels_per_call": grouped.size() / calls,
        "launches_per_call": launches / calls,
        **{f"{name.lower()}_share": by_category.get(name, 0) / total for name in MATRIX_CATEGORIES},
    })


def _read_capture(bundle: str | Path) -> tuple[int, pd.DataFrame, pd.DataFrame]:
    """A capture bundle's profiled calls per range, timings and kernels: read once."""
    path = Path(bundle)
    manifest = read_manifest(path)
    if manifest.get("kind") != "capture":
        raise InvalidArgumentError(f"{path}: a breakdown needs a capture bundle (fuseprof profile); this one is "
                                   f"{manifest.get('kind')!r}")
    return int(manifest["profiler"]["repeats_per_range"]), load_timings(path), load(path)


def _breakdown(calls: int, timings: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    rows = timings[~is_copy(timings)].join(fastest_copy_ns(timings), on=COPY_KEYS).set_index(KEYS)
    out = pd.DataFrame({
        "as_called_us": rows["as_called_median_ns"] / 1e3,
        "gpu_us": rows["gpu_median_ns"] / 1e3,
    }).join(_kernel_stats(kernels, calls))
    out["memory_bound_share"] = 1 - out["gemm_share"] - out["attention_share"]
    out["bytes"] = rows["nominal_bytes"]
    out["copy_us"] = rows["copy_gpu_ns"] / 1e3
    out["pct_of_memory_roofline"] = 100 * out["copy_us"] / out["as_called_us"]
    out["gpu_pct_of_memory_roofline"] = 100 * out["copy_us"] / out["gpu_us"]
    return sort_by_shape(out.reset_index(), ["case", "dtype", "shape", "variant"])


def variant_breakdown(bundle: str | Path) -> pd.DataFrame:
    """One row per variant and shape of a capture bundle (``fuseprof profile``), columns as in
    ``BREAKDOWN_COLUMNS``; copy columns are null without ``--copy-baseline``."""
    calls, timings, kernels = _read_capture(bundle)
    return _breakdown(calls, timings, kernels)


AMDAHL_COLUMNS: tuple[Column, ...] = (
    Column("baseline_kernel_us", "Float64", "kernel_us of the baseline variant (eager)"),
    Column("fused_kernel_us", "Float64", "kernel_us of the variant with fused kernels"),
    Column("fused_kernels_us", "Float64", "profiler: Σ duration of the fused variant's kernels launched by an op "
                                          "matching fused_ops (fuseprof::*) / calls"),
    Column("replaced_share", "Float64", "p = (baseline_kernel_us − fused_kernel_us + fused_kernels_us) / "
                                        "baseline_kernel_us: the baseline's time in the chains the kernels replace"),
    Column("kernel_speedup", "Float64", "k = p · baseline_kernel_us / fused_kernels_us"),
    Column("amdahl_limit", "Float64", "1 / (1 − p): the layer's speed-up were the replaced chains free"),
    Column("measured_speedup", "Float64", "baseline_kernel_us / fused_kernel_us"),
    Column("memory_bound_limit", "Float64", "1 / (1 − memory_bound_share of the baseline): were every "
                                            "memory-bound kernel free"),
)


def fusion_amdahl(bundle: str | Path, baseline: str = "eager", fused: str = "fused_cuda",
                  fused_ops: str = r"^fuseprof::") -> pd.DataFrame:
    """Amdahl's law for a variant that swaps chains of the baseline for fused kernels, per shape:
    the share p of the baseline's kernel time those chains take (the time that disappears plus what
    the fused kernels still take), the fused kernels' speed-up k on it, and the bound 1/(1 − p)
    that no faster kernel for those chains can pass. (With this p and k, 1/((1 − p) + p/k) is the
    measured speed-up by construction, so it is not a column.)"""
    calls, timings, kernels = _read_capture(bundle)
    frame = _breakdown(calls, timings, kernels).set_index(["variant", "shape"])
    own = kernels[(kernels["source"] == "torch.profiler") & (kernels["variant"] == fused)
                  & kernels["cpu_op"].str.contains(fused_ops, na=False)]
    out = pd.DataFrame({"baseline_kernel_us": frame.loc[baseline, "kernel_us"],
                        "fused_kernel_us": frame.loc[fused, "kernel_us"],
                        "fused_kernels_us": own.groupby("shape")["duration_ns"].sum() / calls / 1e3})
    replaced = out["baseline_kernel_us"] - out["fused_kernel_us"] + out["fused_kernels_us"]
    out["replaced_share"] = replaced / out["baseline_kernel_us"]
    out["kernel_speedup"] = replaced / out["fused_kernels_us"]
    out["amdahl_limit"] = 1 / (1 - out["replaced_share"])
    out["measured_speedup"] = out["baseline_kernel_us"] / out["fused_kernel_us"]
    out["memory_bound_limit"] = 1 / (1 - frame.loc[baseline, "memory_bound_share"])
    return sort_by_shape(out.rename_axis("shape").reset_index(), ["shape"])
