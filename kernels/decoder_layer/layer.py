"""One Llama-3-8B-shaped decoder layer as serving engines run it, with its elementwise ops swappable.

The residual stream enters as (hidden, residual), as in vLLM: the layer opens with residual add +
RMSNorm (the previous layer's closing residual add fused into this layer's first norm) and returns
(mlp_out, residual) for the next layer to add. Every layer of a stack then does the same work:
add + RMSNorm, fused QKV projection, rotary embedding, KV-cache write, SDPA over the cache, output
projection, add + RMSNorm, gate/up projections, SiLU·mul, down projection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fuseprof_kernels._llama_model.model import rotate_half
from torch import nn

HIDDEN, INTERMEDIATE, HEADS, KV_HEADS = 4096, 14336, 32, 8
HEAD_DIM = HIDDEN // HEADS
EPS, ROPE_THETA = 1e-5, 500000.0  # Llama 3's


@dataclass(frozen=True)
class Ops:
    """The memory-bound steps a variant may replace with fused kernels; each takes 2-D (tokens, hidden)."""

    add_rms_norm: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
    silu_mul: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class DecoderLayer(nn.Module):
    """Weights, rotary tables and a static KV cache of ``kv_len`` positions for ``batch`` sequences.

    Parameters and buffers (not plain tensors) so that torch.compile's CUDA graphs treat them as
    static addresses and the in-place cache write does not disable graphs.
    """

    def __init__(self, weights: dict[str, torch.Tensor], k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
        super().__init__()
        for name, w in weights.items():
            self.register_parameter(name, nn.Parameter(w, requires_grad=False))
        self.register_buffer("k_cache", k_cache)
        self.register_buffer("v_cache", v_cache)
        kv_len = k_cache.shape[2]
        inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64,
                                                     device=k_cache.device) / HEAD_DIM)
        angles = torch.arange(kv_len, dtype=torch.float64, device=k_cache.device)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().to(k_cache.dtype))
        self.register_buffer("sin", angles.sin().to(k_cache.dtype))


def forward(layer: DecoderLayer, hidden: torch.Tensor, residual: torch.Tensor, positions: torch.Tensor,
            ops: Ops) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden, residual (batch, tokens, HIDDEN); positions (tokens,) are the cache slots of the new
    tokens, the same for every sequence. Attention is causal over the new tokens when there are
    several (prefill) and covers the whole cache for one (decode)."""
    batch, tokens, _ = hidden.shape
    flat = (batch * tokens, HIDDEN)
    y, residual = ops.add_rms_norm(hidden.reshape(flat), residual.reshape(flat), layer.input_norm)
    q, k, v = F.linear(y, layer.w_qkv).view(batch, tokens, HEADS + 2 * KV_HEADS, HEAD_DIM).transpose(1, 2).split(
        [HEADS, KV_HEADS, KV_HEADS], dim=1)
    cos, sin = layer.cos[positions], layer.sin[positions]
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    layer.k_cache.index_copy_(2, positions, k)
    layer.v_cache.index_copy_(2, positions, v)
    attn = F.scaled_dot_product_attention(q, layer.k_cache, layer.v_cache, is_causal=tokens > 1, enable_gqa=True)
    o = F.linear(attn.transpose(1, 2).reshape(flat), layer.w_o)
    y, residual = ops.add_rms_norm(o, residual, layer.post_attn_norm)
    out = F.linear(ops.silu_mul(F.linear(y, layer.w_gate), F.linear(y, layer.w_up)), layer.w_down)
    return out.view(batch, tokens, HIDDEN), residual.view(batch, tokens, HIDDEN)
