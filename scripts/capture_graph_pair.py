"""Capture, on a GPU, the traces that test graph attribution, profiler steps and idle causes.

Writes under --out (each a gzipped torch.profiler trace, record_shapes and with_modules on):
- ``graph-capture.json.gz``: a two-layer bf16 block (RMSNorm, QKV-style projection, SiLU·mul MLP,
  residual adds) captured into one ``torch.cuda.CUDAGraph`` under the profiler: the launch calls, the
  ops, shapes and modules of every kernel the graph holds; no kernel runs.
- ``graph-replay.json.gz``: the same graph replayed 3 times in 3 profiler steps, after one warm-up
  step inside the profiler's schedule (``wait=0, warmup=1, active=3``): the replays' kernels carry
  no op, and the warm-up step's GPU work has no CPU records.
- ``idle-causes.json.gz``: the eager block over 4 profiler steps; in each step, before its second
  layer, a 3 ms ``time.sleep`` inside ``record_function("host_sleep")`` (a host-bound gap of known
  length and cause), and at the end of each step a ``.item()`` (a blocking device-to-host copy: a
  sync).
- ``eager-attention.json.gz``: a ViT-style encoder block written the eager way (QKᵀ with ``torch.matmul``,
  scale, softmax, ·V, as HF's "eager" attention), bf16, batch 8 × 197 tokens × 12 heads of 64, 3 steps.
Prints what the first kernel events and launch calls of each trace record, so the format is seen.

    python scripts/capture_graph_pair.py --out DIR
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

HIDDEN, FFN, TOKENS = 1024, 2816, 64
SLEEP_S = 0.003


class RMSNorm(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * self.weight


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = RMSNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.out = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.gate_up = nn.Linear(HIDDEN, 2 * FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)
        self.mlp_norm = RMSNorm(HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        x = x + self.out(q * torch.sigmoid(k) + v)
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(nn.functional.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, sleep_before_second: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Layer(), Layer()])
        self.sleep_before_second = sleep_before_second

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            if i == 1 and self.sleep_before_second:
                with record_function("host_sleep"):
                    time.sleep(SLEEP_S)
            x = layer(x)
        return x


def _profiler(**kwargs):  # type: ignore[no-untyped-def]
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_modules=True,
                   with_stack=True, **kwargs)


def _export(prof, path: Path) -> Path:  # type: ignore[no-untyped-def]
    raw = path.with_suffix("")
    prof.export_chrome_trace(str(raw))
    path.write_bytes(gzip.compress(raw.read_bytes(), 6))
    raw.unlink()
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    print(f"{path.name}: {path.stat().st_size / 1e3:.0f} kB, {len(kernels)} kernels, {len(launches)} runtime calls")
    print("  runtime names:", sorted({e["name"] for e in launches}))
    for e in kernels[:2]:
        print("  kernel args:", e["name"][:60], e.get("args"))
    for e in [e for e in launches if "aunch" in e["name"]][:3]:
        print("  launch args:", e["name"], e.get("args"))
    return path


def capture_graph_pair(out: Path) -> None:
    torch.manual_seed(0)
    model = Block().to("cuda", torch.bfloat16).eval()
    static_x = torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream before capture, as torch.cuda.graph asks
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with _profiler() as prof:
            with torch.cuda.graph(graph):
                static_y = model(static_x)
        _export(prof, out / "graph-capture.json.gz")
        eager = model(static_x)
        graph.replay()
        torch.cuda.synchronize()
        err = (static_y.float() - eager.float()).abs().max().item()
        assert err == 0, f"graph replay differs from eager by {err}"
        # the trace is written when the schedule's one cycle ends (a trace exported after the profiler
        # exits would hold only the next cycle's events: none)
        ready = lambda p: _export(p, out / "graph-replay.json.gz")  # noqa: E731
        with _profiler(schedule=schedule(wait=0, warmup=1, active=3, repeat=1), on_trace_ready=ready) as prof:
            for _ in range(4):
                graph.replay()
                torch.cuda.synchronize()
                prof.step()


def capture_idle_causes(out: Path) -> None:
    torch.manual_seed(0)
    model = Block(sleep_before_second=True).to("cuda", torch.bfloat16).eval()
    x = torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        with _profiler() as prof:
            for _ in range(4):
                y = model(x)
                float(y[0, 0].item())  # a blocking device-to-host copy each step
                prof.step()
    _export(prof, out / "idle-causes.json.gz")


class EagerAttention(nn.Module):
    """Multi-head self-attention with the scores materialised, as HF's 'eager' attention does."""

    def __init__(self, width: int = 768, heads: int = 12) -> None:
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) / (c // self.heads) ** 0.5
        probs = torch.softmax(scores, dim=-1)
        return self.out(torch.matmul(probs, v).transpose(1, 2).reshape(b, n, c))


def capture_eager_attention(out: Path) -> None:
    torch.manual_seed(0)
    model = EagerAttention().to("cuda", torch.bfloat16).eval()
    x = torch.randn(8, 197, 768, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        with _profiler() as prof:
            for _ in range(3):
                model(x)
                torch.cuda.synchronize()
                prof.step()
    _export(prof, out / "eager-attention.json.gz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(torch.__version__, torch.cuda.get_device_name())
    capture_graph_pair(args.out)
    capture_idle_causes(args.out)
    capture_eager_attention(args.out)


if __name__ == "__main__":
    main()
