"""Two capture folders side by side (``fuseprof compare A B``): the same case, variant, shape and dtype in each,
with the time of each, their ratio and whether it stands above the noise.

Formulas (all from each folder's timings.parquet, ``fuseprof.bundle.loading.load_timings``):
    timed                      = "GPU" where both sides have a GPU time (CUDA-graph replay), else "as called"
                                 (events on a GPU, the CPU's counter for a CPU capture): like with like
    a_ns, b_ns                 = that time's median in the newest bundle in A (B) holding the key (bundle names
                                 end in their capture time; an older capture of the same key is left out, not
                                 averaged)
    ratio                      = b_ns / a_ns (above 1: B is slower)
    a_spread_pct, b_spread_pct = 100 × (p90 − p10) / median of that time over that side's repeats
    change                     = "slower" / "faster" where |ratio − 1| exceeds the larger side's spread (half its
                                 p10–p90 width, as a fraction), else "within noise"; "only in A" / "only in B"
                                 where the other side has no such row
    a_bytes, b_bytes           = nominal_bytes (the bytes a fused kernel must move, from the case's shapes)
Rows of a ``fuseprof fusion --verify`` bundle (chains replayed) and the same-bytes copies are not variants and
are left out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from fuseprof.errors import FuseprofError
from fuseprof.tables.compare import is_copy
from fuseprof.tables.summary import sort_by_shape

KEY = ["case", "variant", "shape", "dtype"]
COLUMNS = [*KEY, "timed", "a_ns", "b_ns", "ratio", "a_spread_pct", "b_spread_pct", "change", "a_bytes", "b_bytes",
           "a_correct", "b_correct", "a_bundle", "b_bundle"]


def _side(folder: Path, label: str) -> pd.DataFrame:
    """One folder's variants, the newest bundle's row per key, as that side's columns."""
    from fuseprof.bundle.loading import load_timings

    timings = load_timings(folder)
    if not timings.empty:
        timed = timings["gpu_median_ns"].notna() | timings["as_called_median_ns"].notna()
        timings = timings[timings["fusion_row"].isna() & ~is_copy(timings) & timed]
    if timings.empty:
        raise FuseprofError(f"{label} = {folder}: no capture timings (compare A B reads folders written by "
                            "`fuseprof profile`, `run` or `bench`); for two traces use `fuseprof diff A B`")
    newest = timings.sort_values("bundle", kind="stable").drop_duplicates(KEY, keep="last")
    side = label.lower()
    out = pd.DataFrame({k: newest[k].astype(str) for k in KEY})
    for timed in ("gpu", "as_called"):
        for stat in ("median", "p10", "p90"):
            out[f"{side}_{timed}_{stat}"] = newest[f"{timed}_{stat}_ns"].astype(float)
    out[f"{side}_bytes"] = newest["nominal_bytes"]
    out[f"{side}_correct"] = newest["correct"]
    out[f"{side}_bundle"] = newest["bundle"].astype(str)
    return out


def compare_runs(a: Path, b: Path) -> pd.DataFrame:
    """Per case, variant, shape and dtype in either folder: A's and B's time (GPU where both have one), B/A and
    whether the change stands above the spread of the repeats (the module docstring)."""
    both = _side(a, "A").merge(_side(b, "B"), on=KEY, how="outer")
    gpu = both["a_gpu_median"].notna() & both["b_gpu_median"].notna()
    both["timed"] = np.where(gpu, "GPU", "as called")
    for side in ("a", "b"):
        for stat in ("median", "p10", "p90"):
            both[f"{side}_{stat}"] = both[f"{side}_gpu_{stat}"].where(gpu, both[f"{side}_as_called_{stat}"])
        both[f"{side}_ns"] = both[f"{side}_median"]
        both[f"{side}_spread_pct"] = 100.0 * (both[f"{side}_p90"] - both[f"{side}_p10"]) / both[f"{side}_median"]
    both["ratio"] = both["b_ns"] / both["a_ns"]
    noise = np.fmax(both["a_spread_pct"], both["b_spread_pct"]).fillna(0.0) / 200.0
    off = (both["ratio"] - 1.0).abs()
    both["change"] = np.select(
        [both["a_ns"].isna(), both["b_ns"].isna(), off <= noise, both["ratio"] > 1.0],
        ["only in B", "only in A", "within noise", "slower"], "faster")
    return sort_by_shape(both[COLUMNS], ["case", "dtype", "shape", "variant"]).reset_index(drop=True)


def readable(table: pd.DataFrame) -> pd.DataFrame:
    """The terminal's columns: µs to 3 decimals, the ratio to 3, spreads to 1, bytes as MB."""
    return pd.DataFrame({
        **{k: table[k] for k in KEY}, "timed": table["timed"],
        "A µs": (table["a_ns"] / 1e3).round(3), "B µs": (table["b_ns"] / 1e3).round(3),
        "B/A": table["ratio"].round(3), "A spread %": table["a_spread_pct"].round(1),
        "B spread %": table["b_spread_pct"].round(1), "change": table["change"],
        "A MB": (table["a_bytes"].astype(float) / 1e6).round(3), "B MB": (table["b_bytes"].astype(float) / 1e6).round(3),
    })
