"""What a fresh process pays before its first timed item: ``python scripts/cold_start.py [CASE]``.

Each rank of a sharded bench is a fresh process, so each pays this once (a one-GPU bench pays it
once in all); run it with empty TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR for the cold figure.
Prints the seconds of each step and torch.compile's own phase times for the first compile.
"""

from __future__ import annotations

import sys
import time

started = time.monotonic()
steps: list[tuple[str, float]] = []


def step(name: str) -> None:
    steps.append((name, time.monotonic() - started - sum(s for _, s in steps)))


import torch  # noqa: E402

step("import torch")
torch.ones(1, device="cuda").sum().item()
step("CUDA context")
from fuseprof.case import load_case  # noqa: E402

case = load_case(sys.argv[1] if len(sys.argv) > 1 else "rmsnorm_swiglu")
variants = {v.name: v.fn for v in case.variants}
step(f"load case {case.name}")


def inputs(shape: tuple[int, int]) -> tuple[torch.Tensor, ...]:
    return tuple(case.make_inputs(shape, "bfloat16", "cuda", torch.Generator("cuda").manual_seed(0)))


x = inputs((1, 4096))
variants["eager"](*x)
torch.cuda.synchronize()
step("eager first call")
import torch._inductor.compile_fx  # noqa: E402, F401

step("import Inductor")
variants["compiled"](*x)
torch.cuda.synchronize()
step("compiled first call (cold compile)")
variants["compiled"](*inputs((128, 4096)))
torch.cuda.synchronize()
step("compiled, a second shape")
for name in ("fused_cuda", "fused_triton"):
    variants[name](*x)
    torch.cuda.synchronize()
    step(f"{name} first call")
for name, seconds in steps:
    print(f"{name:36s} {seconds:6.2f} s")
print(f"{'total':36s} {time.monotonic() - started:6.2f} s")
print(torch._dynamo.utils.compile_times(repr="str", aggregate=True)[:1500])
