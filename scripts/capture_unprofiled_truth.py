"""Capture plain torch.profiler traces with their truth measured apart from the profiler (issue 59 point 5,
issue 63's graph pairs).

    python scripts/capture_unprofiled_truth.py --out DIR [--only NAME,NAME] [--rounds N] [--time-first] [--list]

For each workload, in one process and on one card: every candidate change is checked against the workload as it
is (the same result from the same seed) before anything is timed; then the workload is profiled (a plain
``torch.profiler.profile``: no fuseprof metadata, settings recorded in the truth file; schedule wait 1, warm-up 1,
active 3; the host synchronised only before the last step ends, so the last step's kernels are in the trace);
then, without the profiler, its step (CUDA events at each step boundary of a loop that never synchronises, as a
user's loop runs: median, p10, p90), its GPU busy per step (the steps queued behind a spinning kernel, so that they
run back to back: kernel time with no launch gaps, checked by the spin still running when the host finished
queueing), and the step with each candidate change applied (graphs, torch.compile (dynamic=False), fused optimizer,
syncs removed, data loading overlapped, the largest fusion). The step and its changes are timed in paired rounds
(``--rounds``, default 6; each round times every variant's loop of 5 warm-up and 10 timed steps, the order rotated
round by round, the profiled capture between the middle two rounds): a host whose speed drifts within minutes (a
step measured 1.7-2.5 ms p10-p90 on one H100 host) moves base and change alike within a round, so a change's saving
is the median of its rounds' paired differences, and the step is all rounds' steps pooled around the capture.
``--rounds 0`` times them once each, one after another (5 warm-up, 30 timed), as the sets before h100g were.
``--time-first`` measures every workload before the process runs any profiler and profiles them all afterwards: a
process's first profiler session left h100g/train_foreach's eager step 1.27x slower for the rest of the process
(its graph replay unchanged), so truth timed after any capture may carry the profiler's after-effect. ``<name>.truth.json`` holds them, the bound by the rule (GPU-bound when busy >= 80% of the un-profiled step;
else the largest idle cause: data loading — the loader's own un-profiled time per step —, synchronisation — what
removing the syncs saves —, else the host's launches), the card, torch and the profiler settings. The truth is
written here, from the workload's code and these measurements, before fuseprof ever reads the trace.

Graph workloads (``*_graph``) also keep the profiled capture of their graph (``<name>.capture.json.gz``) and name
their eager twin (the same model, weights and shapes, captured eagerly in this run): issue 63's replay-without-
capture attribution is checked against the capture-based one with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_truth_set as base  # noqa: E402  (the models of the truth set: one definition)

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if CUDA else "cpu")
DTYPE = torch.bfloat16
WARM, TIMED, ROUND_STEPS, ROUNDS = 5, 30, 10, 6
PROFILE_GRAPH_CAPTURES = True  # a graph workload's base profiles its capture when made (off while --time-first times)
BUSY_RULE = 0.8
SYNC_WIDTH = 2048 if CUDA else 256
SETTINGS: dict[str, dict[str, bool]] = {
    "activities": {},
    "shapes": {"record_shapes": True},
    "modules": {"record_shapes": True, "with_stack": True, "with_modules": True},
    "memory": {"record_shapes": True, "profile_memory": True},
}
Step = Callable[[], Any]


# --- timing apart from the profiler ---------------------------------------------------------------------

def _spread(times: list[float]) -> dict[str, float]:
    deciles = statistics.quantiles(times, n=10)
    return {"median_ms": round(statistics.median(times), 4), "p10_ms": round(deciles[0], 4),
            "p90_ms": round(deciles[-1], 4), "n": len(times)}


def step_times(step: Step, steps: int = TIMED) -> list[float]:
    """Per-step times (ms) of a loop that never synchronises: an event at each step boundary (on the CPU, a clock)."""
    for _ in range(WARM):
        step()
    if not CUDA:
        marks = [time.perf_counter()]
        for _ in range(steps):
            step()
            marks.append(time.perf_counter())
        return [1e3 * (b - a) for a, b in zip(marks, marks[1:])]
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    events[0].record()
    for i in range(steps):
        step()
        events[i + 1].record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in zip(events, events[1:])]


def time_loop(step: Step, steps: int = TIMED) -> dict[str, float]:
    """The median, p10 and p90 of a loop's per-step times."""
    return _spread(step_times(step, steps))


