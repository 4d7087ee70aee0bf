"""Run every fused CUDA kernel on shapes that exercise each code path, for compute-sanitizer.

``compute-sanitizer --tool memcheck python -m fuseprof_kernels._cuda.sanitize`` (and racecheck):
vector and scalar paths, rows past the register cache (second pass), a single row, many rows.
"""

from __future__ import annotations

import torch
from fuseprof_kernels._cuda import cuda_ops

SHAPES = ((1, 8), (3, 771), (5, 768), (2, 4096), (2, 40_000), (1, 65_536), (70_001, 16))


def main() -> None:
    ops = cuda_ops()
    for dtype in (torch.float16, torch.bfloat16):
        for m, n in SHAPES:
            x = torch.randn(m, n, device="cuda", dtype=dtype)
            g = torch.randn(m, n, device="cuda", dtype=dtype)
            w = torch.randn(n, device="cuda", dtype=dtype)
            ops.rmsnorm_swiglu(x, g, w, 1e-6)
            ops.add_rms_norm(x, g, w, 1e-6)
            ops.silu_mul(x, g)
            ops.silu_and_mul(torch.cat([x, g], dim=1))
    torch.cuda.synchronize()
    print(f"sanitize: ran 4 ops x {len(SHAPES)} shapes x 2 dtypes")


if __name__ == "__main__":
    main()
