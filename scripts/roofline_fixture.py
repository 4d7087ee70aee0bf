"""The kernels of the roofline cross-check fixture: one per FLOP source ncu can count.

``python scripts/roofline_fixture.py --capture OUT`` runs this file under
``ncu --set roofline --metrics <fuseprof's list> --clock-control none`` and writes the raw CSV to
``OUT/roofline_raw.csv.gz`` (committed as ``tests/fixtures/roofline_raw.csv.gz``), where tests
compare fuseprof's achieved FLOP/s, arithmetic intensity and DRAM bandwidth with ncu's own
roofline formulas. Every kernel runs inside the NVTX range ``roofline_fixture`` after one
warm-up call. Without ``--capture`` it only runs the kernels (what ncu profiles).
"""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F


def _fp16_fma_triton() -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None:
    """x·y + z computed in fp16 by Triton, so the FP16 (HFMA2) counters are not zero."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x, y, z = tl.load(x_ptr + offs, mask), tl.load(y_ptr + offs, mask), tl.load(z_ptr + offs, mask)
        tl.store(out_ptr + offs, x * y + z, mask)

    def run(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 4096),)](x, y, z, out, x.numel(), BLOCK=4096)
        return out

    return run


def cases() -> dict[str, Callable[[], object]]:
    dev, g = "cuda", torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        return torch.randn(shape, device=dev, generator=g, dtype=torch.float32).to(dtype)

    a_bf, b_bf = rand(2048, 4096), rand(14336, 4096)
    a_h, b_h = rand(2048, 2048, dtype=torch.float16), rand(2048, 2048, dtype=torch.float16)
    a_f, b_f = rand(2048, 2048, dtype=torch.float32), rand(2048, 2048, dtype=torch.float32)
    a_d, b_d = rand(1024, 1024, dtype=torch.float64), rand(1024, 1024, dtype=torch.float64)
    a_i = torch.randint(-8, 8, (2048, 2048), device=dev, generator=g, dtype=torch.int8)
    b_i = torch.randint(-8, 8, (2048, 2048), device=dev, generator=g, dtype=torch.int8)
    a_8 = rand(2048, 2048).to(torch.float8_e4m3fn)
    b_8 = rand(2048, 2048).to(torch.float8_e4m3fn)
    one = torch.ones((), device=dev)
    x_h, y_h, z_h = (rand(64 * 1024 * 1024, dtype=torch.float16) for _ in range(3))
    gate, up = rand(4096, 14336), rand(4096, 14336)
    x_f, y_f = rand(32 * 1024 * 1024, dtype=torch.float32), rand(32 * 1024 * 1024, dtype=torch.float32)

    def tf32_mm() -> torch.Tensor:
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return a_f @ b_f
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    out = {
        "gemm_bf16": lambda: F.linear(a_bf, b_bf),
        "gemm_fp16": lambda: a_h @ b_h,
        "gemm_tf32": tf32_mm,
        "gemm_fp32_ffma": lambda: a_f[:1024, :1024] @ b_f[:1024, :1024],
        "gemm_fp64": lambda: a_d @ b_d,
        "gemm_int8": lambda: torch._int_mm(a_i, b_i.t().contiguous().t()),
        "gemm_fp8": lambda: torch._scaled_mm(a_8, b_8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
        "silu_mul_bf16": lambda: F.silu(gate) * up,
        "add_fp16": lambda: x_h + y_h,
        "fma_fp32": lambda: torch.addcmul(x_f, x_f, y_f),
    }
    fma = _fp16_fma_triton()
    if fma is not None:
        out["fma_fp16_triton"] = lambda: fma(x_h, y_h, z_h)
    return out


def capture(out: Path) -> Path:
    from fuseprof.capture.ncu_command import NcuRequest, profile_argv
    from fuseprof.capture.ncu_run import find_ncu, run_ncu_known_metrics
    from fuseprof.parse.ncu_import import import_csv_argv, run_capture_output
    from fuseprof.parse.ncu_metrics import NCU_METRICS

    ncu, report = find_ncu(), out / "roofline.ncu-rep"
    run, argv, kept, dropped = run_ncu_known_metrics(
        lambda metrics: profile_argv(NcuRequest(ncu=ncu, report_path=report, range_labels=["roofline_fixture"],
                                                metrics=metrics, target_argv=[sys.executable, __file__],
                                                sections=("roofline",))),
        NCU_METRICS, 900, print)
    (out / "roofline_ncu.log").write_text(" ".join(argv) + "\n" + run.log)
    path = out / "roofline_raw.csv.gz"
    with gzip.open(path, "wt", compresslevel=9) as fh:
        fh.write(run_capture_output(import_csv_argv(ncu, report)))
    print(f"roofline fixture: {len(run.passes)} kernels, passes {sorted({p for _, p in run.passes})}, "
          f"dropped metrics {dropped}; {path}")
    return path


def run_kernels() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, fn in cases().items():
        try:
            fn()  # warm-up: cuBLAS handles, Triton compile
        except Exception as exc:  # a precision this torch or GPU lacks is left out of the fixture
            print(f"roofline_fixture: skipping {name}: {exc}")
            continue
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("roofline_fixture")
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        print(f"roofline_fixture: ran {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capture", type=Path, metavar="OUT", help="run under ncu and write OUT/roofline_raw.csv.gz")
    args = parser.parse_args()
    if args.capture:
        args.capture.mkdir(parents=True, exist_ok=True)
        capture(args.capture)
    else:
        run_kernels()


if __name__ == "__main__":
    main()