def host_reference_ms(repeats: int = 3) -> dict[str, float]:
    """Fixed pieces of host work, the fastest of a few each: the host's speed at that moment. Eager steps of one
    process moved 1.7x within seconds (h100k/infer_eager's rounds: 2.6 then 1.5 ms a step), so the truth records the
    host's speed beside each round and around the capture, to tell the host's drift from the model's error. Python:
    a pure-Python loop (~1 ms); launches: the host's time to queue 200 one-element adds (on the CPU, 200 such ops)."""
    python, launches = float("inf"), float("inf")
    one = torch.zeros(1, device=DEVICE)
    for _ in range(repeats):
        t0 = time.perf_counter()
        total = 0
        for i in range(20_000):
            total += i * i
        t1 = time.perf_counter()
        for _ in range(200):
            one.add_(1)
        t2 = time.perf_counter()
        python, launches = min(python, t1 - t0), min(launches, t2 - t1)
        if CUDA:
            torch.cuda.synchronize()
    return {"python": round(1e3 * python, 4), "launches": round(1e3 * launches, 4)}


def timed_variants(variants: dict[str, Step], rounds: int, midway: Callable[[], Any],
                   host: dict[str, list[dict[str, float]]] | None = None) -> dict[str, list[list[float]]]:
    """Each variant's per-step times, round by round: with ``rounds``, every variant's loop once a round in an order
    rotated round by round and ``midway`` (the profiled capture) between the middle two rounds, so that the host's
    drift reaches base and change alike; with none, ``midway`` first and then each variant's loop once, one after
    another (the method of the sets before h100g). ``host`` gets ``host_reference_ms`` before each round and just
    before and after ``midway``."""
    host = {} if host is None else host
    if not rounds:
        midway()
        return {name: [step_times(step)] for name, step in variants.items()}
    names, times = list(variants), {name: [] for name in variants}
    for r in range(rounds):
        if r == rounds // 2:
            host.setdefault("before_capture", []).append(host_reference_ms())
            midway()
            host.setdefault("after_capture", []).append(host_reference_ms())
        host.setdefault("rounds", []).append(host_reference_ms())
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(step_times(variants[name], ROUND_STEPS))
    return times


def pooled(rounds: list[list[float]]) -> dict[str, Any]:
    """All rounds' steps as one spread, with each round's median and p10-p90 width beside it."""
    widths = [_spread(r)["p90_ms"] - _spread(r)["p10_ms"] for r in rounds]
    return {**_spread([t for r in rounds for t in r]), "round_medians_ms": [round(statistics.median(r), 4)
                                                                              for r in rounds],
            "round_widths_ms": [round(w, 4) for w in widths]}


def saving_spread(base: dict[str, Any], change: dict[str, Any]) -> float:
    """The spread a saving is scored within: the mean of the two loops' p10-p90 widths, loop by loop (the median
    over rounds). Pooling the rounds' steps instead widens it (h100g against h100g-seq: 2.9x the median, up to 16x),
    since a loop's few slow steps set a pooled p90 that no loop's own spread shows."""
    return statistics.median((b + c) / 2 for b, c in zip(base["round_widths_ms"], change["round_widths_ms"],
                                                         strict=True))


_CYCLES_PER_MS: list[float] = []


def _spin_rate() -> float:
    """torch.cuda._sleep's cycles per millisecond on this card, measured once."""
    if not _CYCLES_PER_MS:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        start.record()
        torch.cuda._sleep(20_000_000)
        end.record()
        end.synchronize()
        _CYCLES_PER_MS.append(20_000_000 / start.elapsed_time(end))
    return _CYCLES_PER_MS[0]


def busy_ms(step: Step, step_ms: float, repeats: int = 5) -> dict[str, Any] | None:
    """The GPU's work per step with no launch gaps: steps queued behind a spinning kernel run back to back once it
    ends; a try counts only when the spin was still running after the host had queued them all (else the spin is
    doubled; 3 steps a try, then 1 if 3 never fit the launch queue)."""
    if not CUDA:
        return None
    tries: list[dict[str, Any]] = []
    for steps in (3, 1):
        results, spin_ms = [], 2 * steps * step_ms + 5
        while len(results) < repeats and len(tries) < 2 * repeats + 6:
            torch.cuda.synchronize()
            first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(int(spin_ms * _spin_rate()))
            first.record()
            for _ in range(steps):
                step()
            last.record()
            queued = not first.query()
            torch.cuda.synchronize()
            tries.append({"steps": steps, "spin_ms": round(spin_ms, 1), "queued_ahead": queued})
            if queued:
                results.append(first.elapsed_time(last) / steps)
            else:
                spin_ms *= 2
        if len(results) >= 2:
            return {**_spread(results), "method": f"{steps} steps queued behind a spin kernel, median of "
                                                  f"{len(results)}", "failed_tries": len(tries) - len(results)}
    return {"failed": tries}


