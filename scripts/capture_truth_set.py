"""Capture, on a GPU, traces of small models whose truth is known by construction, each with its truth file.

    python scripts/capture_truth_set.py --out DIR [--only NAME,NAME]

Every trace is a gzipped torch.profiler trace (``record_shapes``, ``with_stack``, ``with_modules``, the stack's
frames other than modules dropped; 1 warm-up and 3 active steps) with the PyTorch execution trace beside it (``<name>.et.json.gz``: which tensor each op
took) and ``<name>.truth.json``: what a careful reader of the model code knows — the audit verdict per
catalogue entry (a list where two readings are fair), which opportunity classes exist, the idle verdict,
the step's known critical path where one is built in, and the median step time measured apart from the
profiler (20 steps, CUDA events; the A/B pairs' closed loop reads it). The models (bf16):

    train_foreach / train_fused   a 4-layer Llama-style step (d 2048, 32k vocabulary: ~0.4 B parameters, so the
                                  optimizer is a real share of it): forward, backward, AdamW(foreach / fused)
    train_foreach_memory          train_foreach with profile_memory=True ([memory] events)
    train_checkpoint              train_foreach with every layer's activations recomputed (torch.utils.checkpoint)
    lm_head_eager / lm_head_liger   the LM head and cross-entropy over a 32k vocabulary, eager or Liger's fused
                                  linear cross-entropy (no N × V logits), with profile_memory
    train_hygiene_unfused / _fused   the parts around the optimizer: fp16 with a GradScaler, gradient clipping per
                                  parameter / foreach, AdamW foreach / fused, zero_grad writing zeros / to None
    mlp_gated / mlp_gateup / mlp_plain   inference MLPs: gate and up apart, gate_up as one GEMM, fc1-GELU-fc2
    qkv_separate / qkv_fused      attention blocks: q, k, v as three GEMMs, or one qkv GEMM split
    attn_eager / attn_sdpa        causal attention written eagerly (QKᵀ, scale, mask, softmax, ·V) or as SDPA
    moe                           a top-2 mixture of 8 experts, eager (router softmax and topk: not attention,
                                  not sampling)
    fp8_gemm                      an FP8 linear: per-tensor quantize, torch._scaled_mm
    prefill_eager / prefill_compiled   the Llama forward eager and under torch.compile(dynamic=False)
    decode_eager                  token-by-token decode with a KV cache and greedy sampling, eager
    decode_graph/                 the same decode step as CUDA graphs at batch 1 and 4, each graph writing its
                                  sampled token back into its input (a memcpy node): capture-bs1/-bs4 (the
                                  capture traces), replay-bs1/-bs4, and replay-both (both graphs in one trace)
    known_path                    small kernels, a 2 ms host sleep, a long GEMM on a side stream that the
                                  default stream then waits for, a synchronize, small kernels: a known path
    dataloader_wait               each step waits 5 ms in a DataLoader-named range before ~1 ms of GPU work
    sync_bound                    each step calls .item() after every small op
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, record_function, schedule

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DTYPE = torch.bfloat16
D, HEADS, FFN, VOCAB, LAYERS = 1024, 8, 2816, 8192, 4
WARMUP, ACTIVE = 1, 3


# --- the models ------------------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    """HF Llama's RMSNorm, eager: float, pow, mean, add eps, rsqrt, mul, cast, weight."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, fused_qkv: bool = False, eager: bool = False) -> None:
        super().__init__()
        self.fused_qkv, self.eager, self.width, self.head = fused_qkv, eager, D, D // HEADS
        if fused_qkv:
            self.qkv = nn.Linear(D, 3 * D, bias=False)
        else:
            self.q_proj, self.k_proj, self.v_proj = (nn.Linear(D, D, bias=False) for _ in range(3))
        self.o_proj = nn.Linear(D, D, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                cache: tuple[torch.Tensor, torch.Tensor] | None = None, pos: torch.Tensor | None = None) -> torch.Tensor:
        b, length, _ = x.shape
        q, k, v = self.qkv(x).split(self.width, dim=-1) if self.fused_qkv else (self.q_proj(x), self.k_proj(x),
                                                                                  self.v_proj(x))
        q, k, v = (t.view(b, length, HEADS, self.head).transpose(1, 2) for t in (q, k, v))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        causal = cache is None
        if cache is not None:  # decode: write this token's k and v, attend over the whole cache
            cache[0].index_copy_(2, pos, k)
            cache[1].index_copy_(2, pos, v)
            k, v = cache
        if self.eager:
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head)
            if causal:
                mask = torch.full((length, length), float("-inf"), device=x.device).triu(1)
                scores = scores + mask
            out = torch.matmul(torch.softmax(scores.float(), dim=-1).to(q.dtype), v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.o_proj(out.transpose(1, 2).reshape(b, length, self.width))


class MLP(nn.Module):
    def __init__(self, kind: str = "gated") -> None:
        super().__init__()
        self.kind = kind
        if kind == "gated":
            self.gate_proj, self.up_proj = nn.Linear(D, FFN, bias=False), nn.Linear(D, FFN, bias=False)
        elif kind == "gateup":
            self.gate_up_proj = nn.Linear(D, 2 * FFN, bias=False)
        else:
            self.fc1 = nn.Linear(D, FFN)
        self.down = nn.Linear(FFN, D, bias=kind == "plain")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "gated":
            return self.down(F.silu(self.gate_proj(x)) * self.up_proj(x))
        if self.kind == "gateup":
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
            return self.down(F.silu(gate) * up)
        return self.down(F.gelu(self.fc1(x)))


class Layer(nn.Module):
    def __init__(self, **attention: Any) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(D), RMSNorm(D)
        self.self_attn, self.mlp = Attention(**attention), MLP()

    def forward(self, x, cos, sin, cache=None, pos=None):  # type: ignore[no-untyped-def]
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, pos)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, layers: int = LAYERS, checkpoint: bool = False) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList([Layer() for _ in range(layers)])
        self.norm, self.lm_head, self.checkpoint = RMSNorm(D), nn.Linear(D, VOCAB, bias=False), checkpoint
        self.head = D // HEADS

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inv = 1.0 / (10000 ** (torch.arange(0, self.head, 2, device=positions.device).float() / self.head))
        freqs = positions.float()[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(DTYPE), emb.sin().to(DTYPE)

    def forward(self, tokens, positions, caches=None, pos=None):  # type: ignore[no-untyped-def]
        x = self.embed_tokens(tokens)
        cos, sin = self.rotary(positions)
        for i, layer in enumerate(self.layers):
            cache = caches[i] if caches is not None else None
            if self.checkpoint:
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin, cache, pos)
        return self.lm_head(self.norm(x))


