"""``fuseprof ceilings``: the capture GPU's own roofs, measured rather than read off a datasheet.

- DRAM: a device-to-device copy of 2 GiB, counting bytes read plus written (the rate a
  memory-bound kernel can hope for; about 4.3 TB/s on this workplace's H200 against 4.8 on paper).
- FP32: a kernel of 8 independent FMA chains per thread over every SM (2 FLOPs per FMA).
- BF16 tensor: an 8192³ matrix product through cuBLAS.
Each is the median of CUDA-event timings after warm-up.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

_FMA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void fma_chains(float* out, int iters, float a, float b) {
  float x0 = threadIdx.x, x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f,
        x4 = x0 + 4.f, x5 = x0 + 5.f, x6 = x0 + 6.f, x7 = x0 + 7.f;
  for (int i = 0; i < iters; ++i) {
    x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
    x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
void fma_chains_launch(torch::Tensor out, int64_t iters, int64_t threads) {
  fma_chains<<<out.numel() / threads, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      out.data_ptr<float>(), static_cast<int>(iters), 0.999f, 0.001f);
}
"""
FMA_CHAINS = 8
FMA_ITERS = 16384


def _median_seconds(fn: Callable[[], Any], repeats: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return statistics.median(samples)


def copy_bandwidth(device: torch.device, nbytes: int = 2 << 30) -> float:
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / _median_seconds(lambda: dst.copy_(src))


def fp32_fma_rate(device: torch.device) -> float:
    from torch.utils.cpp_extension import load_inline

    module = load_inline("fuseprof_fma_ceiling", cpp_sources="void fma_chains_launch(torch::Tensor out, "
                         "int64_t iters, int64_t threads);", cuda_sources=_FMA_SOURCE,
                         functions=["fma_chains_launch"], extra_cuda_cflags=["-O3"])
    threads = 256
    blocks = torch.cuda.get_device_properties(device).multi_processor_count * 8
    out = torch.empty(blocks * threads, dtype=torch.float32, device=device)
    seconds = _median_seconds(lambda: module.fma_chains_launch(out, FMA_ITERS, threads), repeats=10)
    return 2 * FMA_CHAINS * FMA_ITERS * out.numel() / seconds


def bf16_matmul_rate(device: torch.device, n: int = 8192) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    return 2 * n**3 / _median_seconds(lambda: a @ b, repeats=10)


def measure_ceilings(device: torch.device) -> dict[str, Any]:
    """Measured roofs in base units (bytes/s, FLOP/s), with how each was measured."""
    return {
        "dram_bytes_per_s": copy_bandwidth(device),
        "fp32_flops_per_s": fp32_fma_rate(device),
        "bf16_tensor_flops_per_s": bf16_matmul_rate(device),
        "method": {
            "dram_bytes_per_s": "2 GiB device-to-device copy, (read + written bytes) / median time",
            "fp32_flops_per_s": f"{FMA_CHAINS} FMA chains x {FMA_ITERS} iterations per thread, 8 blocks of 256 "
                                "threads per SM, 2 FLOPs per FMA / median time",
            "bf16_tensor_flops_per_s": "8192^3 bf16 torch.matmul, 2n^3 / median time",
        },
    }


def write_ceilings_bundle(device_name: str, out_dir: Path) -> Path:
    """Measure and store the ceilings as a bundle of kind 'ceilings' (manifest only)."""
    from fuseprof.bundle.files import BundleWriter
    from fuseprof.bundle.provenance import bundle_name, command_line, git_state, now_utc, versions
    from fuseprof.capture.device_facts import device_facts
    from fuseprof.capture.profile import resolve_device
    from fuseprof.errors import NoGPUError

    device = resolve_device(device_name)
    if device.type != "cuda":
        raise NoGPUError("ceilings are GPU rates: run on a GPU machine")
    facts, created = device_facts(device), now_utc()
    manifest = {"kind": "ceilings", "case": None, "device": facts, "created_utc": created,
                "command_line": command_line(), "git": git_state(Path.cwd()), "versions": versions(),
                "ceilings": measure_ceilings(device)}
    with BundleWriter(out_dir, bundle_name("ceilings", facts["name"], created)) as w:
        w.write_manifest(manifest)
        return w.commit()