# --- the variants -----------------------------------------------------------------------------------------

def graphed(step: Step, capture_trace: Path | None = None) -> Step:
    """The step captured once in a CUDA graph (3 warm-up steps on a side stream first, as torch.cuda.graph asks),
    replayed; with ``capture_trace``, the capture is profiled (modules, shapes, stack) into it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    if capture_trace is not None:
        with profile(activities=_activities(), **SETTINGS["modules"]) as prof, torch.cuda.graph(graph):
            out = step()
        _export(prof, capture_trace, slim=True)
    else:
        with torch.cuda.graph(graph):
            out = step()

    def replay() -> Any:
        graph.replay()
        return out

    replay.keep = (graph, step)  # type: ignore[attr-defined]  # the graph replays the step's tensors: keep both
    return replay


def compiled(module: nn.Module) -> nn.Module:
    return torch.compile(module, dynamic=False)  # type: ignore[return-value]


def fuse_norms(model: nn.Module) -> nn.Module:
    """Every eager RMSNorm (float, pow, mean, add, rsqrt, mul, cast, mul) as torch's one-call F.rms_norm."""
    for module in model.modules():
        if isinstance(module, base.RMSNorm):
            def forward(x: torch.Tensor, m: base.RMSNorm = module) -> torch.Tensor:
                return F.rms_norm(x, (x.shape[-1],), m.weight.to(x.dtype), 1e-6)
            module.forward = forward  # type: ignore[method-assign]
    return model


# --- the workloads ----------------------------------------------------------------------------------------

@dataclass
class Workload:
    """``make(variant)`` builds fresh state from seed 0 and returns (step, steps already taken); the step returns
    its result, compared across variants before any timing."""

    name: str
    what: str
    settings: str
    make: Callable[[str], tuple[Step, int]]
    changes: dict[str, str]  # change -> variant name, or "n/a: why"
    tolerance: float = 3e-2
    syncs: bool = False  # the step blocks the host: its busy is timed on the variant without syncs
    data: Callable[[], float] | None = None  # the loader's own time per step, un-profiled
    extra: dict[str, Any] = field(default_factory=dict)


def _tokens(batch: int, length: int, vocab: int = base.VOCAB) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(0)
    return torch.randint(0, vocab, (batch, length), generator=g).to(DEVICE), torch.arange(length, device=DEVICE)


def _llama_train(optimizer: str, variant: str) -> tuple[Step, int]:
    torch.manual_seed(0)
    model = base.Llama(layers=2).to(DEVICE)
    if variant == "fusion":
        fuse_norms(model)
    fused = optimizer == "fused" or variant == "fused_optimizer"
    kwargs = {"fused": True} if fused else {"foreach": True}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=variant == "graphs", **kwargs)
    forward = compiled(model) if variant == "compile" else model
    tokens, positions = _tokens(2, 256)

    def loss_of_step() -> torch.Tensor:
        with torch.autocast(DEVICE.type, dtype=DTYPE, cache_enabled=False):
            logits = forward(tokens, positions)
        return F.cross_entropy(logits.float().view(-1, base.VOCAB), tokens.view(-1))

    return _training_step(loss_of_step, opt, variant)


def _training_step(loss_of_step: Step, opt: torch.optim.Optimizer, variant: str) -> tuple[Step, int]:
    """A training step around a loss (backward, the optimizer's step, zero_grad unless graphed: a graph keeps its
    gradients' memory), as a graph replay with 3 warm-up steps where the variant asks for one."""
    def step() -> torch.Tensor:
        loss = loss_of_step()
        loss.backward()
        opt.step()
        if variant != "graphs":
            opt.zero_grad(set_to_none=True)
        return loss.detach()

    if variant == "graphs":
        return _graphed_train(step, opt), 3
    return step, 0