class MoE(nn.Module):
    def __init__(self, experts: int = 8, top: int = 2) -> None:
        super().__init__()
        self.router, self.top = nn.Linear(D, experts, bias=False), top
        self.experts = nn.ModuleList([MLP() for _ in range(experts)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = torch.softmax(self.router(flat).float(), dim=-1).topk(self.top, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel():
                out.index_add_(0, rows, expert(flat.index_select(0, rows)) * weights[rows, slot, None].to(x.dtype))
        return out.view_as(x)


# --- capture --------------------------------------------------------------------------------------------

def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def _gzip(path: Path) -> Path:
    gz = path.with_name(path.name + ".gz")
    gz.write_bytes(gzip.compress(path.read_bytes(), 6))
    path.unlink()
    return gz


def step_time_ms(step: Callable[[], Any], repeats: int = 20) -> float:
    """The median wall time of one step, apart from the profiler: CUDA events around each, 3 warm-ups first."""
    for _ in range(3):
        step()
    _sync()
    times = []
    for _ in range(repeats):
        if DEVICE.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t = time.perf_counter()
            step()
            times.append(1e3 * (time.perf_counter() - t))
    return statistics.median(times)


def slim(trace: Path) -> None:
    """The trace without the Python stack's frames other than nn.Module ones (with_stack records every frame;
    fuseprof reads only the modules): a tenth of the size, every event fuseprof reads kept."""
    data = json.loads(trace.read_text())
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "python_function"
                           or str(e.get("name", "")).startswith("nn.Module: ")]
    trace.write_text(json.dumps(data))


def capture(out: Path, name: str, step: Callable[[], Any], truth: dict[str, Any], memory: bool = False,
            timed: bool = True) -> None:
    """Profile ``step`` (1 warm-up and 3 active profiler steps) with an execution trace beside it, then time it
    apart from the profiler; write the trace, the execution trace and the truth file."""
    out.mkdir(parents=True, exist_ok=True)
    trace, et_path = out / f"{name}.json", out / f"{name}.et.json"
    observer = ExecutionTraceObserver()
    observer.register_callback(str(et_path))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE.type == "cuda" else [])
    t0 = time.monotonic()
    with profile(activities=activities, record_shapes=True, with_stack=True, with_modules=True, profile_memory=memory,
                 schedule=schedule(wait=0, warmup=WARMUP, active=ACTIVE), execution_trace_observer=observer,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
        for _ in range(WARMUP + ACTIVE):
            step()
            _sync()
            prof.step()
    observer.unregister_callback()
    if timed:
        truth["measured_step_ms"] = round(step_time_ms(step), 4)
    slim(trace)
    _gzip(trace)
    if et_path.exists():
        _gzip(et_path)
    (out / f"{name}.truth.json").write_text(json.dumps({"name": name, **truth}, indent=1) + "\n")
    print(f"{name}: {time.monotonic() - t0:.1f} s, trace {(out / f'{name}.json.gz').stat().st_size / 1e3:.0f} kB, "
          f"step {truth.get('measured_step_ms', '?')} ms", flush=True)


def _tokens(batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(0)
    return (torch.randint(0, VOCAB, (batch, length), generator=g).to(DEVICE),
            torch.arange(length, device=DEVICE))


ALL_FUSED_NOT = {"add + RMSNorm": ["not fused"], "SiLU · mul": ["not fused"], "QKV projection": ["not fused"],
                 "gate / up projection": ["not fused"], "RoPE + KV-cache write": ["not fused"],
                 "flash attention": ["fused"], "dequant + GEMM": ["not present"], "sampling": ["not present"],
                 # a gated MLP's SiLU after the gate GEMM: an activation epilogue by one reading, the SiLU · mul
                 # entry's by the other (labels.json marks the same case debatable)
                 "GEMM + bias + activation epilogue": ["not fused", "not present"]}


def train(out: Path, name: str, fused: bool, memory: bool = False, checkpoint: bool = False) -> None:
    global D, FFN, VOCAB
    torch.manual_seed(0)
    narrow = D, FFN, VOCAB
    if D == 1024:  # a model whose optimizer step is a real share of the step: wider, 32k vocabulary
        D, FFN, VOCAB = 2048, 5632, 32000
    try:
        model = Llama(checkpoint=checkpoint).to(DEVICE)
    finally:
        D, FFN, VOCAB = narrow
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if fused else {"foreach": True}))
    vocab = model.lm_head.out_features
    g = torch.Generator(device="cpu").manual_seed(0)
    tokens, positions = torch.randint(0, vocab, (2, 256), generator=g).to(DEVICE), torch.arange(256, device=DEVICE)

    def step() -> None:
        with torch.autocast(DEVICE.type, dtype=DTYPE):
            logits = model(tokens, positions)
        loss = F.cross_entropy(logits.float().view(-1, vocab), tokens.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    truth = {"what": f"4-layer Llama-style training step (d {model.embed_tokens.embedding_dim}, vocab {vocab}, 2 × 256 "
                     f"tokens), bf16 autocast, AdamW(fused={fused})"
                     + (", activation checkpointing" if checkpoint else ""),
             "audit": {**ALL_FUSED_NOT, "optimizer step": ["fused" if fused else "not fused"]},
             "phases": ["forward", "backward", "optimizer"], "checkpointing": checkpoint,
             "parameters": sum(p.numel() for p in model.parameters()),
             "idle_verdict": ["host-bound"]}  # ~12 ms of GPU work in a ~28 ms step, ~100 ms profiled
    capture(out, name, step, truth, memory=memory)


def train_hygiene(out: Path, name: str, fused: bool) -> None:
    """The step around the optimizer: fp16 autocast with a GradScaler, gradients unscaled and clipped, then the
    optimizer and zero_grad. Unfused: clip_grad_norm_(foreach=False) (a norm and a mul per parameter),
    AdamW(foreach), zero_grad(set_to_none=False) (a fill per parameter); fused: clip_grad_norm_(foreach=True),
    AdamW(fused), zero_grad(set_to_none=True) (no kernel). The truth file holds each part's GPU time measured
    apart (CUDA events), to score the rows' predicted savings against."""
    torch.manual_seed(0)
    model = Llama().to(DEVICE)
    params = [p for p in model.parameters()]
    optimizer = torch.optim.AdamW(params, lr=1e-4, **({"fused": True} if fused else {"foreach": True}))
    scaler = torch.amp.GradScaler(DEVICE.type)
    vocab = model.lm_head.out_features
    g = torch.Generator(device="cpu").manual_seed(0)
    tokens, positions = torch.randint(0, vocab, (2, 256), generator=g).to(DEVICE), torch.arange(256, device=DEVICE)

    def backward() -> None:
        with torch.autocast(DEVICE.type, dtype=torch.float16):
            logits = model(tokens, positions)
        loss = F.cross_entropy(logits.float().view(-1, vocab), tokens.view(-1))
        scaler.scale(loss).backward()

    def step() -> None:
        backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=fused)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=fused)

    backward()  # gradients to time the parts on
    grads = [p.grad for p in params]
    found, inv = torch.zeros(1, device=DEVICE), torch.ones(1, device=DEVICE)
    parts = {"clip_per_parameter_ms": lambda: torch.nn.utils.clip_grad_norm_(params, 1e9, foreach=False),
             "clip_foreach_ms": lambda: torch.nn.utils.clip_grad_norm_(params, 1e9, foreach=True),
             "zero_grad_foreach_ms": lambda: torch._foreach_zero_(grads),  # what zero_grad(set_to_none=False) runs
             "unscale_ms": lambda: torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)}
    measured = {k: round(step_time_ms(f), 4) for k, f in parts.items()}
    optimizer.zero_grad(set_to_none=True)
    grad_bytes = sum(p.numel() * p.element_size() for p in params)
    truth = {"what": f"4-layer Llama-style training step (d {D}, vocab {vocab}, 2 × 256 tokens), fp16 autocast, "
                     f"GradScaler, clip_grad_norm_(foreach={fused}), AdamW(fused={fused}), "
                     f"zero_grad(set_to_none={fused})",
             "audit": {"optimizer step": ["fused" if fused else "not fused"],
                       "gradient clipping": ["fused" if fused else "not fused"],
                       "zero-grad": ["fused" if fused else "not fused"], "grad scaler": ["fused"]},
             "parameters": len(params), "gradient_bytes": grad_bytes, "parts": measured,
             "phases": ["forward", "backward", "optimizer"], "idle_verdict": ["host-bound"]}
    capture(out, name, step, truth)


