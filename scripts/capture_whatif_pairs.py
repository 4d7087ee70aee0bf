"""Capture, on a GPU, A/B pairs for the step-level what-if (``fuseprof whatif``): for each pair a trace of A, a
trace of B, and both step times measured apart from the profiler, interleaved in one run.

    python scripts/capture_whatif_pairs.py --out DIR [--only NAME,NAME]

B is A with one plan applied, the plan ``fuseprof whatif`` is given to predict B from A's trace:

    decode      2-layer Llama decode at batch 1: eager (A) vs the step as one CUDA graph (B)   --graph step
    compile     4-layer Llama forward, 8 × 1024 tokens: eager vs torch.compile(dynamic=False)  --compile step
    optimizer   a 4-layer training step (4 × 512 tokens): AdamW(foreach) vs AdamW(fused)       --fuse optimizer
    attention   causal attention, 8 × 1024 tokens: eager softmax(QKᵀ)V vs SDPA                --fuse attention
    qkv         an attention block: q, k, v as three GEMMs vs one qkv GEMM                     --fuse horizontal

Traces are light (``record_shapes`` and an execution trace beside each; no Python stack, whose overhead the profiler
adds to every op), 1 warm-up and 3 active profiler steps, gzipped. ``pairs.json`` holds per pair the plan and A's and B's measured step times: the
median over 7 rounds, A then B, of the median of 20 steps each (CUDA events around each step, 3 warm-ups first).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_truth_set as models  # noqa: E402  (the truth set's models: one definition of each)

DEVICE = models.DEVICE
Step = Callable[[], Any]


def _sync() -> None:
    torch.cuda.synchronize()


def trace(step: Step, path: Path) -> None:
    """A gzipped torch.profiler trace of ``step`` (1 warm-up, 3 active steps, shapes recorded) with its execution
    trace beside it (``NAME.et.json.gz``: which tensor each op took, so the fusion finder sees the dataflow)."""
    et = path.with_name(path.name.replace(".json", ".et.json"))
    observer = ExecutionTraceObserver()
    observer.register_callback(str(et))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3), execution_trace_observer=observer,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(4):
            step()
            _sync()
            prof.step()
    observer.unregister_callback()
    for file in (path, et):
        if file.exists():
            file.with_name(file.name + ".gz").write_bytes(gzip.compress(file.read_bytes(), 6))
            file.unlink()


def pair(out: Path, name: str, a: Step, b: Step, plan: str, what: str) -> dict[str, Any]:
    """Trace A and B, then time them in turn; the pair's row of pairs.json."""
    t0 = time.monotonic()
    trace(a, out / f"{name}_a.json")
    trace(b, out / f"{name}_b.json")
    rounds = [(models.step_time_ms(a), models.step_time_ms(b)) for _ in range(7)]
    row = {"pair": name, "what": what, "plan": plan, "a": f"{name}_a.json.gz", "b": f"{name}_b.json.gz",
           "measured_a_ms": round(statistics.median(r[0] for r in rounds), 4),
           "measured_b_ms": round(statistics.median(r[1] for r in rounds), 4)}
    print(f"{name}: A {row['measured_a_ms']} ms, B {row['measured_b_ms']} ms ({time.monotonic() - t0:.0f} s)", flush=True)
    return row


@torch.no_grad()
def decode(out: Path) -> dict[str, Any]:
    decoder = models.Decoder(1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            decoder.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decoder.step()
    return pair(out, "decode", decoder.step, graph.replay, "--graph step",
                "2-layer Llama decode step, batch 1: eager vs one CUDA graph")


@torch.no_grad()
def compiled(out: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    model = models.Llama().to(DEVICE, models.DTYPE).eval()
    tokens, positions = models._tokens(8, 1024)
    fast = torch.compile(model, dynamic=False)
    fast(tokens, positions)
    return pair(out, "compile", lambda: model(tokens, positions), lambda: fast(tokens, positions), "--compile step",
                "4-layer Llama forward, 8 x 1024 tokens: eager vs torch.compile(dynamic=False)")


def optimizer(out: Path) -> dict[str, Any]:
    steps = {}
    for fused in (False, True):
        torch.manual_seed(0)
        model = models.Llama().to(DEVICE)
        adam = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if fused else {"foreach": True}))
        vocab = model.lm_head.out_features
        g = torch.Generator(device="cpu").manual_seed(0)
        tokens = torch.randint(0, vocab, (4, 512), generator=g).to(DEVICE)
        positions = torch.arange(512, device=DEVICE)

        def step(model: Any = model, adam: Any = adam, tokens: Any = tokens, positions: Any = positions,
                 vocab: int = vocab) -> None:
            with torch.autocast("cuda", dtype=models.DTYPE):
                logits = model(tokens, positions)
            F.cross_entropy(logits.float().view(-1, vocab), tokens.view(-1)).backward()
            adam.step()
            adam.zero_grad(set_to_none=True)

        steps[fused] = step
    return pair(out, "optimizer", steps[False], steps[True], "--fuse optimizer",
                "4-layer Llama training step, 4 x 512 tokens, bf16 autocast: AdamW(foreach) vs AdamW(fused)")


@torch.no_grad()
def _blocks(out: Path, name: str, a: dict[str, bool], b: dict[str, bool], plan: str, what: str,
            same_weights: bool = False) -> dict[str, Any]:
    """Two attention blocks (``models.Attention`` with options ``a`` and ``b``; B with A's weights where their
    parameters match) on one 8 x 1024-token input."""
    x = torch.randn(8, 1024, models.D, device=DEVICE, dtype=models.DTYPE)
    cos, sin = models.Llama(layers=0).rotary(torch.arange(1024, device=DEVICE))
    first, second = (models.Attention(**options).to(DEVICE, models.DTYPE) for options in (a, b))
    if same_weights:
        second.load_state_dict(first.state_dict())
    return pair(out, name, lambda: first(x, cos, sin), lambda: second(x, cos, sin), plan, what)


def attention(out: Path) -> dict[str, Any]:
    return _blocks(out, "attention", {"eager": True}, {"eager": False}, "--fuse attention",
                   "attention block, 8 x 1024 tokens: eager softmax(QK^T)V vs SDPA", same_weights=True)


def qkv(out: Path) -> dict[str, Any]:
    return _blocks(out, "qkv", {"fused_qkv": False}, {"fused_qkv": True}, "--fuse horizontal",
                   "attention block, 8 x 1024 tokens: q, k, v as three GEMMs vs one qkv GEMM")


PAIRS: dict[str, Callable[[Path], dict[str, Any]]] = {"decode": decode, "compile": compiled, "optimizer": optimizer,
                                                      "attention": attention, "qkv": qkv}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", help="comma-separated pairs: " + ", ".join(PAIRS))
    args = parser.parse_args()
    if DEVICE.type != "cuda":
        print("capture_whatif_pairs: needs a CUDA GPU", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.only.split(",") if args.only else PAIRS:
        try:
            rows.append(PAIRS[name](args.out))
        except Exception as exc:  # one pair's failure must not lose the others
            print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
    device = torch.cuda.get_device_name()
    (args.out / "pairs.json").write_text(json.dumps({"device": device, "torch": torch.__version__, "pairs": rows},
                                                    indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