def _graphed_train(step: Step, opt: torch.optim.Optimizer) -> Step:
    """Whole-step capture as torch's docs show it: grads to None before the capture, so that backward in the graph
    writes them afresh at every replay."""
    def warm_then_none() -> Any:
        out = step()
        opt.zero_grad(set_to_none=True)
        return out
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            warm_then_none()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()

    def replay() -> Any:
        graph.replay()
        return out
    replay.keep = (graph, step, opt)  # type: ignore[attr-defined]  # the model, data and optimizer it replays
    return replay


class MLPStack(nn.Module):
    """A small MLP classifier: eight 1024-wide Linear + GELU layers and a head (host-bound to train)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(*(m for _ in range(8) for m in (nn.Linear(1024, 1024), nn.GELU())))
        self.head = nn.Linear(1024, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _batch(i: int, rows: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(i)
    return torch.randn(rows, 1024, generator=g), torch.randint(0, 10, (rows,), generator=g)


def _sgd_train(optimizer: str, variant: str, loader: Any = None) -> tuple[Step, int]:
    torch.manual_seed(0)
    model = MLPStack().to(DEVICE)
    fused = optimizer == "fused" or variant == "fused_optimizer"
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, **({"fused": True} if fused else {"foreach": True}))
    forward = compiled(model) if variant == "compile" else model
    x, y = (t.to(DEVICE) for t in _batch(0))
    batches = iter(loader) if loader is not None else None

    def loss_of_step() -> torch.Tensor:
        nonlocal x, y
        if batches is not None:
            cpu_x, cpu_y = next(batches)
            x, y = cpu_x.to(DEVICE, non_blocking=True), cpu_y.to(DEVICE, non_blocking=True)
        return F.cross_entropy(forward(x), y)

    return _training_step(loss_of_step, opt, variant)


class SlowBatches(torch.utils.data.Dataset):
    """Each item is a whole batch (seeded by its index) that takes ``delay`` seconds to make, as a decode or an
    augmentation would."""

    def __init__(self, delay: float = 0.004) -> None:
        self.delay = delay

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay)
        return _batch(i)


def _loader(workers: int) -> torch.utils.data.DataLoader:
    return torch.utils.data.DataLoader(SlowBatches(), batch_size=None, num_workers=workers, pin_memory=CUDA,
                                       **({"prefetch_factor": 4, "persistent_workers": True} if workers else {}))


def _data_bound(variant: str) -> tuple[Step, int]:
    if variant == "data_removed":  # the same batches, already on the GPU: the bound of any loader fix
        resident = [tuple(t.to(DEVICE) for t in _batch(i)) for i in range(64)]
        return _sgd_train("foreach", "base", iter(resident * 1000))
    return _sgd_train("foreach", "base", _loader(4 if variant == "data_prefetched" else 0))


def _loader_ms() -> float:
    """The single-process loader's own time per batch (next() and the copy's launch), un-profiled."""
    batches, times = iter(_loader(0)), []
    for _ in range(WARM + 20):
        t = time.perf_counter()
        next(batches)
        times.append(1e3 * (time.perf_counter() - t))
    return statistics.median(times[WARM:])


def _sync_bound(variant: str) -> tuple[Step, int]:
    torch.manual_seed(0)
    # a GEMM long enough (~0.2 ms on an H100) that the host waits at every .item() for the GPU it just fed:
    # the syncs, not the launches, are the idle (1024-wide GEMMs left the loop host-bound with or without them)
    a = torch.randn(SYNC_WIDTH, SYNC_WIDTH, device=DEVICE, dtype=DTYPE)
    w = torch.randn(SYNC_WIDTH, SYNC_WIDTH, device=DEVICE, dtype=DTYPE) / SYNC_WIDTH ** 0.5

    def step() -> Any:  # a loop logging a scalar after every small op (.item(): a blocking copy each)
        x, total = a, 0.0
        for _ in range(24):
            x = torch.tanh(x @ w)
            total += x.float().mean().item()
        return torch.tensor(total)

    def no_syncs() -> Any:
        x, total = a, torch.zeros((), device=DEVICE)
        for _ in range(24):
            x = torch.tanh(x @ w)
            total += x.float().mean()
        return total

    if variant == "no_syncs":
        return no_syncs, 0
    if variant == "graphs_no_syncs":
        return graphed(no_syncs), 3
    return step, 0


def _infer(variant: str, batch: int = 1, length: int = 32, layers: int = 2, eager_attention: bool = False,
           capture: Path | None = None) -> tuple[Step, int]:
    torch.manual_seed(0)
    model = base.Llama(layers=layers).to(DEVICE, DTYPE).eval()
    for layer in model.layers:
        layer.self_attn.eager = eager_attention and variant != "fusion"
    if variant == "fusion_norm" or (variant == "fusion" and not eager_attention):
        fuse_norms(model)
    forward = compiled(model) if "compile" in variant else model
    tokens, positions = _tokens(batch, length)

    @torch.no_grad()
    def step() -> torch.Tensor:
        return forward(tokens, positions)

    if "graphs" in variant:
        return graphed(step, capture), 3
    return step, 0


def _decode(variant: str, capture: Path | None = None) -> tuple[Step, int]:
    decoder = base.Decoder(1)
    if variant == "fusion":
        fuse_norms(decoder.model)
    if "compile" in variant:
        decoder.model = compiled(decoder.model)

    @torch.no_grad()
    def step() -> torch.Tensor:  # Decoder.step, returning its logits for the check
        logits = decoder.model(decoder.tokens, decoder.pos, decoder.caches, decoder.pos)
        decoder.tokens.copy_(logits[:, -1].argmax(-1, keepdim=True))
        return logits

    step.decoder = decoder  # type: ignore[attr-defined]  # the graph replays its tensors
    if "graphs" in variant:
        return graphed(step, capture), 3
    return step, 0


def workloads(out: Path) -> list[Workload]:
    infer_capture, decode_capture = out / "infer_graph.capture.json", out / "decode_graph.capture.json"
    train_changes = {"graphs": "graphs", "compile": "compile", "fusion": "fusion"}
    return [
        Workload("train_foreach", "2-layer Llama-style training step (d 1024, vocab 8192, 2 x 256 tokens), bf16 "
                 "autocast, AdamW(foreach)", "modules", lambda v: _llama_train("foreach", v),
                 {**train_changes, "fused_optimizer": "fused_optimizer"}, tolerance=5e-2),
        Workload("train_fused", "the same step with AdamW(fused)", "activities", lambda v: _llama_train("fused", v),
                 {**train_changes, "fused_optimizer": "n/a: already fused"}, tolerance=5e-2),
        Workload("train_sgd_foreach", "MLP classifier (8 x Linear 1024 + GELU, batch 32) training step, fp32, "
                 "SGD(momentum, foreach)", "shapes", lambda v: _sgd_train("foreach", v),
                 {"graphs": "graphs", "compile": "compile", "fused_optimizer": "fused_optimizer"}),
        Workload("train_sgd_fused", "the same step with SGD(momentum, fused), profile_memory on", "memory",
                 lambda v: _sgd_train("fused", v), {"graphs": "graphs", "compile": "compile",
                                                     "fused_optimizer": "n/a: already fused"}),
        Workload("data_bound", "the MLP step fed by a single-process DataLoader whose batches take 4 ms each to "
                 "make (pinned, copied non_blocking)", "modules", _data_bound,
                 {"data_prefetched": "data_prefetched", "data_removed": "data_removed",
                  "graphs": "n/a: the loader's host time is outside any graph"}, data=_loader_ms),
        Workload("sync_bound", "24 x (2048^2 GEMM, tanh, mean, .item()) a step: a blocking copy after every op",
                 "shapes", _sync_bound, {"no_syncs": "no_syncs", "graphs": "n/a: .item() cannot be captured",
                                         "graphs_after_no_syncs": "graphs_no_syncs",
                                         "compile": "n/a: .item() breaks the graph"}, syncs=True),
        Workload("infer_eager", "2-layer Llama forward, 1 x 32 tokens, bf16, eager (SDPA)", "modules", _infer,
                 {"graphs": "graphs", "compile": "compile", "fusion": "fusion"}),
        Workload("infer_graph", "the infer_eager forward as a CUDA-graph replay (its capture profiled beside)",
                 "modules", lambda v: _infer("graphs" if v == "base" else "compile+graphs",
                                             capture=infer_capture if v == "base" and PROFILE_GRAPH_CAPTURES
                                             else None),
                 {"compile": "compile", "graphs": "n/a: already a graph replay"},
                 extra={"eager_twin": "infer_eager", "capture": infer_capture.name + ".gz"}),
        Workload("infer_compiled", "the infer_eager forward under torch.compile(dynamic=False)", "activities",
                 lambda v: _infer("compile" if v == "base" else "compile+graphs"),
                 {"graphs": "graphs", "compile": "n/a: already compiled"}),
        Workload("prefill_eager", "4-layer Llama forward, 4 x 1024 tokens, bf16, attention written eagerly (QK^T, "
                 "scale, mask, softmax, V)", "shapes",
                 lambda v: _infer(v, batch=4, length=1024, layers=4, eager_attention=True),
                 {"fusion": "fusion", "fusion_norm": "fusion_norm", "compile": "compile", "graphs": "graphs"},
                 tolerance=5e-2, extra={"fusion_is": "eager attention -> scaled_dot_product_attention",
                                        "fusion_norm_is": "every eager RMSNorm -> F.rms_norm, attention eager"}),
        Workload("decode_eager", "2-layer decode step, batch 1, static KV cache, argmax written back, eager",
                 "modules", _decode, {"graphs": "graphs", "compile": "compile", "fusion": "fusion"}),
        Workload("decode_graph", "the decode_eager step as a CUDA-graph replay (its capture profiled beside)",
                 "modules", lambda v: _decode("graphs" if v == "base" else "compile+graphs",
                                              capture=decode_capture if v == "base" and PROFILE_GRAPH_CAPTURES
                                              else None),
                 {"compile": "compile", "graphs": "n/a: already a graph replay"},
                 extra={"eager_twin": "decode_eager", "capture": decode_capture.name + ".gz"}),
        Workload("decode_compiled", "the decode step under torch.compile(dynamic=False)", "shapes",
                 lambda v: _decode("compile" if v == "base" else "compile+graphs"),
                 {"graphs": "graphs", "compile": "n/a: already compiled"}),
    ]


# --- capture ----------------------------------------------------------------------------------------------

def _activities() -> list[ProfilerActivity]:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])


def _export(prof: Any, path: Path, slim: bool) -> None:
    prof.export_chrome_trace(str(path))
    if slim:
        base.slim(path)
    base._gzip(path)


def profiled(step: Step, path: Path, settings: str) -> dict[str, Any]:
    """The step under a plain torch.profiler (wait 1, warm-up 1, active 3), exported gzipped; what it used."""
    kwargs = SETTINGS[settings]
    slim = kwargs.get("with_stack", False)
    with profile(activities=_activities(), schedule=schedule(wait=1, warmup=1, active=3),
                 on_trace_ready=lambda p: _export(p, path, slim), **kwargs) as prof:
        for i in range(5):
            step()
            if i == 4 and CUDA:
                torch.cuda.synchronize()
            prof.step()
    return {"activities": [a.name for a in _activities()], **{k: kwargs.get(k, False) for k in
            ("record_shapes", "with_stack", "with_modules", "profile_memory")},
            "schedule": "wait=1, warmup=1, active=3", "synchronize": "before the last active step ends only",
            "TEARDOWN_CUPTI": os.environ.get("TEARDOWN_CUPTI", "unset"),
            "python_frames_dropped": "all but nn.Module frames" if slim else "none recorded"}


def _result(step: Step, runs: int) -> torch.Tensor:
    out = None
    for _ in range(max(runs, 1)):
        out = step()
    return torch.as_tensor(out).detach().float().cpu()


def checked(work: Workload) -> tuple[dict[str, Step], dict[str, Any]]:
    """Each change's variant, built once, its second step after its own warm-ups (so that an optimizer's first step
    is in it) compared with the base after as many steps in all (fresh state from seed 0 both); a variant that differs is reported and not timed."""
    cache: dict[int, torch.Tensor] = {}

    def reference(total: int) -> torch.Tensor:
        if total not in cache:
            step, taken = work.make("base")
            cache[total] = _result(step, total - taken)
        return cache[total]

    steps, errors = {}, {}
    for change, variant in work.changes.items():
        if variant.startswith("n/a") or not (CUDA or variant in ("fused_optimizer", "no_syncs", "data_prefetched",
                                                                 "data_removed", "fusion")):
            continue
        try:
            step, taken = work.make(variant)
            got, want = _result(step, 2), reference(taken + 2)
            error = float((got - want).norm() / want.norm().clamp_min(1e-12))
        except Exception as exc:  # a change that cannot be built is reported, not fatal
            errors[change] = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
            continue
        errors[change] = error
        if error <= work.tolerance:
            steps[change] = step
    return steps, errors


def bound(step_ms: float, busy: float | None, data_ms: float, sync_ms: float) -> dict[str, Any]:
    """The rule: GPU-bound when busy >= 80% of the un-profiled step, else the largest idle cause."""
    if busy is None:
        return {"bound": "unknown (no GPU)"}
    idle = max(step_ms - busy, 0.0)
    data, sync = min(data_ms, idle), min(max(sync_ms, 0.0), idle)
    causes = {"data loading": data, "sync-bound": sync, "host-bound": max(idle - data - sync, 0.0)}
    verdict = "GPU-bound" if busy >= BUSY_RULE * step_ms else max(causes, key=causes.__getitem__)
    return {"bound": verdict, "busy_pct": round(100 * busy / step_ms, 1), "idle_ms": round(idle, 4),
            "idle_causes_ms": {k: round(v, 4) for k, v in causes.items()},
            "rule": "GPU-bound when busy >= 80% of the un-profiled step; else the largest idle cause (data loading: "
                    "the loader's own un-profiled time per step; sync: what removing the syncs saves; host-bound: "
                    "the rest)"}


def time_changes(work: Workload, times: dict[str, list[list[float]]],
                 errors: dict[str, Any]) -> dict[str, Any]:
    """The un-profiled step with each change applied, and what it saves against the step as it is: the median of
    the rounds' paired differences of medians (one round: the difference of the two loops' medians); the spread is
    ``saving_spread``'s."""
    base = pooled(times["base"])
    changes: dict[str, Any] = {}
    for change, variant in work.changes.items():
        if change not in times:
            changes[change] = (variant if variant.startswith("n/a") else
                               f"not measured: {errors.get(change, 'needs a GPU')}")
            continue
        timed = pooled(times[change])
        paired = [statistics.median(b) - statistics.median(c) for b, c in zip(times["base"], times[change],
                                                                              strict=True)]
        spread = saving_spread(base, timed)
        changes[change] = {"variant": variant, "step": timed, "saving_ms": round(statistics.median(paired), 4),
                           "paired_savings_ms": [round(x, 4) for x in paired], "saving_spread_ms": round(spread, 4),
                           "relative_error_vs_base": errors[change]}
    return changes