def lm_head_loss(out: Path) -> None:
    """The LM head and its loss over a 32k vocabulary (4 × 1024 tokens, d 2048, bf16), forward and backward:
    eager (the linear's N × V logits, cast to float, log_softmax, nll_loss) and Liger's fused linear
    cross-entropy (the logits computed and consumed a chunk at a time: never N × V at once). Both with
    profile_memory, so the peak's difference is the logits buffers the fusion avoids; the truth holds each
    step's time measured apart."""
    tokens, width, vocab = 4 * 1024, 2048, 32000
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(tokens, width, generator=g).to(DEVICE, DTYPE).requires_grad_()
    head = nn.Linear(width, vocab, bias=False).to(DEVICE, DTYPE)
    target = torch.randint(0, vocab, (tokens,), generator=g).to(DEVICE)
    eager = {"what": f"LM head + cross-entropy, eager ({tokens} tokens, d {width}, vocab {vocab}, bf16)",
             "audit": {"linear cross-entropy": ["not fused"]}, "classes_present": ["linear cross-entropy"],
             "logits_bytes": tokens * vocab * 2}

    def eager_step() -> None:
        F.cross_entropy(head(x).float(), target).backward()

    capture(out, "lm_head_eager", eager_step, eager, memory=True)
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
    except ImportError as exc:
        print(f"lm_head_liger: skipped ({exc})", flush=True)
        return
    fused_loss = LigerFusedLinearCrossEntropyLoss()

    def liger_step() -> None:
        fused_loss(head.weight, x, target).backward()

    capture(out, "lm_head_liger", liger_step, {**eager, "what": eager["what"].replace("eager", "Liger fused linear "
                                                                                     "cross-entropy"),
                                               "audit": {"linear cross-entropy": ["fused"]}, "classes_present": [],
                                               "classes_absent": ["linear cross-entropy"]}, memory=True)


