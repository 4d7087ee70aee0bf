"""fuseprof's roofline numbers beside Nsight Compute's own, for every kernel of the ncu fixture;
then the committed llama_mlp block's measured FLOPs against its analytic count.

    python scripts/roofline_vs_ncu.py

ncu's side is computed from the raw CSV with the formulas of its roofline sections (the same
arithmetic tests/test_roofline_fidelity.py asserts within 1%); fuseprof's side is its parser and
``fuseprof.model.derived``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fuseprof  # noqa: E402
from fuseprof.model.derived import derive  # noqa: E402
from fuseprof.parse.ncu_csv import read_ncu_csv  # noqa: E402
from tests.test_roofline_fidelity import (  # noqa: E402
    HIDDEN,
    INTERMEDIATE,
    MLP_BUNDLE,
    ROOFLINE_CSV,
    _ncu_flops_per_s,
    _raw_rows,
)


def main() -> None:
    ours = derive(read_ncu_csv(ROOFLINE_CSV))
    rows = []
    for (_, row), raw in zip(ours.iterrows(), _raw_rows()):
        ncu_flops, ncu_bw = _ncu_flops_per_s(raw), raw["dram__bytes.sum.per_second"]
        rows.append({"kernel": str(row["kernel"])[:44], "pipe": row["roof_pipe"],
                     "TFLOP/s fuseprof": row["achieved_flops_per_s"] / 1e12, "TFLOP/s ncu": ncu_flops / 1e12,
                     "TB/s fuseprof": row["achieved_bytes_per_s"] / 1e12, "TB/s ncu": ncu_bw / 1e12,
                     "FLOP/B fuseprof": row["arithmetic_intensity"],
                     "FLOP/B ncu": ncu_flops / ncu_bw if ncu_bw else float("nan")})
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.4g}".format):
        print(pd.DataFrame(rows).to_string(index=False))
    block = derive(fuseprof.load(MLP_BUNDLE).query("source == 'ncu'"))
    totals = block.groupby(["variant", "shape"])[["flops", "flops_tensor_bf16"]].sum().reset_index()
    m = totals["shape"].str.split("x").str[0].astype(int)
    # three GEMMs; add + RMSNorm ≈ 5 FLOPs per (M, H) element, SiLU·mul ≈ 5 per (M, I) element
    totals["analytic"] = 6 * m * HIDDEN * INTERMEDIATE + 5 * m * HIDDEN + 5 * m * INTERMEDIATE
    totals["over analytic %"] = 100 * (totals["flops"] / totals["analytic"] - 1)
    print(f"\n{MLP_BUNDLE.name}: measured FLOPs per call against the analytic count")
    print(totals.to_string(index=False))


if __name__ == "__main__":
    main()
