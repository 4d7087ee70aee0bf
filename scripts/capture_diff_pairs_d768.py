"""Further sets of pairs for issue 62's truth, on other model shapes: held out from the rules of the diff aligner.

    python scripts/capture_diff_pairs_d768.py --out DIR [--only PAIR,PAIR] [--list]
        [--d 768] [--heads 12] [--ffn 2048] [--layers 3] [--batch 4] [--length 128] [--mlp gelu|swiglu]
        [--dtype bf16|fp16]

capture_diff_pairs.py's machinery (sides, float64 checks, module paths from forward hooks, un-profiled timing,
truth files written before fuseprof reads a trace) on a model unlike its own. The defaults are the h100_d768 set's
model: d 768, 12 heads of 64, 3 layers, a GELU MLP (fc1 768 -> 2048 with bias, GELU, fc2 with bias) instead of
SwiGLU, 4 x 128 tokens, bf16; the arguments give another (h100_d1024_fp16: --d 1024 --heads 16 --ffn 4096
--layers 2 --batch 2 --length 256 --mlp swiglu --dtype fp16):

    compile        eager forward                          -> torch.compile(dynamic=False) of the whole forward
    norm_compiled  eager RMSNorm                          -> each RMSNorm compiled in place (module.compile()),
                                                             the rest eager
    norm_fused     eager RMSNorm (float, pow, mean, add,  -> F.rms_norm, one call
                   rsqrt, mul, cast, mul)
    gelu_fused     GELU written out (tanh form: mul, pow, -> F.gelu(approximate="tanh"), one call
                   mul, add, mul, tanh, add, mul)            (--mlp gelu)
    silu_fused     SiLU written out (g * sigmoid(g))      -> F.silu(g), one call (--mlp swiglu: gate, up
                                                             and down without bias, silu(gate) * up)
    sdpa           attention by hand                      -> F.scaled_dot_product_attention(is_causal=True)
    fp8            nn.Linear (bf16 or fp16)               -> fp8 e4m3 weights and per-tensor activation scales
                                                             through torch._scaled_mm (Linear -> Fp8Linear)

The classes are written from the code: a module whose own ops the change rewrites into fewer calls of the same
work is ``fused`` (several elementwise calls -> one), one whose work runs inside a torch.compile'd graph
``compiled`` (all of it, its GEMMs too: they are called from the compiled graph), one whose work goes through
other ops ``replaced`` (attention by hand -> SDPA; bf16 GEMM -> fp8 GEMM with its quantization), the rest ``same``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_diff_pairs as cdp  # noqa: E402  (sides, truth files, timing: one definition)
import capture_truth_set as base  # noqa: E402

# the shapes, process-wide: base's modules read D, HEADS and FFN when built and HEADS in Attention.forward
base.D, base.HEADS, base.FFN = 768, 12, 2048
LAYERS, BATCH, LENGTH, MLP_KIND = 3, 4, 128, "gelu"
FP8 = getattr(torch, "float8_e4m3fn", None)
FP8_MAX = 448.0
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def configure(argv: list[str] | None = None) -> list[str]:
    """The model's shape and dtype from ``argv`` (defaults: h100_d768's), set process-wide (base's modules, the
    sides' and the rotary tables' dtype); the rest of ``argv`` is capture_diff_pairs.main's."""
    global LAYERS, BATCH, LENGTH, MLP_KIND
    parser = argparse.ArgumentParser(add_help=False)
    for flag, default in (("--d", 768), ("--heads", 12), ("--ffn", 2048), ("--layers", 3), ("--batch", 4),
                          ("--length", 128)):
        parser.add_argument(flag, type=int, default=default)
    parser.add_argument("--mlp", choices=("gelu", "swiglu"), default="gelu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    args, rest = parser.parse_known_args(argv)
    if min(args.d, args.heads, args.ffn, args.layers, args.batch, args.length) < 1 or args.d % args.heads:
        parser.error(f"sizes must be positive and --d a multiple of --heads (got d {args.d}, heads {args.heads})")
    base.D, base.HEADS, base.FFN = args.d, args.heads, args.ffn
    LAYERS, BATCH, LENGTH, MLP_KIND = args.layers, args.batch, args.length, args.mlp
    base.DTYPE = cdp.DTYPE = cdp.unprof.DTYPE = DTYPES[args.dtype]
    return rest


class GeluMLP(nn.Module):
    """fc1 (bias) -> GELU (tanh form) -> fc2 (bias); ``written_out``: the GELU as a user writes it, eight
    elementwise calls; else F.gelu(approximate="tanh")."""

    def __init__(self, written_out: bool) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(base.D, base.FFN), nn.Linear(base.FFN, base.D)
        self.written_out = written_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        if self.written_out:
            h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3))))
        else:
            h = F.gelu(h, approximate="tanh")
        return self.fc2(h)