@torch.no_grad()
def inference(out: Path, name: str, module: nn.Module, x: torch.Tensor, truth: dict[str, Any], *args: Any) -> None:
    module = module.to(DEVICE, DTYPE)
    capture(out, name, lambda: module(x, *args), truth)


def blocks(out: Path) -> None:
    x = torch.randn(8, 512, D, device=DEVICE, dtype=DTYPE)
    positions = torch.arange(512, device=DEVICE)
    cos, sin = Llama(layers=0).rotary(positions)
    absent = {"add + RMSNorm": ["not present"], "RoPE + KV-cache write": ["not present"],
              "dequant + GEMM": ["not present"], "sampling": ["not present"], "QKV projection": ["not present"],
              "flash attention": ["not present"]}
    inference(out, "mlp_gated", MLP("gated"), x, {"what": "gated MLP: gate and up GEMMs on one input, SiLU · up",
              "audit": {**absent, "SiLU · mul": ["not fused"], "gate / up projection": ["not fused"],
                        "GEMM + bias + activation epilogue": ["not fused", "not present"]},
              "horizontal_gemms": [["gate_proj", "up_proj"]]})
    inference(out, "mlp_gateup", MLP("gateup"), x, {"what": "gated MLP with gate and up as one GEMM (N = 2 × 2816)",
              "audit": {**absent, "SiLU · mul": ["not fused"], "gate / up projection": ["fused"],
                        "GEMM + bias + activation epilogue": ["not fused", "not present"]}, "horizontal_gemms": []})
    inference(out, "mlp_plain", MLP("plain"), x, {"what": "plain MLP: fc1 (bias) → GELU → fc2 (bias)",
              "audit": {**absent, "SiLU · mul": ["not present"], "gate / up projection": ["not present"],
                        "GEMM + bias + activation epilogue": ["partly fused", "not fused"]}, "horizontal_gemms": []})
    for fused in (False, True):
        inference(out, f"qkv_{'fused' if fused else 'separate'}", Attention(fused_qkv=fused), x,
                  {"what": f"attention block, {'one qkv GEMM split' if fused else 'q, k, v as three GEMMs'}, SDPA",
                   "audit": {**absent, "QKV projection": ["fused" if fused else "not fused"], "flash attention": ["fused"],
                             "RoPE + KV-cache write": ["not fused"], "SiLU · mul": ["not present"],
                             "gate / up projection": ["not present"], "GEMM + bias + activation epilogue": ["not present"]},
                   "horizontal_gemms": [] if fused else [["q_proj", "k_proj", "v_proj"]]}, cos, sin)
    for eager in (True, False):
        inference(out, f"attn_{'eager' if eager else 'sdpa'}", Attention(eager=eager), x,
                  {"what": f"causal attention, {'eager: QKᵀ, scale, mask, softmax, ·V' if eager else 'SDPA'}",
                   "audit": {**absent, "QKV projection": ["not fused"], "RoPE + KV-cache write": ["not fused"],
                             "flash attention": ["not fused" if eager else "fused"], "SiLU · mul": ["not present"],
                             "gate / up projection": ["not present"], "GEMM + bias + activation epilogue": ["not present"]},
                   "eager_attention": eager}, cos, sin)
    inference(out, "moe", MoE(), torch.randn(4, 256, D, device=DEVICE, dtype=DTYPE),
              {"what": "top-2 of 8 experts, eager: router GEMM, softmax, topk, per-expert index_select/GEMMs/index_add_",
               "audit": {**absent, "SiLU · mul": ["not fused"], "gate / up projection": ["not fused"],
                         "GEMM + bias + activation epilogue": ["not fused", "not present"]},
               "not_attention": True, "not_sampling": True})


