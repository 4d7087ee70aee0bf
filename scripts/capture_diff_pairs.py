"""Capture pairs of runs where exactly one thing changed, each pair with its truth file (issue 62 point 4).

    python scripts/capture_diff_pairs.py --out DIR [--only PAIR,PAIR] [--list]

The same small Llama-style decoder (scripts/capture_truth_set.py's: d 1024, 8 heads, FFN 2816, vocabulary 8192,
2 layers, named nn.Modules) in each run, profiled as users run it (capture_unprofiled_truth.py's ``profiled``:
record_shapes, with_modules, with_stack, schedule wait 1 / warm-up 1 / active 3, so three ProfilerStep#N):

    compile       eager forward (SDPA)                     -> torch.compile(dynamic=False) of the same forward
    sdpa          attention by hand (QK^T, scale, mask,    -> F.scaled_dot_product_attention
                  softmax, .V) in the same forward
    optimizer     training step, AdamW(foreach)            -> AdamW(fused)
    int8_fused    int8 weights, eager dequant              -> torch._weight_int8pack_mm
                  (w.to(bf16) * scales, then linear)
    int8_vs_bf16  bf16 nn.Linear                           -> torch._weight_int8pack_mm (Linear -> Int8Linear)
    graph         eager decode step                        -> the step as a CUDA-graph replay
                                                              (its capture kept: decode_graph.capture.json.gz)

Before any capture every side's result is compared with a float64 run of the same model and weights (max abs
and relative error printed and kept). ``<pair>.truth.json`` is written from this code and the un-profiled
measurement, before fuseprof reads a trace: for each module of A (its dotted name and the path torch.profiler's
module column gives it: ``Class_k`` joined by " / ", k the instance's rank among its class's first calls, recorded
with forward hooks on a run outside the profiler), the path in B it must match and the class of change (fused,
compiled, graphed, replaced, same); op-level expectations where ops change; and each side's un-profiled step time
(CUDA events, same process, A and B interleaved over 3 rounds of capture_unprofiled_truth's loop timing, and each
step alone after an L2 flush: median, p10, p90).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_truth_set as base  # noqa: E402  (the model: one definition)
import capture_unprofiled_truth as unprof  # noqa: E402  (profiling, loop timing, graphs: one definition)

CUDA, DEVICE, DTYPE = unprof.CUDA, unprof.DEVICE, unprof.DTYPE
LAYERS = 2
ROUNDS, ISOLATED = 3, 20
PROFILER_STEPS = 3  # unprof.profiled: wait 1, warm-up 1, active 3
COMPILED_ROOT = "OptimizedModule_0"  # torch.compile's wrapper: the one module whose call the compiled forward makes
Step = Callable[[], Any]


# --- module paths as the profiler names them -------------------------------------------------------------

def trace_paths(model: nn.Module, run: Step) -> dict[str, str]:
    """Each module's dotted name -> the path torch.profiler's module column gives it: ``Class_k`` (k: the
    instance's rank among its class's first calls) joined by " / " from the outermost call, read from forward
    hooks on one run of ``run`` outside the profiler."""
    names = {id(m): n for n, m in model.named_modules()}
    first_calls: dict[str, list[int]] = {}
    stack: list[str] = []
    paths: dict[str, str] = {}

    def enter(module: nn.Module, _args: Any) -> None:
        seen = first_calls.setdefault(type(module).__name__, [])
        if id(module) not in seen:
            seen.append(id(module))
        stack.append(f"{type(module).__name__}_{seen.index(id(module))}")
        paths.setdefault(names[id(module)], " / ".join(stack))

    def leave(_module: nn.Module, _args: Any, _out: Any) -> None:
        stack.pop()

    handles = [h for m in model.modules() for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return paths


# --- the models ------------------------------------------------------------------------------------------

PACK_DTYPE: list[torch.dtype] = []


def pack_dtype() -> torch.dtype:
    """The activation dtype torch._weight_int8pack_mm takes here: bf16 where it runs, else float32 (its CUDA
    kernel has taken float32 only), tried once."""
    if not PACK_DTYPE:
        w, x = torch.ones(64, 64, dtype=torch.int8, device=DEVICE), torch.ones(2, 64, device=DEVICE)
        try:
            torch._weight_int8pack_mm(x.to(DTYPE), w, torch.ones(64, device=DEVICE, dtype=DTYPE))
            PACK_DTYPE.append(DTYPE)
        except RuntimeError:
            PACK_DTYPE.append(torch.float32)
    return PACK_DTYPE[0]


class Int8Linear(nn.Module):
    """A bias-free Linear with int8 weights and one scale per output row (absmax / 127): ``packed`` runs
    torch._weight_int8pack_mm; else the eager dequant a user writes, ``w.to(x.dtype) * scales`` then linear."""

    weight: torch.Tensor
    scales: torch.Tensor

    def __init__(self, linear: nn.Linear, packed: bool) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        scales = w.abs().amax(1).clamp_min(1e-8) / 127
        self.register_buffer("weight", torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scales", scales.to(pack_dtype() if packed else linear.weight.dtype))
        self.packed = packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.packed:
            return F.linear(x, self.weight.to(x.dtype) * self.scales[:, None].to(x.dtype))
        flat = x.reshape(-1, x.shape[-1]).to(self.scales.dtype)
        out = torch._weight_int8pack_mm(flat, self.weight, self.scales)
        return out.to(x.dtype).view(*x.shape[:-1], out.shape[-1])


def quantize(model: nn.Module, packed: bool) -> nn.Module:
    """Every nn.Linear of ``model`` as an Int8Linear under the same attribute name."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8Linear(child, packed))
    return model