class Fp8Linear(nn.Module):
    """A Linear through torch._scaled_mm: e4m3 weights with one scale (absmax / 448), the activations scaled
    per call the same way. With its buffers made float64 (the reference) it runs the dequantized linear."""

    weight: torch.Tensor
    scale: torch.Tensor

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax().clamp_min(1e-12) / FP8_MAX
        self.register_buffer("weight", (w / scale).to(FP8))
        self.register_buffer("scale", scale.reshape(()))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype != FP8:
            return F.linear(x, self.weight * self.scale, self.bias)
        flat = x.reshape(-1, x.shape[-1])
        x_scale = flat.abs().amax().float().clamp_min(1e-12) / FP8_MAX
        out = torch._scaled_mm((flat / x_scale).to(FP8), self.weight.t(), scale_a=x_scale, scale_b=self.scale,
                               bias=self.bias, out_dtype=x.dtype)
        return out.view(*x.shape[:-1], out.shape[-1])


class SwiGLUMLP(nn.Module):
    """gate and up (no bias) -> SiLU(gate) * up -> down (no bias); ``written_out``: the SiLU as a user writes it,
    ``g * torch.sigmoid(g)``; else F.silu(g)."""

    def __init__(self, written_out: bool) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(base.D, base.FFN, bias=False), nn.Linear(base.D, base.FFN, bias=False)
        self.down = nn.Linear(base.FFN, base.D, bias=False)
        self.written_out = written_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.gate_proj(x)
        g = g * torch.sigmoid(g) if self.written_out else F.silu(g)
        return self.down(g * self.up_proj(x))


def _mlp() -> type[nn.Module]:
    return GeluMLP if MLP_KIND == "gelu" else SwiGLUMLP


def model(written_act: bool = False, eager_attention: bool = False) -> nn.Module:
    """The model from seed 0: the same weights in every side."""
    torch.manual_seed(0)
    built = base.Llama(layers=LAYERS)
    for layer in built.layers:
        layer.mlp = _mlp()(written_act)
    built = built.to(cdp.DEVICE, cdp.DTYPE)
    for module in built.modules():
        if isinstance(module, base.Attention):
            module.eager = eager_attention
        if isinstance(module, _mlp()):
            module.written_out = written_act
    return built


def fp8_linears(built: nn.Module) -> nn.Module:
    for parent in list(built.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Fp8Linear(child))
    return built


def compile_norms(built: nn.Module) -> nn.Module:
    for module in built.modules():
        if isinstance(module, base.RMSNorm):
            module.compile(dynamic=False)
    return built


def what() -> str:
    dtype = {v: k for k, v in DTYPES.items()}[cdp.DTYPE]
    return (f"{LAYERS}-layer model (d {base.D}, {base.HEADS} heads, {'GELU' if MLP_KIND == 'gelu' else 'SwiGLU'} MLP "
            f"{base.FFN}), {BATCH} x {LENGTH} tokens, {dtype}")


def side(trace: str, said: str, built: nn.Module, **kwargs: object) -> cdp.Side:
    return cdp._forward_side(trace, f"{what()}: {said}", built, BATCH, LENGTH, **kwargs)  # type: ignore[arg-type]


def _activation_pair(eager: Callable[[Path], cdp.Side]) -> cdp.Pair:
    if MLP_KIND == "gelu":
        return cdp.Pair("gelu_fused", "GELU written out (tanh form) -> F.gelu(approximate='tanh')",
                        lambda _o: side("gelu_written", "GELU written out", model(written_act=True)), eager,
                        cdp._where("fused", ("GeluMLP",)))
    return cdp.Pair("silu_fused", "SiLU written out (g * torch.sigmoid(g)) -> F.silu(g)",
                    lambda _o: side("silu_written", "SiLU written out", model(written_act=True)), eager,
                    cdp._where("fused", ("SwiGLUMLP",)))


def pairs() -> list[cdp.Pair]:
    eager = lambda _o: side("eager", "SDPA, eager", model())  # noqa: E731
    return [
        cdp.Pair("compile", "torch.compile(dynamic=False) of the whole forward", eager,
                 lambda _o: side("compiled", "torch.compile(dynamic=False)", model(), wrap=cdp.unprof.compiled),
                 cdp._all("compiled")),
        cdp.Pair("norm_compiled", "each RMSNorm compiled in place (nn.Module.compile), the rest eager", eager,
                 lambda _o: side("norms_compiled", "RMSNorms compiled in place", model(), wrap=compile_norms,
                                 whole=False), cdp._where("compiled", ("RMSNorm",))),
        cdp.Pair("norm_fused", "eager RMSNorm -> F.rms_norm", eager,
                 lambda _o: side("norms_fused", "RMSNorm as F.rms_norm", cdp.unprof.fuse_norms(model())),
                 cdp._where("fused", ("RMSNorm",))),
        _activation_pair(eager),
        cdp.Pair("sdpa", "attention by hand -> F.scaled_dot_product_attention(is_causal=True)",
                 lambda _o: side("eager_attention", "attention by hand", model(eager_attention=True)), eager,
                 cdp._where("replaced", ("Attention",))),
        cdp.Pair("fp8", f"{what().rsplit(', ', 1)[-1]} nn.Linear -> fp8 e4m3 through torch._scaled_mm "
                 "(Linear -> Fp8Linear)", eager,
                 lambda _o: side("fp8", "every Linear as Fp8Linear (torch._scaled_mm)", fp8_linears(model())),
                 cdp._where("replaced", ("Fp8Linear",))),
    ]


if __name__ == "__main__":
    raise SystemExit(cdp.main(configure(), chosen_pairs=pairs, doc=__doc__))