@torch.no_grad()
def fp8(out: Path) -> None:
    if DEVICE.type != "cuda":
        return
    x = torch.randn(2048, D, device=DEVICE, dtype=DTYPE)
    w = torch.randn(4096, D, device=DEVICE, dtype=DTYPE)
    scale_w = w.abs().max().float() / 448.0
    w8 = (w / scale_w).to(torch.float8_e4m3fn)

    def step() -> torch.Tensor:
        scale_x = x.abs().max().float() / 448.0
        x8 = (x / scale_x).to(torch.float8_e4m3fn)
        return torch._scaled_mm(x8, w8.t(), scale_a=scale_x, scale_b=scale_w, out_dtype=DTYPE)

    capture(out, "fp8_gemm", step, {"what": "FP8 linear: per-tensor quantize of x, torch._scaled_mm with scales",
                                    "audit": {"dequant + GEMM": ["fused"]}})


@torch.no_grad()
def prefill(out: Path) -> None:
    torch.manual_seed(0)
    model = Llama().to(DEVICE, DTYPE).eval()
    tokens, positions = _tokens(1, 512)
    truth = {"audit": {**ALL_FUSED_NOT}, "pair": "prefill_eager -> prefill_compiled"}
    capture(out, "prefill_eager", lambda: model(tokens, positions), {**truth, "what": "Llama forward, 512 tokens, eager"})
    if DEVICE.type == "cuda":
        compiled = torch.compile(model, dynamic=False)
        compiled(tokens, positions)  # compiled before the capture
        capture(out, "prefill_compiled", lambda: compiled(tokens, positions),
                {"what": "the same forward under torch.compile(dynamic=False)",
                 "audit": {"add + RMSNorm": ["fused"], "SiLU · mul": ["fused"], "flash attention": ["fused"],
                           "dequant + GEMM": ["not present"], "sampling": ["not present"]}})