def llama(eager_attention: bool = False, dtype: torch.dtype | None = DTYPE) -> nn.Module:
    """The 2-layer model from seed 0 (the same weights in every side)."""
    torch.manual_seed(0)
    model = base.Llama(layers=LAYERS).to(DEVICE, dtype) if dtype else base.Llama(layers=LAYERS).to(DEVICE)
    for module in model.modules():
        if isinstance(module, base.Attention):
            module.eager = eager_attention
    return model


def reference64(model: nn.Module) -> nn.Module:
    """A float64 copy (attention written out, int8 weights dequantized) that a side's result is checked against;
    the rotary tables stay bf16 in both (base.Llama.rotary casts them)."""
    ref = copy.deepcopy(model).double()
    for module in ref.modules():
        if isinstance(module, base.Attention):
            module.eager = True
        if isinstance(module, Int8Linear):
            module.packed = False
    return ref


def errors(got: torch.Tensor, want: torch.Tensor) -> dict[str, float]:
    got, want = got.double(), want.double()
    return {"max_abs_error": float((got - want).abs().max()),
            "relative_error": float((got - want).norm() / want.norm().clamp_min(1e-30)),
            "finite": bool(torch.isfinite(got).all())}


# --- the sides -------------------------------------------------------------------------------------------

@dataclass
class Side:
    """One run: its step, the module paths its trace's module column will hold, its check against float64."""

    trace: str
    what: str
    step: Step
    paths: dict[str, str]
    check: dict[str, Any]
    keep: list[Any] = field(default_factory=list)  # what a graph replays


def _forward_side(trace: str, what: str, model: nn.Module, batch: int, length: int,
                  wrap: Callable[[nn.Module], nn.Module] | None = None, whole: bool = True) -> Side:
    """``wrap`` (torch.compile, say) applied after the float64 reference; ``whole``: it wraps the whole model, so
    every module's work sits under torch.compile's wrapper; else it changes modules in place and each keeps the
    path the eager model's hooks give it (read before the wrap)."""
    tokens, positions = unprof._tokens(batch, length)
    with torch.no_grad():
        want = reference64(model)(tokens, positions)
    eager_paths = trace_paths(model, lambda: model(tokens, positions)) if wrap is not None and not whole else None
    forward = wrap(model) if wrap else model

    @torch.no_grad()
    def step() -> torch.Tensor:
        return forward(tokens, positions)

    check = errors(step(), want)
    paths = trace_paths(model, step) if wrap is None else eager_paths if eager_paths is not None else \
        {name: COMPILED_ROOT for name, _ in model.named_modules()}
    return Side(trace, what, step, paths, check)


def forward_sdpa() -> Side:
    return _forward_side("forward_sdpa", "2-layer Llama forward, 2 x 256 tokens, bf16, SDPA, eager", llama(), 2, 256)


def forward_eager_attention() -> Side:
    return _forward_side("forward_eager_attention", "the forward_sdpa forward with attention written by hand "
                         "(matmul, scale, causal mask, fp32 softmax, matmul)", llama(eager_attention=True), 2, 256)


def forward_compiled() -> Side:
    return _forward_side("forward_compiled", "the forward_sdpa forward under torch.compile(dynamic=False)", llama(),
                         2, 256, wrap=unprof.compiled)