def measure(work: Workload, rounds: int, midway: Callable[[Step], Any]) -> dict[str, Any]:
    """Every measurement the truth holds (the step, busy, the loader, each change, the bound by its rule), the
    variants checked first; ``midway`` gets the base step between the rounds (``timed_variants``)."""
    steps, errors = checked(work)
    step, _ = work.make("base")
    host: dict[str, list[dict[str, float]]] = {}
    times = timed_variants({"base": step, **steps}, rounds, lambda: midway(step), host)
    measured = pooled(times["base"])
    busy = busy_ms(steps.get("no_syncs") or work.make("no_syncs")[0] if work.syncs else step, measured["median_ms"])
    data_ms = work.data() if work.data else 0.0
    changes = time_changes(work, times, errors)
    sync_ms = changes["no_syncs"]["saving_ms"] if isinstance(changes.get("no_syncs"), dict) else 0.0
    busy_median = busy.get("median_ms") if busy else None
    return {"unprofiled_step": measured, "gpu_busy": busy, "loader_ms_per_step": data_ms,
            "host_reference_ms": {**host, "what": "host_reference_ms's fixed host work (ms; fastest of 3): "
                                                     "before each round and around the capture"},
            **bound(measured["median_ms"], busy_median, data_ms, sync_ms), "changes": changes}