class Decoder:
    """Greedy decode of the Llama with a static KV cache: one step writes the token's k and v at ``pos``,
    samples the next token with argmax and writes it back into the step's input (``tokens.copy_``)."""

    def __init__(self, batch: int, context: int = 256) -> None:
        torch.manual_seed(0)
        self.model = Llama(layers=2).to(DEVICE, DTYPE).eval()
        shape = (batch, HEADS, context, D // HEADS)
        self.caches = [(torch.zeros(shape, device=DEVICE, dtype=DTYPE), torch.zeros(shape, device=DEVICE, dtype=DTYPE))
                       for _ in self.model.layers]
        self.tokens = torch.zeros((batch, 1), dtype=torch.long, device=DEVICE)
        self.pos = torch.zeros(1, dtype=torch.long, device=DEVICE)

    @torch.no_grad()
    def step(self) -> None:
        logits = self.model(self.tokens, self.pos, self.caches, self.pos)
        self.tokens.copy_(logits[:, -1].argmax(-1, keepdim=True))  # the sampled token back into the input


DECODE_TRUTH = {"audit": {"add + RMSNorm": ["not fused"], "SiLU · mul": ["not fused"], "QKV projection": ["not fused"],
                          "gate / up projection": ["not fused"], "RoPE + KV-cache write": ["not fused"],
                          "flash attention": ["fused"], "dequant + GEMM": ["not present"], "sampling": ["not fused"],
                          "GEMM + bias + activation epilogue": ["not fused", "not present"]}}


def decode(out: Path) -> None:
    eager = Decoder(1)
    capture(out, "decode_eager", eager.step, {**DECODE_TRUTH, "what": "2-layer decode step, batch 1, eager",
                                              "idle_verdict": ["host-bound"], "pair": "decode_eager -> replay-bs1"})
    if DEVICE.type != "cuda":
        return
    folder = out / "decode_graph"
    folder.mkdir(parents=True, exist_ok=True)
    graphs, decoders = {}, []  # a graph replays its decoder's tensors: each decoder must outlive its graph
    for batch in (1, 4):
        decoder = Decoder(batch)
        decoders.append(decoder)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                decoder.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_stack=True,
                     with_modules=True) as prof, torch.cuda.graph(graph):
            decoder.step()
        prof.export_chrome_trace(str(folder / f"capture-bs{batch}.json"))
        slim(folder / f"capture-bs{batch}.json")
        _gzip(folder / f"capture-bs{batch}.json")
        graphs[batch] = graph
    for label, replay in (("bs1", [graphs[1]]), ("bs4", [graphs[4]]), ("both", [graphs[1], graphs[4]])):
        def step(replay: list[torch.cuda.CUDAGraph] = replay) -> None:
            for g in replay:
                g.replay()
        capture(folder, f"replay-{label}", step, {**DECODE_TRUTH,
                "what": f"CUDA-graph replay of the decode step ({label}); each graph holds a memcpy node",
                "graphs": {"bs1": 1, "bs4": 1, "both": 2}[label], "memcpy_node": True,
                "idle_verdict": ["GPU-bound", "other idle"]})


