"""Tensor-parallel Llama-style MLP on several GPUs, one torch.profiler trace per rank.

    torchrun --nproc-per-node 2 scripts/capture_tp_mlp.py --out DIR [--m 2048]

Column-parallel gate and up projections (each rank holds intermediate/world columns), SiLU·mul,
row-parallel down projection, and an all-reduce of the output (NCCL), bf16, hidden 4096,
intermediate 14336. Checked against a float64 reference first; then a profiler warm-up step (it
absorbs the ranks' different profiler start-up, which otherwise shows as one all-reduce waiting
hundreds of ms) and three recorded steps, record_shapes on. Writes DIR/tp_mlp-rank<r>.json.gz.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from fuseprof.capture.torch_profile import export_gzipped_trace, profiler_activities

HIDDEN, INTERMEDIATE = 4096, 14336


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--m", type=int, default=2048)
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    g = torch.Generator(device="cuda").manual_seed(0)  # same full weights on every rank, then sliced
    x = torch.randn(args.m, HIDDEN, device="cuda", generator=g).bfloat16()
    w_gate = (torch.randn(INTERMEDIATE, HIDDEN, device="cuda", generator=g) / HIDDEN**0.5).bfloat16()
    w_up = (torch.randn(INTERMEDIATE, HIDDEN, device="cuda", generator=g) / HIDDEN**0.5).bfloat16()
    w_down = (torch.randn(HIDDEN, INTERMEDIATE, device="cuda", generator=g) / INTERMEDIATE**0.5).bfloat16()
    part = INTERMEDIATE // world
    cols = slice(rank * part, (rank + 1) * part)
    gate, up, down = w_gate[cols].contiguous(), w_up[cols].contiguous(), w_down[:, cols].contiguous()

    def step() -> torch.Tensor:
        out = F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)
        dist.all_reduce(out)
        return out

    out = step()
    ref = (F.silu(x.double() @ w_gate.double().T) * (x.double() @ w_up.double().T)) @ w_down.double().T
    rel = float((out.double() - ref).norm() / ref.norm())
    assert rel < 2e-2, f"rank {rank}: rel_err {rel}"
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    args.out.mkdir(parents=True, exist_ok=True)
    gz = args.out / f"tp_mlp-rank{rank}.json.gz"
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(activities=profiler_activities(True), record_shapes=True, schedule=schedule,
                                on_trace_ready=lambda p: export_gzipped_trace(p, gz)) as prof:
        for _ in range(4):
            step()
            torch.cuda.synchronize()
            prof.step()
    print(f"rank {rank}/{world}: rel_err {rel:.2e}; {gz}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