def write_truth(out: Path, work: Workload, settings: dict[str, Any], measured: dict[str, Any], method: str,
                seconds: float) -> None:
    truth = {"name": work.name, "what": work.what, "trace": f"{work.name}.json.gz", "card": _card(),
             "profiler": settings, **measured, **work.extra, "timing": method,
             "measured": "in the process and on the card that made the trace; truth written before "
                         "fuseprof read the trace"}
    (out / f"{work.name}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    size, step, changes = (out / f"{work.name}.json.gz").stat().st_size / 1e3, measured["unprofiled_step"], \
        measured["changes"]
    busy = measured["gpu_busy"].get("median_ms") if measured["gpu_busy"] else None
    print(f"{work.name}: {seconds:.0f} s, {size:.0f} kB, step {step['median_ms']:.3f} ms "
          f"[{step['p10_ms']:.3f}, {step['p90_ms']:.3f}], busy {busy}, {truth['bound']}; "
          + ", ".join(f"{c} -{v['saving_ms']:.3f}" for c, v in changes.items() if isinstance(v, dict))
          + "".join(f"; {c}: {v}" for c, v in changes.items() if isinstance(v, str) and v.startswith("not")),
          flush=True)


def _method(rounds: int) -> str:
    return (f"{rounds} paired rounds of {ROUND_STEPS} timed steps a variant (order rotated)" if rounds else
            f"each variant's {TIMED} timed steps one after another")


def capture_one(out: Path, work: Workload, rounds: int = ROUNDS) -> None:
    """One workload measured and profiled in turn, the capture between the middle rounds (or before the loops)."""
    t0, settings = time.monotonic(), {}
    measured = measure(work, rounds, lambda step: settings.update(profiled(step, out / f"{work.name}.json",
                                                                             work.settings)))
    write_truth(out, work, settings, measured, _method(rounds) + (f", the profiled capture after round {rounds // 2}"
                                                                  if rounds else ", after the profiled capture"),
                time.monotonic() - t0)


def time_first(out: Path, chosen: list[Workload], rounds: int) -> None:
    """Every workload measured before this process runs any profiler (a first profiler session leaves eager
    launches slower: h100g/train_foreach 5.65 ms a step before its capture, 7.16 after, its graph replay unchanged),
    the graph workloads' captures included (taken in the second pass); then each workload profiled."""
    global PROFILE_GRAPH_CAPTURES
    PROFILE_GRAPH_CAPTURES = False
    measured = []
    for work in chosen:
        t0 = time.monotonic()
        measured.append((measure(work, rounds, lambda step: None), time.monotonic() - t0))
        if CUDA:
            torch.cuda.empty_cache()
    PROFILE_GRAPH_CAPTURES = True
    for work, (values, seconds) in zip(chosen, measured, strict=True):
        step, _ = work.make("base")
        for _ in range(WARM):
            step()
        settings = profiled(step, out / f"{work.name}.json", work.settings)
        write_truth(out, work, settings, values, _method(rounds) + ", every workload before the process ran any "
                    "profiler; the captures after all of them", seconds)


def shifted_settings(work: Workload, shift: int) -> Workload:
    """The workload with its profiler settings moved ``shift`` places along SETTINGS' order: the same code profiled
    under other settings, so a new held-out set is not the captures the rules were written on again."""
    order = list(SETTINGS)
    return replace(work, settings=order[(order.index(work.settings) + shift) % len(order)])


def _card() -> dict[str, str]:
    return {"gpu": torch.cuda.get_device_name() if CUDA else "cpu", "torch": torch.__version__,
            "cuda": str(torch.version.cuda)}


def _rounds(text: str) -> int:
    if not text.isdigit() or int(text) == 1:
        raise argparse.ArgumentTypeError(f"{text!r}: 0 (one loop each, after the capture) or 2 or more")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", help="comma-separated workload names (default: all)")
    parser.add_argument("--rounds", type=_rounds, default=ROUNDS,
                        help=f"paired timing rounds around the capture (default {ROUNDS}; 0: one loop each, after it)")
    parser.add_argument("--time-first", action="store_true",
                        help="measure every workload before the process runs any profiler, then profile each")
    parser.add_argument("--settings-shift", type=int, default=0, metavar="N",
                        help="move each workload's profiler settings N places along activities, shapes, modules, "
                             "memory (a held-out set whose captures differ from the sets the rules were written on)")
    parser.add_argument("--list", action="store_true", help="print the workloads and their changes, run nothing")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = workloads(args.out)
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {w.name for w in chosen}
        if unknown:
            parser.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
        chosen = [w for w in chosen if w.name in names]
    chosen = [shifted_settings(w, args.settings_shift) for w in chosen]
    if args.list:
        for w in chosen:
            print(f"{w.name:18} {w.settings:10} {', '.join(w.changes)}")
        return 0
    print(_card(), flush=True)
    if args.time_first:  # no retry in a fresh process: a failure there would time after a profiler had run
        time_first(args.out, chosen, args.rounds)
        return 0
    for i, work in enumerate(chosen):
        try:
            capture_one(args.out, work, args.rounds)
            if CUDA:
                torch.cuda.empty_cache()
        except Exception as exc:  # the rest go on in a fresh process: a device-side error ends this one's context
            print(f"{work.name}: FAILED {type(exc).__name__}: {str(exc)[:500]}", flush=True)
            rest = [w.name for w in chosen[i + 1:]]
            if rest:
                subprocess.call([sys.executable, __file__, "--out", str(args.out), "--only", ",".join(rest),
                                 "--rounds", str(args.rounds), "--settings-shift", str(args.settings_shift)])
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