def _linear_side(trace: str, what: str, packed: bool | None) -> Side:
    model = llama() if packed is None else quantize(llama(), packed)
    return _forward_side(trace, what, model, 1, 32)


def linear_bf16() -> Side:
    return _linear_side("linear_bf16", "2-layer Llama forward, 1 x 32 tokens, bf16 nn.Linear weights", None)


def linear_int8_dequant() -> Side:
    return _linear_side("linear_int8_dequant", "the linear_bf16 forward with int8 weights (per-row absmax scales), "
                        "eager dequant: w.to(bf16) * scales, then F.linear", False)


def linear_int8_packmm() -> Side:
    return _linear_side("linear_int8_packmm", "the same int8 weights through torch._weight_int8pack_mm "
                        f"(activations {str(pack_dtype()).removeprefix('torch.')})", True)


def _train_side(trace: str, fused: bool) -> Side:
    model = llama(dtype=None)
    tokens, positions = unprof._tokens(2, 256)
    kwargs: dict[str, Any] = {"fused": True} if fused else {"foreach": True}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **kwargs)

    def loss_of_step() -> torch.Tensor:
        with torch.autocast(DEVICE.type, dtype=DTYPE, cache_enabled=False):
            logits = model(tokens, positions)
        return F.cross_entropy(logits.float().view(-1, base.VOCAB), tokens.view(-1))

    ref = reference64(model)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-4, foreach=False)
    ref_loss = F.cross_entropy(ref(tokens, positions).view(-1, base.VOCAB), tokens.view(-1))
    ref_loss.backward()
    ref_opt.step()
    before = [p.detach().double().clone() for p in model.parameters()]
    step, _ = unprof._training_step(loss_of_step, opt, "base")
    loss = step()
    got = torch.cat([(p.detach().double() - b).flatten() for p, b in zip(model.parameters(), before)])
    want = torch.cat([(r.detach() - b).flatten() for r, b in zip(ref.parameters(), before)])
    check = {"loss": errors(loss, ref_loss.detach()), "first_update": errors(got, want)}
    paths = trace_paths(model, loss_of_step)
    return Side(trace, f"2-layer Llama training step (d 1024, vocab 8192, 2 x 256 tokens), fp32 weights, bf16 "
                f"autocast, AdamW({'fused' if fused else 'foreach'})", step, paths, check)


def train_foreach() -> Side:
    return _train_side("train_adamw_foreach", fused=False)


def train_fused() -> Side:
    return _train_side("train_adamw_fused", fused=True)


def _decode_check(decoder: base.Decoder, step: Step) -> dict[str, Any]:
    """The step's logits against the float64 model on the same token (the cache holds only position 0, which
    every step rewrites: a fresh zero cache gives the same function)."""
    tokens = decoder.tokens.clone()
    ref = reference64(decoder.model)
    caches = [(torch.zeros_like(k, dtype=torch.float64), torch.zeros_like(v, dtype=torch.float64))
              for k, v in decoder.caches]
    with torch.no_grad():
        want = ref(tokens, decoder.pos, caches, decoder.pos)
    return errors(step(), want)


def decode_eager() -> Side:
    step, _ = unprof._decode("base")
    decoder = step.decoder  # type: ignore[attr-defined]
    check = _decode_check(decoder, step)
    paths = trace_paths(decoder.model, step)
    return Side("decode_eager", "2-layer decode step, batch 1, static KV cache, argmax written back, eager", step,
                paths, check)


def decode_graph(out: Path) -> Side:
    replay, _ = unprof._decode("graphs", capture=out / "decode_graph.capture.json")
    graph, step = replay.keep  # type: ignore[attr-defined]
    decoder = step.decoder
    check = _decode_check(decoder, replay)
    # the capture's profiler session names the same model's modules in the same first-call order
    twin, _ = unprof._decode("base")
    paths = trace_paths(twin.decoder.model, twin)  # type: ignore[attr-defined]
    return Side("decode_graph", "the decode_eager step as a CUDA-graph replay (3 side-stream warm-ups, one capture, "
                "its capture profiled into decode_graph.capture.json.gz)", replay, paths, check, keep=[graph, step])


# --- the pairs -------------------------------------------------------------------------------------------

ClassOf = Callable[[str, str], str]  # (dotted name, B's class name) -> the class of change


@dataclass
class Pair:
    name: str
    change: str
    a: Callable[[Path], Side]
    b: Callable[[Path], Side]
    class_of: ClassOf
    ops: list[dict[str, Any]] = field(default_factory=list)
    regions: list[dict[str, Any]] = field(default_factory=list)
    b_trace_of_modules: str | None = None  # where B's module paths are (a graph's capture)


