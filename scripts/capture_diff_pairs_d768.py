"""A second set of pairs for issue 62's truth, on another model shape: held out from the rules of the diff aligner.

    python scripts/capture_diff_pairs_d768.py --out DIR [--only PAIR,PAIR] [--list]

capture_diff_pairs.py's machinery (sides, float64 checks, module paths from forward hooks, un-profiled timing,
truth files written before fuseprof reads a trace) on a model unlike its own: d 768, 12 heads of 64, 3 layers, a
GELU MLP (fc1 768 -> 2048 with bias, GELU, fc2 with bias) instead of SwiGLU, 4 x 128 tokens:

    compile        eager forward                          -> torch.compile(dynamic=False) of the whole forward
    norm_compiled  eager RMSNorm                          -> each RMSNorm compiled in place (module.compile()),
                                                             the rest eager
    norm_fused     eager RMSNorm (float, pow, mean, add,  -> F.rms_norm, one call
                   rsqrt, mul, cast, mul)
    gelu_fused     GELU written out (tanh form: mul, pow, -> F.gelu(approximate="tanh"), one call
                   mul, add, mul, tanh, add, mul)
    sdpa           attention by hand                      -> F.scaled_dot_product_attention(is_causal=True)
    fp8            bf16 nn.Linear                         -> fp8 e4m3 weights and per-tensor activation scales
                                                             through torch._scaled_mm (Linear -> Fp8Linear)

The classes are written from the code: a module whose own ops the change rewrites into fewer calls of the same
work is ``fused`` (several elementwise calls -> one), one whose work runs inside a torch.compile'd graph
``compiled`` (all of it, its GEMMs too: they are called from the compiled graph), one whose work goes through
other ops ``replaced`` (attention by hand -> SDPA; bf16 GEMM -> fp8 GEMM with its quantization), the rest ``same``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_diff_pairs as cdp  # noqa: E402  (sides, truth files, timing: one definition)
import capture_truth_set as base  # noqa: E402

# the shapes, process-wide: base's modules read D, HEADS and FFN when built and HEADS in Attention.forward
base.D, base.HEADS, base.FFN = 768, 12, 2048
LAYERS, BATCH, LENGTH = 3, 4, 128
FP8 = getattr(torch, "float8_e4m3fn", None)
FP8_MAX = 448.0


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


def model(written_gelu: bool = False, eager_attention: bool = False) -> nn.Module:
    """The 3-layer model from seed 0: the same weights in every side."""
    torch.manual_seed(0)
    built = base.Llama(layers=LAYERS)
    for layer in built.layers:
        layer.mlp = GeluMLP(written_gelu)
    built = built.to(cdp.DEVICE, cdp.DTYPE)
    for module in built.modules():
        if isinstance(module, base.Attention):
            module.eager = eager_attention
        if isinstance(module, GeluMLP):
            module.written_out = written_gelu
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


WHAT = f"3-layer model (d {base.D}, {base.HEADS} heads, GELU MLP {base.FFN}), {BATCH} x {LENGTH} tokens, bf16"


def side(trace: str, what: str, built: nn.Module, **kwargs: object) -> cdp.Side:
    return cdp._forward_side(trace, f"{WHAT}: {what}", built, BATCH, LENGTH, **kwargs)  # type: ignore[arg-type]


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
        cdp.Pair("gelu_fused", "GELU written out (tanh form) -> F.gelu(approximate='tanh')",
                 lambda _o: side("gelu_written", "GELU written out", model(written_gelu=True)), eager,
                 cdp._where("fused", ("GeluMLP",))),
        cdp.Pair("sdpa", "attention by hand -> F.scaled_dot_product_attention(is_causal=True)",
                 lambda _o: side("eager_attention", "attention by hand", model(eager_attention=True)), eager,
                 cdp._where("replaced", ("Attention",))),
        cdp.Pair("fp8", "bf16 nn.Linear -> fp8 e4m3 through torch._scaled_mm (Linear -> Fp8Linear)", eager,
                 lambda _o: side("fp8", "every Linear as Fp8Linear (torch._scaled_mm)", fp8_linears(model())),
                 cdp._where("replaced", ("Fp8Linear",))),
    ]


if __name__ == "__main__":
    raise SystemExit(cdp.main(chosen_pairs=pairs, doc=__doc__))
