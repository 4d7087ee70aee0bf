"""A program of your own, with two regions for ``fuseprof run``:

    fuseprof run examples/region_demo.py --steps 4
    fuseprof run --unprofiled-steps 3 examples/region_demo.py --steps 6

An RMSNorm written the unfused way and a SwiGLU-style gate; runs on the GPU when there is one.
"""

import argparse

import torch
import torch.nn.functional as F

import fuseprof

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2)
parser.add_argument("--rows", type=int, default=256)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if device == "cuda" else torch.float32
x = torch.randn(args.rows, 4096, device=device, dtype=dtype)
gate = torch.randn(args.rows, 4096, device=device, dtype=dtype)
weight = torch.ones(4096, device=device, dtype=dtype)

for _ in range(args.steps):
    with fuseprof.region("rmsnorm"):
        h = x.float()
        y = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype) * weight
    with fuseprof.region("gate"):
        out = F.silu(gate) * y
    fuseprof.step()  # one step ended: `fuseprof run --unprofiled-steps K` times K of them before tracing the rest
print(f"ran {args.steps} steps on {device}: {float(out.float().abs().mean()):.4f}")