def _all(kind: str) -> ClassOf:
    return lambda _name, _cls: kind


def _where(kind: str, classes: tuple[str, ...]) -> ClassOf:
    return lambda _name, cls: kind if cls in classes else "same"


EAGER_ATTENTION_OPS = ["aten::matmul", "aten::div", "aten::full", "aten::triu", "aten::add", "aten::softmax",
                       "aten::to", "aten::matmul"]


def pairs() -> list[Pair]:
    return [
        Pair("compile", "torch.compile(dynamic=False) of the whole forward", lambda _o: forward_sdpa(),
             lambda _o: forward_compiled(), _all("compiled"),
             ops=[{"a_module": "every module", "a_ops": "every aten op", "b_ops": ["Triton kernels of the compiled "
                   "graph", "aten::mm / extern GEMMs", "the SDPA kernel"], "class": "compiled"}]),
        Pair("sdpa", "attention by hand -> F.scaled_dot_product_attention(is_causal=True)",
             lambda _o: forward_eager_attention(), lambda _o: forward_sdpa(), _where("replaced", ("Attention",)),
             ops=[{"a_module": "each Attention", "a_ops": EAGER_ATTENTION_OPS,
                   "b_ops": ["aten::scaled_dot_product_attention"], "class": "replaced"},
                  {"a_module": "each Attention", "a_ops": "the RoPE ops (mul, cat, neg, add), view/transpose, "
                   "reshape", "b_ops": "the same", "class": "same"}]),
        Pair("optimizer", "AdamW(foreach) -> AdamW(fused)", lambda _o: train_foreach(), lambda _o: train_fused(),
             _all("same"),
             ops=[{"a_ops": ["aten::_foreach_* (lerp, mul, addcmul, sqrt, div, add, addcdiv, ...)"],
                   "b_ops": ["aten::_fused_adamw_"], "class": "fused"}],
             regions=[{"a": "Optimizer.step#AdamW.step", "b": "Optimizer.step#AdamW.step", "class": "fused"},
                      {"a": "backward (autograd thread, no module)", "b": "the same", "class": "same"}]),
        Pair("int8_fused", "int8 weights: eager dequant (w.to(bf16) * scales, F.linear) -> "
             "torch._weight_int8pack_mm", lambda _o: linear_int8_dequant(), lambda _o: linear_int8_packmm(),
             _where("fused", ("Int8Linear",)),
             ops=[{"a_module": "each Int8Linear", "a_ops": ["aten::to", "aten::mul", "aten::linear"],
                   "b_ops": ["aten::_weight_int8pack_mm"], "class": "fused"}]),
        Pair("int8_vs_bf16", "bf16 nn.Linear -> int8 weights through torch._weight_int8pack_mm",
             lambda _o: linear_bf16(), lambda _o: linear_int8_packmm(), _where("replaced", ("Int8Linear",)),
             ops=[{"a_module": "each Linear", "a_ops": ["aten::linear"], "b_ops": ["aten::_weight_int8pack_mm"],
                   "class": "replaced"}]),
        Pair("graph", "eager decode step -> the step captured once as a CUDA graph and replayed",
             lambda _o: decode_eager(), decode_graph, _all("graphed"), b_trace_of_modules="decode_graph.capture.json.gz",
             ops=[{"a_module": "every module", "a_ops": "every kernel-launching op",
                   "b_ops": ["cudaGraphLaunch (the replay's kernels carry no op or module; the capture has them)"],
                   "class": "graphed"}]),
    ]


def matches(pair: Pair, a: Side, b: Side, b_model_classes: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for name, path in a.paths.items():
        row = {"name": name or "(root)", "a": path, "b": b.paths.get(name), "class": pair.class_of(name,
               b_model_classes.get(name, ""))}
        if pair.b_trace_of_modules:
            row["b_trace"] = pair.b_trace_of_modules
        rows.append(row)
    return rows


# --- timing apart from the profiler ----------------------------------------------------------------------

_FLUSH: list[torch.Tensor] = []


def isolated(step: Step, repeats: int = ISOLATED) -> dict[str, float] | None:
    """Each step alone: the L2 flushed (a write twice its size), the GPU idle, events around the step only."""
    if not CUDA:
        return None
    if not _FLUSH:
        _FLUSH.append(torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8,
                                  device=DEVICE))
    for _ in range(3):
        step()
    times = []
    for _ in range(repeats):
        _FLUSH[0].zero_()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return unprof._spread(times)


