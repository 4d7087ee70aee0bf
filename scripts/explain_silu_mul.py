"""Why Inductor's SiLU·mul beat fuseprof's kernels at M >= 4096: one change at a time, one run.

    python scripts/explain_silu_mul.py [--out FILE.csv]     (on a GPU)

The hypothesis from the bench and ncu (same DRAM bytes, same registers and occupancy, yet 3-6%
slower): the order in which blocks walk the tensor. fuseprof's kernels numbered blocks row first,
so the ~1000 blocks in flight sat at one column offset of ~1000 rows, a power-of-two row pitch
apart; Inductor numbers them along the flat tensor. This times the same Triton kernel in both
orders beside Inductor's kernel, the CUDA kernel and a same-bytes copy, CUDA-graph replay with L2
flushed (fuseprof's timing path), and prints each time over Inductor's.
"""

from __future__ import annotations

import argparse

import pandas as pd
import torch
import triton
import triton.language as tl
from fuseprof_kernels.silu_and_mul import SPLIT_CASE
from fuseprof_kernels.silu_and_mul.fused_triton import BLOCK, silu_mul_triton

from fuseprof.capture import timing
from fuseprof.capture.correctness import compare
from fuseprof.capture.measure import copy_rows, time_callable
from fuseprof.case import shape_label, shape_seed

SHAPES = ((4096, 4096), (8192, 4096), (4096, 8192), (8192, 8192), (32768, 8192))


@triton.jit
def _rows_first(g_ptr, u_ptr, o_ptr, stride, d, BLOCK: tl.constexpr):
    """The kernel's previous order: program_id(0) is the row, program_id(1) the tile."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    g = tl.load(g_ptr + row * stride + cols, mask=mask).to(tl.float32)
    u = tl.load(u_ptr + row * stride + cols, mask=mask).to(tl.float32)
    tl.store(o_ptr + row * stride + cols, (g * tl.sigmoid(g) * u).to(o_ptr.dtype.element_ty), mask=mask)


def rows_first(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(gate)
    m, d = gate.shape
    _rows_first[(m, triton.cdiv(d, BLOCK))](gate, up, out, d, d, BLOCK=BLOCK, num_warps=8)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the rows as CSV here too")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    device = torch.device("cuda")
    flusher = timing.L2Flusher(device)
    candidates = {"inductor": SPLIT_CASE.variant("compiled").fn, "fused_cuda": SPLIT_CASE.variant("fused_cuda").fn,
                  "triton_tiles_first": silu_mul_triton, "triton_rows_first": rows_first}
    rows = []
    for shape in SHAPES:
        gen = torch.Generator(device=device).manual_seed(shape_seed(0, shape))
        gate, up = SPLIT_CASE.make_inputs(shape, "bfloat16", "cuda", gen)
        expected = SPLIT_CASE.reference(gate, up)
        times = {}
        for name, fn in candidates.items():
            check = compare(fn(gate, up), expected, SPLIT_CASE.tolerances["bfloat16"])
            assert check["correct"], (name, shape, check["problem"])
            times[name] = time_callable(fn, (gate, up), device, args.repeats, flusher)["gpu_median_ns"]
        times["copy"] = min(r["gpu_median_ns"] for r in copy_rows(SPLIT_CASE, shape, "bfloat16", device, args.repeats,
                                                                 flusher))
        for name, ns in times.items():
            rows.append({"shape": shape_label(shape), "kernel": name, "gpu_us": ns / 1e3,
                         "over_inductor": ns / times["inductor"]})
    frame = pd.DataFrame(rows)
    table = frame.pivot(index="shape", columns="kernel", values="over_inductor")
    print("GPU time over Inductor's (same run, CUDA-graph replay, L2 flushed):")
    print(table.round(3).to_string())
    if args.out:
        frame.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
