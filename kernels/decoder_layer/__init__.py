"""One Llama-3-8B decoder layer (bf16, hidden 4096, 32 query / 8 KV heads, intermediate 14336)
at prefill and decode shapes, five ways: eager, eager with fuseprof's fused kernels, eager replayed
as a CUDA graph, torch.compile, and torch.compile with CUDA graphs (mode="reduce-overhead").

fuseprof's third fused kernel, RMSNorm + SwiGLU gate (``rmsnorm_swiglu``), does not apply here:
it normalises the tensor it gates, while Llama's gate multiplies the outputs of two GEMMs that
the norm feeds.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from fuseprof_kernels._cuda import cuda_op
from fuseprof_kernels.decoder_layer.layer import EPS, DecoderLayer, Ops, forward
from fuseprof_kernels.decoder_layer.reference import make_inputs, nominal_bytes, reference

from fuseprof.case import Case, Variant, compile_static, graph_replayed

_ADD_RMS_NORM = cuda_op("add_rms_norm")
_SILU_MUL = cuda_op("silu_mul")


def _add_rms_norm_eager(x: torch.Tensor, residual: torch.Tensor,
                        weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's LlamaRMSNorm after the residual add: upcast, pow, mean, rsqrt, mul, downcast, mul."""
    h = x + residual
    h32 = h.float()
    return (h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + EPS)).to(h.dtype) * weight, h


EAGER_OPS = Ops(add_rms_norm=_add_rms_norm_eager, silu_mul=lambda gate, up: F.silu(gate) * up)
FUSED_OPS = Ops(add_rms_norm=lambda x, residual, weight: _ADD_RMS_NORM(x, residual, weight, EPS), silu_mul=_SILU_MUL)


def eager(layer: DecoderLayer, hidden: torch.Tensor, residual: torch.Tensor, positions: torch.Tensor) -> Any:
    return forward(layer, hidden, residual, positions, EAGER_OPS)


def fused_cuda(layer: DecoderLayer, hidden: torch.Tensor, residual: torch.Tensor, positions: torch.Tensor) -> Any:
    return forward(layer, hidden, residual, positions, FUSED_OPS)


CASE = Case(
    name="decoder_layer",
    description="Llama-3-8B decoder layer, bf16: add+RMSNorm, QKV, RoPE, cache write, SDPA, O, add+RMSNorm, "
                "gate/up, SiLU·mul, down; shape BATCHxTOKENSxKV_LEN",
    variants=(
        Variant("eager", eager, "unfused", "PyTorch eager: cuBLAS GEMMs, SDPA, one kernel per elementwise op"),
        Variant("fused_cuda", fused_cuda, "fused", "eager with fuseprof's add_rms_norm (x2) and silu_mul CUDA kernels",
                devices=("cuda",)),
        Variant("eager_graph", graph_replayed(eager), "unfused",
                "the eager layer captured once as a CUDA graph and replayed: one launch per call",
                devices=("cuda",), own_graph=True),
        Variant("compiled", compile_static(eager), "compiled", "torch.compile(eager, dynamic=False)"),
        Variant("compiled_graphs", compile_static(eager, mode="reduce-overhead"), "compiled",
                'torch.compile(eager, dynamic=False, mode="reduce-overhead"): Inductor kernels in CUDA graphs',
                devices=("cuda",), own_graph=True),
    ),
    make_inputs=make_inputs,
    reference=reference,
    nominal_bytes=nominal_bytes,
    default_shapes=((1, 2048, 2048), (1, 1, 2048), (8, 1, 2048), (64, 1, 2048)),
    dtypes=("bfloat16",),
    # bf16 rounds q, k, v, the attention output, two norms and the MLP intermediates before
    # K = 4096 and 14336 products (llama_mlp alone needs 1.5e-2).
    tolerances={"bfloat16": 2e-2},
)