def known_path(out: Path) -> None:
    if DEVICE.type != "cuda":
        return
    small = torch.randn(1 << 20, device=DEVICE)
    a, b = torch.randn(8192, 8192, device=DEVICE, dtype=DTYPE), torch.randn(8192, 8192, device=DEVICE, dtype=DTYPE)
    side = torch.cuda.Stream()

    def step() -> None:
        with record_function("phase1_small"):
            for _ in range(10):
                small.mul_(1.0001)
        with record_function("host_sleep"):
            time.sleep(0.002)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), record_function("long_gemm"):
            c = a @ b
        with record_function("overlapped_small"):
            for _ in range(10):
                small.add_(1e-6)
        torch.cuda.current_stream().wait_stream(side)
        with record_function("after_wait"):
            small.add_(c[0, :1].float().sum())
        with record_function("sync"):
            torch.cuda.synchronize()
        with record_function("phase3_small"):
            for _ in range(5):
                small.mul_(0.9999)

    capture(out, "known_path", step, {"what": "a step with a known critical path",
                                      "critical_path": ["phase1_small", "host_sleep", "long_gemm", "after_wait",
                                                        "sync", "phase3_small"],
                                      "off_path": ["overlapped_small"], "host_sleep_ms": 2.0})


def idle_causes(out: Path) -> None:
    x = torch.randn(4096, 4096, device=DEVICE, dtype=DTYPE)

    def loader_step() -> None:
        with record_function("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
            time.sleep(0.005)
        for _ in range(4):
            torch.mm(x, x)

    capture(out, "dataloader_wait", loader_step, {"what": "5 ms in the DataLoader's iterator, then ~1 ms of GEMMs",
                                                 "idle_verdict": ["data loading"]})
    y = torch.randn(256, device=DEVICE)

    def sync_step() -> None:
        for _ in range(20):
            y.mul_(1.0001)
            y.sum().item()

    # under the profiler each tiny op's host dispatch outlasts its .item() round trip: the trace is host-bound
    # (its truth file says why); the syncs are the idle section's second cause
    capture(out, "sync_bound", sync_step, {"what": ".item() after every small op", "idle_verdict": ["host-bound"]})


GROUPS: dict[str, Callable[[Path], None]] = {
    "train": lambda out: (train(out, "train_foreach", False), train(out, "train_fused", True),
                          train(out, "train_foreach_memory", False, memory=True),
                          train(out, "train_checkpoint", False, checkpoint=True)),
    "hygiene": lambda out: (train_hygiene(out, "train_hygiene_unfused", False),
                            train_hygiene(out, "train_hygiene_fused", True)),
    "lmhead": lm_head_loss,
    "blocks": blocks, "fp8": fp8, "prefill": prefill, "decode": decode, "known_path": known_path,
    "idle": idle_causes,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", help="comma-separated groups: " + ", ".join(GROUPS))
    parser.add_argument("--small", action="store_true", help="tiny widths, to try the script on a CPU")
    args = parser.parse_args()
    if args.small:
        global D, FFN, VOCAB
        D, FFN, VOCAB = 128, 352, 512
    chosen = args.only.split(",") if args.only else list(GROUPS)
    if args.out.exists():
        shutil.rmtree(args.out)
    for group in chosen:
        t = time.monotonic()
        try:
            GROUPS[group](args.out)
        except Exception as exc:  # one group's failure must not lose the others' traces
            print(f"{group}: FAILED {type(exc).__name__}: {exc}", flush=True)
        print(f"--- {group} {time.monotonic() - t:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
