"""Two capture folders side by side (``fuseprof compare A B``): the same case, variant, shape and dtype in each,
with the time of each, their ratio and whether it stands above the noise.

Formulas (all from each folder's timings.parquet, ``fuseprof.bundle.loading.load_timings``):
    timed                      = "GPU" where every side holding the row has a GPU time (CUDA-graph replay), else
                                 "as called" (events on a GPU, the CPU's counter for a CPU capture): like with like
    a_ns, b_ns                 = that time's median in the newest bundle in A (B) holding the key (by its
                                 manifest's created_utc; an older capture of the same key is left out, not
                                 averaged; a_device / b_device say which GPU ran it)
    ratio                      = b_ns / a_ns (above 1: B is slower)
    a_spread_pct, b_spread_pct = 100 × (p90 − p10) / median of that time over that side's repeats
    change                     = "slower" / "faster" where |ratio − 1| exceeds half the larger side's p10–p90
                                 spread (as a fraction), else "within noise"; "only in A" / "only in B" where the
                                 other side has no such row; "not comparable" where a side lacks that time
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
           "a_correct", "b_correct", "a_device", "b_device", "a_bundle", "b_bundle"]


def _created(folder: Path) -> dict[str, str]:
    """Each bundle's capture time (its manifest's ``created_utc``), by bundle name."""
    from fuseprof.bundle.files import find_bundles, read_manifest

    return {bundle.name: str(read_manifest(bundle).get("created_utc", "")) for bundle in find_bundles(folder)}


def _side(folder: Path, label: str) -> pd.DataFrame:
    """One folder's variants, the newest bundle's row per key (by the manifests' capture time), as that side's
    columns."""
    from fuseprof.bundle.loading import load_timings

    try:
        timings = load_timings(folder)
    except FuseprofError as exc:
        raise type(exc)(f"{label} = {exc}") from None
    if not timings.empty:
        timed = timings["gpu_median_ns"].notna() | timings["as_called_median_ns"].notna()
        timings = timings[timings["fusion_row"].isna() & ~is_copy(timings) & timed]
    if timings.empty:
        raise FuseprofError(f"{label} = {folder}: no capture timings (compare A B reads folders written by "
                            "`fuseprof profile`, `run` or `bench`); for two traces use `fuseprof diff A B`")
    created = _created(folder)
    timings = timings.assign(_created=timings["bundle"].astype(str).map(created).fillna(""))
    newest = timings.sort_values(["_created", "bundle"], kind="stable").drop_duplicates(KEY, keep="last")
    side = label.lower()
    out = pd.DataFrame({k: newest[k].astype(str) for k in KEY})
    for timed in ("gpu", "as_called"):
        for stat in ("median", "p10", "p90"):
            out[f"{side}_{timed}_{stat}"] = newest[f"{timed}_{stat}_ns"].astype(float)
    out[f"{side}_bytes"] = newest["nominal_bytes"]
    out[f"{side}_correct"] = newest["correct"]
    out[f"{side}_device"] = newest["device"].astype(str)
    out[f"{side}_bundle"] = newest["bundle"].astype(str)
    return out


def compare_runs(a: Path, b: Path) -> pd.DataFrame:
    """Per case, variant, shape and dtype in either folder: A's and B's time (GPU where every side holding the
    row has one), B/A and whether the change stands above the spread of the repeats (the module docstring)."""
    both = _side(a, "A").merge(_side(b, "B"), on=KEY, how="outer", indicator=True)
    in_a, in_b = both["_merge"] != "right_only", both["_merge"] != "left_only"
    gpu = (~in_a | both["a_gpu_median"].notna()) & (~in_b | both["b_gpu_median"].notna())
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
        [~in_a, ~in_b, both["ratio"].isna(), off <= noise, both["ratio"] > 1.0],
        ["only in B", "only in A", "not comparable", "within noise", "slower"], "faster")
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
