"""A verify bundle's timing rows as one row per chain: the finder's prediction beside the replay.

    realised_saving_ns = eager GPU median − compiled GPU median (one run, CUDA graph replay, L2 flushed)
    error_pct          = 100 · (predicted_saving_ns − realised_saving_ns) / realised_saving_ns
    fuseprof_error_pct = the same with fuseprof's own kernel as the fusion, where one computes the chain

The prediction's own columns (trace_chain_ns, fused_bytes, predicted_fused_ns, predicted_saving_ns) are
in the bundle's timing schema; both lists are printed by ``fuseprof columns``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fuseprof.bundle.schema import Column

PREDICTION_COLUMNS = ("fusion_row", "signature", "chain_class", "chain_count", "chain_instances", "chain_kernels",
                      "trace_chain_ns", "fused_bytes", "predicted_fused_ns", "predicted_saving_ns")
VERIFICATION_COLUMNS: tuple[Column, ...] = (
    Column("eager_ns", "Float64", "the eager replay's gpu_median_ns"),
    Column("compiled_ns", "Float64", "the compiled replay's gpu_median_ns"),
    Column("compiled_kernels", "Int64", "the compiled replay's kernels_per_call"),
    Column("realised_saving_ns", "Float64", "eager_ns − compiled_ns"),
    Column("error_pct", "Float64", "100 · (predicted_saving_ns − realised_saving_ns) / realised_saving_ns"),
    Column("fuseprof_ns", "Float64", "gpu_median_ns of fuseprof's own kernel for the chain, where one computes it"),
    Column("fuseprof_error_pct", "Float64",
           "100 · (predicted_saving_ns − (eager_ns − fuseprof_ns)) / (eager_ns − fuseprof_ns)"),
)


def _error_pct(predicted: float, realised: float) -> float:
    return 100 * (predicted - realised) / realised


def verification_table(timings: pd.DataFrame) -> pd.DataFrame:
    """One row per chain: the finder's prediction beside the replay (formulas in the module docstring)."""
    rows = []
    keys = ["bundle", "case"] if "bundle" in timings else ["case"]  # a folder of verify bundles: each on its own
    for _, part in timings.groupby(keys, sort=False):
        first = part.iloc[0]
        row: dict[str, Any] = {k: first[k] for k in keys} | {c: first[c] for c in PREDICTION_COLUMNS}
        if "skipped" in part and pd.notna(first["skipped"]):
            rows.append({**row, "verdict": f"not replayed: {first['skipped']}"})
            continue
        variants = part.set_index("variant")
        row["rel_err"] = float(variants["rel_err"].max())
        row["verdict"] = "outputs agree" if bool(variants["correct"].all()) else "OUTPUTS DIFFER"
        if "kernels_per_call" in variants:
            row["compiled_kernels"] = variants.loc["compiled", "kernels_per_call"]
        timed = "gpu_median_ns" in variants and bool(variants["gpu_median_ns"].notna().all())
        if not timed:
            row["verdict"] += " (no GPU time: run on the CPU)"
        else:
            row["eager_ns"], row["compiled_ns"] = (float(variants.loc[v, "gpu_median_ns"]) for v in ("eager", "compiled"))
            row["realised_saving_ns"] = row["eager_ns"] - row["compiled_ns"]
            row["error_pct"] = _error_pct(row["predicted_saving_ns"], row["realised_saving_ns"])
            if "fuseprof" in variants.index:
                row["fuseprof_ns"] = float(variants.loc["fuseprof", "gpu_median_ns"])
                row["fuseprof_error_pct"] = _error_pct(row["predicted_saving_ns"], row["eager_ns"] - row["fuseprof_ns"])
        rows.append(row)
    return pd.DataFrame(rows)