def timings(a: Side, b: Side) -> dict[str, Any]:
    """A and B interleaved: ROUNDS of capture_unprofiled_truth's loop timing each, then each alone, L2 flushed."""
    rounds: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for _ in range(ROUNDS):
        rounds["a"].append(unprof.time_loop(a.step))
        rounds["b"].append(unprof.time_loop(b.step))
    out: dict[str, Any] = {}
    for side, step in (("a", a.step), ("b", b.step)):
        out[side] = {"loop_rounds": rounds[side],
                     "loop_median_ms": round(statistics.median(r["median_ms"] for r in rounds[side]), 4),
                     "isolated_l2_flushed": isolated(step)}
    out["method"] = (f"CUDA events; loop: {unprof.WARM} warm-up + {unprof.TIMED} timed steps of a loop that never "
                     f"synchronises, A and B interleaved over {ROUNDS} rounds (median of round medians); isolated: "
                     f"{ISOLATED} steps each alone after an L2 flush and a synchronize")
    return out


# --- capture ---------------------------------------------------------------------------------------------

def capture_pair(out: Path, pair: Pair, done: dict[str, dict[str, Any]]) -> None:
    t0 = time.monotonic()
    a, b = pair.a(out), pair.b(out)
    for side in (a, b):
        print(f"  {side.trace}: vs float64 {json.dumps(side.check)}", flush=True)
        if side.trace not in done:
            done[side.trace] = unprof.profiled(side.step, out / f"{side.trace}.json", "modules")
    truth: dict[str, Any] = {"pair": pair.name, "change": pair.change,
             "a": {"trace": f"{a.trace}.json.gz", "what": a.what, "check_vs_float64": a.check,
                   "profiler": done[a.trace]},
             "b": {"trace": f"{b.trace}.json.gz", "what": b.what, "check_vs_float64": b.check,
                   "profiler": done[b.trace]},
             "profiler_steps": PROFILER_STEPS,
             "matches": matches(pair, a, b, _classes(b)), "ops": pair.ops, "regions": pair.regions,
             "unprofiled": timings(a, b), "card": unprof._card(),
             "written": "from the workload code and the un-profiled measurement, in the process that made both "
                        "traces, before fuseprof read them"}
    if pair.b_trace_of_modules:
        truth["b"]["capture"] = pair.b_trace_of_modules
    (out / f"{pair.name}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    t = truth["unprofiled"]
    print(f"{pair.name}: {time.monotonic() - t0:.0f} s, A {t['a']['loop_median_ms']} ms, B {t['b']['loop_median_ms']} "
          f"ms (loop medians); isolated {(t['a']['isolated_l2_flushed'] or {}).get('median_ms')} / "
          f"{(t['b']['isolated_l2_flushed'] or {}).get('median_ms')} ms", flush=True)


def _classes(side: Side) -> dict[str, str]:
    """Dotted name -> the class name its trace path ends in (``Int8Linear_3`` -> ``Int8Linear``)."""
    return {name: path.rsplit(" / ", 1)[-1].rsplit("_", 1)[0] for name, path in side.paths.items()}


def main(argv: list[str] | None = None, chosen_pairs: Callable[[], list[Pair]] = pairs, doc: str | None = None) -> int:
    """The command; ``chosen_pairs`` and ``doc``: another set's pairs and help (capture_diff_pairs_d768.py)."""
    parser = argparse.ArgumentParser(description=doc or __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="the folder the traces and truth files go to")
    parser.add_argument("--only", help="comma-separated pair names (default: all)")
    parser.add_argument("--list", action="store_true", help="print the pairs, run nothing")
    args = parser.parse_args(argv)
    chosen = chosen_pairs()
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {p.name for p in chosen}
        if unknown:
            parser.error(f"unknown pair(s): {', '.join(sorted(unknown))}")
        chosen = [p for p in chosen if p.name in names]
    if args.list:
        for p in chosen:
            print(f"{p.name:14} {p.change}")
        return 0
    if args.out is None:
        parser.error("--out is required to capture")
    args.out.mkdir(parents=True, exist_ok=True)
    print(unprof._card(), flush=True)
    done: dict[str, dict[str, Any]] = {}
    failed = 0
    for pair in chosen:
        try:
            capture_pair(args.out, pair, done)
        except Exception as exc:  # one pair's failure is reported; the others go on
            failed += 1
            print(f"{pair.name}: FAILED {type(exc).__name__}: {str(exc)[:500]}", flush=True)
        if CUDA:
            torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
